// SPDX-License-Identifier: MIT
/*
 * seccomp, per thread: strict mode, or a chain of classic BPF filters with
 * their flags (SECCOMP_FILTER_FLAG_LOG, and SPEC_ALLOW when the thread's
 * store-bypass mitigation was not forced by them).
 *
 * Dump reads the chain with PTRACE_SECCOMP_GET_FILTER and
 * PTRACE_GET_SECCOMP_METADATA; infect.c suspends the filters of such threads
 * (PTRACE_O_SUSPEND_SECCOMP) so that amber's injected syscalls pass.  A
 * filter that can return SECCOMP_RET_USER_NOTIF is refused: its listener, an
 * fd of some supervisor, cannot be recreated.
 *
 * Restore installs the filters before the credentials (the thread is still
 * root; filters only take rights away) under PTRACE_O_SUSPEND_SECCOMP, so
 * the rest of the restore still runs.  The kernel cannot say whether two
 * threads share a filter, so filters are compared by content: the oldest
 * filters every thread has alike are installed once by the leader with
 * SECCOMP_FILTER_FLAG_TSYNC, shared by all threads as a filter installed
 * with TSYNC, or before the threads were created, is; the rest are each
 * thread's own.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "amber.h"
#include "infect.h"
#include "log.h"
#include "sys.h"

#ifndef PTRACE_SECCOMP_GET_METADATA
#define PTRACE_SECCOMP_GET_METADATA 0x420d
#endif
#ifndef SECCOMP_RET_USER_NOTIF
#define SECCOMP_RET_USER_NOTIF 0x7fc00000U
#endif
#ifndef SECCOMP_FILTER_FLAG_SPEC_ALLOW
#define SECCOMP_FILTER_FLAG_SPEC_ALLOW (1UL << 2)
#endif

#define MODE_STRICT	1
#define MODE_FILTER	2
#define MAX_INSNS_PATH	32768 /* the kernel's MAX_INSNS_PER_PATH */
#define PATH_PENALTY	4     /* instructions the kernel counts per filter */
#define MAX_FILTERS	(MAX_INSNS_PATH / (PATH_PENALTY + 1) + 1)
#define KEPT_FLAGS	(SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_SPEC_ALLOW)
#define SECCOMP_DATA_SZ 64 /* struct seccomp_data */

struct kmetadata {
	uint64_t filter_off;
	uint64_t flags;
};

/* Whether the thread's store-bypass mitigation is still its own choice. */
static bool spec_vulnerable(pid_t tid)
{
	char path[64], line[160];
	bool vulnerable = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	f = sys_fopen_read(path);
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Speculation_Store_Bypass:", 25))
			vulnerable = strstr(line, "thread vulnerable") != NULL;
	fclose(f);
	return vulnerable;
}

static bool returns_user_notif(const struct sock_filter *insn, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (insn[i].code == (BPF_RET | BPF_K) &&
		    (insn[i].k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF)
			return true;
	return false;
}

/* Filter number idx, counted from the newest (0) as ptrace does. */
static int dump_filter(struct dump_ctx *ctx, pid_t tid, unsigned long idx, bool spec_allow,
		       SeccompFilter **out)
{
	struct kmetadata md = {.filter_off = idx};
	SeccompFilter *f;
	long n, r;

	n = sys_ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)idx, NULL);
	if (n <= 0 || n > BPF_MAXINSNS) {
		pr_err("pid %d thread %d: cannot read seccomp filter %lu: %s", ctx->pid, tid, idx,
		       n < 0 ? strerror((int)-n) : "bad length");
		return n < 0 ? (int)n : -EIO;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	seccomp_filter__init(f);
	*out = f;
	f->prog.len = (size_t)n * sizeof(struct sock_filter);
	f->prog.data = malloc(f->prog.len);
	if (!f->prog.data)
		return -ENOMEM;
	r = sys_ptrace(PTRACE_SECCOMP_GET_FILTER, tid, (void *)idx, f->prog.data);
	if (r != n) {
		pr_err("pid %d thread %d: cannot read seccomp filter %lu: %s", ctx->pid, tid, idx,
		       r < 0 ? strerror((int)-r) : "it changed");
		return r < 0 ? (int)r : -EIO;
	}
	if (returns_user_notif((struct sock_filter *)f->prog.data, (size_t)n)) {
		pr_err("pid %d thread %d: seccomp filter %lu hands syscalls to a supervisor "
		       "(SECCOMP_RET_USER_NOTIF), whose listener amber cannot recreate; dump "
		       "the supervisor's tree without this filter, or the program outside it",
		       ctx->pid, tid, idx);
		return -EOPNOTSUPP;
	}
	r = sys_ptrace(PTRACE_SECCOMP_GET_METADATA, tid, (void *)sizeof(md), &md);
	if (r < 0) {
		pr_err("pid %d thread %d: cannot read the flags of seccomp filter %lu: %s",
		       ctx->pid, tid, idx, strerror((int)-r));
		return (int)r;
	}
	f->has_flags = 1;
	f->flags = (uint32_t)(md.flags & SECCOMP_FILTER_FLAG_LOG);
	if (spec_allow)
		f->flags |= SECCOMP_FILTER_FLAG_SPEC_ALLOW;
	return 0;
}

