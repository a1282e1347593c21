// SPDX-License-Identifier: MIT
/* The kinds of open files beyond those files.c knows itself (see files.h). */
#include "files.h"
#include "net/sk.h"
#include "anonfd.h"
#include "ipc/ipc.h"
#include "tty.h"

const struct fd_type *const fd_types[] = {
	&eventfd_type, &epoll_type,	 &signalfd_type,  &timerfd_type,    &inotify_type,
	&unix_sk_type, &inet_sk_type,	 &packet_sk_type, &netlink_sk_type, &pidfd_type,
	&mqueue_type,  &pty_master_type, &pty_slave_type, &devtty_type,	    &proc_type,
	&nsfs_type,    &fanotify_type,	 &bpfmap_type,	  &uring_type,	    NULL,
};
