// SPDX-License-Identifier: MIT
/*
 * The files of a tmpfs of the tree's mount namespace (mnt.c), which die
 * with it: tmpfs-ID.img, a walk of the whole filesystem as tar would make
 * one.  Taken from inside the namespace through a detached copy of the
 * mount alone (open_tree), so that what is mounted on it does not hide
 * its own files; put back in the tmpfs made new at restore before anything
 * is mounted on it.  Every entry keeps its mode, owner and times (those of
 * directories set last, when nothing is added to them any more); symbolic
 * links, device nodes, FIFOs and hard links come back as such.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns.h"
#include "sys.h"

struct walk {
	struct img *img;
	pid_t pid;
	const MntEntry *mnt;
	dev_t dev;
	struct {
		ino_t ino;
		char *path;
	} * links; /* regular files with more than one link, seen once */
	size_t nr_links;
};

static uint64_t ns_of_ts(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static int put(struct walk *w, TmpfsEntry *te)
{
	return img_put(w->img, &te->base);
}

static int dump_data(struct walk *w, int dirfd, const char *name, TmpfsEntry *te, off_t size)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	char *buf;
	off_t off = 0;
	int ret = 0;

	if (fd < 0) {
		pr_err("pid %d: tmpfs at %s: cannot read %s: %m", w->pid, w->mnt->mountpoint,
		       te->path);
		return -errno;
	}
	buf = aligned_alloc(4096, TMPFS_CHUNK); /* the kernel copies faster to aligned */
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	/* the first record makes the file, the others add to it */
	do {
		ssize_t n = sys_pread_full(fd, buf, TMPFS_CHUNK, off);

		if (n < 0) {
			ret = (int)n;
			pr_err("pid %d: tmpfs at %s: cannot read %s: %s", w->pid,
			       w->mnt->mountpoint, te->path, strerror(-ret));
			break;
		}
		te->has_data = 1;
		te->data.data = (uint8_t *)buf;
		te->data.len = (size_t)n;
		te->has_offset = off != 0;
		te->offset = (uint64_t)off;
		ret = put(w, te);
		off += n;
		if (!n)
			break;
	} while (!ret && off < size);
	te->has_data = 0;
	te->data.data = NULL;
	free(buf);
	close(fd);
	return ret;
}

static int walk_dir(struct walk *w, int dirfd, const char *path);

static int walk_entry(struct walk *w, int dirfd, const char *name, const char *path)
{
	TmpfsEntry te = TMPFS_ENTRY__INIT;
	char target[PATH_MAX];
	struct stat st;
	int ret = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) {
		pr_err("pid %d: tmpfs at %s: cannot stat %s: %m", w->pid, w->mnt->mountpoint, path);
		return -errno;
	}
	te.path = (char *)path;
	te.mode = st.st_mode;
	te.uid = st.st_uid;
	te.gid = st.st_gid;
	te.atime = ns_of_ts(&st.st_atim);
	te.mtime = ns_of_ts(&st.st_mtim);
	if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		te.has_rdev = 1;
		te.rdev = st.st_rdev;
	}
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);

		if (n < 0) {
			pr_err("pid %d: tmpfs at %s: cannot read the link %s: %m", w->pid,
			       w->mnt->mountpoint, path);
			return -errno;
		}
		target[n] = 0;
		te.target = target;
	}
	if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
		for (size_t i = 0; i < w->nr_links; i++)
			if (w->links[i].ino == st.st_ino) {
				te.link = w->links[i].path;
				return put(w, &te);
			}
		void *nl = realloc(w->links, (w->nr_links + 1) * sizeof(*w->links));

		if (!nl)
			return -ENOMEM;
		w->links = nl;
		w->links[w->nr_links].ino = st.st_ino;
		w->links[w->nr_links].path = strdup(path);
		if (!w->links[w->nr_links++].path)
			return -ENOMEM;
	}
	if (S_ISREG(st.st_mode))
		return dump_data(w, dirfd, name, &te, st.st_size);
	ret = put(w, &te);
	if (!ret && S_ISDIR(st.st_mode) && *path) {
		int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0) {
			pr_err("pid %d: tmpfs at %s: cannot open the directory %s: %m", w->pid,
			       w->mnt->mountpoint, path);
			return -errno;
		}
		ret = walk_dir(w, fd, path);
	}
	return ret;
}

