// SPDX-License-Identifier: MIT
/*
 * Open files: the fd table (numbers, close-on-exec) and the open file
 * descriptions behind it (path, flags, offset; pipe and FIFO contents;
 * terminals in --shell-job mode).  Descriptions shared by several fds are
 * found with kcmp(KCMP_FILE), sorting by its order instead of comparing
 * every pair.  Deleted files are saved as ghost images and recreated.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "amber.h"
#include "files.h"
#include "log.h"
#include "ns/ns.h"
#include "proc.h"
#include "sys.h"
#include "tty.h"

#ifndef KCMP_FILE
#define KCMP_FILE 0
#endif
#define MAX_FD	 (1 << 20)
#define PIPE_MAX (1 << 20)

static size_t ino_slot(const struct file_table *t, uint64_t dev, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ULL) ^ dev) & (t->by_ino_cap - 1);
}

static void ino_put(struct file_table *t, uint32_t id)
{
	size_t k = ino_slot(t, t->f[id]->dev, t->f[id]->ino);

	while (t->by_ino[k])
		k = (k + 1) & (t->by_ino_cap - 1);
	t->by_ino[k] = id + 1;
}

/* One more file behind mappings in the index, kept at most half full. */
static int ino_add(struct file_table *t, uint32_t id)
{
	size_t old_cap = t->by_ino_cap, cap = old_cap ? old_cap * 2 : 256;
	uint32_t *old = t->by_ino;

	if (old_cap < 2 * (t->by_ino_n + 1)) {
		t->by_ino = calloc(cap, sizeof(*t->by_ino));
		if (!t->by_ino) {
			t->by_ino = old;
			return -ENOMEM;
		}
		t->by_ino_cap = cap;
		for (size_t k = 0; k < old_cap; k++)
			if (old[k])
				ino_put(t, old[k] - 1);
		free(old);
	}
	ino_put(t, id);
	t->by_ino_n++;
	return 0;
}

/* The file behind mappings opened as path with flags on (dev, ino), or NULL. */
static RegFile *find_reg(const struct file_table *t, const struct stat *st, const char *path,
			 int flags)
{
	for (size_t k = t->by_ino_cap ? ino_slot(t, st->st_dev, st->st_ino) : 0;
	     t->by_ino_cap && t->by_ino[k]; k = (k + 1) & (t->by_ino_cap - 1)) {
		RegFile *o = t->f[t->by_ino[k] - 1];

		if (o->kind == FILE_KIND__FILE_REG && o->dev == st->st_dev &&
		    o->ino == st->st_ino && (int)o->flags == flags && !strcmp(o->path, path))
			return o;
	}
	return NULL;
}

int files_add(struct dump_ctx *ctx, RegFile *f)
{
	struct file_table *t = ctx->files;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 32;
		RegFile **nf = realloc(t->f, cap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		t->f = nf;
		t->cap = cap;
	}
	f->id = (uint32_t)t->n;
	t->f[t->n++] = f;
	return (int)f->id;
}

static bool is_tty(const struct stat *st)
{
	unsigned maj = major(st->st_rdev), min = minor(st->st_rdev);

	return (maj >= 136 && maj <= 143) || (maj == 4) || (maj == 5 && min <= 2);
}

#define GHOST_MAX_EXTENTS 65536 /* image.c's LIM_EXTENTS: more are merged */

/* len bytes of src from off into img, by pread: the process's offset stays. */
static int copy_range_to_img(int src, uint64_t off, uint64_t len, struct img *img)
{
	static char buf[1 << 16];

	while (len) {
		ssize_t r = pread(src, buf, len < sizeof(buf) ? len : sizeof(buf), (off_t)off);
		int ret;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ENODATA; /* shrunk while frozen: another process wrote it */
		ret = img_write(img, buf, r);
		if (ret)
			return ret;
		off += r;
		len -= r;
	}
	return 0;
}

/*
 * The data extents of a deleted file (SEEK_DATA/SEEK_HOLE), so that its
 * holes stay holes; a file system without them gives one extent.
 */
static int ghost_extents(struct dump_ctx *ctx, int fd, RegFile *f, uint64_t *total)
{
	uint64_t off = 0, *ex = NULL;
	size_t n = 0;

	*total = 0;
	while (off < f->size) {
		off_t d = lseek(fd, (off_t)off, SEEK_DATA), h;
		uint64_t *nex;

		if (d < 0 && errno == ENXIO)
			break;
		if (d < 0) {
			d = (off_t)off; /* no SEEK_DATA here: all data */
			h = (off_t)f->size;
		} else {
			h = lseek(fd, d, SEEK_HOLE);
			if (h < 0 || (uint64_t)h > f->size)
				h = (off_t)f->size;
		}
		if (n / 2 == GHOST_MAX_EXTENTS - 1)
			h = (off_t)f->size; /* the rest as one extent, holes as zeros */
		if (h <= d)
			break;
		nex = realloc(ex, (n + 2) * sizeof(*ex));
		if (!nex) {
			free(ex);
			return -ENOMEM;
		}
		ex = nex;
		ex[n++] = (uint64_t)d;
		ex[n++] = (uint64_t)(h - d);
		*total += (uint64_t)(h - d);
		off = (uint64_t)h;
	}
	f->ghost_extents = ex;
	f->n_ghost_extents = n;
	if (*total > ctx->o->ghost_limit) {
		pr_err("pid %d: the deleted file %s holds %llu bytes of data, more than the ghost "
		       "limit of %llu; dump with a larger --ghost-limit SIZE to save it in the "
		       "image",
		       ctx->pid, f->path, (unsigned long long)*total,
		       (unsigned long long)ctx->o->ghost_limit);
		return -EFBIG;
	}
	return 0;
}

/*
 * A deleted file's data goes into ghost-N.img, with its size, holes, mode,
 * owner and times in its files.img entry; one ghost per inode.  It is read
 * through a new open of /proc/PID/fd/N with O_NOATIME and pread, so neither
 * the process's offset nor the file's atime changes.
 */
static int dump_ghost(struct dump_ctx *ctx, const char *procpath, RegFile *f)
{
	uint64_t total;
	struct stat st;
	struct img *img;
	int fd, ret;

	for (size_t i = 0; i < ctx->files->n; i++) {
		RegFile *o = ctx->files->f[i];

		if (o->ghost && o->dev == f->dev && o->ino == f->ino) {
			f->ghost = strdup(o->ghost);
			f->n_ghost_extents = o->n_ghost_extents;
			f->ghost_extents = malloc(o->n_ghost_extents * sizeof(uint64_t) + 1);
			if (!f->ghost || !f->ghost_extents)
				return -ENOMEM;
			memcpy(f->ghost_extents, o->ghost_extents,
			       o->n_ghost_extents * sizeof(uint64_t));
			f->has_ghost_uid = f->has_ghost_gid = 1;
			f->ghost_uid = o->ghost_uid;
			f->ghost_gid = o->ghost_gid;
			f->has_ghost_atime = f->has_ghost_mtime = 1;
			f->ghost_atime = o->ghost_atime;
			f->ghost_mtime = o->ghost_mtime;
			if (!o->memfd)
				return 0;
			fd = sys_open(procpath, O_RDONLY | O_CLOEXEC, 0);
			if (fd < 0)
				return fd;
			ret = memfd_dump(ctx, fd, f);
			close(fd);
			return ret;
		}
	}
	fd = sys_open(procpath, O_RDONLY | O_NOATIME | O_CLOEXEC, 0);
	if (fd == -EPERM) /* O_NOATIME is for the file's owner and CAP_FOWNER */
		fd = sys_open(procpath, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("pid %d: cannot open deleted file %s to save it: %s", ctx->pid, f->path,
		       strerror(-fd));
		return fd;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		pr_err("pid %d: cannot stat deleted file %s: %m", ctx->pid, f->path);
		goto close_fd;
	}
	f->size = (uint64_t)st.st_size;
	f->mode = st.st_mode;
	f->has_ghost_uid = f->has_ghost_gid = 1;
	f->ghost_uid = st.st_uid;
	f->ghost_gid = st.st_gid;
	f->has_ghost_atime = f->has_ghost_mtime = 1;
	f->ghost_atime = (uint64_t)st.st_atim.tv_sec * 1000000000ull + st.st_atim.tv_nsec;
	f->ghost_mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + st.st_mtim.tv_nsec;
	ret = ghost_extents(ctx, fd, f, &total);
	if (!ret)
		ret = memfd_dump(ctx, fd, f);
	if (ret)
		goto close_fd;
	ret = img_create(ctx->imgs, IMG_GHOST, &img, "ghost-%d.img", *ctx->ghosts);
	if (ret)
		goto close_fd;
	for (size_t i = 0; i < f->n_ghost_extents && !ret; i += 2)
		ret = copy_range_to_img(fd, f->ghost_extents[i], f->ghost_extents[i + 1], img);
	if (ret) {
		pr_err("pid %d: cannot save deleted file %s: %s", ctx->pid, f->path,
		       strerror(-ret));
		img_abort(img);
		goto close_fd;
	}
	f->ghost = strdup(img->name);
	ret = img_finish(img);
	(*ctx->ghosts)++;
close_fd:
	close(fd);
	return ret;
}

static RegFile *new_file(const char *path, const struct stat *st, int flags, uint64_t pos)
{
	RegFile *f = malloc(sizeof(*f));

	if (!f)
		return NULL;
	reg_file__init(f);
	f->path = strdup(path);
	f->flags = flags;
	f->pos = pos;
	f->size = st->st_size;
	f->mode = st->st_mode;
	f->has_ino = f->has_dev = 1;
	f->ino = st->st_ino;
	f->dev = st->st_dev;
	return f;
}

/* overlayfs maps the file below it: its map_files inode is not the path's */
static bool on_overlayfs(const char *path)
{
	struct statfs sf;

	return !statfs(path, &sf) && sf.f_type == 0x794c7630 /* OVERLAYFS_SUPER_MAGIC */;
}

/*
 * The type of the file system of device dev, where path is: asked once a
 * device (a tree's thousands of fds are on a few), -1 if statfs fails.
 */
static long fs_type(const char *path, dev_t dev)
{
	static struct {
		dev_t dev;
		long type;
	} seen[16];
	static size_t nr_seen;
	struct statfs sf;

	for (size_t i = 0; i < nr_seen; i++)
		if (seen[i].dev == dev)
			return seen[i].type;
	if (statfs(path, &sf))
		return -1;
	if (nr_seen < sizeof(seen) / sizeof(seen[0]))
		seen[nr_seen++] = (typeof(seen[0])){dev, (long)sf.f_type};
	return (long)sf.f_type;
}

#define SECRETMEM_MAGIC 0x5345434d
#define HUGETLBFS_MAGIC 0x958458f6

/*
 * memfd_secret() memory is unmapped from the kernel's direct map: only its
 * process can read it, not /proc/PID/mem nor a reopened fd.  what: "fd 3",
 * "the mapping at 0x...".
 */
static int secretmem_refused(struct dump_ctx *ctx, const char *what)
{
	pr_err("pid %d: %s is secret memory (memfd_secret), which no process but its own can "
	       "read; amber cannot dump it (see README, Limits)",
	       ctx->pid, what);
	return -EOPNOTSUPP;
}

