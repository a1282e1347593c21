// SPDX-License-Identifier: MIT
/*
 * Signals: dispositions (handler, flags, restorer, mask), the alternate
 * stack, and pending signals of the thread and process queues with their
 * full siginfo.  The blocked mask travels with the registers (regs.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amber.h"
#include "ns/ns.h"
#include "log.h"
#include "restore.h"
#include "sys.h"

#define NSIG_KERNEL  64
#define SIGINFO_SIZE 128

#ifndef PTRACE_PEEKSIGINFO
#define PTRACE_PEEKSIGINFO 0x4209
#endif
#ifndef PTRACE_PEEKSIGINFO_SHARED
#define PTRACE_PEEKSIGINFO_SHARED 1
#endif

/* The kernel's struct sigaction on x86_64 (not glibc's). */
struct ksigaction {
	uint64_t handler;
	uint64_t flags;
	uint64_t restorer;
	uint64_t mask;
};

struct kstack {
	uint64_t sp;
	int32_t flags;
	int32_t pad;
	uint64_t size;
};

struct peeksiginfo_args {
	uint64_t off;
	uint32_t flags;
	int32_t nr;
};

static bool settable(int sig)
{
	return sig != SIGKILL && sig != SIGSTOP;
}

/* The 62 settable actions, asked in the process's probe batch (proc_probe()). */
static int dump_actions(struct dump_ctx *ctx)
{
	TaskCore *c = ctx->core;
	int ret = proc_probe(ctx);

	_Static_assert(sizeof(struct ksigaction) == PP_SIGACTION_SIZE &&
			       NSIG_KERNEL == PP_NR_SIGACTIONS,
		       "probe layout");
	if (ret)
		return ret;
	c->sigactions = calloc(NSIG_KERNEL, sizeof(*c->sigactions));
	if (!c->sigactions)
		return -ENOMEM;
	for (int sig = 1; sig <= NSIG_KERNEL; sig++) {
		long r = ctx->probe.ret[PP_SIGACTION + sig - 1];
		struct ksigaction k;
		SigactionEntry *e;

		if (!settable(sig))
			continue;
		if (r) {
			pr_err("pid %d: cannot read the action of signal %d: %s", ctx->pid, sig,
			       strerror((int)-r));
			return (int)r;
		}
		memcpy(&k, ctx->probe.mem + PP_SIGACTION_AT + (sig - 1) * sizeof(k), sizeof(k));
		if (!k.handler && !k.flags && !k.mask)
			continue; /* SIG_DFL, the state of a fresh task */
		e = malloc(sizeof(*e));
		if (!e)
			return -ENOMEM;
		sigaction_entry__init(e);
		e->sig = sig;
		e->handler = k.handler;
		e->flags = k.flags;
		e->restorer = k.restorer;
		e->mask = k.mask;
		c->sigactions[c->n_sigactions++] = e;
	}
	return 0;
}

static int dump_altstack(struct thread *t)
{
	struct kstack ss;
	int ret = thread_probe(t);
	long r = t->probe.ret[PROBE_ALTSTACK];

	if (ret)
		return ret;
	if (r) {
		pr_err("tid %d: cannot read the alternate signal stack: %s", t->tid,
		       strerror((int)-r));
		return (int)r;
	}
	memcpy(&ss, t->probe.mem + PROBE_ALTSTACK_AT, sizeof(ss));
	if (ss.flags & SS_DISABLE)
		return 0;
	t->core->has_altstack_sp = t->core->has_altstack_flags = 1;
	t->core->has_altstack_size = 1;
	t->core->altstack_sp = ss.sp;
	t->core->altstack_flags = (uint32_t)ss.flags;
	t->core->altstack_size = ss.size;
	return 0;
}

static int add_pending(TaskCore *c, const uint8_t *info, bool shared)
{
	SiginfoEntry *e = malloc(sizeof(*e));
	SiginfoEntry **np = realloc(c->pending, (c->n_pending + 1) * sizeof(*np));

	if (!e || !np) {
		free(e);
		if (np)
			c->pending = np;
		return -ENOMEM;
	}
	c->pending = np;
	siginfo_entry__init(e);
	memcpy(&e->signo, info, 4);
	e->shared = shared;
	e->info.len = SIGINFO_SIZE;
	e->info.data = malloc(SIGINFO_SIZE);
	if (!e->info.data) {
		free(e);
		return -ENOMEM;
	}
	memcpy(e->info.data, info, SIGINFO_SIZE);
	c->pending[c->n_pending++] = e;
	return 0;
}

