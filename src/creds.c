// SPDX-License-Identifier: MIT
/*
 * Credentials: uids, gids, groups, capabilities (all five sets) and
 * securebits, restored last of the kernel state since afterwards the task
 * may lack the privilege for the rest; then what a credential change
 * resets (dumpable, parent-death signal) and no_new_privs.
 *
 * The image holds ids as amber saw them (/proc/PID/status translates them
 * to the reader's user namespace) and capability sets relative to the
 * process's user namespace.  A process of a user namespace (ns/userns.c)
 * has its ids set from inside it, so they are translated to its view
 * (restore_ids), and under setgroups "deny" it keeps the groups it
 * inherited from amber, which must be the image's.
 */
#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amber.h"
#include "infect.h"
#include "log.h"
#include "ns/ns.h"
#include "proc.h"
#include "sys.h"

/* Credentials are per thread (a raw setuid() changes only the caller's). */
static int creds_dump_thread(struct dump_ctx *ctx, struct thread *t)
{
	struct proc_status ps, *st = &ps;
	/* a thread's status as read when it stopped; the leader's is the process's */
	int ret = t->tid == ctx->pid ? dump_status(ctx, &ps)
				     : proc_parse_status_of(t->inf ? infect_status(t->inf) : NULL,
							    t->tid, &ps);
	Creds *cr;

	if (ret)
		return ret;
	cr = malloc(sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	creds__init(cr);
	cr->uid = st->uid[0], cr->euid = st->uid[1], cr->suid = st->uid[2];
	cr->fsuid = st->uid[3];
	cr->gid = st->gid[0], cr->egid = st->gid[1], cr->sgid = st->gid[2];
	cr->fsgid = st->gid[3];
	cr->n_groups = st->nr_groups;
	cr->groups = malloc(sizeof(uint32_t) * (st->nr_groups + 1));
	if (!cr->groups) {
		free(cr);
		return -ENOMEM;
	}
	memcpy(cr->groups, st->groups, sizeof(uint32_t) * st->nr_groups);
	cr->cap_inh = st->cap_inh, cr->cap_prm = st->cap_prm, cr->cap_eff = st->cap_eff;
	cr->cap_bnd = st->cap_bnd, cr->cap_amb = st->cap_amb;
	t->core->creds = cr;
	t->core->no_new_privs = st->no_new_privs;
	ret = thread_probe(t);
	if (ret)
		return ret;
	cr->securebits = t->probe.ret[PROBE_SECUREBITS] > 0
				 ? (uint32_t)t->probe.ret[PROBE_SECUREBITS]
				 : 0;
	/* the death signal is reset by credential changes, so restored with them */
	if (!t->probe.ret[PROBE_PDEATHSIG])
		memcpy(&t->core->pdeath_sig, t->probe.mem + PROBE_PDEATHSIG_AT, sizeof(uint32_t));
	return 0;
}

/* Securebits that only take rights away: a user may inherit them from a
 * privileged parent (NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, locks). */
#define SECBITS_RESTRICTING 0xef /* all of 0x00-0xff but KEEP_CAPS (0x10) */
#define SECBITS_KNOWN	    0xff

static uint64_t amber_bounding(uint64_t *known);

static bool cap_bounded(uint64_t caps)
{
	uint64_t known;

	return !(caps & ~amber_bounding(&known));
}

/*
 * An image grants no more than whoever could have made it (owner.c): with a
 * root owner anything the kernel takes; else the owner's uid, its groups, no
 * capabilities and only securebits that restrict.  Each refusal names the
 * field and the limit.
 */
static int check_privileges(struct restore_ctx *ctx, pid_t tid, Creds *cr)
{
	const struct owner *o = &ctx->tree->owner;
	uint32_t uids[] = {cr->uid, cr->euid, cr->suid, cr->fsuid};
	uint32_t gids[] = {cr->gid, cr->egid, cr->sgid, cr->fsgid};
	const struct {
		const char *name;
		uint64_t caps;
	} caps[] = {{"permitted", cr->cap_prm},
		    {"effective", cr->cap_eff},
		    {"inheritable", cr->cap_inh},
		    {"ambient", cr->cap_amb}};

	if (cr->n_groups > NGROUPS_MAX) {
		pr_err("tid %d: the image lists %zu supplementary groups, more than the kernel's "
		       "limit of %d; refusing",
		       tid, cr->n_groups, NGROUPS_MAX);
		return -EINVAL;
	}
	if (cr->securebits & ~SECBITS_KNOWN) {
		pr_err("tid %d: securebits %#x has bits this kernel does not define (known: %#x); "
		       "refusing",
		       tid, cr->securebits, SECBITS_KNOWN);
		return -EINVAL;
	}
	/* the bounding set can only shrink: what amber lacks, nobody can give; a
	 * new user namespace starts with every capability in it (relative to it) */
	if (!ns_user(ctx->tree, (uint32_t)ctx->pid) &&
	    (!cap_bounded(cr->cap_bnd) || !cap_bounded(cr->cap_prm | cr->cap_inh))) {
		pr_err("tid %d: the capability bounding set %#llx (or the permitted/inheritable "
		       "sets) hold capabilities outside amber's own bounding set; refusing "
		       "(restore where amber's bounding set is as large)",
		       tid, (unsigned long long)cr->cap_bnd);
		return -EPERM;
	}
	if (o->unbounded)
		return 0;
	for (size_t i = 0; i < 4; i++)
		if (uids[i] != o->uid) {
			pr_err("tid %d: the image's process ran as uid %u, but the image may grant "
			       "only uid %u (%s); refusing (restore an image of root's as root)",
			       tid, uids[i], o->uid,
			       geteuid() ? "the user restoring it" : "the owner of the image");
			return -EPERM;
		}
	for (size_t i = 0; i < 4; i++)
		if (!owner_in_group(ctx->tree, gids[i])) {
			pr_err("tid %d: the image's process ran with gid %u, which uid %u may not "
			       "have (its groups: the user database's); refusing",
			       tid, gids[i], o->uid);
			return -EPERM;
		}
	for (size_t i = 0; i < cr->n_groups; i++)
		if (!owner_in_group(ctx->tree, cr->groups[i])) {
			pr_err("tid %d: supplementary group %u is not one of uid %u's groups "
			       "(the user database's); refusing",
			       tid, cr->groups[i], o->uid);
			return -EPERM;
		}
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		if (caps[i].caps) {
			pr_err("tid %d: the %s capability set is %#llx, but uid %u's image may "
			       "grant no capabilities; refusing",
			       tid, caps[i].name, (unsigned long long)caps[i].caps, o->uid);
			return -EPERM;
		}
	if (cr->securebits & ~SECBITS_RESTRICTING) {
		pr_err("tid %d: securebits %#x include KEEP_CAPS (%#x), which uid %u could not set "
		       "(only restricting bits, %#x, may come from its image); refusing",
		       tid, cr->securebits, 0x10, o->uid, SECBITS_RESTRICTING);
		return -EPERM;
	}
	return 0;
}

/* The ids of a thread as its user namespace sees them (setresuid inside takes those). */
struct ids {
	uint32_t uid[4], gid[4];
};

static int restore_ids(struct restore_ctx *ctx, pid_t tid, const Creds *cr, struct ids *in)
{
	const NsEntry *user = ns_user(ctx->tree, (uint32_t)ctx->pid);
	uint32_t uids[] = {cr->uid, cr->euid, cr->suid, cr->fsuid};
	uint32_t gids[] = {cr->gid, cr->egid, cr->sgid, cr->fsgid};

	for (size_t i = 0; i < 4; i++) {
		in->uid[i] = uids[i], in->gid[i] = gids[i];
		if (!user)
			continue;
		if (userns_inside(user, false, uids[i], &in->uid[i]) ||
		    userns_inside(user, true, gids[i], &in->gid[i])) {
			pr_err("tid %d: uid %u or gid %u is not mapped in its user namespace %u; "
			       "refusing",
			       tid, uids[i], gids[i], user->id);
			return -EPERM;
		}
	}
	return 0;
}

/* setgroups "deny": the groups amber's fork gave it stay; they must be the image's. */
static int check_kept_groups(pid_t tid, const Creds *cr)
{
	gid_t own[NGROUPS_MAX];
	int n = getgroups(NGROUPS_MAX, own);
	bool same = n >= 0 && (size_t)n == cr->n_groups;

	for (int i = 0; same && i < n; i++)
		same = own[i] == cr->groups[i];
	if (same)
		return 0;
	pr_err("tid %d: its user namespace denies setgroups, so it keeps amber's %d "
	       "supplementary groups, which are not the image's %zu; refusing (restore with "
	       "amber in the groups the process had)",
	       tid, n, cr->n_groups);
	return -EPERM;
}

static int creds_restore_read(struct restore_ctx *ctx)
{
	const NsEntry *user = ns_user(ctx->tree, (uint32_t)ctx->pid);

	for (size_t i = 0; i < ctx->nr_threads; i++) {
		Creds *cr = ctx->threads[i].core->creds;
		struct ids in;
		int ret;

		if (!cr) {
			pr_err("core-%d.img: missing credentials; the image is corrupt",
			       ctx->threads[i].tid);
			return -EBADMSG;
		}
		ret = check_privileges(ctx, ctx->threads[i].tid, cr);
		if (!ret)
			ret = restore_ids(ctx, ctx->threads[i].tid, cr, &in);
		if (!ret && user && user->setgroups_deny)
			ret = check_kept_groups(ctx->threads[i].tid, cr);
		if (ret)
			return ret;
	}
	return 0;
}

struct cap_header {
	uint32_t version;
	int pid;
};

struct cap_data {
	uint32_t effective, permitted, inheritable;
};

/* The syscalls that restore one thread's credentials, run as one batch. */
#define CRED_SC_MAX (64 + 64 + 16) /* bounding set drops, ambient raises, the rest */

struct cred_plan {
	struct infect_sc sc[CRED_SC_MAX];
	const char *what[CRED_SC_MAX];
	size_t n;
};

static void add(struct cred_plan *p, const char *what, long nr, long a1, long a2, long a3)
{
	p->sc[p->n] = (struct infect_sc){nr, {a1, a2, a3, 0, 0, 0}, 0};
	p->what[p->n++] = what;
}

/*
 * The capabilities this kernel knows (*known) and those of them in amber's
 * bounding set, asked once: neither changes, and a tree asked 64 times a
 * thread.
 */
static uint64_t amber_bounding(uint64_t *known)
{
	static uint64_t bnd, kn;
	static bool asked;

	for (int cap = 0; !asked && cap < 64; cap++) {
		int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

		kn |= r >= 0 ? 1ULL << cap : 0;
		bnd |= r == 1 ? 1ULL << cap : 0;
	}
	asked = true;
	*known = kn;
	return bnd;
}

/*
 * Credentials last: after them the task may lack the privilege for the rest.
 * KEEP_CAPS holds the capabilities over the uid change, then capset trims
 * them to the saved sets.  Some prctl values are reset by credential changes,
 * so they come after.  One batch: ~20 syscalls per thread in one stop.  Its
 * data (capset's header and sets, the thread's name, its groups) goes at
 * the scratch area's start + at, the groups at + groups_at.
 */
static int cred_plan(struct restore_ctx *ctx, struct thread *t, struct cred_plan *p,
		     unsigned long at, unsigned long groups_at)
{
	Creds *cr = t->core->creds;
	TaskCore *c = t->core;
	struct cap_header hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct cap_data data[2] = {
		{(uint32_t)cr->cap_eff, (uint32_t)cr->cap_prm, (uint32_t)cr->cap_inh},
		{(uint32_t)(cr->cap_eff >> 32), (uint32_t)(cr->cap_prm >> 32),
		 (uint32_t)(cr->cap_inh >> 32)},
	};
	const NsEntry *user = ns_user(ctx->tree, (uint32_t)ctx->pid);
	unsigned long s = t->inf->scratch + at;
	uint64_t known, bnd = amber_bounding(&known);
	struct ids in;
	int ret, named;
	size_t size;
	char *buf;

	ret = restore_ids(ctx, t->tid, cr, &in);
	if (ret)
		return ret;
	p->n = 0;
	for (int cap = 0; cap < 64; cap++) {
		if (cr->cap_bnd & (1ULL << cap))
			continue;
		/* unknown to this kernel, or already dropped (in amber's, whose the
		 * process has; a user namespace's is full) */
		if (!(known & (1ULL << cap)) || (!user && !(bnd & (1ULL << cap))))
			continue;
		add(p, "the capability bounding set", SYS_prctl, PR_CAPBSET_DROP, cap, 0);
	}
	add(p, "securebits", SYS_prctl, PR_SET_SECUREBITS, cr->securebits | 0x10 /* KEEP_CAPS */,
	    0);
	/* denied, the groups are amber's, checked to be the image's (creds_restore_read) */
	if (!user || !user->setgroups_deny)
		add(p, "supplementary groups", SYS_setgroups, cr->n_groups, s + groups_at, 0);
	add(p, "gids", SYS_setresgid, in.gid[0], in.gid[1], in.gid[2]);
	add(p, "fsgid", SYS_setfsgid, in.gid[3], 0, 0);
	add(p, "uids", SYS_setresuid, in.uid[0], in.uid[1], in.uid[2]);
	add(p, "fsuid", SYS_setfsuid, in.uid[3], 0, 0);
	add(p, "capabilities", SYS_capset, s, s + 64, 0);
	/* KEEP_CAPS off again needs no capability (securebits would: CAP_SETPCAP) */
	if (!(cr->securebits & 0x10))
		add(p, "keep-caps", SYS_prctl, PR_SET_KEEPCAPS, 0, 0);
	for (int cap = 0; cap < 64; cap++)
		if (cr->cap_amb & (1ULL << cap))
			add(p, "ambient capabilities", SYS_prctl, PR_CAP_AMBIENT,
			    PR_CAP_AMBIENT_RAISE, cap);
	add(p, "the parent-death signal", SYS_prctl, PR_SET_PDEATHSIG, c->pdeath_sig, 0);
	if (ctx->core->dumpable <= 1)
		add(p, "dumpable", SYS_prctl, PR_SET_DUMPABLE, ctx->core->dumpable, 0);
	if (c->no_new_privs)
		add(p, "no_new_privs", SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0);
	/* not credentials: its name, in this batch (threads.c); NULL: a warning only */
	named = thread_name_sc(ctx, t, s + 128, &p->sc[p->n]);
	if (named > 0)
		p->what[p->n++] = NULL;

	for (size_t i = 0; !ret && user && !user->setgroups_deny && i < cr->n_groups; i++)
		if (userns_inside(user, true, cr->groups[i], &cr->groups[i])) {
			pr_err("tid %d: supplementary group %u is not mapped in its user "
			       "namespace %u; refusing",
			       t->tid, cr->groups[i], user->id);
			ret = -EPERM;
		}
	if (ret)
		return ret;
	/* the header, the sets, the name and the groups: one write into the process */
	size = groups_at + cr->n_groups * sizeof(uint32_t);
	buf = calloc(1, size);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + 64, data, sizeof(data));
	if (named > 0)
		memcpy(buf + 128, t->core->comm, strlen(t->core->comm) + 1);
	if (cr->n_groups)
		memcpy(buf + groups_at, cr->groups, cr->n_groups * sizeof(uint32_t));
	ret = infect_write(t->inf, s, buf, size);
	free(buf);
	return ret;
}

