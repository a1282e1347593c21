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
 * UTS, IPC, time and cgroup namespaces of the tree (ns.c).  kind is
 * NS_KIND__NS_UTS, NS_KIND__NS_IPC, NS_KIND__NS_TIME, NS_KIND__NS_CGROUP or NS_KIND__NS_USER; id 0
 * is amber's own namespace (at dump: the tree's processes that are in it), others are ns.img's
 * entries.
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
/* Once it made its children: into its user namespace; 0 or -errno, logged. */
int ns_restore_user(const struct tree *t, uint32_t pid);

/*
 * A tree that is its own pid namespace (pidns.c): its root is the init of a
 * pid namespace below amber's, holding the whole tree.  Dump: the root is
 * checked and marked (pidns_dump_root, before anything is frozen), each
 * task's host pid paired with its namespace ids as it is frozen
 * (pidns_dump_add), the namespace checked to hold nothing else
 * (pidns_dump_alone), and whatever the image stores translated
 * (dump_vpid: 0 for a task not of the tree; identity for other trees).
 */
int pidns_dump_root(struct tree *t);
int pidns_dump_add(struct tree *t, pid_t pid, pid_t tid);
int pidns_dump_alone(const struct tree *t);
/*
 * One level of nesting below the tree's namespace: a process's pid or
 * pid_for_children namespace other than the tree's (its link theirs) is
 * checked to be one (pidns_check_nested, as it is frozen); the whole tree's
 * nesting once collected (pidns_dump_nested: host pids, refusals); a
 * task's pid in its nested namespace (0: not in one).
 */
int pidns_check_nested(const struct tree *t, pid_t pid, const char *kind, const char *theirs);
int pidns_dump_nested(struct tree *t);
uint32_t pidns_nested_pid(const struct tree *t, pid_t host);
bool pidns_has_nested(const struct tree *t);
uint32_t dump_vpid(const struct tree *t, pid_t host);
/* host's ids (ppid: in, the host's parent) as the namespace sees them. */
int pidns_dump_ids(const struct tree *t, pid_t host, uint32_t *pid, uint32_t *ppid, uint32_t *pgid,
		   uint32_t *sid);
/* A pstree entry (host pids) as the image holds it. */
int pidns_dump_entry(const struct tree *t, PstreeEntry *e);
/*
 * Restore: pstree.img's pid namespace checked (pidns_restore_read); the
 * host pid of an image pid (a process or thread of the tree; identity for
 * other trees, 0 while it does not exist); after process idx made its
 * children, their host pids (pidns_find_children); a new thread's host tid.
 */
int pidns_restore_read(struct tree *t);
pid_t tree_hpid(const struct tree *t, uint32_t pid);
int pidns_find_children(struct tree *t, size_t idx);
pid_t pidns_host_tid(pid_t pid, uint32_t tid);
/*
 * Nested pid namespaces at restore: each process made by its parent (after
 * the sessions plan), the threads' nested tids checked (after the cores are
 * read); in a restored process, its children's namespace entered again.
 */
int pidns_restore_plan(const struct tree *t);
int pidns_restore_threads(const struct tree *t);
int pidns_enter_children(const PstreeEntry *e);
/* A restored task's process group in the tree's namespace (-1: unknown, logged). */
pid_t pidns_restore_pgid(pid_t host);
/* The pid of process l as process e, in a nested pid namespace, names it (0: unseen). */
uint32_t pidns_seen_pid(const struct tree *t, const PstreeEntry *e, const PstreeEntry *l);
/* A tid of ctx's process (the image's) as the process itself names it. */
uint32_t pidns_own_tid(const struct restore_ctx *ctx, uint32_t tid);

/*
 * Time namespaces (timens.c).  dump: e's offsets and the host's clocks, from
 * /proc/PID/timens_offsets of pid, one of its processes; restore: e checked
 * (0 or -EBADMSG, logged), and made, *fd on it at or above base.
 */
int timens_read(NsEntry *e, pid_t pid);
int timens_check(const NsEntry *e);
int timens_make(const NsEntry *e, int base, int *fd);

/* An fd on the tree's user namespace (dump, and restore once made), or -1. */
int ns_user_fd(void);
/* Does the tree (dump) or image (restore, once read) have a user namespace? */
bool ns_has_user(void);

