// SPDX-License-Identifier: MIT
/*
 * Sessions and process groups whose leader is gone.  A daemon's session
 * outlives the process that made it (fork, setsid, fork, exit): its id is a
 * pid nobody has.  Restore recreates such a session as CRIU does, with a
 * helper process of that pid, which calls setsid() (or setpgid() for a
 * group), creates the members that came from it, and exits.  Its members
 * then belong to the nearest child subreaper, as they did: the process that
 * created the helper, which is one for that moment (amber for the root).
 *
 * A session whose leader is a zombie (it made the session, forked, and
 * exited unreaped) is made the same way by the zombie itself: it calls
 * setsid(), creates the members that came from it, and dies with its
 * status without being reaped; its members go to its parent, the
 * subreaper they had.
 *
 * The plan, from pstree.img alone (dump checks it, restore follows it):
 * every process has a creator, its parent, a helper or its session's
 * zombie leader; a helper's creator is the parent of the members it makes,
 * or the session's helper.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "amber.h"
#include "log.h"
#include "proc.h"

#define PID_LIMIT (1U << 22) /* PID_MAX_LIMIT */

static struct tree_helper *find_helper(struct tree *t, uint32_t pid)
{
	for (size_t i = 0; i < t->nr_helpers; i++)
		if (t->helpers[i].pid == pid)
			return &t->helpers[i];
	return NULL;
}

bool sessions_is_helper(const struct tree *t, uint32_t pid)
{
	return find_helper((struct tree *)t, pid) != NULL;
}

/* The helper pid for entry e's dead session or group, made by creator. */
static int add_helper(struct tree *t, const PstreeEntry *e, bool session, uint32_t creator,
		      uint32_t *out)
{
	uint32_t pid = session ? e->sid : e->pgid;
	struct tree_helper *h = find_helper(t, pid), *nh;

	if (!pid || pid >= PID_LIMIT || tree_entry(t, pid)) {
		pr_err("pstree.img: pid %u's %s %u cannot be recreated (a pid of the tree, or "
		       "out of range); the image is corrupt",
		       e->pid, session ? "session" : "group", pid);
		return -EBADMSG;
	}
	if (h) {
		if (h->creator != creator || h->session != session || h->sid != e->sid) {
			pr_err("pid %u: its %s %u, whose leader is gone, has members with "
			       "different parents (%u and %u); amber can recreate it only when "
			       "they have one",
			       e->pid, session ? "session" : "process group", pid, h->creator,
			       creator);
			return -EOPNOTSUPP;
		}
		*out = pid;
		return 0;
	}
	nh = realloc(t->helpers, (t->nr_helpers + 1) * sizeof(*nh));
	if (!nh)
		return -ENOMEM;
	t->helpers = nh;
	t->helpers[t->nr_helpers++] = (struct tree_helper){pid, creator, session, e->sid};
	*out = pid;
	return 0;
}

/* The session (sid) the creator of a new member has: a helper's, or a process's. */
static bool creator_in_session(struct tree *t, uint32_t creator, uint32_t sid)
{
	struct tree_helper *h = find_helper(t, creator);
	PstreeEntry *p = tree_entry(t, creator);

	return h ? h->sid == sid : p && p->sid == sid;
}

/*
 * The zombie that leads e's session, if e's parent is not in that session:
 * it makes e.  It must be a sibling of e's (its parent is the subreaper its
 * members went to), and be made by that parent.
 */
static int zombie_leader(struct tree *t, size_t i, uint32_t *creator)
{
	PstreeEntry *e = t->pstree[i], *parent = tree_entry(t, e->ppid);
	PstreeEntry *sl = tree_entry(t, e->sid);

	if (!i || !sl || sl == e || !sl->zombie || (parent && parent->sid == e->sid))
		return 0;
	for (size_t k = 0; k < i; k++) {
		if (t->pstree[k] != sl)
			continue;
		if (sl->sid != sl->pid || sl->ppid != e->ppid || t->creator[k] != sl->ppid) {
			pr_err("pid %u: its session %u is led by a zombie that is not its "
			       "sibling; amber can recreate such a session only from a zombie "
			       "whose members went to its parent",
			       e->pid, e->sid);
			return -EOPNOTSUPP;
		}
		*creator = sl->pid;
		return 0;
	}
	pr_err("pstree.img: pid %u comes before the zombie %u that leads its session; the "
	       "image is corrupt",
	       e->pid, e->sid);
	return -EBADMSG;
}

bool sessions_zombie_leads(const struct tree *t, uint32_t pid)
{
	PstreeEntry *z = tree_entry(t, pid);

	for (size_t i = 0; z && z->zombie && i < t->nr_pstree; i++)
		if (t->creator[i] == pid)
			return true;
	return false;
}

