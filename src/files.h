/* SPDX-License-Identifier: MIT */
/*
 * Kinds of open files beyond regular files, directories, devices, terminals
 * and pipes (which files.c handles itself).  Each kind lives in its own file
 * (eventfd.c, epoll.c, sk-unix.c, ...) and is listed in fd_types[]
 * (fd-types.c).  Its state goes into its own message of RegFile
 * (images/anonfd.proto, images/sk.proto).
 */
#ifndef AMBER_FILES_H
#define AMBER_FILES_H

#include <stdbool.h>
#include <sys/stat.h>

#include "amber.h"

struct fd_type {
	const char *name;
	FileKind kind;
	/* Is this open file of this kind?  link: readlink of /proc/PID/fd/N. */
	bool (*match)(const char *link, const struct stat *st);
	/*
	 * Fill f's message for fd of ctx's process (f->kind is set already).
	 * dup is amber's own fd on the same open file description (pidfd_getfd),
	 * valid during the call; the task is frozen.
	 */
	int (*dump)(struct dump_ctx *ctx, int fd, int dup, RegFile *f);
	/*
	 * In amber, before any restored process exists: create the open file
	 * description and return an fd on it (any number; files.c moves it).
	 * Every restored process that had it gets it from there.
	 */
	int (*open)(struct tree *t, RegFile *f);
	/*
	 * Instead of open, for kinds whose descriptions depend on each other
	 * (the image's sockets connect to one another): once per restore, in
	 * amber, before any description is opened, make all n files of this
	 * kind together, fds[k] for files[k] (left -1: not made).  files.c
	 * then takes each fd as if open had returned it.
	 */
	int (*prepare)(struct tree *t, RegFile **files, size_t n, int *fds);
	/*
	 * open and prepare run with the image owner's rights (owner.h), but
	 * for kinds that need amber's own (TCP repair needs CAP_NET_ADMIN):
	 * those bound what they do on the image's word with owner_enter().
	 */
	bool bounds_itself;
	/*
	 * Instead of open, for kinds that need the restored processes: in the
	 * restored process that has f, once its children exist (with the
	 * owner's rights), a new fd on it; files.c places it.  Every fd on f
	 * in that process shares it; other processes make their own.
	 */
	int (*open_child)(struct restore_ctx *ctx, RegFile *f);
	/*
	 * Instead of open, for files of the restored processes themselves
	 * (/proc/PID, pidfds, namespaces): in amber, once every process
	 * exists and is restored up to its credentials, with the owner's
	 * rights unless bounds_itself; holder is the first process that has
	 * f.  Returns amber's fd on it; files.c passes it to every process
	 * that has f (one description for all, as at dump).
	 */
	int (*open_late)(struct restore_ctx *holder, RegFile *f);
	/*
	 * Optional, restore: every image read, before anything is made:
	 * refuse (-EBADMSG or -errno, logged) an entry no dump could have
	 * written, or that the image's owner may not have.
	 */
	int (*check)(struct tree *t, const RegFile *f);
	/*
	 * Optional: in each restored process that has f at fd, once the files
	 * opened late are in place (restore_late; epoll adds those it watches).
	 */
	int (*post_late)(struct restore_ctx *ctx, RegFile *f, int fd);
	/* Optional: once every description is open (epoll adds its targets). */
	int (*post_open)(struct tree *t, RegFile *f, int fd);
	/* Optional, dump: once every open file (and file in flight) is described. */
	int (*dump_done)(struct tree *t);
	/* Optional, dump: the processes run on; see resource_ops.dump_undo. */
	void (*dump_undo)(void);
	/*
	 * An open_child kind that one process alone may hold (an io_uring is
	 * made again in the process, with its memory): refused at dump when
	 * fds of two processes share the description.
	 */
	bool single_process;
};

extern const struct fd_type *const fd_types[]; /* NULL-terminated */