/*
 * The file behind a mapping or /proc/PID/exe; shared by (dev, ino, flags).
 * Opened O_NOATIME at restore where the kernel allows it: mmap() of it
 * would touch its atime.
 */
/*
 * The id of a file this dump has already stat()ed and taken as (dev, ino)
 * at path for flags, or -1.  A mapping's line in maps tells its file's
 * device and inode: a tree's processes map the same libraries, each
 * stat() of their map_files links cost a tree of 500 about 50 ms.
 */
int files_known(struct dump_ctx *ctx, dev_t dev, ino_t ino, const char *path, int flags)
{
	struct stat st = {.st_dev = dev, .st_ino = ino};
	RegFile *f = find_reg(ctx->files, &st, path, flags | O_NOATIME);

	return f ? (int)f->id : -1;
}

int files_dump_path(struct dump_ctx *ctx, const char *procpath, const char *path, int flags,
		    uint64_t pos, int *id)
{
	struct statfs sf;
	struct stat st;
	RegFile *f;
	long type;
	int ret;

	flags |= O_NOATIME;
	if (sys_stat(procpath, &st)) {
		pr_err("pid %d: cannot stat %s (%s): %m", ctx->pid, path, procpath);
		return -errno;
	}
	/* special memory lives on file systems of anonymous devices (major 0) */
	type = major(st.st_dev) ? -1 : fs_type(procpath, st.st_dev);
	if (type == SECRETMEM_MAGIC || type == HUGETLBFS_MAGIC) {
		char what[PATH_MAX + 100];

		snprintf(what, sizeof(what), "%s (%s)", path, procpath);
		if (type == SECRETMEM_MAGIC)
			return secretmem_refused(ctx, what);
		pr_err("pid %d: %s is hugetlb memory (MAP_SHARED|MAP_HUGETLB or a "
		       "hugetlbfs "
		       "file, pages of %lu KiB); amber restores only private huge pages",
		       ctx->pid, what,
		       statfs(procpath, &sf) ? 0UL : (unsigned long)sf.f_bsize >> 10);
		return -EOPNOTSUPP;
	}
	/* what a socket maps is its own memory (a packet ring): no file to map again */
	if (S_ISSOCK(st.st_mode)) {
		pr_err("pid %d: maps %s, a socket's memory (a packet socket's ring whose socket "
		       "the process has no fd on, or a TCP zero-copy receive area), which amber "
		       "cannot restore; unmap it before the dump",
		       ctx->pid, path);
		return -EOPNOTSUPP;
	}
	f = find_reg(ctx->files, &st, path, flags);
	if (f) {
		*id = (int)f->id;
		return 0;
	}
	f = new_file(path, &st, flags, pos);
	if (!f)
		return -ENOMEM;
	f->kind = FILE_KIND__FILE_REG;
	if (st.st_nlink == 0) {
		ret = dump_ghost(ctx, procpath, f);
		if (ret)
			return ret;
	} else if (!on_overlayfs(path)) {
		/* a mapping's name may be gone, or name another file now */
		ret = remap_dump(ctx, procpath, path, &st, f);
		if (ret)
			return ret;
	}
	ret = files_add(ctx, f);
	if (ret < 0)
		return ret;
	*id = ret;
	return ino_add(ctx->files, (uint32_t)ret);
}

/* Copy what is queued in a pipe or FIFO without consuming it (tee). */
static int dump_pipe_data(struct dump_ctx *ctx, const char *procpath, RegFile *f)
{
	int src, p[2], ret = 0, size;
	ssize_t n;

	src = sys_open(procpath, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
	if (src < 0) {
		pr_err("pid %d: cannot open %s to read its pipe: %s", ctx->pid, procpath,
		       strerror(-src));
		return src;
	}
	size = fcntl(src, F_GETPIPE_SZ);
	if (size <= 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
		ret = -errno;
		goto close_src;
	}
	if (fcntl(p[1], F_SETPIPE_SZ, size) < size) {
		ret = -errno;
		pr_err("pid %d: cannot make a %d-byte pipe to copy %s: %m", ctx->pid, size,
		       f->path);
		goto close_pipe;
	}
	f->has_pipe_size = 1;
	f->pipe_size = size;
	n = tee(src, p[1], size, SPLICE_F_NONBLOCK);
	if (n < 0 && errno != EAGAIN) {
		ret = -errno;
		pr_err("pid %d: cannot copy the data in %s: %m", ctx->pid, f->path);
		goto close_pipe;
	}
	if (n > 0) {
		f->has_pipe_data = 1;
		f->pipe_data.data = malloc(n);
		if (!f->pipe_data.data) {
			ret = -ENOMEM;
			goto close_pipe;
		}
		f->pipe_data.len = n;
		if (sys_read_full(p[0], f->pipe_data.data, n) != n)
			ret = -EIO;
	}
close_pipe:
	close(p[0]);
	close(p[1]);
close_src:
	close(src);
	return ret;
}

/* A regular file that is a kind of fd_types[] (a POSIX message queue). */
static bool claimed(const char *link, const struct stat *st)
{
	for (const struct fd_type *const *t = fd_types; *t; t++)
		if ((*t)->match(link, st))
			return true;
	return false;
}

/*
 * A kind from fd_types[]: it gets amber's own dup of the description.  A
 * socket is matched and seen (sock_diag, /proc/net, repair) from inside its
 * network namespace: sock_diag finds a unix socket only there.
 */
static int dump_other(struct dump_ctx *ctx, int fd, const char *link, const struct stat *st,
		      RegFile *f)
{
	bool sock = S_ISSOCK(st->st_mode);
	int dup = -1, ret = 0;
	uint32_t net = 0;

	if (sock) {
		dup = sys_pidfd_getfd(ctx->pidfd, fd);
		if (dup < 0) {
			pr_err("pid %d: cannot get a copy of fd %d (%s): %s", ctx->pid, fd, link,
			       strerror(-dup));
			return dup;
		}
		ret = netns_sock_enter(ctx, fd, dup, f, &net);
		if (ret)
			goto close_dup;
	}
	for (const struct fd_type *const *t = fd_types; *t; t++) {
		if (!(*t)->match(link, st))
			continue;
		if (dup < 0)
			dup = sys_pidfd_getfd(ctx->pidfd, fd);
		if (dup < 0) {
			pr_err("pid %d: cannot get a copy of fd %d (%s): %s", ctx->pid, fd, link,
			       strerror(-dup));
			return dup;
		}
		f->kind = (*t)->kind;
		ret = (*t)->dump(ctx, fd, dup, f);
		goto leave_netns;
	}
	pr_err("pid %d: fd %d is %s, a kind of file amber cannot dump yet (see README, Limits)",
	       ctx->pid, fd, link);
	ret = -EOPNOTSUPP;
leave_netns:
	if (sock)
		ret = netns_sock_dumped(ctx, fd, f, net) ?: ret;
close_dup:
	if (dup >= 0)
		close(dup);
	return ret;
}

static bool pipe_seen(struct dump_ctx *ctx, uint64_t ino)
{
	for (size_t i = 0; i < ctx->files->n; i++)
		if (ctx->files->f[i]->has_pipe_id && ctx->files->f[i]->pipe_id == ino)
			return true;
	return false;
}

struct fdslot {
	struct dump_ctx *ctx;
	size_t proc; /* ctx's index in t->dprocs */
	int fd;
	unsigned flags;
	uint64_t pos;
	int id;
	bool locked; /* its fdinfo lists locks */
};

/*
 * A regular file without a path has no name to reopen (namespace files are
 * procfile.c's).  /proc/PID files are procfile.c's too; other /proc files
 * reopen by name.
 */
static int nsfs_refused(struct dump_ctx *ctx, int fd, const char *path)
{
	if (path[0] == '/')
		return 0;
	pr_err("pid %d: fd %d is %s, a namespace file or another file without a path; "
	       "amber cannot restore it (close it before the dump)",
	       ctx->pid, fd, path);
	return -EOPNOTSUPP;
}

static int describe_fd(struct dump_ctx *ctx, int fd, unsigned flags, uint64_t pos, int *id)
{
	char procpath[64], path[PATH_MAX], what[24];
	bool unlinked = false; /* its name removed, other links keep it */
	struct stat st;
	RegFile *f;
	int ret;

	snprintf(procpath, sizeof(procpath), "/proc/%d/fd/%d", ctx->pid, fd);
	ret = sys_readlink(procpath, path, sizeof(path));
	if (ret < 0 || sys_stat(procpath, &st)) {
		pr_err("pid %d: cannot inspect fd %d: %s", ctx->pid, fd,
		       strerror(ret < 0 ? -ret : errno));
		return ret < 0 ? ret : -errno;
	}
	if (S_ISREG(st.st_mode) && strlen(path) > 10 &&
	    !strcmp(path + strlen(path) - 10, " (deleted)")) {
		struct stat named;

		/* unless a file is really called so */
		if (st.st_nlink == 0 || lstat(path, &named) || named.st_dev != st.st_dev ||
		    named.st_ino != st.st_ino) {
			path[strlen(path) - 10] = 0;
			unlinked = st.st_nlink > 0;
		}
	}
	snprintf(what, sizeof(what), "fd %d", fd);
	if (fs_type(procpath, st.st_dev) == SECRETMEM_MAGIC)
		return secretmem_refused(ctx, what);
	/* a removed directory, device node or FIFO has no name to reopen it by */
	if (!S_ISREG(st.st_mode) && st.st_nlink == 0 &&
	    (S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ||
	     (S_ISFIFO(st.st_mode) && strncmp(path, "pipe:[", 6)))) {
		pr_err("pid %d: fd %d is %s, a directory, device node or FIFO that was removed; "
		       "amber can only recreate deleted regular files (see README, Limits)",
		       ctx->pid, fd, path);
		return -EOPNOTSUPP;
	}
	f = new_file(path, &st, flags & ~O_CLOEXEC, pos);
	if (!f)
		return -ENOMEM;
	if (procfile_path(path)) {
		/* any kind, O_PATH too: procfile.c's (reopened once the processes exist) */
		ret = dump_other(ctx, fd, path, &st, f);
		if (ret)
			return ret;
	} else if ((flags & O_PATH) && !S_ISREG(st.st_mode) && strncmp(path, "pipe:[", 6) &&
		   strncmp(path, "socket:[", 8) && strncmp(path, "anon_inode:", 11) &&
		   path[0] == '/') {
		/* a path fd (a symlink with O_NOFOLLOW, a FIFO, a device): only its name */
		f->kind = S_ISDIR(st.st_mode) ? FILE_KIND__FILE_DIR : FILE_KIND__FILE_REG;
	} else if (S_ISREG(st.st_mode) && !claimed(path, &st)) {
		ret = nsfs_refused(ctx, fd, path);
		if (ret)
			return ret;
		f->kind = FILE_KIND__FILE_REG;
		if (st.st_nlink == 0)
			ret = dump_ghost(ctx, procpath, f);
		else if (unlinked)
			ret = remap_dump(ctx, procpath, path, &st, f);
		if (ret)
			return ret;
	} else if (S_ISDIR(st.st_mode)) {
		f->kind = FILE_KIND__FILE_DIR;
	} else if (S_ISCHR(st.st_mode) && claimed(path, &st)) {
		ret = dump_other(ctx, fd, path, &st, f); /* pseudo-terminals (tty.c) */
		if (ret)
			return ret;
	} else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(5, 1)) {
		pr_err("pid %d: fd %d is %s, the system console; amber cannot restore it (not "
		       "supported, also with -j)",
		       ctx->pid, fd, path);
		return -EOPNOTSUPP;
	} else if (S_ISCHR(st.st_mode) && is_tty(&st)) {
		if (!ctx->o->shell_job) {
			pr_err("pid %d: fd %d is the terminal %s; dump it with --shell-job (-j) "
			       "and restore it with -j in a terminal",
			       ctx->pid, fd, path);
			return -EOPNOTSUPP;
		}
		f->kind = FILE_KIND__FILE_TTY;
		ret = tty_dump_job(ctx, fd, f);
		if (ret)
			return ret;
	} else if (S_ISCHR(st.st_mode)) {
		f->kind = FILE_KIND__FILE_CHR;
		f->has_rdev = 1;
		f->rdev = st.st_rdev;
	} else if (S_ISFIFO(st.st_mode)) {
		bool anon = !strncmp(path, "pipe:[", 6);

		f->kind = anon ? FILE_KIND__FILE_PIPE : FILE_KIND__FILE_FIFO;
		f->has_pipe_id = 1;
		f->pipe_id = st.st_ino;
		/* The buffer belongs to the pipe: saved once, with its first end. */
		if (!pipe_seen(ctx, st.st_ino)) {
			ret = dump_pipe_data(ctx, procpath, f);
			if (ret)
				return ret;
		}
	} else {
		ret = dump_other(ctx, fd, path, &st, f);
		if (ret)
			return ret;
	}
	ret = files_add(ctx, f);
	if (ret < 0)
		return ret;
	*id = ret;
	return 0;
}

