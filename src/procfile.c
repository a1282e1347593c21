// SPDX-License-Identifier: MIT
/*
 * Files of the tree's own processes: a file, directory or O_PATH fd in
 * /proc/PID (FILE_PROC: /proc/self/status, /proc/PID/task/TID/stat...) and a
 * namespace file (FILE_NSFS: /proc/PID/ns/net...).  They name processes that
 * do not exist yet when amber opens the other files, so they are opened late
 * (fd_type.open_late), once every process is restored (same pids, their own
 * credentials), and passed to the processes that had them.
 *
 * A /proc/PID file of a process outside the tree would be another process's
 * at restore, and a namespace other than the holder's own (amber's, or a
 * UTS or IPC namespace that ns/ns.c makes again) cannot be reopened: both
 * are refused at dump.
 * An image's path is opened only below /proc, in the /proc/PID of a process
 * or thread of the restored tree, without following any link.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "amber.h"
#include "files.h"
#include "log.h"
#include "ns/ns.h"
#include "sys.h"

#define PROC_SUPER_MAGIC   0x9fa0
#define KERNEL_O_LARGEFILE 0100000 /* fdinfo shows it; glibc's O_LARGEFILE is 0 here */

bool procfile_path(const char *path)
{
	const char *p = path + 6;

	if (strncmp(path, "/proc/", 6) || *p < '0' || *p > '9')
		return false;
	while (*p >= '0' && *p <= '9')
		p++;
	return !*p || *p == '/';
}

/* The pid of "/proc/PID[/...]" and where the rest starts, or 0. */
static uint32_t path_pid(const char *path, const char **rest)
{
	unsigned long pid;
	char *end;

	if (!procfile_path(path))
		return 0;
	errno = 0;
	pid = strtoul(path + 6, &end, 10);
	if (errno || pid == 0 || pid > INT32_MAX || path[6] == '0')
		return 0;
	*rest = end;
	return (uint32_t)pid;
}

/* Is id a process of the dumped tree (zombies too) or a thread of one? */
static bool dump_tree_has(const struct tree *t, uint32_t id)
{
	if (tree_entry(t, id))
		return true;
	for (size_t p = 0; p < t->nr_procs; p++)
		for (size_t k = 0; k < t->dprocs[p]->nr_threads; k++)
			if ((uint32_t)t->dprocs[p]->threads[k].tid == id)
				return true;
	return false;
}

static bool restore_tree_has(const struct tree *t, uint32_t id)
{
	if (tree_entry(t, id))
		return true;
	for (size_t p = 0; p < t->nr_procs; p++)
		for (size_t k = 0; k < t->rprocs[p]->nr_threads; k++)
			if ((uint32_t)t->rprocs[p]->threads[k].tid == id)
				return true;
	return false;
}

/* An fd of a process of the tree (not one amber found in flight in a queue). */
static bool holder_ok(struct dump_ctx *ctx, int fd, const char *path)
{
	if (tree_entry(ctx->tree, (uint32_t)ctx->pid))
		return true;
	pr_err("%s is in flight in a unix socket's queue (SCM_RIGHTS); amber reopens it only "
	       "for a process of the tree that holds it (let the receiver read it first)",
	       path);
	return false;
}

static bool proc_match(const char *link, const struct stat *st)
{
	return procfile_path(link);
}

static int proc_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	const char *rest;
	uint32_t pid = path_pid(f->path, &rest);

	if (!holder_ok(ctx, fd, f->path))
		return -EOPNOTSUPP;
	if (!pid || !dump_tree_has(ctx->tree, pid)) {
		pr_err("pid %d: fd %d is %s, of process %u, which is not in the dumped tree; at "
		       "restore that pid would be another process's (dump its tree too, or "
		       "close the fd)",
		       ctx->pid, fd, f->path, pid);
		return -EOPNOTSUPP;
	}
	if (ctx->tree->own_pidns) {
		/* the path names the host's pid, which the restore gives another */
		pr_err("pid %d: fd %d is %s; /proc files of a tree that is its own pid namespace "
		       "are not dumped yet (close the fd)",
		       ctx->pid, fd, f->path);
		return -EOPNOTSUPP;
	}
	f->has_proc_pid = 1;
	f->proc_pid = pid;
	pr_debug("pid %d: fd %d: %s, of the tree's process %u", ctx->pid, fd, f->path, pid);
	return 0;
}

/* Flags an fd of /proc may have had and that reopen it as it was. */
#define PROC_FLAGS                                                                                 \
	(O_ACCMODE | O_APPEND | O_NONBLOCK | O_DIRECTORY | O_NOFOLLOW | O_PATH |                   \
	 KERNEL_O_LARGEFILE | O_NOATIME | O_DSYNC | O_SYNC | O_ASYNC | O_DIRECT)

