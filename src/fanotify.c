// SPDX-License-Identifier: MIT
/*
 * fanotify: a group's fanotify_init flags ("fanotify flags:F event-flags:E"
 * in fdinfo) and its marks, one fdinfo line each (all hex):
 *   fanotify ino:I sdev:D mflags:M mask:K ignored_mask:G fhandle-bytes:... f_handle:H
 *   fanotify mnt_id:N mflags:M mask:K ignored_mask:G
 *   fanotify sdev:D mflags:M mask:K ignored_mask:G            (a filesystem)
 * An inode mark is kept by the inode's file handle (and its path, where one
 * reaches it: inotify.c's fsn_* helpers), a mount mark by the mount point's
 * path (mountinfo), a filesystem mark by a mount of it.  Restore makes the
 * group with its flags as the image's owner and marks each object again
 * through an O_PATH fd on it (/proc/self/fd/N: fanotify_mark with a NULL
 * path takes no O_PATH fd), then reads its fdinfo back: every mark must be
 * there with its masks and flags.  Queued events cannot be put back: a
 * group with some (FIONREAD) is refused at dump.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "anonfd.h"

#ifndef FAN_MARK_EVICTABLE
#define FAN_MARK_EVICTABLE 0x00000200
#endif
#ifndef FAN_MARK_IGNORE
#define FAN_MARK_IGNORE 0x00000400
#endif
#define MARK_FLAGS (FAN_MARK_IGNORED_SURV_MODIFY | FAN_MARK_EVICTABLE | FAN_MARK_IGNORE)
/* fanotify_init flags this amber knows (FAN_ALL_INIT_FLAGS and the FAN_REPORT_* ones) */
#define INIT_FLAGS 0x1fffu
#define MAX_MARKS  (1u << 20)

static bool fanotify_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:[fanotify]");
}

static FanotifyMark *new_mark(FanotifyEntry *e)
{
	FanotifyMark **nm, *m;

	if (e->n_marks >= MAX_MARKS)
		return NULL;
	nm = realloc(e->marks, (e->n_marks + 1) * sizeof(*nm));
	if (!nm)
		return NULL;
	e->marks = nm;
	m = malloc(sizeof(*m));
	if (!m)
		return NULL;
	fanotify_mark__init(m);
	e->marks[e->n_marks++] = m;
	return m;
}

/* The mount point (amber's view) and device of mount id, from mountinfo. */
static int mount_of_id(unsigned id, char **path, uint64_t *dev)
{
	char *buf, *line, *save = NULL;
	int ret = -ENOENT;

	ret = sys_read_file("/proc/self/mountinfo", &buf, NULL);
	if (ret)
		return ret;
	ret = -ENOENT;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char point[PATH_MAX];
		unsigned mid, maj, mnr;

		if (sscanf(line, "%u %*d %u:%u %*s %4095s", &mid, &maj, &mnr, point) != 4 ||
		    mid != id)
			continue;
		fsn_unescape(point);
		*path = strdup(point);
		*dev = makedev(maj, mnr);
		ret = *path ? 0 : -ENOMEM;
		break;
	}
	free(buf);
	return ret;
}

static int dump_inode_mark(struct dump_ctx *ctx, int fd, const char *line, FanotifyMark *m)
{
	struct fsn_inode in = {0};
	unsigned sdev;
	int ret;

	if (sscanf(line, "fanotify ino:%lx sdev:%x mflags:%x mask:%x ignored_mask:%x", &in.ino,
		   &sdev, &m->mflags, &m->mask, &m->ignored_mask) != 5)
		return -EINVAL;
	in.dev = fsn_dev(sdev);
	fsn_parse_handle(line, &in);
	ret = fsn_resolve(ctx, fd, "a fanotify inode mark", &in, &m->path);
	if (ret)
		return ret;
	m->kind = FANOTIFY_MARK_KIND__FANOTIFY_MARK_INODE;
	m->dev = in.dev;
	m->has_ino = m->has_fhandle_type = m->has_fhandle = 1;
	m->ino = in.ino;
	m->fhandle_type = in.htype;
	m->fhandle.len = in.hbytes;
	m->fhandle.data = malloc(in.hbytes);
	if (!m->fhandle.data)
		return -ENOMEM;
	memcpy(m->fhandle.data, in.handle, in.hbytes);
	return 0;
}