static int kcmp_err;

/*
 * kcmp gives 0 (same), 1 (less) or 2 (greater) in a consistent, obfuscated
 * order, so sorting every (process, fd) of the tree by it brings the fds
 * that share an open file description next to each other: n log n kcmp
 * calls instead of n^2.
 */
static int kcmp_order(const void *a, const void *b)
{
	const struct fdslot *x = a, *y = b;
	int r = sys_kcmp(x->ctx->pid, y->ctx->pid, KCMP_FILE, x->fd, y->fd);

	if (r < 0) {
		__atomic_store_n(&kcmp_err, r, __ATOMIC_RELAXED);
		return x->fd - y->fd;
	}
	return r == 0 ? 0 : r == 1 ? -1 : 1;
}

struct slot_half {
	struct fdslot *s;
	size_t n;
};

static void *sort_half(void *arg)
{
	struct slot_half *h = arg;

	qsort(h->s, h->n, sizeof(*h->s), kcmp_order);
	return NULL;
}

/*
 * The tree's fds in kcmp order.  kcmp is the cost of dumping many fds (each
 * call checks ptrace access to both processes): the halves are sorted on
 * two CPUs and merged, about half the calls' time (n/2 log n/2 each, then
 * n).  0 or kcmp's -errno.
 */
#define KCMP_SPLIT_MIN 1024

static int sort_slots(struct fdslot *s, size_t n)
{
	struct slot_half h = {s + n / 2, n - n / 2};
	struct fdslot *out = n >= KCMP_SPLIT_MIN ? malloc(n * sizeof(*out)) : NULL;
	size_t a = 0, b = n / 2, k = 0;
	pthread_t th;

	kcmp_err = 0;
	if (!out || sys_thread_start(&th, sort_half, &h)) {
		free(out);
		qsort(s, n, sizeof(*s), kcmp_order);
		return kcmp_err;
	}
	qsort(s, n / 2, sizeof(*s), kcmp_order);
	pthread_join(th, NULL);
	while (a < n / 2 && b < n && !kcmp_err)
		out[k++] = kcmp_order(&s[b], &s[a]) < 0 ? s[b++] : s[a++];
	while (a < n / 2)
		out[k++] = s[a++];
	while (b < n)
		out[k++] = s[b++];
	memcpy(s, out, n * sizeof(*s));
	free(out);
	return kcmp_err;
}

