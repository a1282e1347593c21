// SPDX-License-Identifier: MIT
/* The task's fs_struct: current directory, root and umask. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns/ns.h"
#include "sys.h"

static int fs_dump(struct dump_ctx *ctx)
{
	char path[64], cwd[PATH_MAX], root[PATH_MAX];
	FsEntry fs = FS_ENTRY__INIT;
	struct img *img;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/cwd", ctx->pid);
	ret = sys_readlink(path, cwd, sizeof(cwd));
	if (ret < 0)
		goto fail;
	snprintf(path, sizeof(path), "/proc/%d/root", ctx->pid);
	ret = sys_readlink(path, root, sizeof(root));
	if (ret < 0)
		goto fail;
	if (strstr(cwd, " (deleted)")) {
		pr_err("pid %d: its current directory %s was removed; amber cannot restore it",
		       ctx->pid, cwd);
		return -ENOENT;
	}
	fs.cwd = cwd;
	fs.root = root;
	ret = img_create(ctx->imgs, IMG_FS, &img, "fs-%u.img", dump_vpid(ctx->tree, ctx->pid));
	if (ret)
		return ret;
	ret = img_put(img, &fs.base);
	if (ret) {
		img_abort(img);
		return ret;
	}
	return img_finish(img);
fail:
	pr_err("cannot read %s: %s", path, strerror(-ret));
	return ret;
}

static int fs_restore_read(struct restore_ctx *ctx)
{
	return img_read_one(ctx->img, IMG_FS, &fs_entry__descriptor, (ProtobufCMessage **)&ctx->fs,
			    "fs-%d.img", ctx->pid);
}

/*
 * After files: those paths are opened relative to amber's root.  The saved
 * cwd is a path as amber sees it, so it is entered before the chroot.
 */
static int fs_restore_child(struct restore_ctx *ctx)
{
	if (chdir(ctx->fs->cwd)) {
		pr_err("pid %d: cannot enter its working directory %s: %m (was it removed?)",
		       ctx->pid, ctx->fs->cwd);
		return -errno;
	}
	if (strcmp(ctx->fs->root, "/") && chroot(ctx->fs->root)) {
		pr_err("pid %d: cannot chroot to %s: %m", ctx->pid, ctx->fs->root);
		return -errno;
	}
	umask(ctx->core->umask);
	return 0;
}

const struct resource_ops fs_ops = {
	.name = "fs",
	.dump = fs_dump,
	.restore_read = fs_restore_read,
	.restore_child = fs_restore_child,
};
