// SPDX-License-Identifier: MIT
/*
 * Threads.  Each thread other than the leader has its own core-TID.img
 * (registers, mask, altstack, thread-directed signals, credentials, comm).
 * On restore the leader clones each thread with its old TID (clone3
 * set_tid) once the address space is back; ptrace's auto-attach stops the
 * new thread before it runs a single instruction, and its registers are
 * loaded with everyone else's at the end.
 */
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns/ns.h"
#include "proc.h"
#include "sys.h"

#define TASK_COMM_LEN 16 /* the kernel's thread names, with the NUL */

#define MAX_THREADS 32768

static int threads_dump_thread(struct dump_ctx *ctx, struct thread *t)
{
	char path[96], name[64], *buf;
	int ret;

	if (t->tid == ctx->pid)
		return 0; /* the leader's comm is the task's */
	if (t->inf && infect_status(t->inf) &&
	    !proc_status_name(infect_status(t->inf), name, sizeof(name))) {
		t->core->comm = strdup(name);
		return t->core->comm ? 0 : -ENOMEM;
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", ctx->pid, t->tid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	buf[strcspn(buf, "\n")] = 0;
	t->core->comm = buf;
	return 0;
}

/* The probe's syscalls, writing at the scratch area's start + off. */
static void thread_probe_sc(const struct thread *t, struct infect_sc *sc, long off)
{
	long at = (long)t->inf->scratch + off;

	sc[PROBE_ALTSTACK] = (struct infect_sc){SYS_sigaltstack, {0, at + PROBE_ALTSTACK_AT}};
	sc[PROBE_SECUREBITS] = (struct infect_sc){SYS_prctl, {PR_GET_SECUREBITS}};
	sc[PROBE_PDEATHSIG] =
		(struct infect_sc){SYS_prctl, {PR_GET_PDEATHSIG, at + PROBE_PDEATHSIG_AT}};
	sc[PROBE_TID_ADDRESS] =
		(struct infect_sc){SYS_prctl, {40 /* PR_GET_TID_ADDRESS */, at + PROBE_TID_AT}};
}

/* The probe's answers: its batch's results and what it wrote at the scratch area's start + off. */
static int probe_taken(struct thread *t, const struct infect_sc *sc, long off)
{
	int ret = infect_read(t->inf, t->inf->scratch + off, t->probe.mem, sizeof(t->probe.mem));

	if (ret)
		return ret;
	for (int i = 0; i < PROBE_NR; i++)
		t->probe.ret[i] = sc[i].ret;
	t->probe.done = true;
	return 0;
}

int thread_probe(struct thread *t)
{
	struct infect_sc sc[PROBE_NR];
	int ret;

	if (t->probe.done)
		return 0;
	thread_probe_sc(t, sc, 0);
	/* one stop for all (a process of 10,000 threads makes 10,000 of them) */
	ret = infect_batch(t->inf, sc, PROBE_NR);
	if (!ret)
		ret = probe_taken(t, sc, 0);
	if (ret)
		pr_err("tid %d: cannot make it run sigaltstack and prctl: %s", t->tid,
		       strerror(-ret));
	return ret;
}

/*
 * The other threads' probes, a window of them at a time (threads_batches_in()):
 * each writes into an output slot of its own, from the scratch area's start
 * (10,000 threads made 10,000 round trips one after the other).
 */
#define PROBE_SLOT 64 /* bytes of output per thread */

static int probe_plan(void *arg, void *ctx, struct thread *t, size_t slot, bool alone,
		      struct infect_sc **sc, size_t *n)
{
	struct infect_sc *p = (struct infect_sc *)arg + slot * PROBE_NR;

	*n = 0;
	if (t->probe.done)
		return 0;
	thread_probe_sc(t, p, (long)slot * PROBE_SLOT);
	*sc = p;
	*n = PROBE_NR;
	return 0;
}

static int probe_done(void *arg, struct thread *t, size_t slot)
{
	return probe_taken(t, (struct infect_sc *)arg + slot * PROBE_NR, (long)slot * PROBE_SLOT);
}

int threads_probe(struct dump_ctx *ctx)
{
	struct infect_sc *sc;
	struct thread_batch b = {"sigaltstack and prctl", PROBE_NR + 1, NULL, probe_plan,
				 probe_done, NULL};
	int ret;

	_Static_assert(sizeof(((struct thread_probe *)0)->mem) <= PROBE_SLOT, "probe slot");
	/* the leader's comes with proc_probe(): most processes have no other */
	if (ctx->nr_threads < 2)
		return 0;
	sc = calloc(THREAD_WINDOW * PROBE_NR, sizeof(*sc));
	b.arg = sc;
	ret = sc ? threads_batches_in(ctx, &ctx->inf, ctx->threads, 1, ctx->nr_threads, &b)
		 : -ENOMEM;
	free(sc);
	return ret;
}

int proc_probe(struct dump_ctx *ctx)
{
	struct thread *t = &ctx->threads[0]; /* the leader */
	long at = (long)ctx->inf.scratch;
	struct infect_sc sc[PROBE_NR + PP_NR], *p = sc + PROBE_NR;
	int ret;

	if (ctx->probe.done)
		return 0;
	thread_probe_sc(t, sc, 0);
	p[PP_DUMPABLE] = (struct infect_sc){SYS_prctl, {PR_GET_DUMPABLE}};
	p[PP_THP_DISABLE] = (struct infect_sc){SYS_prctl, {PR_GET_THP_DISABLE}};
	p[PP_SUBREAPER] =
		(struct infect_sc){SYS_prctl, {PR_GET_CHILD_SUBREAPER, at + PP_SUBREAPER_AT}};
	p[PP_BRK] = (struct infect_sc){SYS_brk, {0}};
	for (int w = 0; w < 3; w++)
		p[PP_ITIMER + w] = (struct infect_sc){
			SYS_getitimer, {w, at + PP_ITIMER_AT + w * (long)sizeof(struct itimerval)}};
	p[PP_MEMBARRIER] = (struct infect_sc){SYS_membarrier, {MB_GET_REGISTRATIONS}};
	p[PP_PERSONALITY] = (struct infect_sc){SYS_personality, {0xffffffff}};
	p[PP_TIMERSLACK] = (struct infect_sc){SYS_prctl, {PR_GET_TIMERSLACK}};
	for (int sig = 1; sig <= PP_NR_SIGACTIONS; sig++)
		p[PP_SIGACTION + sig - 1] = (struct infect_sc){
			SYS_rt_sigaction,
			{sig, 0, at + PP_SIGACTION_AT + (sig - 1) * (long)PP_SIGACTION_SIZE, 8}};
	ret = infect_batch(&ctx->inf, sc, PROBE_NR + PP_NR);
	if (!ret)
		ret = infect_read(&ctx->inf, ctx->inf.scratch, ctx->probe.mem,
				  sizeof(ctx->probe.mem));
	if (ret) {
		pr_err("pid %d: cannot make it run prctl, brk, getitimer, membarrier, "
		       "personality and rt_sigaction: %s",
		       ctx->pid, strerror(-ret));
		return ret;
	}
	for (int i = 0; i < PP_NR; i++)
		ctx->probe.ret[i] = p[i].ret;
	ctx->probe.done = true;
	/* the leader's own: what its thread_probe() would ask */
	if (!t->probe.done) {
		for (int i = 0; i < PROBE_NR; i++)
			t->probe.ret[i] = sc[i].ret;
		memcpy(t->probe.mem, ctx->probe.mem, sizeof(t->probe.mem));
		t->probe.done = true;
	}
	return 0;
}

static int threads_restore_read(struct restore_ctx *ctx)
{
	size_t n = ctx->core->n_threads;
	ProtobufCMessage *extra;
	struct img *img = NULL;
	int ret;

	if (n >= MAX_THREADS) {
		pr_err("core-%d.img lists %zu threads; the image is corrupt", ctx->pid, n);
		return -EBADMSG;
	}
	ctx->threads = calloc(n + 1, sizeof(*ctx->threads));
	if (!ctx->threads)
		return -ENOMEM;
	ctx->threads[0] = (struct thread){ctx->pid, &ctx->inf, ctx->core};
	ctx->nr_threads = 1;
	if (!n)
		return 0;
	ret = img_open(ctx->img, IMG_THREADS, &img, "threads-%d.img", ctx->pid);
	for (size_t i = 0; !ret && i < n; i++) {
		struct thread *t = &ctx->threads[ctx->nr_threads];

		t->tid = ctx->core->threads[i];
		ret = img_get(img, &task_core__descriptor, (ProtobufCMessage **)&t->core);
		if (ret < 0) /* a bad record: img_get() said so */
			break;
		if (!ret) {
			pr_err("threads-%d.img holds %zu threads of the %zu core-%d.img lists; the "
			       "image is corrupt",
			       ctx->pid, i, n, ctx->pid);
			ret = -EBADMSG;
			break;
		}
		ret = 0;
		if (t->core->pid != (uint32_t)t->tid || t->tid <= 0 || !t->core->comm) {
			pr_err("threads-%d.img: record %zu does not describe thread %d; the image "
			       "is corrupt",
			       ctx->pid, i + 1, t->tid);
			ret = -EBADMSG;
			break;
		}
		/* it goes into the scratch area as it is (thread_name_sc) */
		if (strlen(t->core->comm) >= TASK_COMM_LEN) {
			pr_err("threads-%d.img: thread %d's name is %zu bytes long, and the "
			       "kernel's are at most %d; the image is corrupt",
			       ctx->pid, t->tid, strlen(t->core->comm), TASK_COMM_LEN - 1);
			ret = -EBADMSG;
			break;
		}
		t->inf = calloc(1, sizeof(*t->inf));
		if (!t->inf)
			ret = -ENOMEM;
		else
			ctx->nr_threads++;
	}
	if (!ret && img_get(img, &task_core__descriptor, &extra) > 0) {
		protobuf_c_message_free_unpacked(extra, NULL);
		pr_err("threads-%d.img holds more threads than core-%d.img lists; the image is "
		       "corrupt",
		       ctx->pid, ctx->pid);
		ret = -EBADMSG;
	}
	if (img)
		img_close(img);
	return ret;
}

#define ARGS_AT	  (128UL << 10) /* in the scratch area: clone_args, then the tids */
#define ARGS_SIZE 128

/* Threads first..first+n-1, cloned by the leader in one batch of clone3 calls. */
static int clone_threads(struct restore_ctx *ctx, size_t first, size_t n)
{
	unsigned long base = ctx->inf.scratch + ARGS_AT;
	struct infect_sc *sc = calloc(n, sizeof(*sc));
	int ret = 0;

	if (!sc)
		return -ENOMEM;
	for (size_t i = 0; i < n && !ret; i++) {
		unsigned long at = base + i * ARGS_SIZE, tid_at = at + ARGS_SIZE - 8;
		/* in a nested pid namespace: its tid there, then the tree's (innermost first) */
		uint32_t nested = ctx->threads[first + i].core->nested_tid;
		int32_t tids[2] = {(int32_t)nested, ctx->threads[first + i].tid};
		struct clone_args a = {
			.flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
				 CLONE_SYSVSEM,
			/* never runs on it: its registers are loaded before it is let go */
			.stack = ctx->inf.scratch + 65536,
			.stack_size = 65536,
			.set_tid = tid_at,
			.set_tid_size = nested ? 2 : 1,
		};

		ret = infect_write(&ctx->inf, at, &a, sizeof(a));
		if (!ret)
			ret = infect_write(&ctx->inf, tid_at, nested ? tids : tids + 1,
					   nested ? sizeof(tids) : sizeof(tids[1]));
		sc[i] = (struct infect_sc){SYS_clone3, {(long)at, sizeof(a), 0, 0, 0, 0}, 0};
	}
	if (!ret)
		ret = infect_batch(&ctx->inf, sc, n);
	for (size_t i = 0; !ret && i < n; i++) {
		struct thread *t = &ctx->threads[first + i];

		/* clone3 returns the tid as the process sees it */
		if (sc[i].ret != (long)pidns_own_tid(ctx, (uint32_t)t->tid)) {
			pr_err("pid %d: cannot recreate thread %d: %s", ctx->pid, t->tid,
			       sc[i].ret < 0 ? strerror((int)-sc[i].ret) : "got another tid");
			ret = sc[i].ret < 0 ? (int)sc[i].ret : -EEXIST;
		}
	}
	free(sc);
	return ret;
}

/* A new thread: auto-attached (PTRACE_O_TRACECLONE), stopped before its first instruction. */
static int take_thread(struct restore_ctx *ctx, struct thread *t)
{
	int status, ret;
	/* amber's handle on it: the host's tid in a pid namespace of the tree's */
	pid_t host = ctx->tree->own_pidns ? pidns_host_tid(ctx->inf.pid, (uint32_t)t->tid) : t->tid;
	long r = host ? sys_waitpid(host, &status, __WALL) : -ESRCH;

	if (r < 0 || !WIFSTOPPED(status)) {
		pr_err("thread %d did not stop after its creation", t->tid);
		return -ESRCH;
	}
	ret = infect_attach_new_thread(host, t->inf, &ctx->inf);
	if (ret)
		return ret;
	t->inf->syscall_ip = ctx->inf.syscall_ip;
	t->inf->scratch = ctx->inf.scratch;
	t->inf->scratch_size = ctx->inf.scratch_size;
	return 0; /* its name comes later (thread_name_sc) */
}

int thread_name_sc(struct restore_ctx *ctx, struct thread *t, unsigned long at,
		   struct infect_sc *sc)
{
	if (t == &ctx->threads[0])
		return 0;
	*sc = (struct infect_sc){SYS_prctl, {PR_SET_NAME, (long)at, 0, 0, 0, 0}, 0};
	return 1;
}

/* Its batch failed: said once, naming the thread and what the batch was for. */
static int batch_failed(const struct thread *t, const struct thread_batch *b, int ret)
{
	pr_err("tid %d: its batch of %s failed: %s", t->tid, b->what, strerror(-ret));
	return ret;
}

/*
 * A window: its threads' batches all started before the first is waited
 * for; a thread that must go alone ends it (and runs once it is done).
 */
static int batch_window(void *ctx, struct infect *leader, struct thread *threads, size_t nr,
			const struct thread_batch *b, size_t *next)
{
	struct thread *w[THREAD_WINDOW];
	struct infect_sc *sc[THREAD_WINDOW];
	size_t nsc[THREAD_WINDOW], n = 0;
	int ret = 0;

	for (; *next < nr && n < THREAD_WINDOW && !ret; ++*next) {
		struct thread *t = &threads[*next];
		bool alone = t->inf->trap_pending || (b->alone && b->alone(b->arg, t));

		if (alone && n)
			break; /* after this window */
		ret = b->plan(b->arg, ctx, t, n, alone, &sc[n], &nsc[n]);
		if (!ret && !nsc[n])
			continue; /* nothing for this one */
		if (!ret && !alone) {
			t->inf->batch_loaded = leader->batch_loaded; /* one address space */
			ret = infect_batch_start_at(t->inf, sc[n], nsc[n], n * b->table);
			leader->batch_loaded = t->inf->batch_loaded;
			if (!ret) {
				w[n++] = t;
				continue;
			}
			if (ret != -EAGAIN) {
				batch_failed(t, b, ret);
				break;
			}
			if (n) {
				ret = 0;
				break; /* no room: after this window */
			}
			ret = b->plan(b->arg, ctx, t, 0, true, &sc[0], &nsc[0]);
		}
		if (!ret && (ret = infect_batch(t->inf, sc[0], nsc[0])))
			batch_failed(t, b, ret);
		if (!ret)
			ret = b->done(b->arg, t, 0);
	}
	/* every thread started is waited for, even after a failure */
	for (size_t k = 0; k < n; k++) {
		int r = infect_batch_wait(w[k]->inf, sc[k], nsc[k]);

		if (!r)
			r = b->done(b->arg, w[k], k);
		else if (!ret)
			batch_failed(w[k], b, r);
		ret = ret ? ret : r;
	}
	return ret;
}

int threads_batches_in(void *ctx, struct infect *leader, struct thread *threads, size_t first,
		       size_t nr, const struct thread_batch *b)
{
	size_t next = first;
	int ret = 0;

	while (!ret && next < nr)
		ret = batch_window(ctx, leader, threads, nr, b, &next);
	return ret;
}

int threads_batches(struct restore_ctx *ctx, const struct thread_batch *b)
{
	return threads_batches_in(ctx, &ctx->inf, ctx->threads, 0, ctx->nr_threads, b);
}

static int threads_restore_inject(struct restore_ctx *ctx)
{
	/* clone_args slots that fit between ARGS_AT and the batch executor's half */
	size_t chunk = (ctx->inf.scratch_size / 2 - ARGS_AT) / ARGS_SIZE;
	int ret = 0;
	long r;

	if (ctx->nr_threads == 1)
		return 0;
	r = sys_ptrace(
		PTRACE_SETOPTIONS, ctx->inf.pid, NULL,
		(void *)(long)(PTRACE_O_EXITKILL | PTRACE_O_TRACECLONE | PTRACE_O_TRACESYSGOOD));
	if (r) {
		pr_err("pid %d: cannot trace its new threads: %s", ctx->pid, strerror((int)-r));
		return (int)r;
	}
	for (size_t i = 1; !ret && i < ctx->nr_threads; i += chunk) {
		size_t n = ctx->nr_threads - i < chunk ? ctx->nr_threads - i : chunk;

		ret = clone_threads(ctx, i, n);
		for (size_t k = i; !ret && k < i + n; k++)
			ret = take_thread(ctx, &ctx->threads[k]);
	}
	if (ret)
		return ret;
	r = sys_ptrace(PTRACE_SETOPTIONS, ctx->inf.pid, NULL,
		       (void *)(long)(PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD));
	return r ? (int)r : 0;
}

const struct resource_ops threads_ops = {
	.name = "threads",
	.restore_read = threads_restore_read,
	.restore_inject = threads_restore_inject,
	.dump_thread = threads_dump_thread,
};