static int list_fds(struct dump_ctx *ctx, size_t proc, struct fdslot **s, size_t *n, size_t *cap)
{
	char path[64];
	struct dirent *de;
	int info;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", ctx->pid);
	info = sys_open(path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (info < 0) {
		pr_err("cannot open %s: %s", path, strerror(-info));
		return info;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", ctx->pid);
	d = sys_opendir(path);
	if (!d) {
		pr_err("cannot list %s: %m", path);
		close(info);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct fdslot *e;
		int ret;

		if (de->d_name[0] == '.')
			continue;
		if (*n == *cap) {
			struct fdslot *ns;

			*cap = *cap ? *cap * 2 : 64;
			ns = realloc(*s, *cap * sizeof(*ns));
			if (!ns) {
				closedir(d);
				close(info);
				return -ENOMEM;
			}
			*s = ns;
		}
		e = &(*s)[*n];
		e->ctx = ctx;
		e->proc = proc;
		e->fd = atoi(de->d_name);
		e->id = -1;
		ret = proc_parse_fdinfo_at(info, e->fd, &e->pos, &e->flags, &e->locked);
		if (ret) {
			pr_err("pid %d: cannot read fdinfo of fd %d: %s", ctx->pid, e->fd,
			       strerror(-ret));
			closedir(d);
			close(info);
			return ret;
		}
		(*n)++;
	}
	closedir(d);
	close(info);
	return 0;
}

/* ctx's fds: the n slots listed by idx. */
static int write_fds(struct dump_ctx *ctx, const struct fdslot *s, const size_t *idx, size_t n)
{
	struct img *img = NULL;
	int ret =
		img_create(ctx->imgs, IMG_FDS, &img, "fds-%u.img", dump_vpid(ctx->tree, ctx->pid));

	for (size_t k = 0; k < n && !ret; k++) {
		const struct fdslot *f = &s[idx[k]];
		FdEntry e = FD_ENTRY__INIT;

		e.fd = f->fd;
		e.file_id = f->id;
		e.cloexec = !!(f->flags & O_CLOEXEC);
		ret = img_put(img, &e.base);
	}
	if (ret) {
		if (img)
			img_abort(img);
		return ret;
	}
	return img_finish(img);
}

/*
 * Files in flight: descriptors queued in unix sockets (SCM_RIGHTS), which a
 * peek handed to amber itself.  One open in the tree is that fd's file;
 * else it is described from amber's own fd, which stays open until the end
 * of the dump so that later copies of it are recognised (kcmp).
 */
static struct fdslot *dump_slots;
static size_t nr_dump_slots;
static struct {
	int fd, id;
} * inflight;
static size_t nr_inflight;

/* Describe slot j and those sharing its description, if not done yet. */
static int describe_group(size_t j)
{
	struct fdslot *s = dump_slots;
	size_t a = j, b = j;
	int ret, id;

	if (s[j].id >= 0)
		return s[j].id;
	while (a > 0 &&
	       !sys_kcmp(s[a - 1].ctx->pid, s[j].ctx->pid, KCMP_FILE, s[a - 1].fd, s[j].fd))
		a--;
	while (b + 1 < nr_dump_slots &&
	       !sys_kcmp(s[b + 1].ctx->pid, s[j].ctx->pid, KCMP_FILE, s[b + 1].fd, s[j].fd))
		b++;
	if (s[a].id >= 0)
		return s[a].id;
	if (s[a].id == -2)
		goto loop;
	s[a].id = -2;
	ret = describe_fd(s[a].ctx, s[a].fd, s[a].flags, s[a].pos, &id);
	if (ret)
		return ret;
	for (size_t k = a; k <= b; k++)
		s[k].id = id;
	return id;
loop:
	pr_err("pid %d: fd %d is a unix socket whose queue carries itself (SCM_RIGHTS, directly "
	       "or through other sockets in flight), which amber cannot dump; let the receiver "
	       "read it first",
	       s[a].ctx->pid, s[a].fd);
	return -ELOOP;
}

int files_dump_inflight(struct dump_ctx *ctx, int fd, int *id)
{
	pid_t self = getpid();
	struct dump_ctx me = *ctx;
	unsigned flags;
	uint64_t pos;
	void *ni;
	int ret;

	for (size_t j = 0; j < nr_dump_slots; j++)
		if (!sys_kcmp(self, dump_slots[j].ctx->pid, KCMP_FILE, fd, dump_slots[j].fd)) {
			close(fd);
			ret = describe_group(j);
			*id = ret;
			return ret < 0 ? ret : 0;
		}
	for (size_t j = 0; j < nr_inflight; j++)
		if (!sys_kcmp(self, self, KCMP_FILE, fd, inflight[j].fd)) {
			close(fd);
			*id = inflight[j].id;
			if (*id >= 0)
				return 0;
			pr_err("a unix socket in flight carries itself in its queue (SCM_RIGHTS), "
			       "which amber cannot dump; let the receiver read it first");
			return -ELOOP;
		}
	ni = realloc(inflight, (nr_inflight + 1) * sizeof(*inflight));

	if (!ni) {
		close(fd);
		return -ENOMEM;
	}
	inflight = ni;
	inflight[nr_inflight].fd = fd;
	inflight[nr_inflight].id = -1;
	nr_inflight++;
	ret = proc_parse_fdinfo(self, fd, &pos, &flags, NULL);
	if (ret) {
		pr_err("cannot read the fdinfo of a file in flight (amber's fd %d): %s", fd,
		       strerror(-ret));
		return ret;
	}
	/* describe_fd looks at /proc/PID/fd and pidfd_getfd()s: amber's own, here */
	me.pid = self;
	me.pidfd = sys_pidfd_open(self);
	if (me.pidfd < 0)
		return me.pidfd;
	ret = describe_fd(&me, fd, flags, pos, id);
	close(me.pidfd);
	for (size_t j = 0; j < nr_inflight && !ret; j++)
		if (inflight[j].fd == fd)
			inflight[j].id = *id;
	return ret;
}

static void inflight_close(void)
{
	for (size_t j = 0; j < nr_inflight; j++)
		close(inflight[j].fd);
	free(inflight);
	inflight = NULL;
	nr_inflight = 0;
	dump_slots = NULL;
	nr_dump_slots = 0;
}

static const struct fd_type *type_of(RegFile *f);

/*
 * A file opened once the processes exist (open_late) is placed after the
 * locks and O_ASYNC owners are set (locks.c, restore_inject): refused.
 */
static int late_locks_refused(struct dump_ctx *ctx, int fd, unsigned flags, RegFile *f)
{
	const struct fd_type *ft = type_of(f);

	if (!ft || !ft->open_late || (!f->n_locks && !(flags & O_ASYNC)))
		return 0;
	pr_err("pid %d: fd %d (%s) has %s; amber cannot restore that on a file it reopens once "
	       "the processes exist (/proc/PID files, namespace files, pidfds): release it "
	       "before the dump",
	       ctx->pid, fd, f->path, f->n_locks ? "a file lock" : "O_ASYNC");
	return -EOPNOTSUPP;
}

/* A kind one process alone may hold (fd_type.single_process) in two processes. */
static int shared_refused(struct fdslot *s, size_t i, RegFile *f)
{
	const struct fd_type *ft = type_of(f);

	if (!ft || !ft->single_process || i == 0 || s[i - 1].id != s[i].id ||
	    s[i - 1].ctx == s[i].ctx)
		return 0;
	pr_err("pid %d: fd %d (%s) is shared with pid %d (fd %d); amber makes it again in one "
	       "process and cannot share it (close it in all but one before the dump)",
	       s[i].ctx->pid, s[i].fd, ft->name, s[i - 1].ctx->pid, s[i - 1].fd);
	return -EOPNOTSUPP;
}

/*
 * Each process's fds-PID.img, its slots in slot order: grouped by process in
 * one pass (a scan of every slot for each process was O(n^2) for a tree).
 */
static int write_all_fds(struct tree *t, const struct fdslot *s, size_t n)
{
	size_t *idx = malloc((n + 1) * sizeof(*idx));
	size_t *first = calloc(t->nr_procs + 1, sizeof(*first));
	size_t *next = malloc((t->nr_procs + 1) * sizeof(*next));
	int ret = 0;

	if (!idx || !first || !next) {
		ret = -ENOMEM;
		goto free_arrays;
	}
	for (size_t i = 0; i < n; i++)
		first[s[i].proc + 1]++;
	for (size_t p = 0; p < t->nr_procs; p++)
		first[p + 1] += first[p];
	memcpy(next, first, (t->nr_procs + 1) * sizeof(*next));
	for (size_t i = 0; i < n; i++)
		idx[next[s[i].proc]++] = i;
	for (size_t p = 0; p < t->nr_procs && !ret; p++)
		ret = write_fds(t->dprocs[p], s, idx + first[p], first[p + 1] - first[p]);
free_arrays:
	free(idx);
	free(first);
	free(next);
	return ret;
}

static int files_dump_tree(struct tree *t)
{
	struct fdslot *s = NULL;
	size_t n = 0, cap = 0, i;
	int ret = locks_dump_start(), id = -1;

	for (size_t p = 0; p < t->nr_procs && !ret; p++)
		ret = list_fds(t->dprocs[p], p, &s, &n, &cap);
	if (ret)
		goto free_slots;
	if (sort_slots(s, n)) {
		pr_err("kcmp(KCMP_FILE) failed: %s (kernel without CONFIG_KCMP/CHECKPOINT_RESTORE? "
		       "see amber check)",
		       strerror(-kcmp_err));
		ret = kcmp_err;
		goto free_slots;
	}
	dump_slots = s;
	nr_dump_slots = n;
	for (i = 0; i < n; i++) {
		/* a file in flight may have described it (and its group) already */
		if (s[i].id >= 0) {
			id = s[i].id;
			continue;
		}
		if (i == 0 || sys_kcmp(s[i - 1].ctx->pid, s[i].ctx->pid, KCMP_FILE, s[i - 1].fd,
				       s[i].fd) != 0) {
			s[i].id = -2; /* being described: a queue carrying it is a loop */
			ret = describe_fd(s[i].ctx, s[i].fd, s[i].flags, s[i].pos, &id);
			if (ret)
				goto free_slots;
		}
		s[i].id = id;
		ret = shared_refused(s, i, t->files.f[id]);
		if (!ret)
			ret = locks_dump_fd(s[i].ctx, s[i].fd, s[i].flags, s[i].locked,
					    t->files.f[id]);
		if (!ret)
			ret = late_locks_refused(s[i].ctx, s[i].fd, s[i].flags, t->files.f[id]);
		if (ret)
			goto free_slots;
	}
	for (const struct fd_type *const *ft = fd_types; *ft && !ret; ft++)
		if ((*ft)->dump_done)
			ret = (*ft)->dump_done(t);
	if (!ret)
		ret = write_all_fds(t, s, n);
free_slots:
	inflight_close();
	free(s);
	return ret;
}

/* files.img last: mem.c adds the files behind mappings. */
static int files_dump_tree_late(struct tree *t)
{
	struct img *img;
	int ret = img_create(&t->imgs, IMG_FILES, &img, "files.img");

	if (ret)
		return ret;
	for (size_t i = 0; i < t->files.n && !ret; i++)
		ret = img_put(img, &t->files.f[i]->base);
	if (ret) {
		img_abort(img);
		return ret;
	}
	return img_finish(img);
}

/* ---- restore ---- */

/* The extents of a ghost: pairs, in order, apart, within its size. */
static bool ghost_extents_ok(const RegFile *f)
{
	uint64_t end = 0;

	if (f->n_ghost_extents % 2)
		return false;
	for (size_t i = 0; i < f->n_ghost_extents; i += 2) {
		uint64_t off = f->ghost_extents[i], len = f->ghost_extents[i + 1];

		if (off < end || len == 0 || len > f->size || off > f->size - len)
			return false;
		end = off + len;
	}
	return true;
}

static const struct fd_type *type_of(RegFile *f);

static int read_files_img(struct restore_ctx *ctx)
{
	struct tree *t = ctx->tree;
	int ret = img_read_all(ctx->img, IMG_FILES, &reg_file__descriptor, &t->rfiles,
			       &t->nr_rfiles, "files.img");

	for (size_t i = 0; !ret && i < t->nr_rfiles; i++) {
		RegFile *f = t->rfiles[i];

		if (f->id != i || (f->ghost && strchr(f->ghost, '/')) || !ghost_extents_ok(f) ||
		    (f->n_ghost_extents && !f->ghost) || !remap_valid(f)) {
			pr_err("files.img: bad entry %u; the image is corrupt", f->id);
			return -EBADMSG;
		}
		/* (checked before any namespace is made, and so any queue in one) */
		if ((f->mqueue_ns && f->kind != FILE_KIND__FILE_MQUEUE) ||
		    !ns_known(NS_KIND__NS_IPC, f->mqueue_ns)) {
			pr_err("files.img: entry %u (%.64s) names IPC namespace %u for a message "
			       "queue, which ns.img does not have; the image is corrupt",
			       f->id, f->path, f->mqueue_ns);
			return -EBADMSG;
		}
		if (f->kind == FILE_KIND__FILE_TTY && !ctx->o->shell_job) {
			pr_err("the process used the terminal %s; restore it with -j (--shell-job) "
			       "from a terminal",
			       f->path);
			return -EINVAL;
		}
	}
	return ret;
}

/* files.img is the tree's (read with the first process); fds-PID.img each one's. */
static int files_restore_read(struct restore_ctx *ctx)
{
	int ret;

	if (!ctx->tree->rfiles) {
		ret = read_files_img(ctx);
		if (ret)
			return ret;
	}
	ctx->files = ctx->tree->rfiles;
	ctx->nr_files = ctx->tree->nr_rfiles;
	ret = img_read_all(ctx->img, IMG_FDS, &fd_entry__descriptor, &ctx->fds, &ctx->nr_fds,
			   "fds-%d.img", ctx->pid);
	for (size_t i = 0; !ret && i < ctx->nr_fds; i++) {
		FdEntry *e = ctx->fds[i];

		if (e->file_id >= ctx->nr_files || e->fd >= MAX_FD) {
			pr_err("fds-%d.img: bad entry for fd %u; the image is corrupt", ctx->pid,
			       e->fd);
			return -EBADMSG;
		}
	}
	return ret;
}

/*
 * Every open file description of the tree is opened once, by amber, before
 * the first process is created, at fds >= fd_base.  Each restored process
 * gets those it needs under the same numbers (files_recv_needed) and
 * dup3()s its own into place, so descriptions shared by several fds or
 * processes stay shared (one offset, one pipe).
 */
static int tty_fd = -1; /* amber's terminal, for --shell-job */
static struct {
	uint64_t id;
	int rd, wr;
} * pipes;
static size_t nr_pipes;
static struct {
	const char *name;
	int fd;
	int tmpfile_id; /* fd was opened O_TMPFILE as this description, or -1 */
} * ghosts;
static size_t nr_ghosts;
static int late_sk[2] = {-1, -1}; /* amber -> restored processes (files_restore_late) */
static int *late_fd;		  /* per file id: amber's fd on an open_late kind */

static int late_socket(struct tree *t);
static int make_desc_fds(struct tree *t);
static int make_needs(struct tree *t);

static int up(struct tree *t, int fd)
{
	int nfd;

	if (fd < 0 || fd >= t->fd_base)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, t->fd_base);
	if (nfd < 0)
		pr_err("cannot move fd %d above %d: %m (RLIMIT_NOFILE?)", fd, t->fd_base);
	close(fd);
	return nfd < 0 ? -errno : nfd;
}

/* Fill a recreated ghost: its size, then each extent's bytes at its offset. */
static int ghost_fill(int fd, RegFile *f, struct img *img)
{
	static char buf[1 << 16];
	ssize_t r;

	if (ftruncate(fd, (off_t)f->size)) {
		pr_err("cannot make the deleted file %s %llu bytes long: %m", f->path,
		       (unsigned long long)f->size);
		return -errno;
	}
	for (size_t i = 0; i < f->n_ghost_extents; i += 2) {
		uint64_t off = f->ghost_extents[i], len = f->ghost_extents[i + 1];

		while (len) {
			r = img_read(img, buf, len < sizeof(buf) ? len : sizeof(buf));
			if (r <= 0) {
				pr_err("%s: shorter than the extents of %s; the image is corrupt",
				       f->ghost, f->path);
				return r < 0 ? (int)r : -EBADMSG;
			}
			if (pwrite(fd, buf, r, (off_t)off) != r) {
				pr_err("cannot refill deleted file %s: %m", f->path);
				return -EIO;
			}
			off += r;
			len -= r;
		}
	}
	r = img_read(img, buf, 1);
	if (r != 0) {
		pr_err("%s: longer than the extents of %s; the image is corrupt", f->ghost,
		       f->path);
		return r < 0 ? (int)r : -EBADMSG;
	}
	return 0;
}

/*
 * Its owner, mode and times, after the data.  The owner only as far as the
 * image's owner may chown (owner.h): otherwise the file stays the image
 * owner's (README, Limits).  chown before chmod: chown clears set-id bits.
 */
static int ghost_attrs(int fd, RegFile *f)
{
	struct timespec ts[2];

	if (f->has_ghost_uid && f->has_ghost_gid && fchown(fd, f->ghost_uid, f->ghost_gid))
		pr_warn("the deleted file %s comes back owned by uid %u, not %u:%u: %m", f->path,
			geteuid(), f->ghost_uid, f->ghost_gid);
	if (fchmod(fd, f->mode & 07777)) {
		pr_err("cannot give the deleted file %s its mode %o: %m", f->path, f->mode & 07777);
		return -errno;
	}
	if (!f->has_ghost_atime || !f->has_ghost_mtime)
		return 0;
	ts[0].tv_sec = (time_t)(f->ghost_atime / 1000000000ull);
	ts[0].tv_nsec = (long)(f->ghost_atime % 1000000000ull);
	ts[1].tv_sec = (time_t)(f->ghost_mtime / 1000000000ull);
	ts[1].tv_nsec = (long)(f->ghost_mtime % 1000000000ull);
	if (futimens(fd, ts)) {
		pr_err("cannot set the times of the deleted file %s: %m", f->path);
		return -errno;
	}
	return 0;
}

static int reopen_self(int fd, int flags, const char *what);

/* Recreate a deleted file under its old name (so /proc shows "name (deleted)"). */
static int ghost_fd(struct tree *t, RegFile *f)
{
	char tmp[PATH_MAX];
	struct img *img;
	int fd, wfd, ret;

	for (size_t i = 0; i < nr_ghosts; i++)
		if (!strcmp(ghosts[i].name, f->ghost))
			return ghosts[i].fd;
	if (f->path[0] != '/') {
		pr_err("%s: the deleted file %s has no absolute path; the image is corrupt",
		       f->ghost, f->path);
		return -EBADMSG;
	}
	/* a set-id file is a right of its own: only root's images may make one */
	if ((f->mode & (S_ISUID | S_ISGID)) && !t->owner.unbounded) {
		pr_err("%s: the deleted file %s is set-user/group-ID (mode %o); only an image "
		       "owned by root restored by root may recreate such a file",
		       f->ghost, f->path, f->mode & 07777);
		return -EPERM;
	}
	ret = img_open(t->img, IMG_GHOST, &img, "%s", f->ghost);
	if (ret)
		return ret;
	snprintf(tmp, sizeof(tmp), "%s", f->path);
	*strrchr(tmp, '/') = 0;
	if (f->memfd) {
		fd = memfd_open(f);
		if (fd < 0) {
			ret = fd;
			goto close_img;
		}
	} else if ((f->flags & O_TMPFILE) == O_TMPFILE && (f->flags & O_ACCMODE) != O_RDONLY) {
		/* made by O_TMPFILE: so again, with this description's own flags */
		fd = open(tmp[0] ? tmp : "/",
			  (f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_APPEND)) | O_CLOEXEC, 0600);
	} else {
		fd = open(f->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			unlink(f->path);
		else
			fd = open(tmp[0] ? tmp : "/", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0)
			fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		ret = -errno;
		pr_err("cannot recreate deleted file %s: %m", f->path);
		goto close_img;
	}
	/* filled through a description of its own (O_APPEND, O_RDONLY...) */
	wfd = reopen_self(fd, O_RDWR, f->path);
	if (wfd < 0) {
		ret = wfd;
		close(fd);
		goto close_img;
	}
	ret = ghost_fill(wfd, f, img);
	if (!ret)
		ret = ghost_attrs(wfd, f);
	close(wfd);
	if (ret) {
		close(fd);
		goto close_img;
	}
	if (f->memfd) {
		ret = memfd_finish(f, fd);
		if (ret) {
			close(fd);
			goto close_img;
		}
	}
	fd = up(t, fd);
	if (fd < 0) {
		ret = fd;
		goto close_img;
	}
	ghosts = realloc(ghosts, (nr_ghosts + 1) * sizeof(*ghosts));
	if (!ghosts) {
		ret = -ENOMEM;
		close(fd);
		goto close_img;
	}
	ghosts[nr_ghosts].name = f->ghost;
	ghosts[nr_ghosts].tmpfile_id = (f->flags & O_TMPFILE) == O_TMPFILE ? (int)f->id : -1;
	ghosts[nr_ghosts++].fd = fd;
	ret = fd;
close_img:
	img_close(img);
	return ret;
}

/* A new open file description of what fd refers to, with its own flags. */
static int reopen_self(int fd, int flags, const char *what)
{
	char path[64];
	int nfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, flags | O_CLOEXEC);
	if (nfd < 0) {
		pr_err("cannot reopen %s (flags %#o): %m", what, flags);
		return -errno;
	}
	return nfd;
}