/*
 * Open rest ("PID/status") below /proc; resolve: RESOLVE_* (an image's path
 * follows no link and stays in procfs; a namespace file is a link to nsfs).
 */
static int open_below_proc(const char *rest, int flags, uint64_t resolve)
{
	struct statfs sf;
	int dir, fd;

	dir = sys_open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (dir < 0) {
		pr_err("cannot open /proc: %s", strerror(-dir));
		return dir;
	}
	if (fstatfs(dir, &sf) || sf.f_type != PROC_SUPER_MAGIC) {
		pr_err("/proc is not procfs here; cannot reopen /proc/%s", rest);
		close(dir);
		return -ENOENT;
	}
	fd = sys_openat2(dir, rest, flags | O_CLOEXEC, 0, resolve);
	close(dir);
	return fd;
}

/* Each component of a path below /proc/PID: a name, not "", "." or "..". */
static bool rest_ok(const char *rest)
{
	if (!*rest)
		return true;
	if (*rest != '/' || strlen(rest) >= PATH_MAX - 32)
		return false;
	for (const char *c = rest + 1;;) {
		size_t n = strcspn(c, "/");

		if (!n || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[n])
			return true;
		/* links (to the process's files) end a path: nothing is reached through them */
		if ((n == 4 && (!strncmp(c, "root", 4))) || (n == 3 && !strncmp(c, "cwd", 3)) ||
		    (n == 3 && !strncmp(c, "exe", 3)))
			return false;
		c += n + 1;
	}
}

static int proc_check(struct tree *t, const RegFile *f)
{
	const char *rest;
	uint32_t pid = path_pid(f->path, &rest);

	if (pid && f->has_proc_pid && f->proc_pid == pid && rest_ok(rest) &&
	    restore_tree_has(t, pid) && !(f->flags & ~PROC_FLAGS))
		return 0;
	pr_err("files.img: entry %u, %s (flags %#o), is not a file in /proc/PID of a process of "
	       "the restored tree; the image is corrupt",
	       f->id, f->path, f->flags);
	return -EBADMSG;
}

