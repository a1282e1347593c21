// SPDX-License-Identifier: MIT
/* The kinds of open files beyond those files.c knows itself (see files.h). */
#include "files.h"

const struct fd_type *const fd_types[] = {
	NULL,
};