static int pipe_end(struct tree *t, RegFile *f)
{
	size_t i;
	int p[2];

	for (i = 0; i < nr_pipes; i++)
		if (pipes[i].id == f->pipe_id)
			goto found;
	if (f->kind == FILE_KIND__FILE_FIFO) {
		/* O_RDWR never blocks on a FIFO and keeps it open for the real ends. */
		p[0] = open(f->path, O_RDWR | O_CLOEXEC);
		if (p[0] < 0) {
			pr_err("cannot open FIFO %s: %m", f->path);
			return -errno;
		}
		p[1] = dup(p[0]);
	} else if (pipe2(p, O_CLOEXEC)) {
		pr_err("cannot create a pipe for %s: %m", f->path);
		return -errno;
	}
	p[0] = up(t, p[0]);
	p[1] = up(t, p[1]);
	pipes = realloc(pipes, (nr_pipes + 1) * sizeof(*pipes));
	pipes[i].id = f->pipe_id;
	pipes[i].rd = p[0];
	pipes[i].wr = p[1];
	nr_pipes++;
found:
	if (f->has_pipe_size && fcntl(pipes[i].wr, F_SETPIPE_SZ, f->pipe_size) < 0)
		pr_warn("cannot resize pipe %s to %u bytes: %m", f->path, f->pipe_size);
	if (f->has_pipe_data && f->pipe_data.len &&
	    sys_write_full(pipes[i].wr, f->pipe_data.data, f->pipe_data.len) !=
		    (ssize_t)f->pipe_data.len) {
		pr_err("cannot refill pipe %s", f->path);
		return -EIO;
	}
	/* A new description of the same pipe, with this one's own flags. */
	return reopen_self((f->flags & O_ACCMODE) == O_WRONLY ? pipes[i].wr : pipes[i].rd, f->flags,
			   f->path);
}

static int tmpfile_desc(int g, RegFile *f)
{
	int fd = fcntl(g, F_DUPFD_CLOEXEC, 0);

	if (fd < 0 || ((f->flags & O_APPEND) && fcntl(fd, F_SETFL, O_APPEND | f->flags))) {
		pr_err("cannot set up the O_TMPFILE file %s: %m", f->path);
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	return fd;
}

int files_open_noatime(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0 && errno == EPERM && (flags & O_NOATIME)) /* not the file's owner */
		fd = open(path, (flags & ~O_NOATIME) | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static const char *last_sized; /* the path open_reg() last compared the size of */

static int open_reg(struct tree *t, RegFile *f, int flags)
{
	struct stat st;
	int fd;

	if (f->ghost) {
		int g = ghost_fd(t, f);

		if (g < 0)
			return g;
		/* the description made by O_TMPFILE, whose flags no reopen gives */
		for (size_t i = 0; i < nr_ghosts; i++)
			if (ghosts[i].fd == g && ghosts[i].tmpfile_id == (int)f->id)
				return tmpfile_desc(g, f);
		return reopen_self(g, flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_TMPFILE), f->path);
	}
	if (f->link_remap)
		fd = remap_open(f, flags & ~(O_CREAT | O_EXCL | O_TRUNC)); /* logs its errors */
	else
		fd = files_open_noatime(f->path, flags & ~(O_CREAT | O_EXCL | O_TRUNC));
	if (fd < 0 && f->link_remap)
		return fd;
	if (fd < 0) {
		if ((fd == -EACCES || fd == -EPERM) && t->owner.switches)
			pr_err("cannot open %s: %s: uid %u, whose image this is, may not open it "
			       "(an fd a privileged parent opened for it must be reopened by "
			       "root's "
			       "own image)",
			       f->path, strerror(-fd), t->owner.uid);
		else
			pr_err("cannot open %s: %s (the process had it open; is it still there?)",
			       f->path, strerror(-fd));
		return fd;
	}
	if ((f->flags & O_PATH) &&
	    (fstat(fd, &st) || (st.st_mode & S_IFMT) != (f->mode & S_IFMT))) {
		pr_err("%s: not the same kind of file as the process's O_PATH fd on it (mode %o, "
		       "was %o)",
		       f->path, st.st_mode & S_IFMT, f->mode & S_IFMT);
		close(fd);
		return -ESTALE;
	}
	/* once a path: a tree may hold thousands of descriptions of one file */
	if (S_ISREG(f->mode) && (!last_sized || strcmp(last_sized, f->path)) && !fstat(fd, &st)) {
		last_sized = f->path;
		if ((uint64_t)st.st_size != f->size)
			pr_warn("%s changed size since the dump (%llu -> %llu bytes)", f->path,
				(unsigned long long)f->size, (unsigned long long)st.st_size);
	}
	return fd;
}

static const struct fd_type *type_of(RegFile *f)
{
	for (const struct fd_type *const *ft = fd_types; *ft; ft++)
		if ((*ft)->kind == f->kind)
			return *ft;
	return NULL;
}

/* A kind amber does not open before the processes: they make it, or it comes late. */
static bool made_after(const struct fd_type *ft)
{
	return ft && (ft->open_child || ft->open_late);
}

/* Open f on the image's word: with the image owner's rights (owner.h). */
static int open_as_owner(struct tree *t, RegFile *f)
{
	const struct fd_type *ft;
	int fd;

	switch (f->kind) {
	case FILE_KIND__FILE_REG:
	case FILE_KIND__FILE_DIR:
	case FILE_KIND__FILE_CHR:
		fd = open_reg(t, f, f->flags);
		/* an O_PATH fd has no offset */
		if (fd >= 0 && f->kind == FILE_KIND__FILE_REG && !(f->flags & O_PATH) && f->pos &&
		    lseek(fd, (off_t)f->pos, SEEK_SET) < 0) {
			pr_err("cannot seek %s to %llu: %m", f->path, (unsigned long long)f->pos);
			close(fd);
			return -errno;
		}
		return fd;
	case FILE_KIND__FILE_PIPE:
	case FILE_KIND__FILE_FIFO:
		return pipe_end(t, f);
	default:
		break;
	}
	ft = type_of(f);
	if (!ft) {
		pr_err("%s: a kind of file this amber cannot restore (%d)", f->path, f->kind);
		return -EINVAL;
	}
	if (!ft->prepare)
		return ft->open(t, f);
	if (t->desc_fd[f->id] < 0) {
		pr_err("%s: not found among the image's files of kind %s (corrupt files.img?)",
		       f->path, ft->name);
		return -EINVAL;
	}
	return t->desc_fd[f->id];
}

/*
 * The RPC's inherit_fd: the client hands the restored tree a file of its own
 * in place of one of the image (runc: the container's stdio pipes, which
 * were runc's and are a new runc's now).  The key names the dumped file:
 * "pipe:[INODE]" for a pipe, else its path.  -ENOENT: none names it.
 */
static int inherited(const struct tree *t, const RegFile *f)
{
	char key[40];

	snprintf(key, sizeof(key), "pipe:[%llu]", (unsigned long long)f->pipe_id);
	for (size_t i = 0; i < t->o->nr_inherit_fd; i++) {
		const struct inherit_fd *h = &t->o->inherit_fd[i];
		int fd;

		if (f->kind == FILE_KIND__FILE_PIPE ? strcmp(h->key, key)
						    : !f->path || strcmp(h->key, f->path))
			continue;
		/* the client's description itself, as it gave it (offset, flags, contents) */
		fd = fcntl(h->fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
		if (fd < 0) {
			pr_err("inherit_fd %s: cannot take fd %d for %s: %m", h->key, h->fd,
			       f->path);
			return -errno;
		}
		pr_info("file %u (%s) is the client's fd %d (inherit_fd %s)", f->id, f->path, h->fd,
			h->key);
		return fd;
	}
	return -ENOENT;
}

static int open_desc(struct tree *t, RegFile *f)
{
	int fd;

	fd = inherited(t, f);
	if (fd != -ENOENT)
		return fd;

	/* with -j, the terminal is the restorer's own, not the image's to pick */
	if (f->kind == FILE_KIND__FILE_TTY) {
		if (t->o->orphan_pts_master)
			return tty_orphan_peer(f);
		if (tty_fd < 0) {
			pr_err("the process used the terminal %s, but amber restore has no "
			       "terminal on stdin/stdout/stderr",
			       f->path);
			return -ENOTTY;
		}
		return reopen_self(tty_fd, f->flags & ~O_NOCTTY, f->path);
	}
	fd = owner_enter(t);
	if (fd)
		return fd;
	fd = open_as_owner(t, f);
	owner_leave(t);
	return fd;
}

/* The kinds made all at once (fd_type.prepare): their fds go into desc_fd. */
static int prepare_kinds(struct tree *t)
{
	RegFile **files = malloc((t->nr_rfiles + 1) * sizeof(*files));
	int *fds = malloc((t->nr_rfiles + 1) * sizeof(*fds));
	int ret = 0;

	if (!files || !fds) {
		ret = -ENOMEM;
		goto free_arrays;
	}
	for (size_t i = 0; i < t->nr_rfiles; i++)
		t->desc_fd[i] = -1;
	for (size_t i = 0; i < t->nr_rfiles && !ret; i++)
		if (!netns_known(t->rfiles[i]->net_ns)) {
			pr_err("files.img: socket %u is in network namespace %u, which netns.img "
			       "does not have; the image is corrupt",
			       t->rfiles[i]->id, t->rfiles[i]->net_ns);
			ret = -EBADMSG;
		}
	/* each network namespace's sockets made inside it, but unix ones (made in
	 * amber's, whatever their namespace: pairs and queues span the tree) */
	for (uint32_t net = 0; !ret; net = netns_next(net)) {
		for (const struct fd_type *const *ft = fd_types; *ft && !ret; ft++) {
			bool unix_sk = (*ft)->kind == FILE_KIND__FILE_UNIX_SK;
			size_t n = 0;

			if (!(*ft)->prepare || (unix_sk && net))
				continue;
			for (size_t i = 0; i < t->nr_rfiles; i++)
				if (t->rfiles[i]->kind == (*ft)->kind &&
				    (unix_sk || t->rfiles[i]->net_ns == net))
					files[n++] = t->rfiles[i];
			if (!n)
				continue;
			for (size_t k = 0; k < n; k++)
				fds[k] = -1;
			ret = netns_enter(net);
			if (ret)
				break;
			/* what they bind, connect and unlink: with the owner's rights */
			ret = (*ft)->bounds_itself ? 0 : owner_enter(t);
			if (!ret) {
				ret = (*ft)->prepare(t, files, n, fds);
				if (!(*ft)->bounds_itself)
					owner_leave(t);
			}
			netns_leave(net);
			for (size_t k = 0; k < n && !ret; k++)
				t->desc_fd[files[k]->id] = fds[k];
		}
		if (!netns_next(net))
			break;
	}
free_arrays:
	free(files);
	free(fds);
	return ret;
}

int files_id_of(struct tree *t, pid_t pid, int fd)
{
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct restore_ctx *ctx = t->rprocs[p];

		if (ctx->pid != pid)
			continue;
		for (size_t i = 0; i < ctx->nr_fds; i++)
			if ((int)ctx->fds[i]->fd == fd)
				return (int)ctx->fds[i]->file_id;
	}
	return -1;
}

/*
 * The free fds below fd_base, taken while the descriptions open (dups of
 * the image directory's fd), so that each opens at fd_base or above at once:
 * moved up (up()), each cost two more syscalls, 20000 for 10000.  Not when
 * fd_base is high: a process's fd 100000 would take as many dups.
 */
#define FILL_MAX 4096
static void close_sorted(const int *fds, size_t n);
static int *fill;
static size_t nr_fill;

static void fill_below(const struct tree *t)
{
	nr_fill = 0;
	if (t->fd_base > FILL_MAX || !(fill = malloc(t->fd_base * sizeof(*fill))))
		return;
	for (;;) {
		int fd = fcntl(t->dirfd, F_DUPFD_CLOEXEC, 0);

		if (fd < 0 || fd >= t->fd_base || nr_fill == (size_t)t->fd_base) {
			if (fd >= 0)
				close(fd);
			break;
		}
		fill[nr_fill++] = fd;
	}
}

static void unfill_below(void)
{
	close_sorted(fill, nr_fill);
	free(fill);
	fill = NULL;
	nr_fill = 0;
}

static int open_descs(struct tree *t);

static int files_restore_tree(struct tree *t)
{
	int ret;

	if (t->o->orphan_pts_master) {
		ret = tty_orphan_open(t, -1);
		if (ret)
			return ret;
	}
	for (int i = 0; i < 3 && tty_fd < 0 && t->o->shell_job && !t->o->orphan_pts_master; i++)
		if (isatty(i))
			tty_fd = fcntl(i, F_DUPFD_CLOEXEC, tree_fd_floor(t));
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		const struct fd_type *ft = type_of(t->rfiles[i]);

		ret = ft && ft->check ? ft->check(t, t->rfiles[i]) : 0;
		if (ret)
			return ret;
	}
	t->desc_fd = malloc((t->nr_rfiles + 1) * sizeof(int));
	if (!t->desc_fd)
		return -ENOMEM;
	fill_below(t);
	last_sized = NULL;
	ret = open_descs(t);
	unfill_below();
	return ret;
}

