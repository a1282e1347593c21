/* SPDX-License-Identifier: MIT */
/* What the unit tests share: fault injection, a scratch directory, image files. */
#ifndef AMBER_UNIT_H
#define AMBER_UNIT_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "image.h"
#include "sys.h"

/* AMBER_FAULT=spec for the calls that follow (NULL: none). */
static inline void set_faults(const char *spec)
{
	sys_fault_reset();
	if (spec)
		setenv("AMBER_FAULT", spec, 1);
	else
		unsetenv("AMBER_FAULT");
	sys_fault_init();
}

/* A new directory /tmp/amber-unit-XXXXXX in dir (64 bytes); its fd, or -1. */
static inline int unit_mkdir(char dir[64])
{
	snprintf(dir, 64, "/tmp/amber-unit-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* rm -rf of a path and of what is beside it (extra, may be NULL). */
static inline int unit_remove(const char *path, const char *extra)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'%s%s%s", path, extra ? " '" : "", extra ? extra : "",
		 extra ? "'" : "");
	return system(cmd) ? -1 : 0;
}

/* An image file of kind holding the one record m, added to set. */
static inline int unit_put_one(struct img_set *set, enum img_kind kind, const char *name,
			       const ProtobufCMessage *m)
{
	struct img *img;
	int ret = img_create(set, kind, &img, "%s", name);

	if (ret)
		return ret;
	ret = img_put(img, m);
	if (ret) {
		img_abort(img);
		return ret;
	}
	return img_finish(img);
}

#endif