static int seccomp_dump_thread(struct dump_ctx *ctx, struct thread *t)
{
	TaskCore *c = t->core;
	bool spec_allow;
	size_t n;
	int ret;

	if (!t->inf->seccomp)
		return 0;
	c->has_seccomp_mode = 1;
	c->seccomp_mode = (uint32_t)t->inf->seccomp;
	if (t->inf->seccomp != MODE_FILTER)
		return 0;
	for (n = 0;; n++) {
		long r = sys_ptrace(PTRACE_SECCOMP_GET_FILTER, t->tid, (void *)n, NULL);

		if (r == -ENOENT)
			break;
		if (r < 0) {
			pr_err("pid %d thread %d: cannot read its seccomp filters: %s%s", ctx->pid,
			       t->tid, strerror((int)-r),
			       r == -EACCES || r == -EPERM
				       ? " (it needs CAP_SYS_ADMIN and amber not under seccomp)"
				       : "");
			return (int)r;
		}
		if (n >= MAX_FILTERS) {
			pr_err("pid %d thread %d: more seccomp filters than the kernel allows",
			       ctx->pid, t->tid);
			return -E2BIG;
		}
	}
	if (!n) {
		pr_err("pid %d thread %d: in seccomp filter mode without filters", ctx->pid,
		       t->tid);
		return -EIO;
	}
	c->seccomp_filters = calloc(n, sizeof(*c->seccomp_filters));
	if (!c->seccomp_filters)
		return -ENOMEM;
	c->n_seccomp_filters = n;
	spec_allow = spec_vulnerable(t->tid);
	/* oldest first, the order they are installed in again */
	for (size_t i = 0; i < n; i++) {
		ret = dump_filter(ctx, t->tid, i, spec_allow, &c->seccomp_filters[n - 1 - i]);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * The checks the kernel makes of a classic seccomp program
 * (bpf_check_classic, check_load_and_stores, seccomp_check_filter), so that
 * an image the kernel would refuse is refused before any process exists.
 */
static bool code_allowed(uint16_t code)
{
	switch (code) {
	case BPF_LD | BPF_W | BPF_ABS:
	case BPF_LD | BPF_W | BPF_LEN:
	case BPF_LDX | BPF_W | BPF_LEN:
	case BPF_RET | BPF_K:
	case BPF_RET | BPF_A:
	case BPF_ALU | BPF_ADD | BPF_K:
	case BPF_ALU | BPF_ADD | BPF_X:
	case BPF_ALU | BPF_SUB | BPF_K:
	case BPF_ALU | BPF_SUB | BPF_X:
	case BPF_ALU | BPF_MUL | BPF_K:
	case BPF_ALU | BPF_MUL | BPF_X:
	case BPF_ALU | BPF_DIV | BPF_K:
	case BPF_ALU | BPF_DIV | BPF_X:
	case BPF_ALU | BPF_AND | BPF_K:
	case BPF_ALU | BPF_AND | BPF_X:
	case BPF_ALU | BPF_OR | BPF_K:
	case BPF_ALU | BPF_OR | BPF_X:
	case BPF_ALU | BPF_XOR | BPF_K:
	case BPF_ALU | BPF_XOR | BPF_X:
	case BPF_ALU | BPF_LSH | BPF_K:
	case BPF_ALU | BPF_LSH | BPF_X:
	case BPF_ALU | BPF_RSH | BPF_K:
	case BPF_ALU | BPF_RSH | BPF_X:
	case BPF_ALU | BPF_NEG:
	case BPF_LD | BPF_IMM:
	case BPF_LDX | BPF_IMM:
	case BPF_MISC | BPF_TAX:
	case BPF_MISC | BPF_TXA:
	case BPF_LD | BPF_MEM:
	case BPF_LDX | BPF_MEM:
	case BPF_ST:
	case BPF_STX:
	case BPF_JMP | BPF_JA:
	case BPF_JMP | BPF_JEQ | BPF_K:
	case BPF_JMP | BPF_JEQ | BPF_X:
	case BPF_JMP | BPF_JGE | BPF_K:
	case BPF_JMP | BPF_JGE | BPF_X:
	case BPF_JMP | BPF_JGT | BPF_K:
	case BPF_JMP | BPF_JGT | BPF_X:
	case BPF_JMP | BPF_JSET | BPF_K:
	case BPF_JMP | BPF_JSET | BPF_X:
		return true;
	}
	return false;
}

static const char *check_prog(const struct sock_filter *p, size_t n)
{
	uint16_t *masks, valid = 0; /* scratch cells written on every path here */
	const char *why = NULL;

	if (!n || n > BPF_MAXINSNS)
		return "its length is out of range";
	if (BPF_CLASS(p[n - 1].code) != BPF_RET)
		return "it does not end in a return";
	if (returns_user_notif(p, n))
		return "it returns SECCOMP_RET_USER_NOTIF";
	masks = malloc(n * sizeof(*masks));
	if (!masks)
		return "out of memory";
	memset(masks, 0xff, n * sizeof(*masks));
	for (size_t pc = 0; pc < n && !why; pc++) {
		const struct sock_filter *f = &p[pc];

		valid &= masks[pc];
		if (!code_allowed(f->code)) {
			why = "an instruction seccomp does not allow";
			break;
		}
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (f->k >= SECCOMP_DATA_SZ || f->k & 3)
				why = "a load outside struct seccomp_data";
			break;
		case BPF_ALU | BPF_DIV | BPF_K:
			if (!f->k)
				why = "a division by zero";
			break;
		case BPF_ALU | BPF_LSH | BPF_K:
		case BPF_ALU | BPF_RSH | BPF_K:
			if (f->k >= 32)
				why = "a shift by 32 or more";
			break;
		case BPF_ST:
		case BPF_STX:
		case BPF_LD | BPF_MEM:
		case BPF_LDX | BPF_MEM:
			if (f->k >= BPF_MEMWORDS) {
				why = "a scratch memory cell out of range";
				break;
			}
			if (f->code == BPF_ST || f->code == BPF_STX)
				valid |= (uint16_t)(1U << f->k);
			else if (!(valid & (1U << f->k)))
				why = "a scratch memory cell read before it is written";
			break;
		case BPF_JMP | BPF_JA:
			if (f->k >= n - pc - 1) {
				why = "a jump out of the program";
				break;
			}
			masks[pc + 1 + f->k] &= valid;
			valid = 0xffff;
			break;
		default:
			if (BPF_CLASS(f->code) != BPF_JMP)
				break;
			if (pc + f->jt + 1 >= n || pc + f->jf + 1 >= n) {
				why = "a jump out of the program";
				break;
			}
			masks[pc + 1 + f->jt] &= valid;
			masks[pc + 1 + f->jf] &= valid;
			valid = 0xffff;
		}
	}
	free(masks);
	return why;
}

static int check_thread(struct restore_ctx *ctx, TaskCore *c)
{
	uint32_t mode = c->has_seccomp_mode ? c->seccomp_mode : 0;
	size_t path = 0;

	if (mode > MODE_FILTER || (mode == MODE_FILTER) != (c->n_seccomp_filters != 0) ||
	    c->n_seccomp_filters > MAX_FILTERS) {
		pr_err("core-%u.img: seccomp mode %u with %zu filters; the image is corrupt",
		       c->pid, mode, c->n_seccomp_filters);
		return -EBADMSG;
	}
	if (mode == MODE_FILTER && !c->no_new_privs && ctx->tree->owner.uid) {
		/* the kernel asks the same of an unprivileged process (a filter
		 * could fool a set-user-ID program it executes) */
		pr_err("core-%u.img: seccomp filters without no_new_privs, in an image of uid "
		       "%u: only root's images may ask for that",
		       c->pid, (unsigned)ctx->tree->owner.uid);
		return -EPERM;
	}
	for (size_t i = 0; i < c->n_seccomp_filters; i++) {
		SeccompFilter *f = c->seccomp_filters[i];
		size_t n = f->prog.len / sizeof(struct sock_filter);
		const char *why = NULL;

		if (f->prog.len % sizeof(struct sock_filter))
			why = "its length is not a whole number of instructions";
		else if (f->flags & ~(uint32_t)KEPT_FLAGS)
			why = "unknown flags";
		else
			why = check_prog((const struct sock_filter *)f->prog.data, n);
		path += n + (i ? PATH_PENALTY : 0);
		if (!why && path > MAX_INSNS_PATH)
			why = "the chain is longer than the kernel allows";
		if (why) {
			pr_err("core-%u.img: seccomp filter %zu cannot be installed: %s; the "
			       "image is corrupt",
			       c->pid, i, why);
			return -EBADMSG;
		}
	}
	return 0;
}

static int seccomp_restore_read(struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_threads; i++) {
		int ret = check_thread(ctx, ctx->threads[i].core);

		if (ret)
			return ret;
	}
	return 0;
}