/*
 * Every description, at fd_base or above: the processes' own fds go below
 * (prepare_kinds, then each, then what the kinds do once all are open).
 */
static int open_descs(struct tree *t)
{
	int ret = prepare_kinds(t);

	if (ret)
		return ret;
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		RegFile *f = t->rfiles[i];
		const struct fd_type *ft = type_of(f);
		int fd;

		if (made_after(ft)) { /* files_restore_child, _late */
			t->desc_fd[i] = -1;
			if (ft->open_late && late_sk[0] < 0) {
				ret = late_socket(t);
				if (ret)
					return ret;
			}
			continue;
		}
		fd = up(t, open_desc(t, f));
		if (fd < 0) /* what failed was logged where it failed */
			return fd;
		t->desc_fd[i] = fd;
	}
	/* every end is its own description now: amber keeping the first ones
	 * open would hide the writers' going away from the readers (no EOF) */
	for (size_t i = 0; i < nr_pipes; i++) {
		close(pipes[i].rd);
		close(pipes[i].wr);
	}
	nr_pipes = 0;
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		const struct fd_type *ft = type_of(t->rfiles[i]);

		if (!ft || !ft->post_open)
			continue;
		ret = ft->post_open(t, t->rfiles[i], t->desc_fd[i]);
		if (ret)
			return ret;
	}
	return make_desc_fds(t) ?: make_needs(t);
}

/*
 * fds[i] of a kind made by the process itself (fd_type.open_child): the
 * first fd on that file opens it, later ones dup it.
 */
static int place_child_made(struct restore_ctx *ctx, size_t i)
{
	FdEntry *e = ctx->fds[i];
	RegFile *f = ctx->files[e->file_id];
	const struct fd_type *ft;
	int fd = -1;

	if (ctx->tree->desc_fd[e->file_id] >= 0)
		return 0;
	ft = type_of(f);
	if (ft && ft->open_late) { /* keeps the number taken until files_restore_late */
		if (dup3(late_sk[1], (int)e->fd, O_CLOEXEC) < 0) {
			pr_err("pid %d: cannot hold fd %u (%s): %m", ctx->pid, e->fd, f->path);
			return -errno;
		}
		return 0;
	}
	for (size_t k = 0; k < i && fd < 0; k++)
		if (ctx->fds[k]->file_id == e->file_id)
			fd = (int)ctx->fds[k]->fd;
	if (fd < 0) {
		if (!ft || !ft->open_child) {
			pr_err("pid %d: fd %u (%s) has no description to place", ctx->pid, e->fd,
			       f->path);
			return -EINVAL;
		}
		fd = ft->open_child(ctx, f);
		if (fd < 0)
			return fd;
		if (fd == (int)e->fd)
			return fcntl(fd, F_SETFD, e->cloexec ? FD_CLOEXEC : 0) ? -errno : 0;
	}
	if (dup3(fd, (int)e->fd, e->cloexec ? O_CLOEXEC : 0) < 0) {
		pr_err("pid %d: cannot place fd %u (%s): %m", ctx->pid, e->fd, f->path);
		return -errno;
	}
	/* a new fd of its own (not an earlier fds[k]) goes once placed */
	for (size_t k = 0; k < i; k++)
		if ((int)ctx->fds[k]->fd == fd)
			return 0;
	close(fd);
	return 0;
}

static ssize_t needed(const struct tree *t, uint32_t pid, const uint32_t **ids);
static int close_descs(const struct tree *t, const uint32_t *ids, size_t n, const bool *keep);

/*
 * Which of its descriptions ids[0..n) a process keeps once its fds are
 * placed (by file id): those it maps, its exe, and the terminals' masters
 * (a group is made the foreground through them, tty.c).  -ENOMEM: none
 * marked.
 */
static bool *kept_descs(const struct restore_ctx *ctx, const uint32_t *ids, size_t n)
{
	const struct tree *t = ctx->tree;
	bool *keep = calloc(t->nr_rfiles + 1, sizeof(*keep));

	if (!keep)
		return NULL;
	for (size_t i = 0; i < ctx->mm->n_vmas; i++)
		if (ctx->mm->vmas[i]->has_file_id && ctx->mm->vmas[i]->file_id < t->nr_rfiles)
			keep[ctx->mm->vmas[i]->file_id] = true;
	if (ctx->mm->has_exe_file_id && ctx->mm->exe_file_id < t->nr_rfiles)
		keep[ctx->mm->exe_file_id] = true;
	for (size_t i = 0; i < n; i++)
		if (t->rfiles[ids[i]]->kind == FILE_KIND__FILE_PTY_MASTER)
			keep[ids[i]] = true;
	return keep;
}

/* A table shared (CLONE_FILES) keeps them all: the sharers' mappings may need them. */
static bool drops_unmapped(const struct restore_ctx *ctx)
{
	return ctx->mm && !tree_shares_files(ctx->tree, (uint32_t)ctx->pid);
}

/*
 * The descriptions a process got that it does not map (nor a terminal's
 * master) go once its fds are placed, while amber drives the others (closed
 * at the end, by an injected close_range, amber waited for each process's
 * thousands of closes in turn).  Only those it got (files_recv_needed): a
 * close_range() over every description's number walks that many slots of
 * its fd table, and 200 processes of 50 fds walked 10000 each.  A table
 * shared (CLONE_FILES) keeps them all: the sharers' mappings may need them.
 */
static int drop_unmapped(struct restore_ctx *ctx)
{
	const uint32_t *ids = NULL;
	ssize_t n = drops_unmapped(ctx) ? needed(ctx->tree, (uint32_t)ctx->pid, &ids) : 0;
	bool *keep;
	int ret;

	if (n <= 0)
		return 0;
	keep = kept_descs(ctx, ids, (size_t)n);
	ret = keep ? close_descs(ctx->tree, ids, (size_t)n, keep) : -ENOMEM;
	free(keep);
	if (ret)
		pr_err("pid %d: no memory to close the files it does not map", ctx->pid);
	return ret;
}