/* The batch's results, in order: the first failure explains the rest (all ran). */
static int cred_results(struct thread *t, const struct cred_plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->sc[i].ret >= 0)
			continue;
		if (!p->what[i]) {
			pr_warn("thread %d: cannot set its name: %s", t->tid,
				strerror((int)-p->sc[i].ret));
			continue;
		}
		pr_err("tid %d: cannot restore %s: %s", t->tid, p->what[i],
		       strerror((int)-p->sc[i].ret));
		return -EPERM;
	}
	return 0;
}

/*
 * Each thread's batch in a window of them (threads_batches()): its data in
 * a slot of its own, from the scratch area's start; alone, from the start,
 * its groups from 4 KB on.  One with more groups than a slot holds goes
 * alone.
 */
#define CRED_SLOT      4096 /* bytes of data per thread */
#define CRED_GROUPS_AT 256

static int cred_batch(void *arg, void *c, struct thread *t, size_t slot, bool alone,
		      struct infect_sc **sc, size_t *n)
{
	struct restore_ctx *ctx = c;
	struct cred_plan *p = (struct cred_plan *)arg + slot;
	int ret = alone ? cred_plan(ctx, t, p, 0, 4096)
			: cred_plan(ctx, t, p, slot * CRED_SLOT, CRED_GROUPS_AT);

	*sc = p->sc;
	*n = p->n;
	return ret;
}

static int cred_done(void *arg, struct thread *t, size_t slot)
{
	return cred_results(t, (struct cred_plan *)arg + slot);
}

static bool cred_alone(void *arg, const struct thread *t)
{
	return t->core->creds->n_groups > (CRED_SLOT - CRED_GROUPS_AT) / sizeof(uint32_t);
}

static int creds_restore_inject(struct restore_ctx *ctx)
{
	struct cred_plan *p = calloc(THREAD_WINDOW, sizeof(*p));
	struct thread_batch b = {"credentials", CRED_SC_MAX + 1, p,
				 cred_batch,	cred_done,	 cred_alone};
	int ret = p ? threads_batches(ctx, &b) : -ENOMEM;

	free(p);
	return ret;
}

const struct resource_ops creds_ops = {
	.name = "credentials",
	.restore_read = creds_restore_read,
	.dump_thread = creds_dump_thread,
	.restore_inject = creds_restore_inject,
};
