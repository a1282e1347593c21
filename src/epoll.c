// SPDX-License-Identifier: MIT
/*
 * epoll: the watched fds ("tfd: N events: X data: Y ..." lines of fdinfo),
 * each with its events and user data.  An epoll item is keyed by (file, fd
 * number), so it is re-added under the owner's own fd number: amber puts
 * the target's description at that number for the EPOLL_CTL_ADD and then
 * gives the number back to whatever amber had there.
 *
 * fdinfo names an item by the fd number it was added with; if the process
 * closed that fd (or reused the number for another file) the item still
 * lives while its file does, but the number no longer leads to it.
 * kcmp(KCMP_EPOLL_TFD) tells.  Another process of the tree that shares the
 * epoll may still have the file at that number (fd tables part ways after
 * fork); failing that, any fd of any process of the tree that has the file
 * (file_fd); the restore adds it under the number tfd all the same.  A file
 * that no fd of the tree holds any more is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "anonfd.h"
#include "ns/ns.h"

#ifndef KCMP_EPOLL_TFD
#define KCMP_EPOLL_TFD 7
#endif

struct kcmp_epoll_slot {
	uint32_t efd;
	uint32_t tfd;
	uint32_t toff;
};

static bool epoll_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:[eventpoll]");
}

static int add_target(EpollEntry *e, int tfd, unsigned events, uint64_t data, pid_t pid,
		      int file_fd)
{
	EpollTarget *tg, **nt;

	nt = realloc(e->targets, (e->n_targets + 1) * sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	e->targets = nt;
	tg = malloc(sizeof(*tg));
	if (!tg)
		return -ENOMEM;
	epoll_target__init(tg);
	tg->tfd = (uint32_t)tfd;
	tg->events = events;
	tg->data = data;
	if (pid != (pid_t)e->owner_pid) {
		tg->has_pid = 1;
		tg->pid = (uint32_t)pid;
	}
	if (file_fd != tfd) {
		tg->has_file_fd = 1;
		tg->file_fd = (uint32_t)file_fd;
	}
	e->targets[e->n_targets++] = tg;
	return 0;
}

/* Which fd of pid is the file of the epoll item slot of ctx's process: the fd, or -1. */
static int fd_with_target(struct dump_ctx *ctx, pid_t pid, struct kcmp_epoll_slot *slot)
{
	char path[64];
	struct dirent *d;
	int found = -1;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = sys_opendir(path);
	if (!dir)
		return -1;
	while (found < 0 && (d = readdir(dir))) {
		char *end;
		long n = strtol(d->d_name, &end, 10);

		if (d->d_name[0] < '0' || d->d_name[0] > '9' || *end || n < 0 || n > INT32_MAX)
			continue;
		if (sys_kcmp(pid, ctx->pid, KCMP_EPOLL_TFD, (unsigned long)n,
			     (unsigned long)slot) == 0)
			found = (int)n;
	}
	closedir(dir);
	return found;
}

/*
 * Which process of the tree has the file of item (tfd, toff) of ctx's epoll
 * fd efd at its fd tfd, ctx's own process first: its pid, or -errno.  Failing
 * that, one that has it at another fd: that fd goes into *file_fd.
 */
