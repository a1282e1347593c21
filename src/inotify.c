// SPDX-License-Identifier: MIT
/*
 * inotify: the watches ("inotify wd:W ino:I sdev:D mask:M ... f_handle:H"
 * lines of fdinfo, all hex).  The watched inode is found again from its file
 * handle (open_by_handle_at on a mount of the same filesystem, which needs
 * CAP_DAC_READ_SEARCH) and saved by path; the path is checked against the
 * inode number and device.  Restored with the same watch descriptors:
 * INOTIFY_IOC_SETNEXTWD (CONFIG_CHECKPOINT_RESTORE) before each
 * inotify_add_watch, in increasing wd order.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "anonfd.h"

#ifndef INOTIFY_IOC_SETNEXTWD
#define INOTIFY_IOC_SETNEXTWD _IOW('I', 0, uint32_t)
#endif
#define MAX_HANDLE 128

static bool inotify_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:inotify");
}

/* mountinfo escapes blanks and backslashes as \ooo */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
			*d++ = (char)strtol((char[]){s[1], s[2], s[3], 0}, NULL, 8);
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = 0;
}

/* An fd on a mount of device dev (amber's view), its root mount preferred. */
static int mount_fd_of(dev_t dev, char *mnt, size_t len)
{
	char *buf, *line, *save = NULL;
	int ret, fd = -ENOENT;
	bool found = false;

	ret = sys_read_file("/proc/self/mountinfo", &buf, NULL);
	if (ret)
		return ret;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char root[PATH_MAX], point[PATH_MAX];
		unsigned maj, mnr;

		if (sscanf(line, "%*d %*d %u:%u %4095s %4095s", &maj, &mnr, root, point) != 4 ||
		    makedev(maj, mnr) != dev)
			continue;
		if (found && strcmp(root, "/"))
			continue;
		unescape(point);
		snprintf(mnt, len, "%s", point);
		found = true;
		if (!strcmp(root, "/"))
			break;
	}
	free(buf);
	if (found) {
		fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
	}
	return fd;
}

static int hexbytes(const char *hex, unsigned char *out, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -EINVAL;
		out[i] = (unsigned char)b;
	}
	return 0;
}

struct watch_line {
	int wd;
	unsigned long ino;
	unsigned sdev, mask, hbytes;
	int htype;
	char handle[2 * MAX_HANDLE + 1];
};

/* The path of the watched inode, from its file handle; checked by inode number. */
static int resolve_watch(struct dump_ctx *ctx, int fd, struct watch_line *w, InotifyWatch *iw)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE];
	} h;
	dev_t dev = makedev(w->sdev >> 20, w->sdev & 0xfffff);
	char mnt[PATH_MAX], proc[64], path[PATH_MAX];
	struct stat st;
	int mfd, hfd, ret;

	if (!w->hbytes || w->hbytes > MAX_HANDLE || hexbytes(w->handle, h.fh.f_handle, w->hbytes)) {
		pr_err("pid %d: inotify fd %d: watch %d (inode %lu on device %u:%u) has no usable "
		       "file handle; its filesystem cannot export handles, so amber cannot find "
		       "the watched file",
		       ctx->pid, fd, w->wd, w->ino, major(dev), minor(dev));
		return -EOPNOTSUPP;
	}
	h.fh.handle_bytes = w->hbytes;
	h.fh.handle_type = w->htype;
	mfd = mount_fd_of(dev, mnt, sizeof(mnt));
	if (mfd < 0) {
		pr_err("pid %d: inotify fd %d: watch %d is on device %u:%u, which is not mounted "
		       "where amber can see it: %s",
		       ctx->pid, fd, w->wd, major(dev), minor(dev), strerror(-mfd));
		return mfd;
	}
	hfd = open_by_handle_at(mfd, &h.fh, O_PATH | O_CLOEXEC);
	if (hfd < 0) {
		ret = -errno;
		pr_err("pid %d: inotify fd %d: cannot open the file of watch %d (inode %lu on %s) "
		       "by its handle: %m%s",
		       ctx->pid, fd, w->wd, w->ino, mnt,
		       errno == EPERM ? " (amber needs CAP_DAC_READ_SEARCH)" : "");
		goto close_mnt;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", hfd);
	ret = sys_readlink(proc, path, sizeof(path));
	if (ret < 0) {
		pr_err("pid %d: inotify fd %d: cannot read the path of watch %d: %s", ctx->pid, fd,
		       w->wd, strerror(-ret));
		goto close_handle;
	}
	ret = 0;
	if (path[0] != '/' || lstat(path, &st) || st.st_ino != w->ino || st.st_dev != dev) {
		pr_err("pid %d: inotify fd %d: watch %d is on inode %lu of %s, but that inode has "
		       "no path amber can reach (deleted, or not in amber's mount namespace): "
		       "'%s'",
		       ctx->pid, fd, w->wd, w->ino, mnt, path);
		ret = -ENOENT;
		goto close_handle;
	}
	iw->wd = w->wd;
	iw->mask = w->mask;
	iw->path = strdup(path);
	iw->has_ino = iw->has_dev = 1;
	iw->ino = st.st_ino;
	iw->dev = st.st_dev;
	if (!iw->path)
		ret = -ENOMEM;
	pr_debug("pid %d: inotify fd %d: wd %d on %s, mask 0x%x", ctx->pid, fd, w->wd, path,
		 w->mask);
close_handle:
	close(hfd);
close_mnt:
	close(mfd);
	return ret;
}

