// SPDX-License-Identifier: MIT
/*
 * The task's identity: pid/pgid/sid, comm, personality, nice,
 * oom_score_adj, timer slack, subreaper, THP; what creds.c restores after
 * the credentials (dumpable, pdeath signal, no_new_privs) is read here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amber.h"
#include "ns/ns.h"
#include "log.h"
#include "proc.h"
#include "sys.h"

/* pid 0: the caller's own, /proc/self (its pid differs in the /proc of another pid namespace) */
static int read_proc_ulong(pid_t pid, const char *name, unsigned long *v, int base)
{
	char path[64], *buf;
	int ret;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	else
		snprintf(path, sizeof(path), "/proc/self/%s", name);
	ret = sys_read_file(path, &buf, NULL);
	if (ret)
		return ret;
	*v = strtoul(buf, NULL, base);
	free(buf);
	return 0;
}

static int task_dump(struct dump_ctx *ctx)
{
	struct proc_status st;
	struct proc_stat ps;
	TaskCore *c = ctx->core;
	unsigned long v;
	int32_t i32;
	long r;
	int ret;

	ret = dump_stat(ctx, &ps);
	if (!ret)
		ret = dump_status(ctx, &st);
	if (ret)
		return ret;
	c->pid = ctx->pid;
	c->ppid = ps.ppid;
	c->pgid = ps.pgrp;
	c->sid = ps.session;
	c->comm = strdup(ps.comm);
	c->nice = (int32_t)ps.nice;
	c->umask = st.umask;
	if (!read_proc_ulong(ctx->pid, "coredump_filter", &v, 16)) {
		c->has_coredump_filter = 1;
		c->coredump_filter = (uint32_t)v;
	}
	/* audit identity: absent without CONFIG_AUDIT */
	if (!read_proc_ulong(ctx->pid, "loginuid", &v, 10)) {
		c->has_loginuid = 1;
		c->loginuid = (uint32_t)v;
	}
	if (!read_proc_ulong(ctx->pid, "sessionid", &v, 10)) {
		c->has_audit_sessionid = 1;
		c->audit_sessionid = (uint32_t)v;
	}
	{
		char path[64], *buf;

		snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", ctx->pid);
		if (!sys_read_file(path, &buf, NULL)) {
			c->oom_score_adj = atoi(buf);
			free(buf);
		}
	}
	/* What only the task can tell: asked (proc_probe). */
	ret = proc_probe(ctx);
	if (ret)
		return ret;
	/* the leader's, as /proc/PID/personality and timerslack_ns show them */
	r = ctx->probe.ret[PP_PERSONALITY];
	if (r >= 0)
		c->personality = (uint32_t)r;
	else if (!read_proc_ulong(ctx->pid, "personality", &v, 16))
		c->personality = (uint32_t)v;
	r = ctx->probe.ret[PP_TIMERSLACK];
	if (r >= 0)
		c->timer_slack_ns = (uint64_t)r;
	else if (!read_proc_ulong(ctx->pid, "timerslack_ns", &v, 10))
		c->timer_slack_ns = v;
	r = ctx->probe.ret[PP_DUMPABLE];
	c->dumpable = r >= 0 ? (uint32_t)r : 1;
	c->thp_disable = ctx->probe.ret[PP_THP_DISABLE] > 0 ? 1 : 0;
	memcpy(&i32, ctx->probe.mem + PP_SUBREAPER_AT, sizeof(i32));
	c->child_subreaper = !ctx->probe.ret[PP_SUBREAPER] && i32 != 0;
	return 0;
}

static int task_restore_read(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;

	if (!c->comm) {
		pr_err("core-%d.img: no task name; the image is corrupt", ctx->pid);
		return -EBADMSG;
	}
	return 0;
}