/* PTRACE_PEEKSIGINFO reads the queues without dequeuing anything. */
static int dump_pending(pid_t tid, TaskCore *core, bool shared)
{
	uint8_t buf[32 * SIGINFO_SIZE];
	struct peeksiginfo_args a = {.flags = shared ? PTRACE_PEEKSIGINFO_SHARED : 0, .nr = 32};

	for (;;) {
		long n = sys_ptrace(PTRACE_PEEKSIGINFO, tid, &a, buf);

		if (n < 0) {
			pr_err("tid %d: cannot read pending signals: %s", tid, strerror((int)-n));
			return (int)n;
		}
		if (n == 0)
			return 0;
		for (long i = 0; i < n; i++) {
			int ret = add_pending(core, buf + i * SIGINFO_SIZE, shared);

			if (ret)
				return ret;
		}
		a.off += n;
	}
}

static int signals_dump(struct dump_ctx *ctx)
{
	int ret = dump_actions(ctx);

	return ret ? ret : dump_pending(ctx->pid, ctx->core, true);
}

static int signals_dump_thread(struct dump_ctx *ctx, struct thread *t)
{
	int ret = dump_altstack(t);

	return ret ? ret : dump_pending(t->tid, t->core, false);
}

static int signals_restore_read(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;

	for (size_t i = 0; i < c->n_sigactions; i++)
		if (c->sigactions[i]->sig < 1 || c->sigactions[i]->sig > NSIG_KERNEL ||
		    !settable((int)c->sigactions[i]->sig))
			goto corrupt;
	for (size_t t = 0; t < ctx->nr_threads; t++) {
		c = ctx->threads[t].core;
		for (size_t i = 0; i < c->n_pending; i++)
			if (c->pending[i]->info.len != SIGINFO_SIZE || c->pending[i]->signo < 1 ||
			    c->pending[i]->signo > NSIG_KERNEL)
				goto corrupt;
	}
	return 0;
corrupt:
	pr_err("core-%d.img: bad signal entry; the image is corrupt", ctx->pid);
	return -EBADMSG;
}

/*
 * The actions every restored process starts with: amber's own, which each
 * inherited with its fork (none changes them before its turn, and one that
 * shares its creator's table finds there what both images hold).  Read once.
 */
static const struct ksigaction *inherited_actions(void)
{
	static struct ksigaction own[NSIG_KERNEL];
	static bool read;

	for (int sig = 1; !read && sig <= NSIG_KERNEL; sig++)
		if (settable(sig) && sys_rt_sigaction(sig, NULL, &own[sig - 1]))
			return NULL;
	read = true;
	return own;
}

/* The actions that differ from the inherited ones (all of them if those are unknown). */
static int signals_restore_inject(struct restore_ctx *ctx)
{
	const struct ksigaction *own = inherited_actions();
	struct ksigaction acts[NSIG_KERNEL];
	struct infect_sc sc[NSIG_KERNEL];
	TaskCore *c = ctx->core;
	int n = 0, ret;

	memset(acts, 0, sizeof(acts));
	for (size_t i = 0; i < c->n_sigactions; i++) {
		SigactionEntry *e = c->sigactions[i];

		acts[e->sig - 1] = (struct ksigaction){e->handler, e->flags, e->restorer, e->mask};
	}
	for (int sig = 1; sig <= NSIG_KERNEL; sig++)
		if (settable(sig) && (!own || memcmp(&acts[sig - 1], &own[sig - 1], sizeof(*acts))))
			sc[n++] = (struct infect_sc){
				SYS_rt_sigaction,
				{sig, ctx->inf.scratch + (sig - 1) * sizeof(*acts), 0, 8, 0, 0},
				0};
	if (!n)
		return 0;
	ret = infect_write(&ctx->inf, ctx->inf.scratch, acts, sizeof(acts));
	if (ret)
		return ret;
	ret = infect_batch(&ctx->inf, sc, n);
	for (int i = 0; !ret && i < n; i++)
		if (sc[i].ret) {
			pr_err("pid %d: cannot set the action of signal %ld: %s", ctx->pid,
			       sc[i].a[0], strerror((int)-sc[i].ret));
			ret = (int)sc[i].ret;
		}
	return ret;
}

/*
 * A zombie comes back by dying while its parent is stopped (restore.c), and
 * that death must not change the parent.  Before (!dead): a parent that
 * ignores SIGCHLD or sets SA_NOCLDWAIT would reap it at once (it died at
 * dump before the parent said so), so the action is the default meanwhile.
 * After (dead): the SIGCHLD it queued is taken back unless the image has one
 * pending (SIGCHLD does not queue twice), and the image's action is put back.
 */