int sessions_plan(struct tree *t)
{
	free(t->helpers);
	free(t->creator);
	t->helpers = NULL;
	t->nr_helpers = 0;
	t->creator = calloc(t->nr_pstree ? t->nr_pstree : 1, sizeof(*t->creator));
	if (!t->creator)
		return -ENOMEM;
	for (size_t i = 0; i < t->nr_pstree; i++) {
		PstreeEntry *e = t->pstree[i], *parent = i ? tree_entry(t, e->ppid) : NULL;
		uint32_t creator = i ? e->ppid : 0;
		int ret;

		if ((e->dead_sid_leader && e->sid == e->pid) ||
		    (e->dead_pgid_leader && (e->pgid == e->pid || e->pgid == e->sid))) {
			pr_err("pstree.img: pid %u leads the session or group it says is "
			       "leaderless; the image is corrupt",
			       e->pid);
			return -EBADMSG;
		}
		ret = zombie_leader(t, i, &creator);
		if (ret)
			return ret;
		/* the first member of a session or group made by its helper */
		if (e->dead_sid_leader && (!parent || parent->sid != e->sid)) {
			ret = add_helper(t, e, true, creator, &creator);
			if (ret)
				return ret;
		}
		if (e->dead_pgid_leader && (!parent || parent->pgid != e->pgid)) {
			if (i && !creator_in_session(t, creator, e->sid)) {
				pr_err("pid %u: its process group %u, whose leader is gone, lies "
				       "in "
				       "session %u, which its parent %u is not in; amber cannot "
				       "recreate that",
				       e->pid, e->pgid, e->sid, e->ppid);
				return -EOPNOTSUPP;
			}
			ret = add_helper(t, e, false, creator, &creator);
			if (ret)
				return ret;
		}
		if (creator != (i ? e->ppid : 0) &&
		    (e->clone_vm || e->clone_files || e->clone_fs || e->clone_sighand)) {
			pr_err("pid %u shares memory, files or fs with its parent and is in a "
			       "session or group whose leader is gone; amber cannot recreate both",
			       e->pid);
			return -EOPNOTSUPP;
		}
		t->creator[i] = creator;
	}
	return 0;
}

/* Whether pid leads session (sid) or process group (!sid) id on this machine. */
static bool leads(uint32_t pid, bool session)
{
	struct proc_stat st;

	if (proc_parse_stat((pid_t)pid, &st))
		return false;
	return session ? (uint32_t)st.session == pid : (uint32_t)st.pgrp == pid;
}

/*
 * A session or group must be recreatable from inside the tree: a process
 * leads it, or has its parent's, or joins a group of its session that some
 * process of the tree leads; or its leader is gone, and a helper makes it.
 * The root may also be in a session and group of a live process outside
 * (a shell's): it is restored into amber's.
 */
int sessions_dump(struct tree *t)
{
	for (size_t i = 0; i < t->nr_pstree; i++) {
		PstreeEntry *e = t->pstree[i], *parent = i ? tree_entry(t, e->ppid) : NULL;
		PstreeEntry *sl = tree_entry(t, e->sid), *gl = tree_entry(t, e->pgid);
		bool sid_ok, pgid_ok;

		if (e->sid != e->pid && !sl && !leads(e->sid, true))
			e->dead_sid_leader = e->has_dead_sid_leader = 1;
		if (e->pgid != e->pid && e->pgid != e->sid && !gl && !leads(e->pgid, false))
			e->dead_pgid_leader = e->has_dead_pgid_leader = 1;
		/* a zombie leader makes its session's first members, a sibling's */
		sid_ok = e->sid == e->pid || e->dead_sid_leader || !i ||
			 (parent && parent->sid == e->sid) ||
			 (sl && sl->zombie && sl->sid == sl->pid && sl->ppid == e->ppid);
		/* the session's helper leads its group too, for the members it makes;
		 * a zombie's group lasts until it is reaped, so others can join it */
		pgid_ok = e->pgid == e->pid || e->dead_pgid_leader || !i ||
			  (parent && parent->pgid == e->pgid) ||
			  (gl && gl->sid == e->sid && gl->pgid == gl->pid) ||
			  (e->pgid == e->sid && e->dead_sid_leader && parent->sid != e->sid);
		if (!sid_ok || !pgid_ok) {
			bool zombie = !sid_ok && sl && sl->zombie;

			pr_err("pid %u (session %u, group %u) cannot be recreated from inside the "
			       "tree of pid %d (its %s leader is %s); dump from an ancestor that "
			       "holds them",
			       e->pid, e->sid, e->pgid, t->o->pid, sid_ok ? "group" : "session",
			       zombie ? "a zombie whose parent is not the member's" : "outside it");
			return -EOPNOTSUPP;
		}
	}
	return sessions_plan(t);
}
