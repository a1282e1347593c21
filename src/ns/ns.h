/* SPDX-License-Identifier: MIT */
/* Namespaces (src/ns/). */
#ifndef AMBER_NS_H
#define AMBER_NS_H

#include "amber.h"

/*
 * restore --new-pidns (pidns.c): run restore(o, &root) in a new pid and mount
 * namespace, as its init; returns what do_restore returns (0, -errno, or the
 * root's exit status | RESTORE_WAITED).
 */
int pidns_restore(struct opts *o, int (*restore)(struct opts *o, uint32_t *root));

/*
 * UTS and IPC namespaces of the tree (ns.c).  kind is NS_KIND__NS_UTS or
 * NS_KIND__NS_IPC; id 0 is amber's own namespace (at dump: the tree's
 * processes that are in it), others are ns.img's entries.
 */
const char *ns_kind_name(int kind);
/* The namespace of pid (a process of pstree.img) of a kind. */
uint32_t ns_of(const struct tree *t, uint32_t pid, int kind);
/* The first namespace id of a kind above after, 0 if none. */
uint32_t ns_next(int kind, uint32_t after);
/* Whether id is 0 or a namespace of that kind in the image (restore: once read). */
bool ns_known(int kind, uint32_t id);
/* amber's calling thread into namespace id (0: nothing) and back; 0 or -errno, logged. */
int ns_enter(int kind, uint32_t id);
void ns_leave(int kind, uint32_t id);
/* restore: ns.img read and checked against pstree.img and the owner, before anything exists. */
int ns_restore_read(struct tree *t);
/* In a restored process just created: into its namespaces; 0 or -errno, logged. */
int ns_restore_process(const struct tree *t, uint32_t pid);

/*
 * The tree's mount namespace (mnt.c) and the files of its tmpfs mounts
 * (tmpfs.c).  restore: mnt.img read and checked before anything exists.
 */
int mnt_restore_read(struct tree *t);
/* In the tree's namespace: tmpfs-ID.img of mount e (its contents field set). */
int tmpfs_dump(struct tree *t, pid_t pid, MntEntry *e);
/* In the new namespace: the files of tmpfs m, made new, whose root root is. */
int tmpfs_restore(struct tree *t, const MntEntry *m, int root);

#endif