static pid_t target_holder(struct dump_ctx *ctx, int efd, int tfd, int toff, int *file_fd)
{
	struct kcmp_epoll_slot slot = {
		.efd = (uint32_t)efd, .tfd = (uint32_t)tfd, .toff = (uint32_t)toff};
	struct tree *t = ctx->tree;
	int r = sys_kcmp(ctx->pid, ctx->pid, KCMP_EPOLL_TFD, (unsigned long)tfd,
			 (unsigned long)&slot);

	if (r == 0)
		return ctx->pid;
	if (r < 0 && r != -EBADF) {
		pr_err("pid %d: kcmp(KCMP_EPOLL_TFD) on epoll fd %d, target fd %d failed: %s "
		       "(kernel without CONFIG_CHECKPOINT_RESTORE? see amber check)",
		       ctx->pid, efd, tfd, strerror(-r));
		return r;
	}
	for (size_t i = 0; t && i < t->nr_procs; i++) {
		pid_t pid = t->dprocs[i]->pid;

		if (pid != ctx->pid && sys_kcmp(pid, ctx->pid, KCMP_EPOLL_TFD, (unsigned long)tfd,
						(unsigned long)&slot) == 0)
			return pid;
	}
	*file_fd = fd_with_target(ctx, ctx->pid, &slot);
	if (*file_fd >= 0)
		return ctx->pid;
	for (size_t i = 0; t && i < t->nr_procs; i++) {
		pid_t pid = t->dprocs[i]->pid;

		if (pid == ctx->pid)
			continue;
		*file_fd = fd_with_target(ctx, pid, &slot);
		if (*file_fd >= 0)
			return pid;
	}
	pr_err("pid %d: epoll fd %d watches a file that was added as fd %d, but fd %d %s "
	       "and no fd of the tree has that file any more; amber cannot restore a watch "
	       "on a file no process has an fd for (EPOLL_CTL_DEL it before closing the fd)",
	       ctx->pid, efd, tfd, tfd, r > 0 ? "is now another file" : "was closed since");
	return -EOPNOTSUPP;
}

/*
 * pidfds and /proc files are opened once the processes exist (open_late),
 * after the epolls: the process itself adds them then (epoll_post_late), so
 * it must have the epoll and the file at the watched number.
 */
static bool target_is_late(pid_t pid, int fd)
{
	char path[64], link[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = sys_readlink_raw(path, link, sizeof(link) - 1);
	if (n <= 0)
		return false;
	link[n] = 0;
	return !strcmp(link, "anon_inode:[pidfd]") || procfile_path(link);
}

static int epoll_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	EpollEntry *e;
	char *buf;
	const char *p;
	int ret;

	ret = anonfd_dump_start(ctx, fd, dup, "epoll", &epoll_entry__descriptor, &buf, (void **)&e);
	if (ret)
		return ret;
	f->epoll = e;
	e->owner_pid = dump_vpid(ctx->tree, ctx->pid); /* the image's pids */
	for (p = buf; p && *p && !ret; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		unsigned long long data;
		unsigned events;
		int tfd, toff = 0, file_fd;
		pid_t holder;

		if (strncmp(p, "tfd:", 4))
			continue;
		if (sscanf(p, "tfd: %d events: %x data: %llx", &tfd, &events, &data) != 3 ||
		    tfd < 0) {
			pr_err("pid %d: fd %d: cannot parse the epoll item '%.*s'", ctx->pid, fd,
			       (int)strcspn(p, "\n"), p);
			ret = -EINVAL;
			break;
		}
		/* Items with the same fd number (different files) are told apart by order. */
		for (size_t i = 0; i < e->n_targets; i++)
			toff += (int)e->targets[i]->tfd == tfd;
		file_fd = tfd;
		holder = target_holder(ctx, fd, tfd, toff, &file_fd);
		if (holder > 0 && (holder != ctx->pid || file_fd != tfd) &&
		    target_is_late(holder, file_fd)) {
			pr_err("pid %d: epoll fd %d watches fd %d (a pidfd or /proc file), which "
			       "this process no longer has at that number; amber cannot restore "
			       "such a watch yet",
			       ctx->pid, fd, tfd);
			holder = -EOPNOTSUPP;
		}
		ret = holder < 0 ? holder
				 : add_target(e, tfd, events, data,
					      (pid_t)dump_vpid(ctx->tree, holder), file_fd);
	}
	if (!ret)
		pr_debug("pid %d: fd %d: epoll with %zu watched fds", ctx->pid, fd, e->n_targets);
	free(buf);
	return ret;
}

