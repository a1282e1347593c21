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
#include <sys/types.h>
#include <protobuf-c/protobuf-c.h>
#include <xxhash.h>

#include "amber.pb-c.h"

#define IMG_VERSION 2
/* pages-PID.img: the pages start page-aligned (userfaultfd copies need that) */
#define PAGES_DATA_OFF 4096
#define IMG_HDR_SIZE   8
/* tmpfs-ID.img: a file's data in records of at most this many bytes */
#define TMPFS_CHUNK (1u << 20)
/* mnt.img: at most the kernel's default fs.mount-max mounts */
#define MNT_MAX 100000

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
	IMG_STATS,   /* stats-dump.img, stats-restore.img (stats.c) */
	IMG_IPC,     /* ipc.img: System V objects, POSIX message queues (src/ipc/) */
	IMG_SHM,     /* shm-ID.img, shm-NS-ID.img: the bytes of System V segment ID (raw) */
	IMG_NS,	     /* ns.img: the tree's UTS and IPC namespaces (ns/ns.c) */
	IMG_CGROUP,  /* cgroup.img: the tree's cgroups (cgroup.c) */
	IMG_NETNS,   /* netns.img: the tree's network namespaces (ns/net.c) */
	IMG_MNT,     /* mnt.img: the mounts of the tree's mount namespace (ns/mnt.c) */
	IMG_TMPFS,   /* tmpfs-ID.img: the files of a tmpfs of it (ns/tmpfs.c) */
	IMG_THREADS, /* threads-PID.img: the TaskCore of each thread but the leader */
	IMG__COUNT,
};

struct img_dir;
struct img_file;
struct img_verify;

struct img {
	int fd;
	char name[64];
	enum img_kind kind;
	uint64_t size;
	XXH3_state_t *hash;
	struct img_set *set;
	/* writing: small writes (records) gather here, written once it is full */
	uint8_t *wb;
	size_t wb_len;
	/* reading: the verified file, where the next record starts, records read */
	const struct img_dir *dir;
	const struct img_file *file;
	uint64_t off, end, nr;
	/* records are read through this (a pagemap has one per run of pages) */
	uint8_t *ra;
	uint64_t ra_off;
	size_t ra_len;
};

/* Files written so far in one dump, for the inventory. */
struct img_set {
	int dirfd;
	size_t n, cap;
	InventoryFile **files;
	char **created; /* every file created, finished or not (img_set_discard) */
	size_t nr_created;
	/* Optional: asked once the files are synced, before the inventory makes
	 * the image complete; an error (-errno, logged) stops the commit. */
	int (*go_on)(void);
};

uint32_t img_magic(enum img_kind kind);
const char *img_kind_name(enum img_kind kind);

