// SPDX-License-Identifier: MIT
/*
 * inotify: the watches ("inotify wd:W ino:I sdev:D mask:M ... f_handle:H"
 * lines of fdinfo, all hex).  The watched inode is found from its file
 * handle (open_by_handle_at on a mount of the same filesystem, which needs
 * CAP_DAC_READ_SEARCH) and saved with the handle and, where a path reaches
 * it, that path.  Restore opens it by the handle again (the very inode, also
 * if a file was put in its place), by the path where the handle cannot be
 * used, and adds the watch through /proc/self/fd.  The same watch
 * descriptors: INOTIFY_IOC_SETNEXTWD (CONFIG_CHECKPOINT_RESTORE) before each
 * inotify_add_watch, in increasing wd order.  The fsn_* helpers serve
 * fanotify.c's inode marks too.
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

static bool inotify_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:inotify");
}

/* mountinfo escapes blanks and backslashes as \ooo */
void fsn_unescape(char *s)
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
int fsn_mount_fd(dev_t dev, char *mnt, size_t len)
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
		fsn_unescape(point);
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
	unsigned mask;
	struct fsn_inode in;
};

/* "fhandle-bytes:B fhandle-type:T f_handle:HEX" (the tail of an inode mark's line) */
void fsn_parse_handle(const char *line, struct fsn_inode *in)
{
	const char *p = strstr(line, "fhandle-bytes:");
	char hex[2 * MAX_HANDLE + 1];

	in->hbytes = 0;
	if (!p ||
	    sscanf(p, "fhandle-bytes:%x fhandle-type:%x f_handle:%256[0-9a-f]", &in->hbytes,
		   (unsigned *)&in->htype, hex) != 3 ||
	    in->hbytes > MAX_HANDLE || strlen(hex) < 2 * in->hbytes ||
	    hexbytes(hex, in->handle, in->hbytes))
		in->hbytes = 0;
}

int fsn_resolve(struct dump_ctx *ctx, int fd, const char *what, const struct fsn_inode *in,
		char **pathp)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE];
	} h;
	char mnt[PATH_MAX], proc[64], path[PATH_MAX];
	struct stat st, hst;
	int mfd, hfd, ret;

	if (!in->hbytes) {
		pr_err("pid %d: fd %d: %s (inode %lu on device %u:%u) has no usable file handle; "
		       "its filesystem cannot export handles, so amber cannot find the file",
		       ctx->pid, fd, what, in->ino, major(in->dev), minor(in->dev));
		return -EOPNOTSUPP;
	}
	memcpy(h.fh.f_handle, in->handle, in->hbytes);
	h.fh.handle_bytes = in->hbytes;
	h.fh.handle_type = in->htype;
	mfd = fsn_mount_fd(in->dev, mnt, sizeof(mnt));
	if (mfd < 0) {
		pr_err("pid %d: fd %d: %s is on device %u:%u, which is not mounted where amber "
		       "can see it: %s",
		       ctx->pid, fd, what, major(in->dev), minor(in->dev), strerror(-mfd));
		return mfd;
	}
	hfd = open_by_handle_at(mfd, &h.fh, O_PATH | O_CLOEXEC);
	if (hfd < 0) {
		ret = -errno;
		pr_err("pid %d: fd %d: cannot open the file of %s (inode %lu on %s) by its "
		       "handle: %m%s",
		       ctx->pid, fd, what, in->ino, mnt,
		       errno == EPERM ? " (amber needs CAP_DAC_READ_SEARCH)" : "");
		goto close_mnt;
	}
	ret = -ENOENT;
	if (fstat(hfd, &hst) || hst.st_ino != in->ino || hst.st_dev != in->dev) {
		pr_err("pid %d: fd %d: the handle of %s does not lead to its inode %lu", ctx->pid,
		       fd, what, in->ino);
		goto close_handle;
	}
	/* the mark keeps the inode alive, but not beyond the dump's kill */
	if (hst.st_nlink == 0) {
		pr_err("pid %d: fd %d: %s is on inode %lu of %s, which was deleted: it goes "
		       "with the process, amber cannot watch it again (remove the watch "
		       "before the dump)",
		       ctx->pid, fd, what, in->ino, mnt);
		goto close_handle;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", hfd);
	ret = sys_readlink(proc, path, sizeof(path));
	if (ret < 0) {
		pr_err("pid %d: fd %d: cannot read the path of %s: %s", ctx->pid, fd, what,
		       strerror(-ret));
		goto close_handle;
	}
	/* no path reaching it (hidden under a mount, another namespace): the handle will */
	if (path[0] != '/' || lstat(path, &st) || st.st_ino != in->ino || st.st_dev != in->dev) {
		pr_info("pid %d: fd %d: %s is on inode %lu of %s, which no path reaches ('%s'); "
			"it is kept by its file handle only",
			ctx->pid, fd, what, in->ino, mnt, path);
		path[0] = 0;
	}
	ret = 0;
	*pathp = strdup(path);
	if (!*pathp)
		ret = -ENOMEM;
close_handle:
	close(hfd);
close_mnt:
	close(mfd);
	return ret;
}

