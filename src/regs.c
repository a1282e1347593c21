// SPDX-License-Identifier: MIT
/*
 * Registers: general purpose (with fs_base/gs_base, i.e. TLS), the whole
 * XSAVE area (x87, SSE, AVX, AVX-512, PKRU...), and the blocked signal mask.
 * Also the per-thread user pointers the kernel keeps: clear_child_tid,
 * robust list and rseq registration.
 */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "restore.h"
#include "sys.h"

#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#define PTRACE_SETSIGMASK 0x420b
#endif
#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
#define RSEQ_FLAG_UNREGISTER 1

/* errno values the kernel uses for syscall restart; never seen by user space */
#define ERESTARTSYS	      512
#define ERESTARTNOINTR	      513
#define ERESTARTNOHAND	      514
#define ERESTART_RESTARTBLOCK 516

#define XSAVE_MAX 16384

struct rseq_config {
	uint64_t rseq_abi_pointer;
	uint32_t rseq_abi_size;
	uint32_t signature;
	uint32_t flags;
	uint32_t pad;
};

static void regs_to_image(const struct user_regs_struct *r, UserRegs *u)
{
	user_regs__init(u);
	u->r15 = r->r15, u->r14 = r->r14, u->r13 = r->r13, u->r12 = r->r12;
	u->bp = r->rbp, u->bx = r->rbx, u->r11 = r->r11, u->r10 = r->r10;
	u->r9 = r->r9, u->r8 = r->r8, u->ax = r->rax, u->cx = r->rcx;
	u->dx = r->rdx, u->si = r->rsi, u->di = r->rdi, u->orig_ax = r->orig_rax;
	u->ip = r->rip, u->cs = r->cs, u->flags = r->eflags, u->sp = r->rsp;
	u->ss = r->ss, u->fs_base = r->fs_base, u->gs_base = r->gs_base;
	u->ds = r->ds, u->es = r->es, u->fs = r->fs, u->gs = r->gs;
}

static void regs_from_image(const UserRegs *u, struct user_regs_struct *r)
{
	r->r15 = u->r15, r->r14 = u->r14, r->r13 = u->r13, r->r12 = u->r12;
	r->rbp = u->bp, r->rbx = u->bx, r->r11 = u->r11, r->r10 = u->r10;
	r->r9 = u->r9, r->r8 = u->r8, r->rax = u->ax, r->rcx = u->cx;
	r->rdx = u->dx, r->rsi = u->si, r->rdi = u->di, r->orig_rax = u->orig_ax;
	r->rip = u->ip, r->cs = u->cs, r->eflags = u->flags, r->rsp = u->sp;
	r->ss = u->ss, r->fs_base = u->fs_base, r->gs_base = u->gs_base;
	r->ds = u->ds, r->es = u->es, r->fs = u->fs, r->gs = u->gs;
}

/*
 * A task stopped inside a syscall resumes by restarting it, as the kernel
 * would on return from a signal without handler.  A restart_block (e.g. of
 * nanosleep) does not survive, so that syscall returns EINTR (as in CRIU).
 */
static void fixup_restart(struct user_regs_struct *r)
{
	if ((long)r->orig_rax < 0)
		return;
	switch ((int)r->rax) {
	case -ERESTARTSYS:
	case -ERESTARTNOINTR:
	case -ERESTARTNOHAND:
		r->rax = r->orig_rax;
		r->rip -= 2;
		break;
	case -ERESTART_RESTARTBLOCK:
		r->rax = -EINTR;
		break;
	}
	r->orig_rax = -1;
}

/*
 * A thread with an x86 user shadow stack: amber does not restore the shadow
 * stack (its contents, pointer and token), and the thread's first return
 * after a restore would fault.  infect.c read its status at seize.
 */
static int refuse_shstk(pid_t pid, const struct thread *t)
{
	if (!t->inf->shstk)
		return 0;
	pr_err("pid %d thread %d: has an x86 user shadow stack (x86_Thread_features: shstk), "
	       "which amber cannot restore; start the program without it "
	       "(GLIBC_TUNABLES=glibc.cpu.x86_shstk=off)",
	       pid, t->tid);
	return -EOPNOTSUPP;
}

static int regs_dump_thread(struct dump_ctx *ctx, struct thread *t)
{
	struct user_regs_struct r = t->inf->regs;
	TaskCore *core = t->core;
	pid_t tid = t->tid;
	struct rseq_config rc;
	struct iovec iov;
	void *xsave;
	UserRegs *u;
	long ret;

	ret = refuse_shstk(ctx->pid, t);
	if (ret)
		return (int)ret;
	u = malloc(sizeof(*u));
	xsave = calloc(1, XSAVE_MAX);
	if (!u || !xsave) {
		free(u);
		free(xsave);
		return -ENOMEM;
	}
	fixup_restart(&r);
	regs_to_image(&r, u);
	core->regs = u;

	iov.iov_base = xsave;
	iov.iov_len = XSAVE_MAX;
	ret = sys_ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov);
	if (ret) {
		pr_err("pid %d: cannot read the FPU/XSAVE state: %s", tid, strerror((int)-ret));
		free(xsave);
		return (int)ret;
	}
	core->xsave.data = xsave;
	core->xsave.len = iov.iov_len;
	core->sigmask = t->inf->sigmask;

	ret = sys_ptrace(PTRACE_GET_RSEQ_CONFIGURATION, tid, (void *)sizeof(rc), &rc);
	if (ret > 0 && rc.rseq_abi_pointer) {
		core->has_rseq_addr = core->has_rseq_len = core->has_rseq_sig = 1;
		core->rseq_addr = rc.rseq_abi_pointer;
		core->rseq_len = rc.rseq_abi_size;
		core->rseq_sig = rc.signature;
	}
	{
		uint64_t head = 0;
		size_t len = 0;

		if (!syscall(SYS_get_robust_list, tid, &head, &len) && head) {
			core->has_robust_list = core->has_robust_list_len = 1;
			core->robust_list = head;
			core->robust_list_len = len;
		}
	}
	/* PR_GET_TID_ADDRESS writes the pointer into the task's memory */
	{
		int err = thread_probe(t);
		long r = t->probe.ret[PROBE_TID_ADDRESS];

		if (err)
			return err;
		if (r) {
			pr_err("tid %d: PR_GET_TID_ADDRESS failed (%s); amber needs a kernel with "
			       "CONFIG_CHECKPOINT_RESTORE",
			       tid, strerror((int)-r));
			return (int)r;
		}
		memcpy(&core->clear_child_tid, t->probe.mem + PROBE_TID_AT, sizeof(uint64_t));
		return 0;
	}
}

