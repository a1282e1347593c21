// SPDX-License-Identifier: MIT
/*
 * Scheduling, per thread: policy and priority (SCHED_OTHER/FIFO/RR/BATCH/
 * IDLE, nice, SCHED_RESET_ON_FORK), CPU affinity and I/O priority.  Dumped
 * from amber with sched_getattr/sched_getaffinity/ioprio_get on each tid;
 * restored the same way once the thread has its credentials, with the image
 * owner's rights (owner_enter): the kernel then refuses an RT policy, a
 * lower nice or the RT I/O class that the owner could not have set
 * (CAP_SYS_NICE, RLIMIT_RTPRIO, RLIMIT_NICE), and lowering priority works.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "amber.h"
#include "log.h"
#include "sys.h"

#ifndef SCHED_FLAG_RESET_ON_FORK
#define SCHED_FLAG_RESET_ON_FORK 0x01
#endif
#ifndef SCHED_IDLE
#define SCHED_IDLE 5
#endif
#define SCHED_DEADLINE_ 6
#define AFFINITY_MAX	1024 /* bytes: 8192 CPUs, the kernel's largest NR_CPUS */
#define IOPRIO_CLASS(v) ((unsigned)(v) >> 13)
#define UCLAMP_MAX	1024

/* The kernel's struct sched_attr (SCHED_ATTR_SIZE_VER1). */
struct ksched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
	uint32_t sched_util_min, sched_util_max;
};

static const char *policy_name(uint32_t p)
{
	static const char *const names[] = {"SCHED_OTHER", "SCHED_FIFO", "SCHED_RR",
					    "SCHED_BATCH", "?",		 "SCHED_IDLE"};

	return p < sizeof(names) / sizeof(names[0]) ? names[p] : "?";
}

static bool rt_policy(uint32_t p)
{
	return p == SCHED_FIFO || p == SCHED_RR;
}

static int sched_dump_thread(struct dump_ctx *ctx, struct thread *t)
{
	struct ksched_attr a = {0};
	uint8_t mask[AFFINITY_MAX];
	TaskCore *c = t->core;
	int ret, nice;

	ret = sys_sched_getattr(t->tid, &a, sizeof(a));
	if (ret) {
		pr_err("pid %d thread %d: sched_getattr: %s", ctx->pid, t->tid, strerror(-ret));
		return ret;
	}
	if (a.sched_policy == SCHED_DEADLINE_ || a.sched_policy > SCHED_IDLE ||
	    a.sched_policy == 4) {
		pr_err("pid %d thread %d: scheduling policy %u (SCHED_DEADLINE?) cannot be "
		       "restored; switch the thread to another policy first",
		       ctx->pid, t->tid, a.sched_policy);
		return -EOPNOTSUPP;
	}
	if (a.sched_util_min || (a.sched_util_max && a.sched_util_max != UCLAMP_MAX)) {
		pr_err("pid %d thread %d: utilization clamps (%u..%u) cannot be restored; reset "
		       "them with sched_setattr(SCHED_FLAG_UTIL_CLAMP) first",
		       ctx->pid, t->tid, a.sched_util_min, a.sched_util_max);
		return -EOPNOTSUPP;
	}
	/* An RT thread's nice is kept for when it goes back to SCHED_OTHER. */
	errno = 0;
	nice = getpriority(PRIO_PROCESS, (id_t)t->tid);
	if (nice == -1 && errno) {
		pr_err("pid %d thread %d: getpriority: %m", ctx->pid, t->tid);
		return -errno;
	}
	c->has_sched_policy = c->has_sched_flags = c->has_sched_nice = 1;
	c->has_sched_priority = c->has_ioprio = c->has_cpu_affinity = 1;
	c->sched_policy = a.sched_policy;
	c->sched_flags = a.sched_flags & SCHED_FLAG_RESET_ON_FORK;
	c->sched_nice = nice;
	c->sched_priority = a.sched_priority;

	ret = sys_sched_getaffinity(t->tid, mask, sizeof(mask));
	if (ret < 0) {
		pr_err("pid %d thread %d: sched_getaffinity: %s", ctx->pid, t->tid, strerror(-ret));
		return ret;
	}
	c->cpu_affinity.len = (size_t)ret;
	c->cpu_affinity.data = malloc((size_t)ret ? (size_t)ret : 1);
	if (!c->cpu_affinity.data)
		return -ENOMEM;
	memcpy(c->cpu_affinity.data, mask, (size_t)ret);

	ret = sys_ioprio_get(t->tid);
	if (ret < 0) {
		pr_err("pid %d thread %d: ioprio_get: %s", ctx->pid, t->tid, strerror(-ret));
		return ret;
	}
	c->ioprio = (uint32_t)ret;
	return 0;
}

