// SPDX-License-Identifier: MIT
/*
 * --link-remap (CRIU's flag): a regular file the process has open or mapped
 * whose name was removed (or now names another file) while other hard links
 * keep it.  No name reaches it, and copying it as a ghost would part it from
 * those links, so the dump makes a link to it beside its old name,
 * .amber-link-remap.INO.N, that the image names.  The restore opens the file
 * through it (through the old name again when that is free, linked for the
 * time of the open, so that /proc shows the name the process used) and
 * removes the link once the processes run; a failed restore leaves it for
 * the next try, a failed dump removes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amber.h"
#include "files.h"
#include "log.h"
#include "owner.h"

#define REMAP_PREFIX ".amber-link-remap."

struct remap {
	dev_t dev;
	ino_t ino;
	char *path;
};

/* dump: the links this dump made; restore: the links it opened files by */
static struct remap *remaps;
static size_t nr_remaps;

static int remember(dev_t dev, ino_t ino, const char *path)
{
	struct remap *n = realloc(remaps, (nr_remaps + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	remaps = n;
	remaps[nr_remaps].path = strdup(path);
	if (!remaps[nr_remaps].path)
		return -ENOMEM;
	remaps[nr_remaps].dev = dev;
	remaps[nr_remaps++].ino = ino;
	return 0;
}

static void forget_all(void)
{
	for (size_t i = 0; i < nr_remaps; i++)
		free(remaps[i].path);
	free(remaps);
	remaps = NULL;
	nr_remaps = 0;
}

/* The directory part of path (a copy in buf), or NULL if it has none. */
static const char *dir_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash || (size_t)(slash - path) + 2 > len)
		return NULL;
	if (slash == path)
		return "/";
	memcpy(buf, path, (size_t)(slash - path));
	buf[slash - path] = 0;
	return buf;
}

/* Unlink path if it is still the link to (dev, ino); errors are the caller's. */
static int unlink_if_same(const char *path, dev_t dev, ino_t ino)
{
	struct stat now;

	if (lstat(path, &now))
		return -errno;
	if (!S_ISREG(now.st_mode) || now.st_dev != dev || now.st_ino != ino)
		return -ESTALE;
	return unlink(path) ? -errno : 0;
}

int remap_dump(struct dump_ctx *ctx, const char *procpath, const char *path, const struct stat *st,
	       RegFile *f)
{
	char dirbuf[PATH_MAX], link[PATH_MAX];
	struct stat named;
	const char *dir;

	if (!S_ISREG(st->st_mode) || st->st_nlink == 0)
		return 0;
	if (!lstat(path, &named) && named.st_dev == st->st_dev && named.st_ino == st->st_ino)
		return 0; /* its name still reaches it */
	if (!ctx->o->link_remap) {
		pr_err("pid %d: %s (%s) lost that name (unlinked or replaced), but %lu other hard "
		       "link(s) keep it; "
		       "dump with --link-remap to keep it by a link amber makes beside it",
		       ctx->pid, path, procpath, (unsigned long)st->st_nlink);
		return -EOPNOTSUPP;
	}
	for (size_t i = 0; i < nr_remaps; i++)
		if (remaps[i].dev == st->st_dev && remaps[i].ino == st->st_ino) {
			f->link_remap = strdup(remaps[i].path);
			return f->link_remap ? 0 : -ENOMEM;
		}
	dir = dir_of(path, dirbuf, sizeof(dirbuf));
	if (!dir) {
		pr_err("pid %d: %s (%s): no directory to make the --link-remap link in", ctx->pid,
		       path, procpath);
		return -EOPNOTSUPP;
	}
	for (int n = 0;; n++) {
		if (snprintf(link, sizeof(link), "%s%s" REMAP_PREFIX "%lu.%d", dir,
			     strcmp(dir, "/") ? "/" : "", (unsigned long)st->st_ino,
			     n) >= (int)sizeof(link)) {
			pr_err("pid %d: %s: its path is too long for a --link-remap link", ctx->pid,
			       path);
			return -ENAMETOOLONG;
		}
		/* never replaces a name: EEXIST tries the next */
		if (!linkat(AT_FDCWD, procpath, AT_FDCWD, link, AT_SYMLINK_FOLLOW))
			break;
		if (errno != EEXIST || n == 99) {
			pr_err("pid %d: %s (%s): cannot make the --link-remap link %s: %m",
			       ctx->pid, path, procpath, link);
			return -errno;
		}
	}
	pr_info("pid %d: %s, unlinked, is kept by the link %s until it is restored", ctx->pid, path,
		link);
	f->link_remap = strdup(link);
	if (!f->link_remap || remember(st->st_dev, st->st_ino, link)) {
		unlink(link);
		return -ENOMEM;
	}
	return 0;
}

void remap_dump_undo(void)
{
	for (size_t i = 0; i < nr_remaps; i++) {
		int ret = unlink_if_same(remaps[i].path, remaps[i].dev, remaps[i].ino);

		if (ret)
			pr_warn("cannot remove the --link-remap link %s: %s", remaps[i].path,
				strerror(-ret));
	}
	forget_all();
}

bool remap_valid(const RegFile *f)
{
	char a[PATH_MAX], b[PATH_MAX];
	const char *da, *db, *base;

	if (!f->link_remap)
		return true;
	da = dir_of(f->path, a, sizeof(a));
	db = dir_of(f->link_remap, b, sizeof(b));
	base = strrchr(f->link_remap, '/');
	/* only a link of amber's making, beside the file's name */
	return f->kind == FILE_KIND__FILE_REG && !f->ghost && da && db && !strcmp(da, db) &&
	       !strncmp(base + 1, REMAP_PREFIX, strlen(REMAP_PREFIX)) &&
	       !strstr(f->link_remap, "/../") && f->path[0] == '/';
}

int remap_open(RegFile *f, int flags)
{
	const char *by = f->link_remap;
	struct stat st;
	bool named = false;
	int fd;

	if (lstat(f->link_remap, &st) || !S_ISREG(st.st_mode)) {
		pr_err("%s: the --link-remap link %s that keeps it is gone or not a file: %m",
		       f->path, f->link_remap);
		return -ENOENT;
	}
	/* the old name, if free, for the time of the open: /proc then shows it */
	if (!link(f->link_remap, f->path)) {
		by = f->path;
		named = true;
	}
	fd = files_open_noatime(by, flags);
	if (named && unlink_if_same(f->path, st.st_dev, st.st_ino))
		pr_warn("%s: cannot remove the name linked for the restore: %m", f->path);
	if (fd < 0) {
		pr_err("cannot open %s by its --link-remap link %s: %s", f->path, f->link_remap,
		       strerror(-fd));
		return fd;
	}
	for (size_t i = 0; i < nr_remaps; i++)
		if (!strcmp(remaps[i].path, f->link_remap))
			return fd;
	if (remember(st.st_dev, st.st_ino, f->link_remap)) {
		close(fd);
		return -ENOMEM;
	}
	return fd;
}

void remap_restore_done(struct tree *t)
{
	for (size_t i = 0; i < nr_remaps; i++) {
		int ret = owner_enter(t);

		if (!ret) {
			ret = unlink_if_same(remaps[i].path, remaps[i].dev, remaps[i].ino);
			owner_leave(t);
		}
		if (ret)
			pr_warn("cannot remove the --link-remap link %s: %s", remaps[i].path,
				strerror(-ret));
	}
	forget_all();
}