static int inotify_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	InotifyEntry *e;
	const char *p;
	char *buf;
	int ret;

	ret = anonfd_dump_start(ctx, fd, dup, "inotify", &inotify_entry__descriptor, &buf,
				(void **)&e);
	if (ret)
		return ret;
	f->inotify = e;
	for (p = buf; p && *p && !ret; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		struct watch_line w = {0};
		InotifyWatch *iw, **nw;

		if (strncmp(p, "inotify wd:", 11))
			continue;
		if (sscanf(p,
			   "inotify wd:%x ino:%lx sdev:%x mask:%x ignored_mask:%*x "
			   "fhandle-bytes:%x fhandle-type:%x f_handle:%256[0-9a-f]",
			   (unsigned *)&w.wd, &w.ino, &w.sdev, &w.mask, &w.hbytes,
			   (unsigned *)&w.htype, w.handle) < 4 ||
		    w.wd <= 0) {
			pr_err("pid %d: fd %d: cannot parse the inotify watch '%.*s'", ctx->pid, fd,
			       (int)strcspn(p, "\n"), p);
			ret = -EINVAL;
			break;
		}
		nw = realloc(e->watches, (e->n_watches + 1) * sizeof(*nw));
		iw = malloc(sizeof(*iw));
		if (nw)
			e->watches = nw;
		if (!nw || !iw) {
			free(iw);
			ret = -ENOMEM;
			break;
		}
		inotify_watch__init(iw);
		e->watches[e->n_watches++] = iw;
		ret = resolve_watch(ctx, fd, &w, iw);
	}
	free(buf);
	return ret;
}

static int by_wd(const void *a, const void *b)
{
	const InotifyWatch *x = *(InotifyWatch *const *)a, *y = *(InotifyWatch *const *)b;

	return (x->wd > y->wd) - (x->wd < y->wd);
}

static int inotify_open(struct tree *t, RegFile *f)
{
	InotifyEntry *e = f->inotify;
	int fd, ret = 0;

	if (!e) {
		pr_err("files.img: inotify entry %u has no inotify state; the image is corrupt",
		       f->id);
		return -EBADMSG;
	}
	fd = inotify_init1(IN_CLOEXEC | ((f->flags & O_NONBLOCK) ? IN_NONBLOCK : 0));
	if (fd < 0) {
		ret = -errno;
		pr_err("cannot create an inotify instance (entry %u): %m", f->id);
		return ret;
	}
	/* Increasing wds: the next new watch then gets the one after the highest. */
	qsort(e->watches, e->n_watches, sizeof(*e->watches), by_wd);
	for (size_t i = 0; i < e->n_watches; i++) {
		InotifyWatch *w = e->watches[i];
		struct stat st;
		int wd;

		if (w->wd <= 0 || (i && w->wd == e->watches[i - 1]->wd)) {
			pr_err("files.img: inotify entry %u has a bad or repeated wd %d; the image "
			       "is corrupt",
			       f->id, w->wd);
			ret = -EBADMSG;
			goto close_fd;
		}
		if (ioctl(fd, INOTIFY_IOC_SETNEXTWD, (unsigned long)w->wd)) {
			ret = -errno;
			pr_err("cannot set the next inotify wd to %d: %m (INOTIFY_IOC_SETNEXTWD "
			       "needs CONFIG_CHECKPOINT_RESTORE)",
			       w->wd);
			goto close_fd;
		}
		/* The path is the watched inode itself, never a link to follow. */
		wd = inotify_add_watch(fd, w->path, w->mask | IN_DONT_FOLLOW);
		if (wd < 0) {
			ret = -errno;
			pr_err("cannot watch %s again (inotify wd %d, mask 0x%x): %m (is it still "
			       "there?)",
			       w->path, w->wd, w->mask);
			goto close_fd;
		}
		if (wd != w->wd) {
			pr_err("inotify watch on %s got wd %d instead of %d; the process would not "
			       "recognise its events",
			       w->path, wd, w->wd);
			ret = -EEXIST;
			goto close_fd;
		}
		if (w->has_ino && w->has_dev &&
		    (lstat(w->path, &st) || st.st_ino != w->ino || st.st_dev != w->dev))
			pr_warn("inotify wd %d: %s is not the file that was watched at the dump "
				"(inode %llu); watching the one there now",
				w->wd, w->path, (unsigned long long)w->ino);
	}
	return fd;
close_fd:
	close(fd);
	return ret;
}

const struct fd_type inotify_type = {
	.name = "inotify",
	.kind = FILE_KIND__FILE_INOTIFY,
	.match = inotify_match,
	.dump = inotify_dump,
	.open = inotify_open,
};