/* procfile.c: a /proc/PID path (PID a number): its files are procfile.c's. */
bool procfile_path(const char *path);
extern const struct fd_type proc_type; /* procfile.c: a file in /proc/PID of the tree */
extern const struct fd_type nsfs_type; /* procfile.c: a namespace file of the tree's */

/*
 * locks.c, for every (process, fd) of the dump once its description is f:
 * the locks taken through it, and whether its owner of signals is asked.
 */
/* locks.c: once per dump, the tree frozen, before the first locks_dump_fd() */
int locks_dump_start(void);
int locks_dump_fd(struct dump_ctx *ctx, int fd, unsigned flags, bool locked, RegFile *f);

/*
 * memfd.c: a memfd is a deleted regular file whose content is saved as a
 * ghost like any other; these add what makes it a memfd again.
 * memfd_dump: fd is open on f's file; fills f->memfd if it is a memfd
 * (0 also when it is not), refuses what cannot be remade (hugetlb).
 * memfd_open: a new, empty memfd for f, or -errno.
 * memfd_finish: once filled, its mode and seals.
 */
int memfd_dump(struct dump_ctx *ctx, int fd, RegFile *f);

int memfd_open(RegFile *f);
int memfd_finish(RegFile *f, int fd);

/* open(path) for a file of the image, without O_NOATIME where the kernel
 * refuses it (not the file's owner); the fd, or -errno. */
int files_open_noatime(const char *path, int flags);

/*
 * link-remap.c, --link-remap: remap_dump checks that a regular file with
 * links (st) is still reached by path, else keeps it by a link it makes
 * (f->link_remap) or refuses without the flag; remap_dump_undo removes the
 * links of a failed dump.  remap_valid checks an image's link; remap_open
 * opens f through it (as the owner); remap_restore_done removes the links
 * once the restored processes run.
 */
int remap_dump(struct dump_ctx *ctx, const char *procpath, const char *path, const struct stat *st,
	       RegFile *f);
void remap_dump_undo(void);
bool remap_valid(const RegFile *f);
int remap_open(RegFile *f, int flags);
void remap_restore_done(struct tree *t);

/*
 * Dump: fd is amber's own, on a file in flight (received by peeking at a
 * unix socket's queue; files.c takes it over and closes it): its file id.
 */
int files_dump_inflight(struct dump_ctx *ctx, int fd, int *id);

/*
 * Dump: is the file /proc shows as link (st) of a kind a restored process
 * gets after the descriptions amber opens (fd_type.open_child, open_late)?
 * Restore: is file id one amber opens, in place before any of those?
 */
bool files_made_late(const char *link, const struct stat *st);
bool files_placed_first(struct tree *t, int id);

/* Is file id of a kind opened once the processes exist (fd_type.open_late)? */
bool files_is_late(struct tree *t, int id);

/*
 * Restore: each process gets from amber only the descriptions it needs
 * (files.c).  files_own_table(): whether pstree entry e drops what it
 * inherited and receives its own (a CLONE_FILES or CLONE_VM child keeps
 * its creator's, which has its share).  files_drop_inherited(): in a
 * process as it starts, the descriptions it inherited from its creator (0:
 * amber) closed.  The send, by amber after go, and the receive, in the
 * process, on its channel.
 */
bool files_own_table(const PstreeEntry *e);
void files_drop_inherited(const struct tree *t, uint32_t creator);
int files_send_needed(const struct tree *t, uint32_t pid, int sock);
int files_recv_needed(const struct tree *t, uint32_t pid, int sock);
/* Restore, once the processes exist: amber's own fds on the descriptions closed. */
void files_close_descs(void);
/* Restore, at the end: every fd amber left in the process closed (one batch). */
int files_drop_amber(struct restore_ctx *ctx);

/* Find which process's fd table an (pid, fd) pair refers to: its file id, or -1. */
int files_id_of(struct tree *t, pid_t pid, int fd);

#endif