/* Takes fd (closed here). */
static int walk_dir(struct walk *w, int fd, const char *path)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int ret = 0;

	if (!d) {
		close(fd);
		return -errno;
	}
	while (!ret && (errno = 0, de = readdir(d))) {
		char *sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&sub, "%s%s%s", path, *path ? "/" : "", de->d_name) < 0)
			ret = -ENOMEM;
		else
			ret = walk_entry(w, dirfd(d), de->d_name, sub);
		free(sub);
	}
	if (!ret && errno) {
		ret = -errno;
		pr_err("pid %d: tmpfs at %s: cannot list %s: %m", w->pid, w->mnt->mountpoint,
		       *path ? path : "/");
	}
	closedir(d);
	return ret;
}

int tmpfs_dump(struct tree *t, pid_t pid, MntEntry *e)
{
	struct walk w = {.pid = pid, .mnt = e};
	struct stat st;
	int fd, ret;

	/* that mount alone: what is mounted on it does not hide its files */
	fd = open_tree(AT_FDCWD, e->mountpoint, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0) {
		pr_err("pid %d: tmpfs mount %u at %s: cannot copy it to read its files: %m", pid,
		       e->id, e->mountpoint);
		return -errno;
	}
	if (fstat(fd, &st) || st.st_dev != e->dev) {
		pr_err("pid %d: tmpfs mount %u at %s is covered by another mount there; amber "
		       "cannot read its files",
		       pid, e->id, e->mountpoint);
		close(fd);
		return -EOPNOTSUPP;
	}
	if (asprintf(&e->contents, "tmpfs-%u.img", e->id) < 0) {
		close(fd);
		return -ENOMEM;
	}
	ret = img_create(&t->imgs, IMG_TMPFS, &w.img, "%s", e->contents);
	if (!ret)
		ret = walk_entry(&w, fd, "", "");
	if (!ret) {
		int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		ret = dfd < 0 ? -errno : walk_dir(&w, dfd, "");
	}
	if (w.img) {
		if (ret)
			img_abort(w.img);
		else
			ret = img_finish(w.img);
	}
	for (size_t i = 0; i < w.nr_links; i++)
		free(w.links[i].path);
	free(w.links);
	close(fd);
	return ret;
}

/* ---- restore ---- */

/* A relative path without ".", "..", or empty components ("" is the root). */
static bool clean(const char *p)
{
	if (!*p)
		return true;
	if (p[0] == '/' || strlen(p) >= PATH_MAX)
		return false;
	for (const char *c = p;;) {
		size_t l = strcspn(c, "/");

		if (!l || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[l])
			return true;
		c += l + 1;
	}
}

struct times {
	char *path;
	uint64_t atime, mtime;
};