static bool same_filter(const SeccompFilter *a, const SeccompFilter *b)
{
	return a->flags == b->flags && a->prog.len == b->prog.len &&
	       !memcmp(a->prog.data, b->prog.data, a->prog.len);
}

/* How many of the oldest filters every thread has alike (0: one thread). */
static size_t shared_filters(const struct restore_ctx *ctx)
{
	TaskCore *lead = ctx->threads[0].core;
	size_t n = lead->n_seccomp_filters;

	if (ctx->nr_threads < 2)
		return 0;
	for (size_t i = 1; i < ctx->nr_threads; i++) {
		TaskCore *c = ctx->threads[i].core;
		size_t k = 0;

		while (k < n && k < c->n_seccomp_filters &&
		       same_filter(lead->seccomp_filters[k], c->seccomp_filters[k]))
			k++;
		n = k;
	}
	return n;
}

static int install(struct restore_ctx *ctx, struct thread *t, size_t idx, unsigned extra)
{
	SeccompFilter *f = t->core->seccomp_filters[idx];
	unsigned long s = t->inf->scratch;
	struct {
		uint64_t len;
		uint64_t filter;
	} fprog = {f->prog.len / sizeof(struct sock_filter), s + 64};
	long r;
	int ret;

	ret = infect_write(t->inf, s, &fprog, sizeof(fprog));
	if (!ret)
		ret = infect_write(t->inf, s + 64, f->prog.data, f->prog.len);
	if (ret)
		return ret;
	r = infect_call(t->inf, SYS_seccomp, SECCOMP_SET_MODE_FILTER, f->flags | extra, (long)s, 0,
			0, 0);
	if (r) {
		pr_err("pid %d thread %d: cannot install seccomp filter %zu: %s", ctx->pid, t->tid,
		       idx, r > 0 ? "another thread's filters differ (TSYNC)" : strerror((int)-r));
		return r > 0 ? -EBUSY : (int)r;
	}
	return 0;
}

