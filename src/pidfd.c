// SPDX-License-Identifier: MIT
/*
 * pidfd: a reference to a process ("Pid:" of fdinfo).  Restored by amber
 * once every process of the tree exists (fd_type.open_late): pidfd_open()
 * of the restored pid (a thread's tid with PIDFD_THREAD), whichever process
 * of the tree it is; a zombie's is opened before it dies again.  A pidfd of
 * a process that died and was reaped (Pid: -1) comes back as one of a helper
 * amber forks, which exits at once and is reaped: as dead.  Pidfds of
 * processes outside the tree are refused by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "anonfd.h"

#define KERNEL_O_LARGEFILE 0100000 /* fdinfo shows it; glibc's O_LARGEFILE is 0 here */

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

static bool pidfd_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:[pidfd]");
}

/* Is id a process of the tree (zombies too), or, thread, a thread of one? */
static bool in_tree(const struct tree *t, long id, bool thread, bool dump)
{
	if (id <= 0 || id > INT32_MAX)
		return false;
	if (tree_entry(t, (uint32_t)id))
		return true;
	for (size_t p = 0; thread && p < t->nr_procs; p++) {
		size_t n = dump ? t->dprocs[p]->nr_threads : t->rprocs[p]->nr_threads;

		for (size_t k = 0; k < n; k++)
			if ((dump ? t->dprocs[p]->threads[k].tid : t->rprocs[p]->threads[k].tid) ==
			    (pid_t)id)
				return true;
	}
	return false;
}

static int pidfd_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
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
	if (!tree_entry(ctx->tree, (uint32_t)ctx->pid)) {
		pr_err("a pidfd (of pid %ld) is in flight in a unix socket's queue (SCM_RIGHTS); "
		       "amber restores pidfds only held by processes of the tree (let the "
		       "receiver read it first)",
		       pid);
		goto free_buf;
	}
	if (pid < 0) { /* dead and reaped: any dead pidfd is alike */
		f->pidfd->has_dead = 1;
		f->pidfd->dead = 1;
		f->pidfd->pid = 0;
		ret = 0;
		pr_debug("pid %d: fd %d: pidfd of a process that was reaped", ctx->pid, fd);
		goto free_buf;
	}
	if (!in_tree(ctx->tree, pid, f->flags & PIDFD_THREAD, true)) {
		pr_err("pid %d: fd %d is a pidfd of pid %ld, which is outside the dumped tree; "
		       "amber restores only pidfds of processes of the dumped tree (dump its "
		       "tree too, or close the fd)",
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

/* A process that has exited and was reaped: a helper's, made so. */
static int dead_pidfd(unsigned flags)
{
	pid_t pid = fork();
	int fd, st;

	if (pid == 0)
		_exit(0);
	if (pid < 0) {
		pr_err("cannot fork a helper for a pidfd of a dead process: %m");
		return -errno;
	}
	/* the pidfd first: it refers to the helper, zombie or not */
	fd = (int)syscall(SYS_pidfd_open, pid, flags);
	if (fd < 0)
		pr_err("cannot open a pidfd of the helper %d: %m", pid);
	fd = fd < 0 ? -errno : fd;
	if (sys_waitpid(pid, &st, 0) != pid) {
		pr_err("cannot reap the helper %d: %m", pid);
		if (fd >= 0)
			close(fd);
		return -ECHILD;
	}
	return fd;
}

static int pidfd_check(struct tree *t, RegFile *f)
{
	const PidfdEntry *e = f->pidfd;

	if (e && !(f->flags & ~(O_ACCMODE | O_NONBLOCK | PIDFD_THREAD | KERNEL_O_LARGEFILE)) &&
	    (e->dead ? e->pid == 0 : in_tree(t, e->pid, f->flags & PIDFD_THREAD, false)))
		return 0;
	pr_err("files.img: pidfd entry %u refers to no process of the restored tree (pid %u, "
	       "flags %#o); the image is corrupt",
	       f->id, e ? e->pid : 0, f->flags);
	return -EBADMSG;
}

static int pidfd_open_late(struct restore_ctx *holder, RegFile *f)
{
	const PidfdEntry *e = f->pidfd;
	unsigned flags = f->flags & (O_NONBLOCK | PIDFD_THREAD);
	int fd;

	if (e->dead)
		return dead_pidfd(flags);
	fd = (int)syscall(SYS_pidfd_open, (pid_t)e->pid, flags);
	if (fd < 0) {
		pr_err("pid %d: cannot open a pidfd of pid %u: %m", holder->pid, e->pid);
		return -errno;
	}
	return fd;
}

const struct fd_type pidfd_type = {
	.name = "pidfd",
	.kind = FILE_KIND__FILE_PIDFD,
	.match = pidfd_match,
	.dump = pidfd_dump,
	.open_late = pidfd_open_late,
	.check = pidfd_check,
};
