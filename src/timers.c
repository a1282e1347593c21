// SPDX-License-Identifier: MIT
/*
 * Timers: the three itimers and POSIX timers, each with its remaining time
 * and interval.  Remaining time is relative, so a timer restored later
 * fires as long after the restore as it had left at the dump.  Overrun
 * counts are not carried over.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns/ns.h"
#include "sys.h"

#ifndef PR_TIMER_CREATE_RESTORE_IDS
#define PR_TIMER_CREATE_RESTORE_IDS	77
#define PR_TIMER_CREATE_RESTORE_IDS_OFF 0
#define PR_TIMER_CREATE_RESTORE_IDS_ON	1
#endif
#define MAX_TIMERS 4096

/* The kernel's struct sigevent (64 bytes on x86_64). */
struct ksigevent {
	uint64_t value;
	int32_t signo;
	int32_t notify;
	int32_t tid;
	int32_t pad[11];
};

static int dump_itimers(struct dump_ctx *ctx)
{
	TaskCore *c = ctx->core;
	int ret;

	c->itimers = calloc(3, sizeof(*c->itimers));
	if (!c->itimers)
		return -ENOMEM;
	ret = proc_probe(ctx);
	if (ret)
		return ret;
	for (int which = 0; which < 3; which++) {
		long r = ctx->probe.ret[PP_ITIMER + which];
		struct itimerval v;
		ItimerEntry *e;

		if (r) {
			pr_err("pid %d: getitimer(%d) failed: %s", ctx->pid, which,
			       strerror((int)-r));
			return (int)r;
		}
		memcpy(&v, ctx->probe.mem + PP_ITIMER_AT + which * sizeof(v), sizeof(v));
		if (!v.it_value.tv_sec && !v.it_value.tv_usec && !v.it_interval.tv_sec &&
		    !v.it_interval.tv_usec)
			continue;
		e = malloc(sizeof(*e));
		if (!e)
			return -ENOMEM;
		itimer_entry__init(e);
		e->which = which;
		e->interval_us = v.it_interval.tv_sec * 1000000ULL + v.it_interval.tv_usec;
		e->value_us = v.it_value.tv_sec * 1000000ULL + v.it_value.tv_usec;
		c->itimers[c->n_itimers++] = e;
	}
	return 0;
}

/* "notify: signal/pid.N" or "none|signal|thread/tid.N" (SIGEV_THREAD_ID) */
static int parse_notify(const char *s, PosixTimerEntry *e)
{
	char kind[16], target[8];
	int id = 0;

	if (sscanf(s, "%15[a-z]/%7[a-z].%d", kind, target, &id) < 2)
		return -EINVAL;
	if (!strcmp(kind, "none"))
		e->notify = SIGEV_NONE;
	else if (!strcmp(kind, "signal"))
		e->notify = SIGEV_SIGNAL;
	else if (!strcmp(kind, "thread"))
		e->notify = SIGEV_THREAD;
	else
		return -EINVAL;
	if (!strcmp(target, "tid")) {
		e->notify |= SIGEV_THREAD_ID;
		e->has_notify_tid = 1;
		e->notify_tid = id;
	}
	return 0;
}

static int add_timer(struct dump_ctx *ctx, PosixTimerEntry *e)
{
	TaskCore *c = ctx->core;
	PosixTimerEntry **n = realloc(c->posix_timers, (c->n_posix_timers + 1) * sizeof(*n));
	struct itimerspec its;
	long r;
	int ret;

	if (!n)
		return -ENOMEM;
	c->posix_timers = n;
	if (c->n_posix_timers >= MAX_TIMERS) {
		pr_err("pid %d has more than %d POSIX timers, more than amber restores", ctx->pid,
		       MAX_TIMERS);
		return -EOPNOTSUPP;
	}
	r = infect_call(&ctx->inf, SYS_timer_gettime, e->id, ctx->inf.scratch, 0, 0, 0, 0);
	if (r) {
		pr_err("pid %d: timer_gettime(%d) failed: %s", ctx->pid, e->id, strerror((int)-r));
		return (int)r;
	}
	ret = infect_read(&ctx->inf, ctx->inf.scratch, &its, sizeof(its));
	if (ret)
		return ret;
	e->interval_ns = its.it_interval.tv_sec * 1000000000ULL + its.it_interval.tv_nsec;
	e->value_ns = its.it_value.tv_sec * 1000000000ULL + its.it_value.tv_nsec;
	r = infect_call(&ctx->inf, SYS_timer_getoverrun, e->id, 0, 0, 0, 0, 0);
	e->overrun = r > 0 ? (int32_t)r : 0;
	c->posix_timers[c->n_posix_timers++] = e;
	return 0;
}

