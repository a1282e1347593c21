// SPDX-License-Identifier: MIT
/*
 * Whose rights a restore uses (owner.h).  The owner is the user running
 * amber, or, when root runs it, the user owning the image: an image written
 * by an unprivileged user grants that user's rights and nothing more.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "owner.h"
#include "sys.h"

/* The owner's groups as a login would give them. */
static int user_groups(struct owner *o)
{
	struct passwd *pw = getpwuid(o->uid);
	int n = 64;

	if (!pw) {
		/* no entry: only the group the image's files carry */
		o->groups = NULL;
		o->n_groups = 0;
		pr_info("uid %u has no entry in the user database: it gets gid %u and no "
			"supplementary groups",
			o->uid, o->gid);
		return 0;
	}
	o->gid = pw->pw_gid;
	for (;;) {
		gid_t *g = realloc(o->groups, n * sizeof(*g));

		if (!g)
			return -ENOMEM;
		o->groups = g;
		if (getgrouplist(pw->pw_name, pw->pw_gid, g, &n) >= 0)
			break;
	}
	o->n_groups = n;
	return 0;
}

static int own_groups(gid_t **out, size_t *nr)
{
	int n = getgroups(0, NULL);

	if (n < 0)
		return -errno;
	*out = malloc((n + 1) * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	n = getgroups(n, *out);
	if (n < 0)
		return -errno;
	*nr = n;
	return 0;
}

int owner_init(struct tree *t)
{
	struct owner *o = &t->owner;
	int ret;

	*o = (struct owner){0};
	if (geteuid()) {
		/* not root: the kernel bounds what amber itself does */
		o->uid = geteuid();
		o->gid = getegid();
		return own_groups(&o->groups, &o->n_groups);
	}
	o->uid = t->image_uid;
	o->gid = t->image_gid;
	if (!o->uid) {
		o->unbounded = true;
		return 0;
	}
	o->switches = true;
	o->root_egid = getegid();
	ret = own_groups(&o->root_groups, &o->n_root_groups);
	if (ret)
		return ret;
	pr_info("the image belongs to uid %u: restoring with that user's rights", o->uid);
	return user_groups(o);
}

void owner_free(struct tree *t)
{
	free(t->owner.groups);
	free(t->owner.root_groups);
	t->owner.groups = t->owner.root_groups = NULL;
}

bool owner_in_group(const struct tree *t, gid_t g)
{
	const struct owner *o = &t->owner;

	if (o->unbounded || g == o->gid)
		return true;
	for (size_t i = 0; i < o->n_groups; i++)
		if (o->groups[i] == g)
			return true;
	return false;
}

int owner_enter(struct tree *t)
{
	struct owner *o = &t->owner;
	int ret;

	if (!o->switches || o->depth++)
		return 0;
	ret = sys_thread_setid(o->uid, o->gid, o->groups, o->n_groups);
	if (ret) {
		o->depth--;
		pr_err("cannot take the rights of uid %u (the image's owner): %s", o->uid,
		       strerror(-ret));
		/* a partial switch is undone before anything runs on it */
		sys_thread_setid(0, o->root_egid, o->root_groups, o->n_root_groups);
		return ret;
	}
	/*
	 * The uid change made the process non-dumpable, which makes /proc/self
	 * root's; dumpable again, its files are the owner's to write (its real
	 * and saved uid 0 still keep the owner from ptrace and signals).
	 */
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	return 0;
}

void owner_leave(struct tree *t)
{
	struct owner *o = &t->owner;
	int ret;

	if (!o->switches || --o->depth)
		return;
	ret = sys_thread_setid(0, o->root_egid, o->root_groups, o->n_root_groups);
	if (ret) {
		/* without root's rights amber could not go on correctly; nor kill */
		pr_err("cannot return from uid %u's rights to root's: %s", o->uid, strerror(-ret));
		abort();
	}
}