static bool any_seccomp(const struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_threads; i++)
		if (ctx->threads[i].core->has_seccomp_mode && ctx->threads[i].core->seccomp_mode)
			return true;
	return false;
}

static int seccomp_restore_inject(struct restore_ctx *ctx)
{
	size_t shared;

	if (!any_seccomp(ctx))
		return 0;
	/* Every thread's, before a filter reaches it through TSYNC. */
	for (size_t i = 0; i < ctx->nr_threads; i++) {
		long r = sys_ptrace(PTRACE_SETOPTIONS, ctx->threads[i].inf->pid, NULL,
				    (void *)(long)(PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD |
						   PTRACE_O_SUSPEND_SECCOMP));

		if (r) {
			pr_err("pid %d thread %d: cannot suspend seccomp while restoring it: "
			       "%s%s",
			       ctx->pid, ctx->threads[i].tid, strerror((int)-r),
			       r == -EPERM ? " (restoring seccomp needs root, with amber itself "
					     "not under seccomp)"
					   : "");
			return (int)r;
		}
	}
	shared = shared_filters(ctx);
	for (size_t i = 0; i < shared; i++) {
		int ret = install(ctx, &ctx->threads[0], i, SECCOMP_FILTER_FLAG_TSYNC);

		if (ret)
			return ret;
	}
	return 0;
}

static int seccomp_restore_thread(struct restore_ctx *ctx, struct thread *t)
{
	TaskCore *c = t->core;
	long r;

	if (!c->has_seccomp_mode || !c->seccomp_mode)
		return 0;
	if (c->seccomp_mode == MODE_STRICT) {
		r = infect_call(t->inf, SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, 0, 0, 0, 0);
		if (r)
			pr_err("pid %d thread %d: cannot enter seccomp strict mode: %s", ctx->pid,
			       t->tid, strerror((int)-r));
		return (int)r;
	}
	for (size_t i = shared_filters(ctx); i < c->n_seccomp_filters; i++) {
		int ret = install(ctx, t, i, 0);

		if (ret)
			return ret;
	}
	return 0;
}

const struct resource_ops seccomp_ops = {
	.name = "seccomp",
	.dump_thread = seccomp_dump_thread,
	.restore_read = seccomp_restore_read,
	.restore_inject = seccomp_restore_inject,
	.restore_thread = seccomp_restore_thread,
};