/* The directory an entry is in, never out of the tmpfs. */
static int parent_of(int root, const char *path, const char **base)
{
	char *dir = strdup(path), *slash;
	int fd;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	*base = slash ? path + (slash - dir) + 1 : path;
	if (slash)
		*slash = 0;
	fd = sys_openat2(root, slash ? dir : ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
			 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
	free(dir);
	return fd;
}

static int make_entry(int root, const MntEntry *m, const TmpfsEntry *te)
{
	const char *base;
	int pfd, fd, ret = 0;
	mode_t perm = te->mode & 07777;

	if (!*te->path)
		return 0; /* the root is there: its attributes follow */
	pfd = parent_of(root, te->path, &base);
	if (pfd < 0) {
		pr_err("tmpfs at %s: cannot open the directory of %s: %s", m->mountpoint, te->path,
		       strerror(-pfd));
		return pfd;
	}
	if (te->link) {
		if (!clean(te->link) || linkat(root, te->link, pfd, base, 0))
			ret = -errno ? -errno : -EINVAL;
	} else if (S_ISDIR(te->mode)) {
		ret = mkdirat(pfd, base, perm) ? -errno : 0;
	} else if (S_ISLNK(te->mode)) {
		ret = !te->target || symlinkat(te->target, pfd, base) ? -EINVAL : 0;
	} else if (S_ISREG(te->mode)) {
		fd = openat(pfd, base,
			    O_WRONLY | O_NOFOLLOW | O_CLOEXEC | (te->offset ? 0 : O_CREAT | O_EXCL),
			    perm);
		if (fd < 0)
			ret = -errno;
		else if (te->has_data && pwrite(fd, te->data.data, te->data.len,
						(off_t)te->offset) != (ssize_t)te->data.len)
			ret = -EIO;
		if (fd >= 0)
			close(fd);
		if (te->offset) /* the attributes are the first record's */
			goto close_parent;
	} else if (S_ISCHR(te->mode) || S_ISBLK(te->mode) || S_ISFIFO(te->mode) ||
		   S_ISSOCK(te->mode)) {
		ret = mknodat(pfd, base, te->mode, (dev_t)te->rdev) ? -errno : 0;
	} else {
		ret = -EINVAL;
	}
	if (!ret && !te->link && fchownat(pfd, base, te->uid, te->gid, AT_SYMLINK_NOFOLLOW))
		ret = -errno;
	/* after chown, which clears set-user-ID */
	if (!ret && !te->link && !S_ISLNK(te->mode) && fchmodat(pfd, base, perm, 0))
		ret = -errno;
	if (ret)
		pr_err("tmpfs at %s: cannot make %s (mode %o): %s", m->mountpoint, te->path,
		       te->mode, strerror(-ret));
close_parent:
	close(pfd);
	return ret;
}

static int set_times(int root, const MntEntry *m, const struct times *tm)
{
	struct timespec ts[2] = {
		{(time_t)(tm->atime / 1000000000ull), (long)(tm->atime % 1000000000ull)},
		{(time_t)(tm->mtime / 1000000000ull), (long)(tm->mtime % 1000000000ull)},
	};
	const char *base;
	int pfd, ret = 0;

	if (!*tm->path) {
		if (utimensat(AT_FDCWD, m->mountpoint, ts, 0))
			ret = -errno;
	} else {
		pfd = parent_of(root, tm->path, &base);
		if (pfd < 0)
			return pfd;
		if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW))
			ret = -errno;
		close(pfd);
	}
	if (ret)
		pr_err("tmpfs at %s: cannot set the times of %s: %s", m->mountpoint,
		       *tm->path ? tm->path : "/", strerror(-ret));
	return ret;
}

int tmpfs_restore(struct tree *t, const MntEntry *m, int root)
{
	struct times *tms = NULL;
	size_t nr_tms = 0;
	struct img *img;
	TmpfsEntry *te;
	int ret = img_open(t->img, IMG_TMPFS, &img, "%s", m->contents);

	if (ret)
		return ret;
	for (;;) {
		te = NULL;
		if (!ret)
			ret = img_get(img, &tmpfs_entry__descriptor, (ProtobufCMessage **)&te);
		if (ret <= 0 || !te)
			break;
		ret = 0;
		bool first = !te->offset;

		if (!clean(te->path) || (!*te->path && !S_ISDIR(te->mode))) {
			pr_err("%s: %s is not a path in the tmpfs; the image is corrupt",
			       m->contents, te->path);
			ret = -EBADMSG;
		} else if (!*te->path) {
			/* the root: its owner and mode now, its times last */
			if (chown(m->mountpoint, te->uid, te->gid) ||
			    chmod(m->mountpoint, te->mode & 07777)) {
				ret = -errno;
				pr_err("tmpfs at %s: cannot set its root's owner and mode: %m",
				       m->mountpoint);
			}
		} else {
			ret = make_entry(root, m, te);
		}
		if (!ret && first && !te->link) {
			struct times *nt = realloc(tms, (nr_tms + 1) * sizeof(*nt));

			if (!nt) {
				ret = -ENOMEM;
			} else {
				tms = nt;
				tms[nr_tms] =
					(struct times){strdup(te->path), te->atime, te->mtime};
				ret = tms[nr_tms++].path ? 0 : -ENOMEM;
			}
		}
		protobuf_c_message_free_unpacked(&te->base, NULL);
	}
	img_close(img);
	/* the deepest last made first: a directory's times once its files exist */
	for (size_t i = nr_tms; i-- > 0;) {
		if (!ret)
			ret = set_times(root, m, &tms[i]);
		free(tms[i].path);
	}
	free(tms);
	return ret;
}
