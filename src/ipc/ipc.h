/* SPDX-License-Identifier: MIT */
/*
 * IPC objects (src/ipc/): System V shared memory, semaphore sets and message
 * queues (sysv.c), and POSIX message queues held as fds (mqueue.c).  Both
 * keep their objects in ipc.img, one IpcEntry each; sysv.c owns the file.
 */
#ifndef AMBER_IPC_H
#define AMBER_IPC_H

#include "amber.h"
#include "files.h"

#define MAX_IPC_ITEMS 65536 /* semaphores of a set, messages of a queue (LIM_IPC) */

/* dump: an entry for ipc.img, written with the others once every process is dumped. */
int ipc_add(IpcEntry *e);
/* dump: the queue of inode ino is in ipc.img already (another description of it). */
IpcMqueue *ipc_find_mqueue(uint64_t ino, uint32_t ns);

/* restore: ipc.img read and checked (once, whoever asks first); NULL entries if none. */
int ipc_load(struct tree *t, IpcEntry ***entries, size_t *n);

/* mqueue.c, dump, amber in IPC namespace ns of the tree (ns/ns.c): its queues are known as
 * its. */
int mqueue_probe_ns(uint32_t ns);
/* mqueue.c, restore: a queue of ipc.img is sound, the owner's, and its name is free (in
 * amber's namespace, ns 0: the others are new). */
int mqueue_check(struct tree *t, const IpcMqueue *q, uint32_t ns);
/* Once every description is open: unlink the queues that were, close amber's fds. */
int mqueue_restore_finish(struct tree *t);
/* The restore failed: unlink the queues it made. */
void mqueue_restore_undo(void);

extern const struct fd_type mqueue_type; /* mqueue.c */

#endif
