// SPDX-License-Identifier: MIT
/*
 * pidfd: a reference to a process ("Pid:" of fdinfo).  Restored by amber
 * once every process of the tree exists (fd_type.open_late): pidfd_open()
 * of the restored pid (a thread's tid with PIDFD_THREAD), whichever process
 * of the tree it is; a zombie's is opened before it dies again.  A pidfd of
 * a process that died and was reaped (Pid: -1) comes back as one of a helper
 * amber forks, which ends at once as that process did (its exit status, if
 * the kernel kept it for PIDFD_GET_INFO) and is reaped: as dead.  Pidfds of
 * processes outside the tree are refused by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "anonfd.h"
#include "ns/ns.h"

#define KERNEL_O_LARGEFILE 0100000 /* fdinfo shows it; glibc's O_LARGEFILE is 0 here */

/* linux/pidfd.h of 6.15 (Debian 12's headers are older): the first 64 bytes */
struct pidfd_info_v0 {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define AMBER_PIDFD_GET_INFO  _IOWR(0xFF, 11, struct pidfd_info_v0)
#define AMBER_PIDFD_INFO_EXIT (1UL << 3)

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
	if (pid < 0) { /* dead and reaped: alike but for the exit status it keeps */
		struct pidfd_info_v0 info = {.mask = AMBER_PIDFD_INFO_EXIT};

		f->pidfd->has_dead = 1;
		f->pidfd->dead = 1;
		f->pidfd->pid = 0;
		/* kernels before 6.15 keep none */
		if (!ioctl(dup, AMBER_PIDFD_GET_INFO, &info) &&
		    (info.mask & AMBER_PIDFD_INFO_EXIT)) {
			f->pidfd->has_exit_code = 1;
			f->pidfd->exit_code = info.exit_code;
		}
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
	/* fdinfo shows the host's pid; the image holds the namespace's */
	f->pidfd->pid = dump_vpid(ctx->tree, (pid_t)pid);
	ret = 0;
	pr_debug("pid %d: fd %d: pidfd of pid %ld", ctx->pid, fd, pid);
free_buf:
	free(buf);
	return ret;
}

/* A wait status a process can end with (the core dump bit aside). */
static bool status_ok(int32_t st)
{
	int sig = st & 0x7f;

	return sig ? sig != 0x7f && sig <= 64 && !(st & ~0xff) : !(st & ~0xff00);
}

/* The helper ends as the process did: by its signal or with its exit code. */
static void __attribute__((noreturn)) end_as(int32_t st)
{
	int sig = st & 0x7f;
	sigset_t set;

	if (sig) {
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core dump of amber */
		signal(sig, SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(sig);
	}
	_exit((st >> 8) & 0xff);
}

/* A process that has exited and was reaped: a helper's, made so. */
static int dead_pidfd(unsigned flags, int32_t status)
{
	pid_t pid = fork();
	int fd, st;

	if (pid == 0)
		end_as(status);
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

static int pidfd_check(struct tree *t, const RegFile *f)
{
	const PidfdEntry *e = f->pidfd;

	if (e && !(f->flags & ~(O_ACCMODE | O_NONBLOCK | PIDFD_THREAD | KERNEL_O_LARGEFILE)) &&
	    (e->dead ? e->pid == 0 && (!e->has_exit_code || status_ok(e->exit_code & ~0x80))
		     : in_tree(t, e->pid, f->flags & PIDFD_THREAD, false)))
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
		return dead_pidfd(flags, e->has_exit_code ? e->exit_code & ~0x80 : 0);
	/* the host pid: amber is outside a pid namespace of the tree's */
	fd = (int)syscall(SYS_pidfd_open, tree_hpid(holder->tree, e->pid), flags);
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