/*
 * A process's descriptions.  amber opens every description of the tree,
 * but a process gets only those it needs, at its go, over its channel
 * (SCM_RIGHTS, restore.c), after it closed every description it inherited:
 * when each process kept the tree's, each fork copied them all and each
 * process closed them again (200 processes of 50 fds each: 10000 apiece).
 * It needs those of its fds, its mappings and its exe, and the terminal
 * masters (tty.c works through them); one whose CLONE_FILES or CLONE_VM
 * children take its table as it is needs theirs too.
 */
static int *desc_fds; /* every description's fd, sorted */
static size_t nr_desc_fds;
struct fd_run {
	unsigned int first, last;
};
/* the runs between them, from fd_base: amber's other fds when it forked */
static struct fd_run *desc_gaps;
static size_t nr_desc_gaps;

static int int_order(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* The descriptions' fd numbers in order, closed by each process as it starts. */
static int make_desc_fds(struct tree *t)
{
	free(desc_fds);
	nr_desc_fds = 0;
	desc_fds = malloc((t->nr_rfiles + 1) * sizeof(*desc_fds));
	if (!desc_fds)
		return -ENOMEM;
	for (size_t i = 0; i < t->nr_rfiles; i++)
		if (t->desc_fd[i] >= 0)
			desc_fds[nr_desc_fds++] = t->desc_fd[i];
	qsort(desc_fds, nr_desc_fds, sizeof(*desc_fds), int_order);
	t->fd_top = nr_desc_fds && desc_fds[nr_desc_fds - 1] >= t->fd_base
			    ? desc_fds[nr_desc_fds - 1] + 1
			    : t->fd_base;
	free(desc_gaps);
	nr_desc_gaps = 0;
	desc_gaps = malloc((nr_desc_fds + 1) * sizeof(*desc_gaps));
	if (!desc_gaps)
		return -ENOMEM;
	for (size_t i = 0, next = (size_t)t->fd_base; i < nr_desc_fds; i++) {
		if (desc_fds[i] < t->fd_base || (size_t)desc_fds[i] <= next) {
			next = desc_fds[i] >= t->fd_base ? (size_t)desc_fds[i] + 1 : next;
			continue;
		}
		desc_gaps[nr_desc_gaps].first = (unsigned int)next;
		desc_gaps[nr_desc_gaps++].last = (unsigned int)desc_fds[i] - 1;
		next = (size_t)desc_fds[i] + 1;
	}
	return 0;
}

bool files_own_table(const PstreeEntry *e)
{
	return !e->clone_files && !e->clone_vm && !e->zombie;
}

/* fds in order, closed in runs: a syscall per fd would cost more than the closes. */
static void close_sorted(const int *fds, size_t n)
{
	for (size_t i = 0, end; i < n; i = end + 1) {
		for (end = i; end + 1 < n && fds[end + 1] <= fds[end] + 1;)
			end++;
		close_range((unsigned)fds[i], (unsigned)fds[end], 0);
	}
}

void files_close_descs(void)
{
	close_sorted(desc_fds, nr_desc_fds);
	nr_desc_fds = 0;
}

/* The fds of descriptions ids[0..n) but those keep marks (NULL: none); -ENOMEM: none closed. */
static int close_descs(const struct tree *t, const uint32_t *ids, size_t n, const bool *keep)
{
	int *fds = malloc((n + 1) * sizeof(*fds));
	size_t nd = 0;

	if (!fds)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!keep || !keep[ids[i]])
			fds[nd++] = t->desc_fd[ids[i]];
	qsort(fds, nd, sizeof(*fds), int_order);
	close_sorted(fds, nd);
	free(fds);
	return 0;
}

/*
 * A process made by a restored process with a table of its own inherited
 * what that one got (files_recv_needed) and nothing else; one made by amber
 * (or a helper, or a zombie), every description.
 */
void files_drop_inherited(const struct tree *t, uint32_t creator)
{
	const PstreeEntry *c = creator ? tree_entry(t, creator) : NULL;
	const uint32_t *ids = NULL;
	ssize_t n = -1;

	/* (a helper is no pstree entry) */
	if (c && files_own_table(c))
		n = needed(t, creator, &ids);
	if (n >= 0 && !close_descs(t, ids, (size_t)n, NULL))
		return;
	close_sorted(desc_fds, nr_desc_fds);
}

static int run_order(const void *a, const void *b)
{
	unsigned int x = ((const struct fd_run *)a)->first, y = ((const struct fd_run *)b)->first;

	return (x > y) - (x < y);
}

/*
 * A close_range() walks each slot of its range, ~13 ns an empty one, and
 * one more syscall costs ~1 us here: runs this close together are one.
 */
#define RUN_SLACK 64

/* runs[0..n) sorted and joined into close_range()s at sc: how many. */
static size_t close_runs(struct fd_run *runs, size_t n, struct infect_sc *sc)
{
	size_t nr = 0;

	qsort(runs, n, sizeof(*runs), run_order);
	for (size_t i = 0; i < n; i++) {
		if (nr && runs[i].first <= (unsigned int)sc[nr - 1].a[1] + RUN_SLACK) {
			if (runs[i].last > (unsigned int)sc[nr - 1].a[1])
				sc[nr - 1].a[1] = runs[i].last;
			continue;
		}
		sc[nr++] = (struct infect_sc){SYS_close_range, {runs[i].first, runs[i].last, 0}, 0};
	}
	return nr;
}

/*
 * At the end, amber's fds in a process, by one batch of close_range()s.
 * One close_range() from fd_base walked every slot of its table, past
 * every description's: 200 processes of 50 fds walked 16384 apiece, 210 us
 * each.  What a process with a table of its own may hold from fd_base up:
 * the descriptions it kept (it closed all others it inherited or got,
 * files_drop_inherited, drop_unmapped), whatever amber had open among the
 * descriptions when it forked (desc_gaps: its channels, pages files), and
 * all from fd_top up; any slot from fd_base up is amber's, so runs close
 * together are closed as one.  A table shared or inherited whole
 * (CLONE_FILES, CLONE_VM) may hold any description: closed from fd_base.
 */
int files_drop_amber(struct restore_ctx *ctx)
{
	const struct tree *t = ctx->tree;
	const PstreeEntry *e = tree_entry(t, (uint32_t)ctx->pid);
	bool own = e && files_own_table(e) && !tree_shares_files(t, (uint32_t)ctx->pid);
	const uint32_t *ids = NULL;
	ssize_t n = own ? needed(t, (uint32_t)ctx->pid, &ids) : -ENOENT;
	size_t k = n > 0 ? (size_t)n : 0, nr = 0;
	struct fd_run *runs = malloc((k + nr_desc_gaps + 1) * sizeof(*runs));
	struct infect_sc *sc = malloc((k + nr_desc_gaps + 1) * sizeof(*sc));
	bool *keep = NULL;
	int ret = -ENOMEM;

	/* (own: its table is not shared, so it dropped the unmapped if it has an mm) */
	if (!runs || !sc || (k && ctx->mm && !(keep = kept_descs(ctx, ids, k))))
		goto free_all;
	for (size_t i = 0; i < k; i++)
		if (!keep || keep[ids[i]])
			runs[nr++] = (struct fd_run){t->desc_fd[ids[i]], t->desc_fd[ids[i]]};
	for (size_t g = 0; n >= 0 && g < nr_desc_gaps; g++)
		runs[nr++] = desc_gaps[g];
	runs[nr++] = (struct fd_run){n < 0 ? t->fd_base : tree_fd_floor(t), ~0U};
	nr = close_runs(runs, nr, sc);
	ret = infect_batch(&ctx->inf, sc, nr);
	for (size_t i = 0; !ret && i < nr; i++)
		ret = (int)sc[i].ret;
	if (ret)
		pr_err("pid %d: cannot close amber's fds: %s", ctx->pid, strerror(-ret));
free_all:
	free(keep);
	free(sc);
	free(runs);
	return ret;
}

static void mark_needed(const struct tree *t, uint32_t pid, bool *need)
{
	const struct restore_ctx *ctx = tree_rproc(t, pid);
	const uint32_t *kids;
	size_t nk = tree_created(t, pid, &kids);

	for (size_t i = 0; ctx && i < ctx->nr_fds; i++)
		if (ctx->fds[i]->file_id < t->nr_rfiles)
			need[ctx->fds[i]->file_id] = true;
	for (size_t i = 0; ctx && ctx->mm && i < ctx->mm->n_vmas; i++)
		if (ctx->mm->vmas[i]->has_file_id && ctx->mm->vmas[i]->file_id < t->nr_rfiles)
			need[ctx->mm->vmas[i]->file_id] = true;
	if (ctx && ctx->mm && ctx->mm->has_exe_file_id && ctx->mm->exe_file_id < t->nr_rfiles)
		need[ctx->mm->exe_file_id] = true;
	for (size_t k = 0; k < nk; k++) {
		const PstreeEntry *c = t->pstree[kids[k]];

		if (!c->zombie && (c->clone_files || c->clone_vm))
			mark_needed(t, c->pid, need);
	}
}

/*
 * The file ids of each pstree entry's descriptions, in id order (the same
 * list on both ends): made once by amber when the descriptions are open
 * (make_needs), so that the forked processes have them too.  Made on each
 * use, each list cost a pass over every description, four times a process.
 */
static struct need_list {
	uint32_t *ids;
	size_t n;
} * needs;

static int make_needs(struct tree *t)
{
	bool *need = malloc(t->nr_rfiles + 1);
	uint32_t *ids = malloc((t->nr_rfiles + 1) * sizeof(*ids));
	int ret = 0;

	free(needs);
	needs = calloc(t->nr_pstree + 1, sizeof(*needs));
	if (!need || !ids || !needs) {
		ret = -ENOMEM;
		goto free_tmp;
	}
	/* each list at its size: every process forked later copies amber's heap */
	for (size_t p = 0; p < t->nr_pstree && !ret; p++) {
		struct need_list *l = &needs[p];

		memset(need, 0, t->nr_rfiles + 1);
		mark_needed(t, t->pstree[p]->pid, need);
		for (size_t i = 0; i < t->nr_rfiles; i++)
			if (t->desc_fd[i] >= 0 &&
			    (need[i] || t->rfiles[i]->kind == FILE_KIND__FILE_PTY_MASTER))
				ids[l->n++] = (uint32_t)i;
		l->ids = malloc((l->n + 1) * sizeof(*l->ids));
		if (l->ids)
			memcpy(l->ids, ids, l->n * sizeof(*ids));
		else
			ret = -ENOMEM;
	}
free_tmp:
	free(ids);
	free(need);
	return ret;
}

static ssize_t needed(const struct tree *t, uint32_t pid, const uint32_t **ids)
{
	size_t pos = tree_pos(t, pid);

	if (!needs || pos >= t->nr_pstree)
		return -ENOENT;
	*ids = needs[pos].ids;
	return (ssize_t)needs[pos].n;
}