/*
 * A namespace made by a child of amber, which a threaded amber could not
 * make itself: make(arg) runs in the child (0: made; it logs why not), then
 * the child waits; meanwhile amber runs ready(pid, arg) if given (userns:
 * the maps), opens /proc/PID/ns/NSFILE and keeps it at or above base in *fd,
 * and lets the child go.  what and id name the namespace in messages.
 */
int ns_make_by_child(const char *what, uint32_t id, const char *nsfile, int (*make)(void *arg),
		     int (*ready)(pid_t pid, void *arg), void *arg, int base, int *fd);

/*
 * The tree's user namespace (userns.c).  dump: e's maps and setgroups, from
 * pid; each process checked to be in a child of amber's; restore: e checked
 * (0 or -EBADMSG, logged) and made, *fd on it at or above base.
 * userns_inside: id of amber's namespace (gid: a group) as the namespace
 * sees it; 0, or -ERANGE when it is not mapped.
 */
int userns_read(NsEntry *e, pid_t pid);
int userns_member(NsEntry *e, pid_t pid);
int userns_check(const NsEntry *e);
int userns_make(const NsEntry *e, int base, int *fd);
int userns_inside(const NsEntry *e, bool gid, uint32_t id, uint32_t *inside);
/* restore: the user namespace pid comes in (NULL: amber's). */
const NsEntry *ns_user(const struct tree *t, uint32_t pid);

/*
 * Cgroup namespaces (cgroupns.c).  dump: e's roots, from pid, and each of
 * its processes checked at the root; restore: e checked, against amber's
 * own cgroups too (0, -EBADMSG or -EOPNOTSUPP, logged).
 */
int cgroupns_read(NsEntry *e, pid_t pid);
int cgroupns_member(NsEntry *e, pid_t pid);
int cgroupns_check(const NsEntry *e);

/*
 * Network namespaces of the tree (net.c): id 0 is amber's own, others are
 * netns.img's entries.
 */
bool netns_known(uint32_t id);
/* The first network namespace id above after, 0 if none. */
uint32_t netns_next(uint32_t after);
/* amber's calling thread into network namespace id (0: nothing) and back; logged. */
int netns_enter(uint32_t id);
void netns_leave(uint32_t id);
/* The tree's network namespace amber's thread is in now (0: its own). */
uint32_t netns_inside(void);
/*
 * Dump: into the network namespace of socket dup (pid's fd), recorded in
 * f->net_ns (*id, 0 for amber's), before the socket is dumped; refused when
 * it is no process's of the tree.  netns_sock_dumped: back, and refuses
 * what the restore would not make in it.
 */
int netns_sock_enter(struct dump_ctx *ctx, int fd, int dup, RegFile *f, uint32_t *id);
int netns_sock_dumped(struct dump_ctx *ctx, int fd, const RegFile *f, uint32_t id);
/* restore: netns.img read and checked (links, addresses, routes, sysctls, nft, owner). */
int netns_restore_read(struct tree *t);
/* restore --external veth[IFNAME]:HOSTSIDE[@BRIDGE]; 0 or -EINVAL, logged. */
int netns_external(const char *arg);
/* In a restored process just created: into its network namespace. */
int netns_restore_process(const struct tree *t, uint32_t pid);

/*
 * The tree's mount namespace (mnt.c) and the files of its tmpfs mounts
 * (tmpfs.c).  restore: mnt.img read and checked before anything exists.
 */
int mnt_external(const char *arg);
/* The same; optional: naming nothing of the tree or image is no error (the RPC's ext_mnt). */
int mnt_external_map(const char *arg, bool optional);
int mnt_restore_read(struct tree *t);
/*
 * In the restored root, in its namespaces, before anything: the procs of
 * its mount namespace when it is its own pid namespace's init (amber's
 * would show the host's pids), the sysfs when it has a network namespace
 * of its own (likewise), and every mount on them; 0 or -errno, logged.
 */
int mnt_restore_proc(struct tree *t);
/* In the tree's namespace: tmpfs-ID.img of mount e (its contents field set). */
int tmpfs_dump(struct tree *t, pid_t pid, MntEntry *e);
/* In the new namespace: the files of tmpfs m, made new, whose root root is. */
int tmpfs_restore(struct tree *t, const MntEntry *m, int root);

#endif