static int regs_restore_read(struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_threads; i++) {
		TaskCore *c = ctx->threads[i].core;

		if (!c->regs || c->xsave.len < 512 || c->xsave.len > XSAVE_MAX) {
			pr_err("core-%d.img has no usable register state; the image is corrupt",
			       ctx->threads[i].tid);
			return -EBADMSG;
		}
	}
	return 0;
}

/*
 * Per-thread kernel pointers into user memory, now that memory is back: a
 * batch a thread, in windows of them (threads_batches()).
 */
struct ptr_batch {
	struct infect_sc sc[3];
	size_t n;
};

static int ptrs_batch(void *arg, void *ctx, struct thread *t, size_t slot, bool alone,
		      struct infect_sc **sc, size_t *n)
{
	struct ptr_batch *b = (struct ptr_batch *)arg + slot;
	TaskCore *c = t->core;

	b->sc[0] = (struct infect_sc){SYS_set_tid_address, {(long)c->clear_child_tid}};
	b->sc[1] = (struct infect_sc){SYS_set_robust_list,
				      {c->has_robust_list ? (long)c->robust_list : 0,
				       c->has_robust_list ? (long)c->robust_list_len : 24}};
	b->sc[2] = (struct infect_sc){
		SYS_rseq, {(long)c->rseq_addr, (long)c->rseq_len, 0, (long)c->rseq_sig}};
	b->n = c->has_rseq_addr ? 3 : 2;
	*sc = b->sc;
	*n = b->n;
	return 0;
}

static int ptrs_done(void *arg, struct thread *t, size_t slot)
{
	struct ptr_batch *b = (struct ptr_batch *)arg + slot;
	long r = 0;

	for (size_t i = 0; !r && i < b->n; i++)
		if (b->sc[i].ret < 0)
			r = b->sc[i].ret;
	if (r)
		pr_err("pid %d: cannot restore thread pointers (tid address, robust list, rseq): "
		       "%s",
		       t->tid, strerror((int)-r));
	return (int)r;
}

static int regs_restore_inject(struct restore_ctx *ctx)
{
	struct ptr_batch *p = calloc(THREAD_WINDOW, sizeof(*p));
	struct thread_batch b = {"thread pointers", 4, p, ptrs_batch, ptrs_done, NULL};
	int ret = p ? threads_batches(ctx, &b) : -ENOMEM;

	free(p);
	return ret;
}

/*
 * Before its memory goes: the kernel would write into amber's rseq area.
 * 1 with the syscall that unregisters it in *sc (mem.c runs it first in the
 * batch that clears the address space), 0 if there is none.
 */
int regs_forget_rseq(struct restore_ctx *ctx, struct infect_sc *sc)
{
	struct rseq_config rc;
	long r = sys_ptrace(PTRACE_GET_RSEQ_CONFIGURATION, ctx->inf.pid, (void *)sizeof(rc), &rc);

	if (r <= 0 || !rc.rseq_abi_pointer)
		return 0;
	*sc = (struct infect_sc){SYS_rseq,
				 {(long)rc.rseq_abi_pointer, (long)rc.rseq_abi_size,
				  RSEQ_FLAG_UNREGISTER, (long)rc.signature}};
	return 1;
}

static int finish_thread(pid_t tid, TaskCore *core)
{
	struct user_regs_struct r;
	struct iovec iov = {core->xsave.data, core->xsave.len};
	uint64_t mask = core->sigmask;
	long ret;

	memset(&r, 0, sizeof(r));
	regs_from_image(core->regs, &r);
	ret = sys_ptrace(PTRACE_SETREGS, tid, NULL, &r);
	if (ret) {
		pr_err("pid %d: the kernel refused the saved registers: %s", tid,
		       strerror((int)-ret));
		return (int)ret;
	}
	ret = sys_ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov);
	if (ret) {
		pr_err("pid %d: the kernel refused the saved FPU/XSAVE state (%zu bytes): %s; "
		       "was the image made on a CPU with other features (AVX-512...)?",
		       tid, iov.iov_len, strerror((int)-ret));
		return (int)ret;
	}
	ret = sys_ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(mask), &mask);
	if (ret) {
		pr_err("pid %d: cannot set the signal mask: %s", tid, strerror((int)-ret));
		return (int)ret;
	}
	return 0;
}

int restore_finish(struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_threads; i++) {
		int ret = finish_thread(ctx->threads[i].inf->pid, ctx->threads[i].core);

		if (ret)
			return ret;
	}
	return 0;
}

const struct resource_ops regs_ops = {
	.name = "registers",
	.restore_read = regs_restore_read,
	.dump_thread = regs_dump_thread,
	.restore_inject = regs_restore_inject,
};