int fsn_open(const char *what, const char *path, uint64_t ino, uint64_t dev, bool has_handle,
	     int htype, const ProtobufCBinaryData *handle, bool *exact)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE];
	} h;
	int mfd, fd = -EOPNOTSUPP;
	char mnt[PATH_MAX];
	struct stat st;

	*exact = false;
	if (has_handle && handle->len && handle->len <= MAX_HANDLE) {
		memcpy(h.fh.f_handle, handle->data, handle->len);
		h.fh.handle_bytes = (unsigned)handle->len;
		h.fh.handle_type = htype;
		/* with the owner's rights: without CAP_DAC_READ_SEARCH, EPERM, and the path */
		mfd = fsn_mount_fd((dev_t)dev, mnt, sizeof(mnt));
		if (mfd >= 0) {
			fd = open_by_handle_at(mfd, &h.fh, O_PATH | O_CLOEXEC);
			fd = fd < 0 ? -errno : fd;
			close(mfd);
		} else {
			fd = mfd;
		}
		if (fd >= 0 && (fstat(fd, &st) || st.st_ino != ino || st.st_dev != dev)) {
			close(fd);
			fd = -ESTALE;
		}
		if (fd >= 0) {
			*exact = true;
			return fd;
		}
		pr_debug("%s: inode %llu not opened by its handle: %s", what,
			 (unsigned long long)ino, strerror(-fd));
	}
	if (!path[0]) {
		pr_err("%s: the watched inode %llu had no path at the dump, and its file handle "
		       "does not open it now: %s%s",
		       what, (unsigned long long)ino, strerror(-fd),
		       fd == -EPERM ? " (only root's images may open files by handle)" : "");
		return fd < 0 ? fd : -ENOENT;
	}
	/* the inode itself, never a link to follow */
	fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		pr_err("%s: cannot open %s: %m (is it still there?)", what, path);
		return fd;
	}
	if (!fstat(fd, &st) && st.st_ino == ino && st.st_dev == dev)
		*exact = true;
	return fd;
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
		unsigned sdev;
		char what[64];

		if (strncmp(p, "inotify wd:", 11))
			continue;
		if (sscanf(p, "inotify wd:%x ino:%lx sdev:%x mask:%x", (unsigned *)&w.wd, &w.in.ino,
			   &sdev, &w.mask) != 4 ||
		    w.wd <= 0) {
			pr_err("pid %d: fd %d: cannot parse the inotify watch '%.*s'", ctx->pid, fd,
			       (int)strcspn(p, "\n"), p);
			ret = -EINVAL;
			break;
		}
		w.in.dev = fsn_dev(sdev);
		fsn_parse_handle(p, &w.in);
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
		snprintf(what, sizeof(what), "inotify watch %d", w.wd);
		ret = fsn_resolve(ctx, fd, what, &w.in, &iw->path);
		if (ret)
			break;
		iw->wd = w.wd;
		iw->mask = w.mask;
		iw->has_ino = iw->has_dev = 1;
		iw->ino = w.in.ino;
		iw->dev = w.in.dev;
		iw->has_fhandle_type = iw->has_fhandle = 1;
		iw->fhandle_type = w.in.htype;
		iw->fhandle.len = w.in.hbytes;
		iw->fhandle.data = malloc(w.in.hbytes);
		if (!iw->fhandle.data) {
			ret = -ENOMEM;
			break;
		}
		memcpy(iw->fhandle.data, w.in.handle, w.in.hbytes);
		pr_debug("pid %d: inotify fd %d: wd %d on '%s' (inode %lu), mask 0x%x", ctx->pid,
			 fd, w.wd, iw->path, w.in.ino, w.mask);
	}
	free(buf);
	return ret;
}