static int epoll_open(struct tree *t, RegFile *f)
{
	int fd, ret;

	if (!f->epoll) {
		pr_err("files.img: epoll entry %u has no epoll state; the image is corrupt", f->id);
		return -EBADMSG;
	}
	fd = epoll_create1(EPOLL_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		pr_err("cannot create an epoll instance (entry %u): %m", f->id);
		return ret;
	}
	if ((f->flags & O_NONBLOCK) && fcntl(fd, F_SETFL, O_NONBLOCK)) {
		ret = -errno;
		pr_err("cannot make epoll entry %u non-blocking: %m", f->id);
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * EPOLL_CTL_ADD of src under the number tfd, which amber may be using (its
 * stdio, the image dir): that fd is parked above fd_base meanwhile.  Nothing
 * is logged until tfd is amber's again (it may be stderr).
 */
static int add_as(struct tree *t, int epfd, int src, int tfd, struct epoll_event *ev)
{
	int fdflags = fcntl(tfd, F_GETFD), parked = -1, ret = 0;

	if (fdflags >= 0) {
		parked = fcntl(tfd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
		if (parked < 0)
			return -errno;
	}
	if (dup3(src, tfd, O_CLOEXEC) < 0) {
		ret = -errno;
		goto unpark;
	}
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, ev))
		ret = -errno;
unpark:
	if (parked >= 0) {
		if (dup3(parked, tfd, (fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0 && !ret)
			ret = -errno;
		close(parked);
	} else {
		close(tfd);
	}
	return ret;
}

static int epoll_post_open(struct tree *t, RegFile *f, int fd)
{
	EpollEntry *e = f->epoll;

	for (size_t i = 0; i < e->n_targets; i++) {
		EpollTarget *tg = e->targets[i];
		struct epoll_event ev = {.events = tg->events, .data.u64 = tg->data};
		pid_t pid = (pid_t)(tg->has_pid ? tg->pid : e->owner_pid);
		unsigned int file_fd = tg->has_file_fd ? tg->file_fd : tg->tfd;
		int id = files_id_of(t, pid, (int)file_fd), ret;

		if (id < 0 || tg->tfd > INT32_MAX) {
			pr_err("files.img: epoll entry %u watches fd %u of pid %d, which that "
			       "process does not have in its fds image; the image is corrupt",
			       f->id, file_fd, pid);
			return -EBADMSG;
		}
		if (files_is_late(t, id)) {
			if (file_fd != tg->tfd) {
				pr_err("files.img: epoll entry %u watches fd %u of pid %d, a file "
				       "opened late, under another number; the image is corrupt",
				       f->id, file_fd, pid);
				return -EBADMSG;
			}
			continue; /* the process adds it (epoll_post_late) */
		}
		ret = add_as(t, fd, t->desc_fd[id], (int)tg->tfd, &ev);
		if (ret) {
			pr_err("cannot add fd %u (%s) to epoll entry %u with events 0x%x: %s",
			       tg->tfd, t->rfiles[id]->path, f->id, tg->events, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* In a process that has the epoll at fd: its watches on files opened late. */
static int epoll_post_late(struct restore_ctx *ctx, RegFile *f, int fd)
{
	EpollEntry *e = f->epoll;

	for (size_t i = 0; i < e->n_targets; i++) {
		EpollTarget *tg = e->targets[i];
		struct epoll_event ev = {.events = tg->events, .data.u64 = tg->data};
		pid_t pid = (pid_t)(tg->has_pid ? tg->pid : e->owner_pid);
		int id = files_id_of(ctx->tree, pid, (int)tg->tfd), ret;
		long r;

		if (pid != ctx->pid || id < 0 || !files_is_late(ctx->tree, id))
			continue;
		ret = infect_write(&ctx->inf, ctx->inf.scratch, &ev, sizeof(ev));
		if (ret)
			return ret;
		r = infect_call(&ctx->inf, SYS_epoll_ctl, fd, EPOLL_CTL_ADD, tg->tfd,
				(long)ctx->inf.scratch, 0, 0);
		if (r) {
			pr_err("pid %d: cannot add fd %u (%s) to its epoll fd %d with events 0x%x: "
			       "%s",
			       ctx->pid, tg->tfd, ctx->tree->rfiles[id]->path, fd, tg->events,
			       strerror((int)-r));
			return (int)r;
		}
	}
	return 0;
}

const struct fd_type epoll_type = {
	.name = "epoll",
	.kind = FILE_KIND__FILE_EPOLL,
	.match = epoll_match,
	.dump = epoll_dump,
	.open = epoll_open,
	.post_open = epoll_post_open,
	.post_late = epoll_post_late,
};