int img_create(struct img_set *set, enum img_kind kind, struct img **out, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int img_write(struct img *img, const void *buf, size_t len);
/*
 * img_write() in two halves, for a writer thread: img_account() hashes and
 * counts the bytes (in their order in the file, on the thread that has them
 * in its cache), img_write_raw() only writes them.  Both for every byte.
 */
void img_account(struct img *img, const void *buf, size_t len);
int img_write_raw(struct img *img, const void *buf, size_t len);
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
/* The same checks on a directory already open (amber swrk's images_dir_fd): an fd of
 * amber's own on it, or -errno (logged). */
int img_dir_adopt(int dirfd, const char *dir);

/*
 * An image directory opened for reading.  restore reads nothing but what
 * img_dir_open() checked: the directory is opened once; inventory.img and
 * every file it lists are opened once each, relative to it and without
 * following links, and must be regular files with one link, owned by the
 * directory's owner and not writable by group or others (nor the directory);
 * each is hashed through that fd, and every later read goes through it.  A
 * name the inventory does not list cannot be opened.  Record files are
 * checked record by record as they are hashed: sizes and counts against what
 * a real process can have (struct img_file), before anything is decoded.
 */
struct img_file {
	char name[64];
	enum img_kind kind;
	int fd;
	uint64_t size, xxh3;
	uint64_t nr_records;  /* record files: as counted by the check */
	uint64_t max_records; /* what img_get() accepts */
	bool async;	      /* hashed by the verification thread */
};

/* What bounds the records of a real process tree, with the name errors give. */
enum img_lim {
	LIM_NR_OPEN,	 /* fds per process */
	LIM_MAP_COUNT,	 /* VMAs per process */
	LIM_THREADS_MAX, /* tasks */
	LIM_PID_MAX,	 /* processes */
	LIM_SIGPENDING,	 /* queued signals, POSIX timers */
	LIM_INOTIFY,	 /* inotify watches */
	LIM_NGROUPS,	 /* supplementary groups */
	LIM_NSIG,	 /* signal actions */
	LIM_RLIMITS,	 /* resource limits */
	LIM_ITIMERS,	 /* interval timers */
	LIM_AUXV,	 /* auxv words */
	LIM_QUEUED,	 /* messages queued on a socket */
	LIM_LOCKS,	 /* file locks per open file description */
	LIM_DIRENTS,	 /* files in the image directory */
	LIM_EXTENTS,	 /* data extents of a ghost file, as offset and length */
	LIM_IPC,	 /* semaphores of a set, messages of a queue */
	LIM_IPC_OBJECTS, /* System V objects */
	LIM_FANOTIFY,	 /* fanotify marks of a group */
	LIM_BPF,	 /* entries of a BPF map */
	LIM__COUNT,
};

struct img_dir {
	int dirfd; /* the caller's */
	const char *path;
	uid_t uid; /* owner of the directory and of every file */
	gid_t gid; /* group of inventory.img */
	Inventory *inv;
	struct img_file **files; /* sorted by name once checked */
	size_t nr_files, cap;
	bool browse; /* amber show: files opened by name as asked, nothing checked */
	uint64_t lim[LIM__COUNT];
	struct img_verify *job; /* the thread hashing the large files */
	int job_ret;
};

/*
 * Check the image in dirfd (named path in messages) as described above; the
 * large files' checksums are computed by a thread meanwhile: nothing restored
 * may run before img_dir_wait() returned 0.  Logs what is wrong and how to
 * fix it.  On success *out owns (*out)->inv.
 */
int img_dir_open(int dirfd, const char *path, struct img_dir **out);
int img_dir_wait(struct img_dir *d);
/* Waits for the thread if need be, closes every file. */
void img_dir_close(struct img_dir *d);
/*
 * Close the files of a kind, read whole already: restored processes inherit
 * every fd amber holds when it forks them, and close each at the end, which
 * costs O(n^2) for a tree of n processes with files per process.  Reading
 * one afterwards fails (-EBADF).
 */
void img_dir_release(struct img_dir *d, enum img_kind kind);
/* Whether files of this kind belong to one process each (core-PID.img, ...). */
bool img_kind_per_process(enum img_kind kind);
/* For amber show: reads what is there by name, checking nothing but records. */
int img_dir_browse(int dirfd, const char *path, struct img_dir **out);
/* A listed raw file (pages, ghost): its fd (the table's: not to be closed) and size. */
int img_dir_raw(struct img_dir *d, enum img_kind kind, const struct img_file **out, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));

int img_open(struct img_dir *d, enum img_kind kind, struct img **out, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* 1: a message read; 0: end of file; <0: -errno (corrupt records are -EBADMSG). */
int img_get(struct img *img, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg);
/* Raw bytes from where the header ended (ghost contents); 0 at the end. */
ssize_t img_read(struct img *img, void *buf, size_t len);
void img_close(struct img *img);
/* Read every record of a file into a malloc'd array (out: address of a T **). */
int img_read_all(struct img_dir *d, enum img_kind kind, const ProtobufCMessageDescriptor *desc,
		 void *out, size_t *n, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Read the single message of a file that holds one. */
int img_read_one(struct img_dir *d, enum img_kind kind, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **msg, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#endif
