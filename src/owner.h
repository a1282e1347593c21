/* SPDX-License-Identifier: MIT */
/*
 * The privilege bound of a restore: whatever the image asks, amber does it
 * with no more rights than the image's owner has (docs/design.md, "What an
 * image may grant").  When root restores an image owned by another user,
 * every path operation and every step a restored process takes with libc
 * on the image's word runs between owner_enter() and owner_leave(): the
 * calling thread's effective uid, gid and groups are the owner's, so the
 * kernel's own permission checks apply (its real and saved uid stay 0, so
 * the owner cannot signal or ptrace it meanwhile).
 */
#ifndef AMBER_OWNER_H
#define AMBER_OWNER_H

#include <stdbool.h>
#include <sys/types.h>

struct tree;

struct owner {
	uid_t uid;
	gid_t gid;     /* primary group (user database; else the image's group) */
	gid_t *groups; /* supplementary groups the owner has */
	size_t n_groups;
	bool unbounded;	 /* amber and the owner are both root: the image may grant all */
	bool switches;	 /* amber is root, the owner is not: owner_enter() switches */
	int depth;	 /* owner_enter() nesting */
	gid_t root_egid; /* amber's own, to switch back to */
	gid_t *root_groups;
	size_t n_root_groups;
};

/* From t->image_uid/image_gid (the verified owner of the image directory). */
int owner_init(struct tree *t);
void owner_free(struct tree *t);
/* May the owner run with gid g (its primary group or one of its groups)? */
bool owner_in_group(const struct tree *t, gid_t g);
/* Nestable; 0 or -errno (then nothing changed and nothing may be done). */
int owner_enter(struct tree *t);
void owner_leave(struct tree *t);

#endif
