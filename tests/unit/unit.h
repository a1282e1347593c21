/* SPDX-License-Identifier: MIT */
/* What the unit tests share: fault injection and a scratch directory. */
#ifndef AMBER_UNIT_H
#define AMBER_UNIT_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

#endif