static int sched_restore_read(struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_threads; i++) {
		TaskCore *c = ctx->threads[i].core;

		if (!c->has_sched_policy)
			continue; /* dumped before amber kept it: the defaults stay */
		if (c->sched_policy > SCHED_IDLE || c->sched_policy == 4 ||
		    (c->sched_flags & ~(uint64_t)SCHED_FLAG_RESET_ON_FORK) || c->sched_nice < -20 ||
		    c->sched_nice > 19 || c->sched_priority > 99 ||
		    (rt_policy(c->sched_policy) != (c->sched_priority != 0)) ||
		    !c->has_cpu_affinity || c->cpu_affinity.len > AFFINITY_MAX || !c->has_ioprio ||
		    c->ioprio > 0xffff) {
			pr_err("core-%d.img: scheduling state out of range (policy %u, priority "
			       "%u, nice %d, %zu bytes of affinity); the image is corrupt",
			       ctx->threads[i].tid, c->sched_policy, c->sched_priority,
			       c->sched_nice, c->cpu_affinity.len);
			return -EBADMSG;
		}
	}
	return 0;
}

static int set_attr(struct restore_ctx *ctx, struct thread *t, uint32_t policy, uint64_t flags,
		    int nice, uint32_t prio)
{
	struct ksched_attr a = {
		.size = 48, /* SCHED_ATTR_SIZE_VER0: no utilization clamps */
		.sched_policy = policy,
		.sched_flags = flags,
		.sched_nice = nice,
		.sched_priority = prio,
	};
	int ret = sys_sched_setattr(t->inf->pid, &a);

	if (ret)
		pr_err("pid %d thread %d: cannot set %s%s priority %u nice %d: %s%s", ctx->pid,
		       t->tid, policy_name(policy),
		       flags & SCHED_FLAG_RESET_ON_FORK ? "|SCHED_RESET_ON_FORK" : "", prio, nice,
		       strerror(-ret),
		       ret == -EPERM ? " (the image's owner may not: it needs CAP_SYS_NICE, "
				       "RLIMIT_RTPRIO or RLIMIT_NICE)"
				     : "");
	return ret;
}

static int sched_restore_thread(struct restore_ctx *ctx, struct thread *t)
{
	TaskCore *c = t->core;
	int ret;

	if (!c->has_sched_policy)
		return 0;
	ret = owner_enter(ctx->tree);
	if (ret)
		return ret;
	/* The nice first: an RT policy hides it, but keeps it for later. */
	ret = set_attr(ctx, t, SCHED_OTHER, 0, c->sched_nice, 0);
	if (!ret && (c->sched_policy != SCHED_OTHER || c->sched_flags))
		ret = set_attr(ctx, t, c->sched_policy, c->sched_flags,
			       rt_policy(c->sched_policy) ? 0 : c->sched_nice, c->sched_priority);
	/* Class NONE too: the restore child may have inherited amber's own. */
	if (!ret) {
		ret = sys_ioprio_set(t->inf->pid, (int)c->ioprio);
		if (ret)
			pr_err("pid %d thread %d: cannot set I/O priority class %u level %u: "
			       "%s%s",
			       ctx->pid, t->tid, IOPRIO_CLASS(c->ioprio), c->ioprio & 7,
			       strerror(-ret),
			       ret == -EPERM ? " (the image's owner may not: the realtime class "
					       "needs CAP_SYS_NICE or CAP_SYS_ADMIN)"
					     : "");
	}
	owner_leave(ctx->tree);
	return ret;
}

/*
 * The affinity last, once amber injected its last syscall into the process:
 * until then amber keeps it on its own CPU (restore.c), where a round trip
 * costs a third of one to another CPU.
 */
int sched_restore_affinity(struct restore_ctx *ctx)
{
	int ret = owner_enter(ctx->tree);

	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < ctx->nr_threads; i++) {
		const struct thread *t = &ctx->threads[i];
		const TaskCore *c = t->core;

		if (!c->has_sched_policy || !c->cpu_affinity.len)
			continue;
		ret = sys_sched_setaffinity(t->inf->pid, c->cpu_affinity.data, c->cpu_affinity.len);
		if (ret)
			pr_err("pid %d thread %d: cannot set its CPU affinity: %s%s", ctx->pid,
			       t->tid, strerror(-ret),
			       ret == -EINVAL ? " (none of its CPUs is usable here)" : "");
	}
	owner_leave(ctx->tree);
	return ret;
}

const struct resource_ops sched_ops = {
	.name = "sched",
	.dump_thread = sched_dump_thread,
	.restore_read = sched_restore_read,
	.restore_thread = sched_restore_thread,
};
