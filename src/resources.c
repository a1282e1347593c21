// SPDX-License-Identifier: MIT
/*
 * The resource table.  Within each phase the order matters:
 *  - restore_child: session first, then fds (files), then the files
 *    behind mappings (mem), then cwd/root (paths above are amber's), limits
 *    last (a low RLIMIT_NOFILE would stop amber placing fds);
 *  - restore_inject: the address space first (everything else points into
 *    it), AIO rings in it (aio), io_uring rings mapped in it (uring), then
 *    the threads (cloned by the leader),
 *    credentials late (creds), file locks and O_ASYNC owners after the mappings and credentials
 *    (locks), scheduling after the credentials too (the kernel checks it
 *    against the thread's own uid and rlimits), per-thread pointers last
 *    (registers); System V objects (ipc) after the mappings (a segment
 *    removed while attached is removed again once the last process
 *    attached it) and before the credentials (the root process, still
 *    root, sets semaphores and sends messages); seccomp filters
 *    just before the credentials (the thread, still root, may install a
 *    filter without no_new_privs; amber's syscalls after it pass, the
 *    filters being suspended while it is traced);
 *  - dump_tree, restore_tree: namespaces (ns) first: ipc takes and makes the
 *    objects of each IPC namespace inside it, and every process enters its
 *    namespaces before anything else (restore.c); the mount namespace (mnt)
 *    next: amber's main thread is in the tree's from there on, so that every
 *    path the others read or open is the tree's, until mnt_exit (last)
 *    takes it out (dump_tree_late, dump_undo, restore_done, restore_undo);
 *    network namespaces (netns) before files: sockets are made inside them;
 *    cgroups before mnt: their hierarchies are found, and kept as fds, while
 *    amber still sees its own mounts;
 *  - restore_tree: tty after files (it sets the terminals files opened),
 *    ipc after files (message queues are made by files'
 *    fd type, ipc then unlinks the deleted ones).  restore_thread hooks run right
 *    after their resource's restore_inject, for every thread.
 */
#include "amber.h"

const struct resource_ops *const resources[] = {
	&ns_ops,	  &cgroup_ops,	   &mnt_ops,	 &netns_ops,	&task_ops,
	&files_ops,	  &tty_ops,	   &mem_ops,	 &aio_ops,	&uring_ops,
	&packet_ring_ops, &threads_ops,	   &fs_ops,	 &rlimits_ops,	&signals_ops,
	&timers_ops,	  &ipc_ops,	   &seccomp_ops, &creds_ops,	&locks_ops,
	&sched_ops,	  &membarrier_ops, &regs_ops,	 &mnt_exit_ops, NULL,
};
