/* SPDX-License-Identifier: MIT */
/*
 * Image files.  Each starts with a header {magic, version}; protobuf records
 * follow as [u32 length][u64 xxh3(payload)][payload].  Raw files (pages,
 * ghost file contents) have the header and then bytes.  inventory.img lists
 * every file with its size and xxh3 and is renamed into place last: its
 * presence is what marks an image complete.
 */
#ifndef AMBER_IMAGE_H
#define AMBER_IMAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>
#include <xxhash.h>

#include "amber.pb-c.h"

#define IMG_VERSION  2
/* pages-PID.img: the pages start page-aligned (userfaultfd copies need that) */
#define PAGES_DATA_OFF 4096
#define IMG_HDR_SIZE 8

enum img_kind {
	IMG_INVENTORY,
	IMG_CORE,
	IMG_MM,
	IMG_PAGEMAP,
	IMG_PAGES,
	IMG_FILES,
	IMG_FDS,
	IMG_FS,
	IMG_GHOST,
	IMG_PSTREE,
	IMG__COUNT,
};

struct img {
	int fd;
	char name[64];
	enum img_kind kind;
	uint64_t size;
	XXH3_state_t *hash;
	struct img_set *set;
};

/* Files written so far in one dump, for the inventory. */
struct img_set {
	int dirfd;
	size_t n, cap;
	InventoryFile **files;
	char **created; /* every file created, finished or not (img_set_discard) */
	size_t nr_created;
};

uint32_t img_magic(enum img_kind kind);
const char *img_kind_name(enum img_kind kind);

int img_create(struct img_set *set, enum img_kind kind, struct img **out, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int img_write(struct img *img, const void *buf, size_t len);
int img_put(struct img *img, const ProtobufCMessage *msg);
/* fsync, close and enter the file in the set; frees img. */
int img_finish(struct img *img);
/* Close and unlink a file that will not be completed. */
void img_abort(struct img *img);
/* Write inventory.img atomically: this is what marks the image complete. */
int img_set_commit(struct img_set *set, Inventory *inv);
void img_set_free(struct img_set *set);
/* A failed dump: remove every file the set created, and nothing else. */
void img_set_discard(struct img_set *set);

/*
 * The directory a dump writes into, as an fd: made by amber (0700), or an
 * existing one that is a directory (not a symbolic link), the dumping
 * user's, not writable by group or others, and empty, so that nothing in it
 * can redirect a write.  Image files are then created O_EXCL|O_NOFOLLOW in
 * it.  -errno with the reason and the fix logged; *created: amber made it.
 */
int img_dir_create(const char *dir, bool *created);

int img_open(int dirfd, enum img_kind kind, struct img **out, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* 1: a message read; 0: end of file; <0: -errno (corrupt records are -EBADMSG). */
int img_get(struct img *img, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg);
void img_close(struct img *img);
/* Read every record of a file into a malloc'd array (out: address of a T **). */
int img_read_all(int dirfd, enum img_kind kind, const ProtobufCMessageDescriptor *desc, void *out,
		 size_t *n, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Read the single message of a file that holds one. */
int img_read_one(int dirfd, enum img_kind kind, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **msg, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/*
 * Check an image directory before anything is restored from it: inventory
 * present and intact, every listed file present with its size and hash, and
 * the versions understood.  Logs what is wrong and how to fix it.
 */
int img_verify_dir(int dirfd, const char *dir, Inventory **inv);
/*
 * The same, but the checksums of large files (pages) are computed by a
 * thread while the caller goes on; img_verify_wait() joins it and says
 * whether they matched.  Nothing restored may run before it returned 0.
 */
struct img_verify;
int img_verify_start(int dirfd, const char *dir, Inventory **inv, struct img_verify **job);
int img_verify_wait(struct img_verify *job);

#endif