static int dump_mount_mark(struct dump_ctx *ctx, int fd, const char *line, FanotifyMark *m)
{
	unsigned id;
	int ret;

	if (sscanf(line, "fanotify mnt_id:%x mflags:%x mask:%x ignored_mask:%x", &id, &m->mflags,
		   &m->mask, &m->ignored_mask) != 4)
		return -EINVAL;
	m->kind = FANOTIFY_MARK_KIND__FANOTIFY_MARK_MOUNT;
	ret = mount_of_id(id, &m->path, &m->dev);
	if (ret)
		pr_err("pid %d: fd %d: a fanotify mark is on mount %u, which amber does not see "
		       "in its mountinfo: %s",
		       ctx->pid, fd, id, strerror(-ret));
	return ret;
}

static int dump_fs_mark(struct dump_ctx *ctx, int fd, const char *line, FanotifyMark *m)
{
	char mnt[PATH_MAX];
	unsigned sdev;
	int mfd;

	if (sscanf(line, "fanotify sdev:%x mflags:%x mask:%x ignored_mask:%x", &sdev, &m->mflags,
		   &m->mask, &m->ignored_mask) != 4)
		return -EINVAL;
	m->kind = FANOTIFY_MARK_KIND__FANOTIFY_MARK_FS;
	m->dev = fsn_dev(sdev);
	mfd = fsn_mount_fd((dev_t)m->dev, mnt, sizeof(mnt));
	if (mfd < 0) {
		pr_err("pid %d: fd %d: a fanotify mark is on the filesystem of device %u:%u, "
		       "which is not mounted where amber can see it: %s",
		       ctx->pid, fd, major(m->dev), minor(m->dev), strerror(-mfd));
		return mfd;
	}
	close(mfd);
	m->path = strdup(mnt);
	return m->path ? 0 : -ENOMEM;
}

static int fanotify_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	FanotifyEntry *e;
	const char *p;
	char *buf;
	int ret, queued = 0;

	if (ioctl(dup, FIONREAD, &queued) == 0 && queued > 0) {
		pr_err("pid %d: fd %d is a fanotify group with %d bytes of events queued; amber "
		       "cannot queue them again (let the process read them before the dump)",
		       ctx->pid, fd, queued);
		return -EBUSY;
	}
	ret = anonfd_dump_start(ctx, fd, dup, "fanotify", &fanotify_entry__descriptor, &buf,
				(void **)&e);
	if (ret)
		return ret;
	f->fanotify = e;
	p = anonfd_field(buf, "fanotify flags:");
	if (!p || sscanf(p, "%x event-flags:%x", &e->init_flags, &e->event_flags) != 2) {
		pr_err("pid %d: fd %d: no fanotify flags in its fdinfo", ctx->pid, fd);
		ret = -EINVAL;
		goto free_buf;
	}
	for (p = buf; p && *p && !ret; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		FanotifyMark *m;

		if (strncmp(p, "fanotify ", 9) || !strncmp(p, "fanotify flags:", 15))
			continue;
		m = new_mark(e);
		if (!m) {
			ret = -ENOMEM;
			break;
		}
		if (!strncmp(p, "fanotify ino:", 13))
			ret = dump_inode_mark(ctx, fd, p, m);
		else if (!strncmp(p, "fanotify mnt_id:", 16))
			ret = dump_mount_mark(ctx, fd, p, m);
		else if (!strncmp(p, "fanotify sdev:", 14))
			ret = dump_fs_mark(ctx, fd, p, m);
		else
			ret = -EINVAL;
		if (ret == -EINVAL)
			pr_err("pid %d: fd %d: a fanotify mark amber cannot dump: '%.*s'", ctx->pid,
			       fd, (int)strcspn(p, "\n"), p);
		if (!ret)
			pr_debug("pid %d: fanotify fd %d: mark %d on '%s', mask 0x%x, ignored 0x%x",
				 ctx->pid, fd, m->kind, m->path, m->mask, m->ignored_mask);
	}
free_buf:
	free(buf);
	return ret;
}

/* ---- restore ---- */