static int by_wd(const void *a, const void *b)
{
	const InotifyWatch *x = *(InotifyWatch *const *)a, *y = *(InotifyWatch *const *)b;

	return (x->wd > y->wd) - (x->wd < y->wd);
}

/* Before anything is made: what open() and fsn_open() take from the image. */
static int inotify_check(struct tree *t, const RegFile *f)
{
	const InotifyEntry *e = f->inotify;

	if (!e) {
		pr_err("files.img: inotify entry %u has no inotify state; the image is corrupt",
		       f->id);
		return -EBADMSG;
	}
	for (size_t i = 0; i < e->n_watches; i++) {
		const InotifyWatch *w = e->watches[i];

		if (w->wd <= 0 || strlen(w->path) >= PATH_MAX ||
		    (w->path[0] ? w->path[0] != '/' : !w->has_fhandle) ||
		    (w->has_fhandle && (!w->has_ino || !w->has_dev)) ||
		    w->fhandle.len > MAX_HANDLE) {
			pr_err("files.img: inotify entry %u: bad watch %zu (wd %d); the image is "
			       "corrupt",
			       f->id, i, w->wd);
			return -EBADMSG;
		}
	}
	return 0;
}

/* An O_PATH fd on the watched inode: by its handle, else by its path. */
static int watch_fd(const InotifyWatch *w, bool *exact)
{
	char what[64];
	int fd;

	if (!w->has_ino || !w->has_dev) { /* an image without them: the path */
		*exact = true;
		fd = open(w->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			pr_err("cannot open %s to watch it again (inotify wd %d): %m", w->path,
			       w->wd);
		return fd < 0 ? -errno : fd;
	}
	snprintf(what, sizeof(what), "inotify wd %d", w->wd);
	return fsn_open(what, w->path, w->ino, w->dev, w->has_fhandle, w->fhandle_type, &w->fhandle,
			exact);
}

static int inotify_open(struct tree *t, RegFile *f)
{
	InotifyEntry *e = f->inotify;
	int fd, ret;

	ret = inotify_check(t, f);
	if (ret)
		return ret;
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
		char proc[64];
		bool exact;
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
		ret = watch_fd(w, &exact);
		if (ret < 0)
			goto close_fd;
		/* through the O_PATH fd's magic link: the very inode it holds */
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ret);
		wd = inotify_add_watch(fd, proc, w->mask);
		close(ret);
		ret = 0;
		if (wd < 0) {
			ret = -errno;
			pr_err("cannot watch %s again (inotify wd %d, mask 0x%x): %m", w->path,
			       w->wd, w->mask);
			goto close_fd;
		}
		if (wd != w->wd) {
			pr_err("inotify watch on %s got wd %d instead of %d; the process would not "
			       "recognise its events",
			       w->path, wd, w->wd);
			ret = -EEXIST;
			goto close_fd;
		}
		if (!exact)
			pr_warn("inotify wd %d: %s is not the file that was watched at the dump "
				"(inode %llu, which its file handle did not open); watching the "
				"one there now",
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
	.check = inotify_check,
	.open = inotify_open,
};