/* /proc/PID/timers (a C/R file) names each timer's id, signal, notify and clock. */
static int dump_posix_timers(struct dump_ctx *ctx)
{
	PosixTimerEntry *e = NULL;
	char path[64], *buf, *line, *save;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/timers", ctx->pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		if (ret == -ENOENT) {
			pr_warn("%s is missing (kernel without CONFIG_CHECKPOINT_RESTORE); POSIX "
				"timers are not saved",
				path);
			return 0;
		}
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int id, signo, clk;
		unsigned long long val;

		if (sscanf(line, "ID: %d", &id) == 1) {
			if (e) {
				ret = add_timer(ctx, e);
				if (ret)
					goto out;
			}
			e = malloc(sizeof(*e));
			if (!e) {
				ret = -ENOMEM;
				goto out;
			}
			posix_timer_entry__init(e);
			e->id = id;
		} else if (e && sscanf(line, "signal: %d/%llx", &signo, &val) == 2) {
			e->signo = signo;
			e->sigval = val;
		} else if (e && !strncmp(line, "notify: ", 8)) {
			ret = parse_notify(line + 8, e);
			if (ret) {
				pr_err("pid %d: timer %d has an unknown notification '%s'",
				       ctx->pid, e->id, line + 8);
				goto out;
			}
			/* /proc shows the host's tid; the timer names the namespace's */
			if (e->has_notify_tid)
				e->notify_tid = (int32_t)dump_vpid(ctx->tree, e->notify_tid);
		} else if (e && sscanf(line, "ClockID: %d", &clk) == 1) {
			e->clockid = clk;
		}
	}
	if (e) {
		ret = add_timer(ctx, e);
		e = NULL;
	}
out:
	free(e);
	free(buf);
	return ret;
}

static int timers_dump(struct dump_ctx *ctx)
{
	int ret = dump_itimers(ctx);

	return ret ? ret : dump_posix_timers(ctx);
}

static int timers_restore_read(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;

	for (size_t i = 0; i < c->n_itimers; i++)
		if (c->itimers[i]->which > 2)
			goto corrupt;
	if (c->n_posix_timers > MAX_TIMERS)
		goto corrupt;
	for (size_t i = 0; i < c->n_posix_timers; i++)
		if (c->posix_timers[i]->id < 0) /* ids only grow: any non-negative int */
			goto corrupt;
	/* amber creates them as root: an alarm clock needs CAP_WAKE_ALARM */
	for (size_t i = 0; i < c->n_posix_timers && !ctx->tree->owner.unbounded; i++) {
		int clk = c->posix_timers[i]->clockid;

		if (clk != CLOCK_REALTIME_ALARM && clk != CLOCK_BOOTTIME_ALARM)
			continue;
		pr_err("core-%d.img: POSIX timer %d is on an alarm clock (%d), which needs "
		       "CAP_WAKE_ALARM; uid %u's image may not have one; refusing",
		       ctx->pid, c->posix_timers[i]->id, clk, ctx->tree->owner.uid);
		return -EPERM;
	}
	return 0;
corrupt:
	pr_err("core-%d.img: bad timer entry; the image is corrupt", ctx->pid);
	return -EBADMSG;
}

static struct timespec ns_to_ts(uint64_t ns)
{
	return (struct timespec){.tv_sec = ns / 1000000000ULL, .tv_nsec = ns % 1000000000ULL};
}

static int create_timer(struct restore_ctx *ctx, PosixTimerEntry *e, bool restore_ids)
{
	unsigned long sev_addr = ctx->inf.scratch, id_addr = ctx->inf.scratch + 128;
	struct ksigevent sev = {.value = e->sigval, .signo = e->signo, .notify = e->notify};
	int32_t id = e->id;
	long r;
	int ret;

	if (e->notify & SIGEV_THREAD_ID)
		/* threads exist by now, with their tids (its own, in a nested pid namespace) */
		sev.tid = (int32_t)pidns_own_tid(ctx, (uint32_t)e->notify_tid);
	ret = infect_write(&ctx->inf, sev_addr, &sev, sizeof(sev));
	if (!ret)
		ret = infect_write(&ctx->inf, id_addr, &id, sizeof(id));
	if (ret)
		return ret;
	r = infect_call(&ctx->inf, SYS_timer_create, e->clockid, sev_addr, id_addr, 0, 0, 0);
	if (r)
		return (int)r;
	ret = infect_read(&ctx->inf, id_addr, &id, sizeof(id));
	if (ret)
		return ret;
	if (restore_ids && id != e->id)
		return -EINVAL;
	return id;
}

/*
 * Timer ids are part of the program's state.  With PR_TIMER_CREATE_RESTORE_IDS
 * (Linux 6.17+) timer_create takes the wanted id; otherwise ids are handed out
 * in order from 0 in a fresh process, so fillers are created and deleted.
 */
static int by_id(const void *a, const void *b)
{
	const PosixTimerEntry *x = *(PosixTimerEntry *const *)a, *y = *(PosixTimerEntry *const *)b;

	return x->id - y->id;
}