static int write_proc_self(const char *name, const char *val)
{
	char path[64];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/self/%s", name);
	fd = sys_open_raw(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * The loginuid only the task itself may write, with CAP_AUDIT_CONTROL once
 * set.  The write starts a new audit session, whose id the kernel picks.
 */
static int restore_loginuid(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;
	unsigned long now;
	char buf[16];
	int ret;

	if (!c->has_loginuid)
		return 0;
	ret = read_proc_ulong(0, "loginuid", &now, 10);
	if (ret) {
		pr_err("pid %d: had loginuid %u, but this kernel has none (CONFIG_AUDIT): %s",
		       ctx->pid, c->loginuid, strerror(-ret));
		return ret;
	}
	/* An unset loginuid may be set by anyone: only root's images may choose it. */
	if (now != c->loginuid && !ctx->tree->owner.unbounded) {
		pr_err("pid %d: cannot set loginuid %u (restore's is %lu): only root's images may "
		       "(CAP_AUDIT_CONTROL); restore from a login of uid %u",
		       ctx->pid, c->loginuid, now, c->loginuid);
		return -EPERM;
	}
	snprintf(buf, sizeof(buf), "%u", c->loginuid);
	ret = now == c->loginuid ? 0 : write_proc_self("loginuid", buf);
	if (ret) {
		pr_err("pid %d: cannot set loginuid %u (restore's is %lu): %s%s", ctx->pid,
		       c->loginuid, now, strerror(-ret),
		       ret == -EPERM
			       ? " (needs CAP_AUDIT_CONTROL, which the image's owner has not,"
				 " or the loginuid is immutable: run the restore from the same "
				 "login)"
			       : "");
		return ret;
	}
	if (c->has_audit_sessionid && !read_proc_ulong(getpid(), "sessionid", &now, 10) &&
	    now != c->audit_sessionid)
		pr_warn("pid %d: audit session id %u is now %lu (restore's, or a new one with the "
			"loginuid: it cannot be chosen)",
			ctx->pid, c->audit_sessionid, now);
	return 0;
}

/* In the child, before its memory is replaced. */
static int task_restore_child(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;
	char buf[32];
	int ret;

	/* session and own group were made in restore.c, before the children */
	if (c->sid != c->pid && (c->pgid == c->pid || sessions_is_helper(ctx->tree, c->pgid)) &&
	    (uint32_t)ctx->pid == ctx->tree->pstree[0]->pid) {
		/* A shell job leading its group was the terminal's foreground job. */
		for (int fd = 0; ctx->o->shell_job && fd < 3; fd++)
			if (isatty(fd) && !tcsetpgrp(fd, getpid()))
				break;
	}
	ret = restore_loginuid(ctx);
	if (ret)
		return ret;
	if (personality(c->personality) < 0) {
		pr_err("pid %d: cannot set personality 0x%x: %m", ctx->pid, c->personality);
		return -errno;
	}
	if (setpriority(PRIO_PROCESS, 0, c->nice)) {
		pr_err("pid %d: cannot set nice %d: %m", ctx->pid, c->nice);
		return -errno;
	}
	snprintf(buf, sizeof(buf), "%d", c->oom_score_adj);
	ret = write_proc_self("oom_score_adj", buf);
	if (ret)
		pr_warn("pid %d: cannot set oom_score_adj %d: %s", ctx->pid, c->oom_score_adj,
			strerror(-ret));
	if (c->has_coredump_filter) {
		snprintf(buf, sizeof(buf), "0x%x", c->coredump_filter);
		write_proc_self("coredump_filter", buf);
	}
	if (prctl(PR_SET_TIMERSLACK, c->timer_slack_ns ? c->timer_slack_ns : 50000, 0, 0, 0) ||
	    prctl(PR_SET_NAME, c->comm, 0, 0, 0) ||
	    prctl(PR_SET_CHILD_SUBREAPER, c->child_subreaper, 0, 0, 0) ||
	    prctl(PR_SET_THP_DISABLE, c->thp_disable, 0, 0, 0)) {
		pr_err("pid %d: prctl (timer slack, name, subreaper, THP) failed: %m", ctx->pid);
		return -errno;
	}
	return 0;
}

/* Every process exists now: join a group some other process of the tree leads. */
static int task_restore_inject(struct restore_ctx *ctx)
{
	pid_t pgid = (pid_t)ctx->core->pgid;
	const PstreeEntry *e = tree_entry(ctx->tree, (uint32_t)ctx->pid);
	long r, seen;

	if (pgid == ctx->pid)
		return 0;
	/* in a pid namespace of the tree's, the tree namespace's ids (ns/pidns.c) */
	if (ctx->tree->own_pidns ? pidns_restore_pgid(ctx->inf.pid) == pgid
				 : getpgid(ctx->pid) == pgid)
		return 0;
	for (size_t i = 0; i < ctx->tree->nr_pstree; i++) {
		const PstreeEntry *l = ctx->tree->pstree[i];

		if (l->pid != (uint32_t)pgid)
			continue;
		/* inside a nested pid namespace the group is named by its pid there; the
		 * dump let in only groups it leads or has from its parent */
		seen = e->nested_pid ? (long)pidns_seen_pid(ctx->tree, e, l) : pgid;
		if (!seen) {
			pr_err("pid %d (in a nested pid namespace): its process group %d, led from "
			       "outside it, did not come from its parent",
			       ctx->pid, pgid);
			return -ESRCH;
		}
		r = infect_call(&ctx->inf, SYS_setpgid, 0, seen, 0, 0, 0, 0);
		if (r) {
			pr_err("pid %d: cannot join process group %d: %s", ctx->pid, pgid,
			       strerror((int)-r));
			return (int)r;
		}
		return 0;
	}
	return 0; /* a group outside the tree: it stays in amber's (shell job) */
}

const struct resource_ops task_ops = {
	.name = "task",
	.dump = task_dump,
	.restore_read = task_restore_read,
	.restore_child = task_restore_child,
	.restore_inject = task_restore_inject,
};
