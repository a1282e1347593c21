// SPDX-License-Identifier: MIT
/*
 * pidfd: a reference to a process ("Pid:" of fdinfo).  Restored by
 * pidfd_open() of the restored pid, by the process that holds it, once its
 * children exist (fd_type.open_child): so only pidfds of processes of the
 * tree that exist by then (itself, its ancestors, children and siblings)
 * are dumped; others, and pidfds of processes that died and were reaped,
 * are refused by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "anonfd.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

static bool pidfd_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:[pidfd]");
}

static const PstreeEntry *entry_of(const struct tree *t, long pid)
{
	for (size_t i = 0; t && i < t->nr_pstree; i++)
		if ((long)t->pstree[i]->pid == pid)
			return t->pstree[i];
	return NULL;
}

/* Does target exist when holder places its fds (restore.c creates parents first)? */
static bool made_before(const struct tree *t, const PstreeEntry *holder, const PstreeEntry *target)
{
	if (target == holder || target->ppid == holder->pid || target->ppid == holder->ppid)
		return true;
	for (const PstreeEntry *a = entry_of(t, holder->ppid); a; a = entry_of(t, a->ppid)) {
		if (a == target)
			return true;
		if (a->ppid == a->pid)
			break;
	}
	return false;
}

static int pidfd_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	const PstreeEntry *holder, *target;
	const char *p;
	char *buf;
	long pid;
	int ret;

	ret = anonfd_dump_start(ctx, fd, dup, "pidfd", &pidfd_entry__descriptor, &buf,
				(void **)&f->pidfd);
	if (ret)
		return ret;
	p = anonfd_field(buf, "Pid:");
	pid = p ? strtol(p, NULL, 10) : 0;
	ret = -EOPNOTSUPP;
	if (!p) {
		pr_err("pid %d: fd %d: no Pid in its fdinfo; cannot tell which process the pidfd "
		       "refers to",
		       ctx->pid, fd);
		goto free_buf;
	}
	if (pid < 0) {
		pr_err("pid %d: fd %d is a pidfd of a process that has died and was reaped; amber "
		       "cannot restore it (close it before the dump)",
		       ctx->pid, fd);
		goto free_buf;
	}
	holder = entry_of(ctx->tree, ctx->pid);
	target = entry_of(ctx->tree, pid);
	if (!holder || !target || pid == 0) {
		pr_err("pid %d: fd %d is a pidfd of pid %ld, %s; amber restores only pidfds of "
		       "processes of the dumped tree",
		       ctx->pid, fd, pid,
		       (f->flags & PIDFD_THREAD) ? "a thread (PIDFD_THREAD) or outside the tree"
						 : "which is outside the dumped tree");
		goto free_buf;
	}
	if (!made_before(ctx->tree, holder, target)) {
		pr_err("pid %d: fd %d is a pidfd of pid %ld, which is neither this process, its "
		       "ancestor, child nor sibling; amber cannot restore such a pidfd yet",
		       ctx->pid, fd, pid);
		goto free_buf;
	}
	f->pidfd->pid = (uint32_t)pid;
	ret = 0;
	pr_debug("pid %d: fd %d: pidfd of pid %ld", ctx->pid, fd, pid);
free_buf:
	free(buf);
	return ret;
}

static int pidfd_open_child(struct restore_ctx *ctx, RegFile *f)
{
	const PstreeEntry *holder = entry_of(ctx->tree, ctx->pid), *target;
	int fd;

	target = f->pidfd ? entry_of(ctx->tree, f->pidfd->pid) : NULL;
	if (!holder || !target || !made_before(ctx->tree, holder, target) ||
	    (f->flags & ~(O_ACCMODE | O_NONBLOCK | PIDFD_THREAD | O_LARGEFILE))) {
		pr_err("files.img: pidfd entry %u of pid %d refers to no process it can have "
		       "(flags %#o); the image is corrupt",
		       f->id, ctx->pid, f->flags);
		return -EBADMSG;
	}
	fd = (int)syscall(SYS_pidfd_open, (pid_t)target->pid,
			  f->flags & (O_NONBLOCK | PIDFD_THREAD));
	if (fd < 0) {
		pr_err("pid %d: cannot open a pidfd of pid %u: %m", ctx->pid, target->pid);
		return -errno;
	}
	return fd;
}

const struct fd_type pidfd_type = {
	.name = "pidfd",
	.kind = FILE_KIND__FILE_PIDFD,
	.match = pidfd_match,
	.dump = pidfd_dump,
	.open_child = pidfd_open_child,
};
