/* SPDX-License-Identifier: MIT */
/*
 * Anonymous-inode files (see files.h): eventfd.c, epoll.c, signalfd.c,
 * timerfd.c, inotify.c, ...  Their state is read from the fdinfo of amber's
 * own dup of the description (the same open file description as the target's
 * fd), and they are recreated by amber before the restored processes exist
 * (but io_uring instances, which uring.c makes in the restored process).
 */
#ifndef AMBER_ANONFD_H
#define AMBER_ANONFD_H

#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "files.h"
#include "log.h"
#include "sys.h"

extern const struct fd_type eventfd_type;  /* eventfd.c: counter, semaphore mode */
extern const struct fd_type epoll_type;	   /* epoll.c: the watched fds */
extern const struct fd_type signalfd_type; /* signalfd.c: the signal mask */
extern const struct fd_type timerfd_type;  /* timerfd.c: clock, remaining time, ticks */
extern const struct fd_type inotify_type;  /* inotify.c: watches with their wd numbers */
extern const struct fd_type pidfd_type;	   /* pidfd.c: a process of the tree */
extern const struct fd_type fanotify_type; /* fanotify.c: a group and its marks */
extern const struct fd_type bpfmap_type;   /* bpfmap.c: array and hash maps, contents */
extern const struct fd_type uring_type;	   /* uring.c: an idle io_uring, its rings */

#define MAX_HANDLE 128 /* MAX_HANDLE_SZ */

/* An inode an fsnotify mark is on, as fdinfo shows it (inotify.c). */
struct fsn_inode {
	unsigned long ino;
	dev_t dev;
	unsigned hbytes; /* 0: no usable handle */
	int htype;
	unsigned char handle[MAX_HANDLE];
};

/* The kernel's s_dev ("sdev:" of fdinfo, 20 bits of minor) as a dev_t. */
static inline dev_t fsn_dev(unsigned sdev)
{
	return makedev(sdev >> 20, sdev & 0xfffff);
}

/* The handle at the end of an inode mark's fdinfo line (hbytes 0 if none). */
void fsn_parse_handle(const char *line, struct fsn_inode *in);
/* A path of mountinfo, its \ooo escapes undone in place. */
void fsn_unescape(char *s);
/* An fd on a mount of device dev (amber's view), its root mount preferred; mnt its path. */
int fsn_mount_fd(dev_t dev, char *mnt, size_t len);
/*
 * Dump: the path of the marked inode (*path, malloc'd; "" when no path reaches
 * it, the handle then being the only way).  Refuses (logged, naming pid, fd
 * and what) an inode without a usable handle, or deleted (it dies with the
 * mark).
 */
int fsn_resolve(struct dump_ctx *ctx, int fd, const char *what, const struct fsn_inode *in,
		char **path);
/*
 * Restore, with the owner's rights: an O_PATH fd on the inode, by its handle
 * (*exact: it is the inode ino of dev), else by path (*exact if it still is).
 */
int fsn_open(const char *what, const char *path, uint64_t ino, uint64_t dev, bool has_handle,
	     int htype, const ProtobufCBinaryData *handle, bool *exact);

/*
 * What every kind's dump starts with: the fdinfo text of amber's dup of fd
 * (*buf, malloc'd, NUL-terminated) and a new message of desc's type,
 * initialized (*msg).  Logs failures; on one, nothing is left to free.
 */
int anonfd_dump_start(struct dump_ctx *ctx, int fd, int dup, const char *what,
		      const ProtobufCMessageDescriptor *desc, char **buf, void **msg);

/* The text after "key" where key starts a line of buf, or NULL. */
static inline const char *anonfd_field(const char *buf, const char *key)
{
	size_t len = strlen(key);

	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, len))
			return p + len;
	return NULL;
}

#endif