static int fanotify_check(struct tree *t, const RegFile *f)
{
	const FanotifyEntry *e = f->fanotify;

	if (!e) {
		pr_err("files.img: fanotify entry %u has no fanotify state; the image is corrupt",
		       f->id);
		return -EBADMSG;
	}
	if (e->init_flags & ~INIT_FLAGS) {
		pr_err("files.img: fanotify entry %u has unknown fanotify_init flags 0x%x; the "
		       "image is corrupt",
		       f->id, e->init_flags);
		return -EBADMSG;
	}
	for (size_t i = 0; i < e->n_marks; i++) {
		const FanotifyMark *m = e->marks[i];
		bool inode = m->kind == FANOTIFY_MARK_KIND__FANOTIFY_MARK_INODE;

		if ((m->mflags & ~MARK_FLAGS) || (!m->mask && !m->ignored_mask) ||
		    strlen(m->path) >= PATH_MAX || (m->path[0] && m->path[0] != '/') ||
		    (!inode && !m->path[0]) || (inode && (!m->has_ino || !m->has_fhandle)) ||
		    m->fhandle.len > MAX_HANDLE) {
			pr_err("files.img: fanotify entry %u: bad mark %zu; the image is corrupt",
			       f->id, i);
			return -EBADMSG;
		}
	}
	return 0;
}

/* An O_PATH fd on what mark m is on, checked against the image. */
static int mark_target(const RegFile *f, const FanotifyMark *m)
{
	struct statx stx;
	bool exact;
	int fd;

	if (m->kind == FANOTIFY_MARK_KIND__FANOTIFY_MARK_INODE) {
		fd = fsn_open("a fanotify inode mark", m->path, m->ino, m->dev, m->has_fhandle,
			      m->fhandle_type, &m->fhandle, &exact);
		if (fd >= 0 && !exact)
			pr_warn("fanotify entry %u: %s is not the file marked at the dump (inode "
				"%llu, which its file handle did not open); marking the one there "
				"now",
				f->id, m->path, (unsigned long long)m->ino);
		return fd;
	}
	fd = open(m->path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		pr_err("fanotify entry %u: cannot open %s to mark it again: %m", f->id, m->path);
		return fd;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) ||
	    makedev(stx.stx_dev_major, stx.stx_dev_minor) != m->dev ||
	    (m->kind == FANOTIFY_MARK_KIND__FANOTIFY_MARK_MOUNT &&
	     (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	     !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))) {
		pr_err("fanotify entry %u: %s is no longer the %s of device %u:%u that was marked",
		       f->id, m->path,
		       m->kind == FANOTIFY_MARK_KIND__FANOTIFY_MARK_MOUNT ? "mount" : "filesystem",
		       major(m->dev), minor(m->dev));
		close(fd);
		return -ESTALE;
	}
	return fd;
}

static int add_mark(int gfd, const RegFile *f, const FanotifyMark *m)
{
	unsigned type = m->kind == FANOTIFY_MARK_KIND__FANOTIFY_MARK_MOUNT ? FAN_MARK_MOUNT
			: m->kind == FANOTIFY_MARK_KIND__FANOTIFY_MARK_FS  ? FAN_MARK_FILESYSTEM
									   : FAN_MARK_INODE;
	unsigned flags = FAN_MARK_ADD | type | (m->mflags & FAN_MARK_EVICTABLE);
	char proc[64];
	int fd, ret = 0;

	fd = mark_target(f, m);
	if (fd < 0)
		return fd;
	/* the magic link leads to the very object the O_PATH fd holds */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (m->mask && fanotify_mark(gfd, flags, m->mask, AT_FDCWD, proc))
		ret = -errno;
	flags |= m->mflags & FAN_MARK_IGNORED_SURV_MODIFY;
	flags |= (m->mflags & FAN_MARK_IGNORE) ? FAN_MARK_IGNORE : FAN_MARK_IGNORED_MASK;
	if (!ret && m->ignored_mask && fanotify_mark(gfd, flags, m->ignored_mask, AT_FDCWD, proc))
		ret = -errno;
	if (ret)
		pr_err("fanotify entry %u: cannot mark %s again (mask 0x%x, ignored 0x%x, flags "
		       "0x%x): %s",
		       f->id, m->path[0] ? m->path : "(by handle)", m->mask, m->ignored_mask,
		       m->mflags, strerror(-ret));
	close(fd);
	return ret;
}