int signals_zombie_dies(struct restore_ctx *ctx, bool dead)
{
	struct {
		uint64_t set;
		struct timespec zero;
	} wait = {1ULL << (SIGCHLD - 1), {0, 0}};
	struct ksigaction act = {0};
	bool reaps, pending = false;
	long r = 0;
	int ret = 0;

	for (size_t i = 0; i < ctx->core->n_sigactions; i++) {
		SigactionEntry *e = ctx->core->sigactions[i];

		if (e->sig == SIGCHLD)
			act = (struct ksigaction){e->handler, e->flags, e->restorer, e->mask};
	}
	reaps = act.handler == (uint64_t)(uintptr_t)SIG_IGN || (act.flags & SA_NOCLDWAIT);
	for (size_t t = 0; t < ctx->nr_threads; t++)
		for (size_t i = 0; i < ctx->threads[t].core->n_pending; i++)
			pending |= ctx->threads[t].core->pending[i]->signo == SIGCHLD;
	if (dead && !pending) {
		ret = infect_write(&ctx->inf, ctx->inf.scratch, &wait, sizeof(wait));
		if (!ret)
			ret = infect_syscall(&ctx->inf, &r, SYS_rt_sigtimedwait,
					     (long)ctx->inf.scratch, 0,
					     (long)(ctx->inf.scratch + sizeof(wait.set)), 8, 0, 0);
		if (!ret && r != SIGCHLD && r != -EAGAIN) {
			pr_err("pid %d: cannot take back the SIGCHLD of its zombie: %s", ctx->pid,
			       r < 0 ? strerror((int)-r) : "another signal came");
			return r < 0 ? (int)r : -EIO;
		}
	}
	if (ret || !reaps)
		return ret;
	if (!dead)
		act = (struct ksigaction){0};
	ret = infect_write(&ctx->inf, ctx->inf.scratch, &act, sizeof(act));
	if (!ret)
		ret = infect_syscall(&ctx->inf, &r, SYS_rt_sigaction, SIGCHLD,
				     (long)ctx->inf.scratch, 0, 8, 0, 0);
	if (!ret && r) {
		pr_err("pid %d: cannot set the action of SIGCHLD: %s", ctx->pid, strerror((int)-r));
		ret = (int)r;
	}
	return ret;
}

/*
 * The kernel lets a task queue any siginfo only to itself: thread-directed
 * signals are queued by their thread, process-wide ones by the leader (whose
 * tid is the pid).  All signals are blocked now, so nothing is delivered.
 */
static int queue_pending(struct restore_ctx *ctx, struct thread *t, SiginfoEntry *e)
{
	int ret = infect_write(t->inf, ctx->inf.scratch, e->info.data, SIGINFO_SIZE);
	long r;

	if (ret)
		return ret;
	/* amber's traps would take it (infect.h): no more traps in its threads */
	if (!e->shared && (INFECT_SYNC_SIGNALS & (1ULL << (e->signo - 1))))
		ret = infect_trap_mode(t->inf);
	for (size_t i = 0; e->shared && e->signo == SIGTRAP && i < ctx->nr_threads && !ret; i++)
		ret = infect_trap_mode(ctx->threads[i].inf);
	if (ret)
		return ret;
	if (e->shared)
		r = infect_call(&ctx->inf, SYS_rt_sigqueueinfo,
				pidns_own_tid(ctx, (uint32_t)ctx->pid), e->signo, ctx->inf.scratch,
				0, 0, 0);
	else
		r = infect_call(
			t->inf, SYS_rt_tgsigqueueinfo, pidns_own_tid(ctx, (uint32_t)ctx->pid),
			pidns_own_tid(ctx, (uint32_t)t->tid), e->signo, ctx->inf.scratch, 0, 0);
	if (r)
		pr_err("tid %d: cannot queue pending signal %u: %s", t->tid, e->signo,
		       strerror((int)-r));
	return (int)r;
}

/* The alternate stack and the thread-directed pending signals are the thread's. */
static int signals_restore_thread(struct restore_ctx *ctx, struct thread *t)
{
	TaskCore *c = t->core;
	int ret;
	long r;

	if (c->has_altstack_sp) {
		struct kstack ss = {c->altstack_sp, (int32_t)(c->altstack_flags & ~SS_ONSTACK), 0,
				    c->altstack_size};

		ret = infect_write(t->inf, ctx->inf.scratch, &ss, sizeof(ss));
		if (ret)
			return ret;
		r = infect_call(t->inf, SYS_sigaltstack, ctx->inf.scratch, 0, 0, 0, 0, 0);
		if (r) {
			pr_err("tid %d: cannot set the alternate signal stack: %s", t->tid,
			       strerror((int)-r));
			return (int)r;
		}
	}
	for (size_t i = 0; i < c->n_pending; i++) {
		ret = queue_pending(ctx, t, c->pending[i]);
		if (ret)
			return ret;
	}
	return 0;
}

const struct resource_ops signals_ops = {
	.name = "signals",
	.dump = signals_dump,
	.restore_read = signals_restore_read,
	.restore_inject = signals_restore_inject,
	.dump_thread = signals_dump_thread,
	.restore_thread = signals_restore_thread,
};
