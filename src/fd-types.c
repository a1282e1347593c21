// SPDX-License-Identifier: MIT
/* The kinds of open files beyond those files.c knows itself (see files.h). */
#include "files.h"
#include "anonfd.h"

const struct fd_type *const fd_types[] = {
	&eventfd_type,
	&epoll_type,
	&signalfd_type,
	&timerfd_type,
	&inotify_type,
	NULL,
};
