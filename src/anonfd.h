/* SPDX-License-Identifier: MIT */
/*
 * Anonymous-inode files (see files.h): eventfd.c, epoll.c, signalfd.c,
 * timerfd.c, inotify.c.  Their state is read from the fdinfo of amber's own
 * dup of the description (the same open file description as the target's
 * fd), and they are recreated by amber before the restored processes exist.
 */
#ifndef AMBER_ANONFD_H
#define AMBER_ANONFD_H

#include <stdio.h>
#include <string.h>

#include "files.h"
#include "log.h"
#include "sys.h"

extern const struct fd_type eventfd_type;  /* eventfd.c: counter, semaphore mode */
extern const struct fd_type epoll_type;	   /* epoll.c: the watched fds */
extern const struct fd_type signalfd_type; /* signalfd.c: the signal mask */
extern const struct fd_type timerfd_type;  /* timerfd.c: clock, remaining time, ticks */
extern const struct fd_type inotify_type;  /* inotify.c: watches with their wd numbers */
extern const struct fd_type pidfd_type;	   /* pidfd.c: a process of the tree */

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
