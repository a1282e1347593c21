/* SPDX-License-Identifier: MIT */
/*
 * dump --freeze-cgroup PATH (freezer.c): the tree is frozen through its
 * cgroup's freezer (v2 cgroup.freeze, v1 freezer.state) while every thread
 * is seized, so that no process can fork or exit meanwhile.
 */
#ifndef AMBER_FREEZER_H
#define AMBER_FREEZER_H

#include <stdbool.h>
#include <sys/types.h>

struct freezer {
	const char *path; /* the cgroup directory, as given */
	bool v1;	  /* a v1 freezer cgroup (freezer.state), else v2 (cgroup.freeze) */
	bool was_frozen;  /* frozen by its user before the dump: frozen again after it */
	bool frozen;	  /* amber wrote "frozen" and has not thawed it since */
};

/* Which kind of cgroup PATH is and whether it is frozen already; nothing is written. */
int freezer_open(struct freezer *fz, const char *path);
/* Every live process of the tree of root is in the cgroup (or below), and the
 * cgroup holds no other process; else the first one that is not is named. */
int freezer_check_members(const struct freezer *fz, pid_t root);
/* Freeze the cgroup and wait until the kernel says it is; thawed again on failure. */
int freezer_freeze(struct freezer *fz);
/* Let the cgroup run (seized tasks stay in their ptrace stops). */
int freezer_thaw(struct freezer *fz);
/* Leave the cgroup as it was before the dump: frozen again if its user had
 * frozen it (written before the tasks are let go, so that they do not run a
 * moment), else thawed if amber's freeze is still on. */
int freezer_restore(struct freezer *fz);
/* Once the tasks are let go: wait until a cgroup its user had frozen is again. */
int freezer_wait_restored(struct freezer *fz);

#endif