static int restore_posix_timers(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;
	bool restore_ids;
	int fillers[MAX_TIMERS], nr_fillers = 0, ret = 0;
	long r;

	if (!c->n_posix_timers)
		return 0;
	/* /proc lists the newest first; fillers only work in ascending id order */
	qsort(c->posix_timers, c->n_posix_timers, sizeof(*c->posix_timers), by_id);
	r = infect_call(&ctx->inf, SYS_prctl, PR_TIMER_CREATE_RESTORE_IDS,
			PR_TIMER_CREATE_RESTORE_IDS_ON, 0, 0, 0, 0);
	restore_ids = r == 0;
	for (size_t i = 0; i < c->n_posix_timers; i++) {
		PosixTimerEntry *e = c->posix_timers[i];
		struct itimerspec its = {ns_to_ts(e->interval_ns), ns_to_ts(e->value_ns)};
		int id;

		for (;;) {
			id = create_timer(ctx, e, restore_ids);
			if (id < 0 || id >= e->id || nr_fillers >= MAX_TIMERS)
				break;
			fillers[nr_fillers++] = id;
		}
		if (id != e->id) {
			pr_err("pid %d: cannot recreate POSIX timer %d (got %d: %s)%s", ctx->pid,
			       e->id, id, id < 0 ? strerror(-id) : "another id",
			       restore_ids ? ""
					   : "; without PR_TIMER_CREATE_RESTORE_IDS (Linux 6.17) "
					     "amber reaches an id by creating the ones below it, "
					     "up to 4096");
			ret = id < 0 ? id : -EINVAL;
			break;
		}
		ret = infect_write(&ctx->inf, ctx->inf.scratch, &its, sizeof(its));
		if (ret)
			break;
		r = infect_call(&ctx->inf, SYS_timer_settime, id, 0, ctx->inf.scratch, 0, 0, 0);
		if (r) {
			pr_err("pid %d: cannot arm POSIX timer %d: %s", ctx->pid, id,
			       strerror((int)-r));
			ret = (int)r;
			break;
		}
	}
	for (int i = 0; i < nr_fillers; i++)
		infect_call(&ctx->inf, SYS_timer_delete, fillers[i], 0, 0, 0, 0, 0);
	if (restore_ids)
		infect_call(&ctx->inf, SYS_prctl, PR_TIMER_CREATE_RESTORE_IDS,
			    PR_TIMER_CREATE_RESTORE_IDS_OFF, 0, 0, 0, 0);
	return ret;
}

static int set_itimer(struct restore_ctx *ctx, unsigned which, uint64_t interval_us,
		      uint64_t value_us)
{
	struct itimerval v = {
		{interval_us / 1000000, interval_us % 1000000},
		{value_us / 1000000, value_us % 1000000},
	};
	int ret = infect_write(&ctx->inf, ctx->inf.scratch, &v, sizeof(v));
	long r;

	if (ret)
		return ret;
	r = infect_call(&ctx->inf, SYS_setitimer, which, ctx->inf.scratch, 0, 0, 0, 0);
	if (r)
		pr_err("pid %d: setitimer(%u) failed: %s", ctx->pid, which, strerror((int)-r));
	return (int)r;
}

/*
 * The kernel adds a tick to a CPU-time itimer when it is set (so it never
 * fires early); measure that tick and take it off, so the restored timer has
 * no more time left than at the dump.
 */
static int trim_cpu_itimer(struct restore_ctx *ctx, ItimerEntry *e)
{
	struct itimerval got;
	uint64_t got_us;
	long r = infect_call(&ctx->inf, SYS_getitimer, e->which, ctx->inf.scratch, 0, 0, 0, 0);

	if (r || infect_read(&ctx->inf, ctx->inf.scratch, &got, sizeof(got)))
		return 0;
	got_us = got.it_value.tv_sec * 1000000ULL + got.it_value.tv_usec;
	if (got_us <= e->value_us || got_us - e->value_us > 20000 ||
	    e->value_us <= got_us - e->value_us)
		return 0;
	return set_itimer(ctx, e->which, e->interval_us, e->value_us - (got_us - e->value_us));
}

static int timers_restore_inject(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;

	for (size_t i = 0; i < c->n_itimers; i++) {
		ItimerEntry *e = c->itimers[i];
		int ret = set_itimer(ctx, e->which, e->interval_us, e->value_us);

		if (!ret && e->which != ITIMER_REAL)
			ret = trim_cpu_itimer(ctx, e);
		if (ret)
			return ret;
	}
	return restore_posix_timers(ctx);
}

const struct resource_ops timers_ops = {
	.name = "timers",
	.dump = timers_dump,
	.restore_read = timers_restore_read,
	.restore_inject = timers_restore_inject,
};