int files_send_needed(const struct tree *t, uint32_t pid, int sock)
{
	int fds[SYS_MAX_FDS];
	const uint32_t *ids;
	ssize_t n = needed(t, pid, &ids);
	int ret = 0;

	for (ssize_t at = 0; n > 0 && at < n && !ret; at += SYS_MAX_FDS) {
		size_t k = (size_t)(n - at) < SYS_MAX_FDS ? (size_t)(n - at) : SYS_MAX_FDS;

		for (size_t j = 0; j < k; j++)
			fds[j] = t->desc_fd[ids[at + j]];
		ret = sys_send_fds(sock, 'd', fds, k, MSG_NOSIGNAL);
		if (ret)
			pr_err("pid %u: cannot pass it its %zu files: %s", pid, (size_t)n,
			       strerror(-ret));
	}
	return n < 0 ? (int)n : ret;
}

/*
 * In the process: its descriptions, each to amber's number for it.  A
 * received fd that sits on one of those numbers moves above them all
 * first, so that placing one never closes another not yet placed.
 */
int files_recv_needed(const struct tree *t, uint32_t pid, int sock)
{
	int got[SYS_MAX_FDS];
	const uint32_t *ids;
	ssize_t n = needed(t, pid, &ids);
	int ret = 0;

	for (ssize_t at = 0; n > 0 && at < n && !ret; at += SYS_MAX_FDS) {
		size_t k = (size_t)(n - at) < SYS_MAX_FDS ? (size_t)(n - at) : SYS_MAX_FDS;
		char tag;
		ssize_t r = sys_recv_fds(sock, &tag, got, k);

		if (r != (ssize_t)k || tag != 'd') {
			for (ssize_t j = 0; j < r; j++)
				close(got[j]);
			pr_err("pid %u: did not get its %zu files from amber", pid, (size_t)n);
			ret = -EIO;
			break;
		}
		for (size_t j = 0; j < k; j++) {
			int fd = got[j];

			if (fd >= t->fd_base && fd < t->fd_top && fd != t->desc_fd[ids[at + j]]) {
				got[j] = fcntl(fd, F_DUPFD_CLOEXEC, t->fd_top);
				close(fd);
			}
		}
		for (size_t j = 0; j < k; j++) {
			int want = t->desc_fd[ids[at + j]];

			if (got[j] == want)
				continue;
			if (got[j] < 0 || dup3(got[j], want, O_CLOEXEC) < 0) {
				pr_err("pid %u: cannot take file %u as fd %d: %m", pid, ids[at + j],
				       want);
				ret = -EIO;
			}
			if (got[j] >= 0)
				close(got[j]);
		}
	}
	return n < 0 ? (int)n : ret;
}

/* In each process: its fds, from the descriptions it inherited. */
static int files_restore_child(struct restore_ctx *ctx)
{
	/* A table shared with the parent (CLONE_FILES) is the parent's to fill. */
	if (tree_entry(ctx->tree, (uint32_t)ctx->pid)->clone_files)
		return 0;
	/* Everything below fd_base is amber's and goes; the target's fds go there. */
	if (close_range(0, ctx->tree->fd_base - 1, 0)) {
		pr_err("close_range failed: %m");
		return -errno;
	}
	for (size_t i = 0; i < ctx->nr_fds; i++) {
		FdEntry *e = ctx->fds[i];

		if (ctx->tree->desc_fd[e->file_id] < 0)
			continue; /* below, once the others are in place */
		if (dup3(ctx->tree->desc_fd[e->file_id], (int)e->fd, e->cloexec ? O_CLOEXEC : 0) <
		    0) {
			pr_err("pid %d: cannot place fd %u (%s): %m", ctx->pid, e->fd,
			       ctx->files[e->file_id]->path);
			return -errno;
		}
	}
	for (size_t i = 0; i < ctx->nr_fds; i++) {
		int ret = place_child_made(ctx, i);

		if (ret)
			return ret;
	}
	return drop_unmapped(ctx);
}

/*
 * Files of the restored processes themselves (fd_type.open_late) are opened
 * by amber once they all exist, and handed to each process that has them
 * through a datagram socket pair every process inherits: amber sends the fd
 * (SCM_RIGHTS), the stopped process receives it by an injected recvmsg.
 */
static int late_socket(struct tree *t)
{
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, late_sk)) {
		pr_err("cannot make a socket pair to pass files to the restored processes: %m");
		return -errno;
	}
	late_sk[0] = up(t, late_sk[0]);
	late_sk[1] = up(t, late_sk[1]);
	return late_sk[0] < 0 || late_sk[1] < 0 ? -EMFILE : 0;
}

static int send_late(int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {0}, byte = 0;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(late_sk[0], &mh, 0) == 1 ? 0 : -errno;
}

/* The process receives amber's fd: its new fd number there, or -errno. */
static int recv_late(struct restore_ctx *ctx)
{
	struct {
		struct msghdr mh;
		struct iovec iov;
		char byte;
		char cbuf[CMSG_SPACE(sizeof(int))] __attribute__((aligned(8)));
	} m = {0};
	unsigned long at = ctx->inf.scratch;
	struct cmsghdr *c;
	int ret, fd;
	long r;

	m.iov.iov_base = (void *)(at + offsetof(typeof(m), byte));
	m.iov.iov_len = 1;
	m.mh.msg_iov = (void *)(at + offsetof(typeof(m), iov));
	m.mh.msg_iovlen = 1;
	m.mh.msg_control = (void *)(at + offsetof(typeof(m), cbuf));
	m.mh.msg_controllen = sizeof(m.cbuf);
	ret = infect_write(&ctx->inf, at, &m, sizeof(m));
	if (ret)
		return ret;
	r = infect_call(&ctx->inf, SYS_recvmsg, late_sk[1], (long)at, MSG_CMSG_CLOEXEC, 0, 0, 0);
	if (r != 1) {
		pr_err("pid %d: cannot receive a file from amber: %s", ctx->pid,
		       strerror(r < 0 ? (int)-r : EIO));
		return r < 0 ? (int)r : -EIO;
	}
	ret = infect_read(&ctx->inf, at, &m, sizeof(m));
	if (ret)
		return ret;
	/* the process's own copy of the header, pointing into its memory */
	m.mh.msg_control = m.cbuf;
	c = CMSG_FIRSTHDR(&m.mh);
	if ((m.mh.msg_flags & MSG_CTRUNC) || !c || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(int))) {
		pr_err("pid %d: did not get the file amber passed (out of fds? RLIMIT_NOFILE)",
		       ctx->pid);
		return -EMFILE;
	}
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* amber's fd on f, opened by its kind the first time a process needs it. */
static int late_fd_of(struct restore_ctx *ctx, RegFile *f)
{
	struct tree *t = ctx->tree;
	const struct fd_type *ft = type_of(f);
	int fd, ret;

	if (!late_fd) {
		late_fd = malloc((t->nr_rfiles + 1) * sizeof(*late_fd));
		if (!late_fd)
			return -ENOMEM;
		for (size_t i = 0; i < t->nr_rfiles; i++)
			late_fd[i] = -1;
	}
	if (late_fd[f->id] >= 0)
		return late_fd[f->id];
	ret = ft->bounds_itself ? 0 : owner_enter(t);
	if (ret)
		return ret;
	fd = ft->open_late(ctx, f);
	if (!ft->bounds_itself)
		owner_leave(t);
	if (fd < 0)
		return fd;
	late_fd[f->id] = fd;
	return fd;
}

static int place_late(struct restore_ctx *ctx, size_t i)
{
	RegFile *f = ctx->files[ctx->fds[i]->file_id];
	int fd, ret;
	long r = 0;

	fd = late_fd_of(ctx, f);
	if (fd < 0)
		return fd;
	ret = send_late(fd);
	if (ret) {
		pr_err("pid %d: cannot pass %s to it: %s", ctx->pid, f->path, strerror(-ret));
		return ret;
	}
	fd = recv_late(ctx);
	if (fd < 0)
		return fd;
	/* every fd of this process on f, from this one description */
	for (size_t k = i; k < ctx->nr_fds && r >= 0; k++) {
		FdEntry *e = ctx->fds[k];

		if (e->file_id != f->id)
			continue;
		r = infect_call(&ctx->inf, SYS_dup3, fd, e->fd, e->cloexec ? O_CLOEXEC : 0, 0, 0,
				0);
		if (r < 0)
			pr_err("pid %d: cannot place fd %u (%s): %s", ctx->pid, e->fd, f->path,
			       strerror((int)-r));
	}
	infect_call(&ctx->inf, SYS_close, fd, 0, 0, 0, 0, 0);
	return r < 0 ? (int)r : 0;
}

bool files_made_late(const char *link, const struct stat *st)
{
	for (const struct fd_type *const *t = fd_types; *t; t++)
		if ((*t)->match(link, st))
			return made_after(*t);
	return false;
}

bool files_placed_first(struct tree *t, int id)
{
	return id >= 0 && (size_t)id < t->nr_rfiles && !made_after(type_of(t->rfiles[id]));
}

bool files_is_late(struct tree *t, int id)
{
	const struct fd_type *ft =
		id >= 0 && (size_t)id < t->nr_rfiles ? type_of(t->rfiles[id]) : NULL;

	return ft && ft->open_late;
}

static int files_restore_late(struct restore_ctx *ctx)
{
	int ret = 0;

	if (late_sk[0] < 0 || tree_entry(ctx->tree, (uint32_t)ctx->pid)->clone_files)
		return 0;
	/* the files opened late, then what refers to them (epoll watches) */
	for (int pass = 0; pass < 2 && !ret; pass++) {
		for (size_t i = 0; i < ctx->nr_fds && !ret; i++) {
			FdEntry *e = ctx->fds[i];
			RegFile *f = ctx->files[e->file_id];
			const struct fd_type *ft = type_of(f);
			bool first = true;

			if (!ft || !(pass ? ft->post_late != NULL : ft->open_late != NULL))
				continue;
			for (size_t k = 0; k < i && first; k++)
				first = ctx->fds[k]->file_id != e->file_id;
			if (first)
				ret = pass ? ft->post_late(ctx, f, (int)e->fd) : place_late(ctx, i);
		}
	}
	return ret;
}

static void late_close(struct tree *t)
{
	for (size_t i = 0; late_fd && i < t->nr_rfiles; i++)
		if (late_fd[i] >= 0)
			close(late_fd[i]);
	free(late_fd);
	late_fd = NULL;
	for (int k = 0; k < 2; k++)
		if (late_sk[k] >= 0)
			close(late_sk[k]);
	late_sk[0] = late_sk[1] = -1;
}

static void files_restore_done(struct tree *t)
{
	late_close(t);
	remap_restore_done(t);
}

static void files_restore_undo(struct tree *t)
{
	late_close(t);
}

static void files_dump_undo(struct tree *t)
{
	remap_dump_undo();
	for (const struct fd_type *const *ft = fd_types; *ft; ft++)
		if ((*ft)->dump_undo)
			(*ft)->dump_undo();
}

const struct resource_ops files_ops = {
	.name = "files",
	.dump_tree = files_dump_tree,
	.dump_tree_late = files_dump_tree_late,
	.dump_undo = files_dump_undo,
	.restore_read = files_restore_read,
	.restore_tree = files_restore_tree,
	.restore_child = files_restore_child,
	.restore_late = files_restore_late,
	.restore_done = files_restore_done,
	.restore_undo = files_restore_undo,
};