/* A mark's line of fdinfo without what names the object: "KIND mflags mask ignored". */
static int mark_key(const char *line, char *key, size_t len)
{
	unsigned mf, mask, ign;
	const char *p = strstr(line, " mflags:");
	char kind = !strncmp(line, "fanotify ino:", 13)	     ? 'I'
		    : !strncmp(line, "fanotify mnt_id:", 16) ? 'M'
		    : !strncmp(line, "fanotify sdev:", 14)   ? 'F'
							     : '?';

	if (!p || sscanf(p, " mflags:%x mask:%x ignored_mask:%x", &mf, &mask, &ign) != 3)
		return -EINVAL;
	snprintf(key, len, "%c %x %x %x", kind, mf, mask, ign);
	return 0;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The new group's fdinfo must list the image's marks, each as it was. */
static int verify_marks(int gfd, const RegFile *f)
{
	const FanotifyEntry *e = f->fanotify;
	size_t n = e->n_marks, got = 0;
	char path[64], *buf, **want, **have;
	const char *p;
	int ret;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", gfd);
	ret = sys_read_file(path, &buf, NULL);
	if (ret)
		return ret;
	want = calloc(n + 1, sizeof(*want));
	have = calloc(n + 1, sizeof(*have));
	if (!want || !have) {
		ret = -ENOMEM;
		goto free_all;
	}
	for (size_t i = 0; i < n; i++) {
		const FanotifyMark *m = e->marks[i];
		char kind = m->kind == FANOTIFY_MARK_KIND__FANOTIFY_MARK_INODE	 ? 'I'
			    : m->kind == FANOTIFY_MARK_KIND__FANOTIFY_MARK_MOUNT ? 'M'
										 : 'F';

		if (asprintf(&want[i], "%c %x %x %x", kind, m->mflags, m->mask, m->ignored_mask) <
		    0) {
			want[i] = NULL;
			ret = -ENOMEM;
			goto free_all;
		}
	}
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		char key[64];

		if (strncmp(p, "fanotify ", 9) || !strncmp(p, "fanotify flags:", 15) ||
		    mark_key(p, key, sizeof(key)))
			continue;
		if (got == n || !(have[got] = strdup(key))) {
			got += got < n;
			ret = -EEXIST;
			break;
		}
		got++;
	}
	qsort(want, n, sizeof(*want), by_str);
	qsort(have, got, sizeof(*have), by_str);
	for (size_t i = 0; !ret && i < n; i++)
		if (i >= got || strcmp(want[i], have[i]))
			ret = -ESTALE;
	if (!ret && got != n)
		ret = -ESTALE;
	if (ret)
		pr_err("fanotify entry %u: the group made again does not have the marks it had "
		       "(kind, mflags, mask, ignored mask: %zu wanted, first '%s'; %zu made, first "
		       "'%s')",
		       f->id, n, n ? want[0] : "", got, got ? have[0] : "");
free_all:
	for (size_t i = 0; i < n; i++) {
		if (want)
			free(want[i]);
		if (have)
			free(have[i]);
	}
	free(want);
	free(have);
	free(buf);
	return ret;
}

static int fanotify_open(struct tree *t, RegFile *f)
{
	FanotifyEntry *e = f->fanotify;
	int fd, fl, ret;

	ret = fanotify_check(t, f);
	if (ret)
		return ret;
	/* the group's flags as they were (FAN_CLOEXEC too: fdinfo shows it), then the
	 * description's O_NONBLOCK; amber's own fd is close-on-exec anyway */
	fd = fanotify_init(e->init_flags, e->event_flags);
	if (fd < 0) {
		ret = -errno;
		pr_err("cannot create a fanotify group (entry %u, flags 0x%x, event flags 0x%x): "
		       "%m%s",
		       f->id, e->init_flags, e->event_flags,
		       errno == EPERM ? " (the image's owner may not: CAP_SYS_ADMIN)" : "");
		return ret;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) ||
	    fcntl(fd, F_SETFL, (fl & ~O_NONBLOCK) | (f->flags & O_NONBLOCK))) {
		ret = -errno;
		pr_err("cannot set the flags of fanotify entry %u: %m", f->id);
		goto close_fd;
	}
	for (size_t i = 0; i < e->n_marks; i++) {
		ret = add_mark(fd, f, e->marks[i]);
		if (ret)
			goto close_fd;
	}
	ret = verify_marks(fd, f);
	if (ret)
		goto close_fd;
	return fd;
close_fd:
	close(fd);
	return ret;
}

const struct fd_type fanotify_type = {
	.name = "fanotify",
	.kind = FILE_KIND__FILE_FANOTIFY,
	.match = fanotify_match,
	.dump = fanotify_dump,
	.check = fanotify_check,
	.open = fanotify_open,
};