static int proc_open_late(struct restore_ctx *holder, RegFile *f)
{
	char rel[PATH_MAX];
	const char *rest;
	struct stat st;
	uint32_t pid = path_pid(f->path, &rest);
	int fd;

	snprintf(rel, sizeof(rel), "%u%s", pid, rest);
	fd = open_below_proc(rel, (int)f->flags,
			     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
	if (fd < 0) {
		pr_err("pid %d: cannot reopen %s (flags %#o) of the restored process %u: %s",
		       holder->pid, f->path, f->flags, pid, strerror(-fd));
		return fd;
	}
	if (fstat(fd, &st) || (st.st_mode & S_IFMT) != (f->mode & S_IFMT)) {
		pr_err("%s: not the same kind of file as the process had (mode %o, was %o)",
		       f->path, st.st_mode & S_IFMT, f->mode & S_IFMT);
		close(fd);
		return -ESTALE;
	}
	/* seq_file contents are made again up to the offset */
	if (!(f->flags & O_PATH) && f->pos && lseek(fd, (off_t)f->pos, SEEK_SET) < 0) {
		pr_err("cannot seek %s to %llu: %m", f->path, (unsigned long long)f->pos);
		close(fd);
		return -errno;
	}
	return fd;
}

const struct fd_type proc_type = {
	.name = "/proc/PID file",
	.kind = FILE_KIND__FILE_PROC,
	.match = proc_match,
	.dump = proc_dump,
	.open_late = proc_open_late,
	.check = proc_check,
};

/* Namespace files: /proc/PID/ns/NAME, of kind (what its link says) KIND. */
static const struct {
	const char *name, *kind;
} ns_files[] = {
	{"cgroup", "cgroup"}, {"ipc", "ipc"},
	{"mnt", "mnt"},	      {"net", "net"},
	{"pid", "pid"},	      {"pid_for_children", "pid"},
	{"time", "time"},     {"time_for_children", "time"},
	{"user", "user"},     {"uts", "uts"},
};

/* The kind of "net:[4026531840]", or NULL. */
static const char *ns_kind(const char *link)
{
	size_t n = strcspn(link, ":");

	if (strncmp(link + n, ":[", 2) || link[n + 2] < '0' || link[n + 2] > '9' ||
	    link[strlen(link) - 1] != ']')
		return NULL;
	for (size_t i = 0; i < sizeof(ns_files) / sizeof(ns_files[0]); i++)
		if (strlen(ns_files[i].kind) == n && !strncmp(link, ns_files[i].kind, n))
			return ns_files[i].kind;
	return NULL;
}

/* nsfs's device: a file on it is a namespace, whatever its name (a bind mount) */
static bool on_nsfs(const struct stat *st)
{
	static dev_t dev;
	struct stat ns;

	if (!dev && !sys_stat("/proc/self/ns/net", &ns))
		dev = ns.st_dev;
	return dev && st->st_dev == dev;
}

static bool nsfs_match(const char *link, const struct stat *st)
{
	return S_ISREG(st->st_mode) && (ns_kind(link) || on_nsfs(st));
}

/* The kind of namespace of an nsfs file (NS_GET_NSTYPE), or NULL. */
static const char *ns_kind_of(int fd, const char *link)
{
	static const struct {
		int type;
		const char *kind;
	} types[] = {
		{CLONE_NEWCGROUP, "cgroup"}, {CLONE_NEWIPC, "ipc"}, {CLONE_NEWNS, "mnt"},
		{CLONE_NEWNET, "net"},	     {CLONE_NEWPID, "pid"}, {CLONE_NEWTIME, "time"},
		{CLONE_NEWUSER, "user"},     {CLONE_NEWUTS, "uts"},
	};
	int type = ioctl(fd, NS_GET_NSTYPE);

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (types[i].type == type)
			return types[i].kind;
	return ns_kind(link);
}

static int nsfs_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	const char *kind = ns_kind_of(dup, f->path);
	struct stat st;
	char path[64];

	if (!holder_ok(ctx, fd, f->path))
		return -EOPNOTSUPP;
	if (!kind) {
		pr_err("pid %d: fd %d is %s, a namespace file of a kind amber does not know (close "
		       "it before the dump)",
		       ctx->pid, fd, f->path);
		return -EOPNOTSUPP;
	}
	/* the holder's own (amber's, or a UTS or IPC namespace restore makes again) */
	for (size_t i = 0; i < sizeof(ns_files) / sizeof(ns_files[0]); i++) {
		if (strcmp(ns_files[i].kind, kind))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", ctx->pid, ns_files[i].name);
		if (sys_stat(path, &st) || st.st_ino != f->ino || st.st_dev != f->dev)
			continue;
		f->proc_ns = strdup(ns_files[i].name);
		if (!f->proc_ns)
			return -ENOMEM;
		pr_debug("pid %d: fd %d: the tree's %s namespace (%s)", ctx->pid, fd, kind,
			 f->path);
		return 0;
	}
	pr_err("pid %d: fd %d is %s, a file of a %s namespace (inode %llu) that the dumped tree "
	       "is not in; amber cannot restore other namespaces yet (close the fd before the "
	       "dump)",
	       ctx->pid, fd, f->path, kind, (unsigned long long)f->ino);
	return -EOPNOTSUPP;
}

static int nsfs_check(struct tree *t, const RegFile *f)
{
	for (size_t i = 0; f->proc_ns && i < sizeof(ns_files) / sizeof(ns_files[0]); i++)
		if (!strcmp(f->proc_ns, ns_files[i].name) &&
		    !(f->flags & ~(O_ACCMODE | O_NONBLOCK | KERNEL_O_LARGEFILE | O_PATH)))
			return 0;
	pr_err("files.img: entry %u, %s (flags %#o), names no namespace file; the image is "
	       "corrupt",
	       f->id, f->path, f->flags);
	return -EBADMSG;
}

static int nsfs_open_late(struct restore_ctx *holder, RegFile *f)
{
	char rel[64];
	struct stat st;
	int fd;

	/* the namespace the restored process is in */
	snprintf(rel, sizeof(rel), "%d/ns/%s", holder->inf.pid, f->proc_ns);
	fd = open_below_proc(rel, (int)f->flags, 0);
	if (fd < 0) {
		pr_err("pid %d: cannot open its %s namespace file /proc/%s: %s", holder->pid,
		       f->proc_ns, rel, strerror(-fd));
		return fd;
	}
	if (!fstat(fd, &st) && f->has_ino && st.st_ino != f->ino)
		pr_debug("pid %d: %s namespace %llu is now %llu (restored anew)", holder->pid,
			 f->proc_ns, (unsigned long long)f->ino, (unsigned long long)st.st_ino);
	return fd;
}

const struct fd_type nsfs_type = {
	.name = "namespace file",
	.kind = FILE_KIND__FILE_NSFS,
	.match = nsfs_match,
	.dump = nsfs_dump,
	.open_late = nsfs_open_late,
	.check = nsfs_check,
};
