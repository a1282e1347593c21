// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "infect.h"
#include "pie-batch.h"
#include "log.h"
#include "stats.h"
#include "proc.h"
#include "sys.h"

#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#define PTRACE_SETSIGMASK 0x420b
#endif

#ifndef PTRACE_GET_SYSCALL_INFO
#define PTRACE_GET_SYSCALL_INFO	 0x420e
#define PTRACE_SYSCALL_INFO_EXIT 2
#endif

static bool is_job_stop_sig(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/*
 * What /proc/TID/status tells of a seized thread: its seccomp mode, whether
 * its shadow stack is on, and whether a trap of amber's would take a queued
 * signal: a SIGTRAP in tid's queue or its process's, or any synchronous
 * signal in tid's own queue (the kernel's dequeue_synchronous_signal() hands
 * out the first one queued, even a blocked one, as soon as one such signal,
 * the trap, is unblocked).
 */
static int read_status(struct infect *inf)
{
	pid_t tid = inf->pid;
	unsigned long long own = 0, shared = 0;
	char path[64], *buf;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("tid %d: cannot read %s: %s", tid, path, strerror(-ret));
		return ret;
	}
	for (const char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, "SigPnd:", 7))
			own = strtoull(l + 7, NULL, 16);
		else if (!strncmp(l, "ShdPnd:", 7))
			shared = strtoull(l + 7, NULL, 16);
		else if (!strncmp(l, "x86_Thread_features:", 20))
			inf->shstk = proc_status_shstk(l);
		else if (!strncmp(l, "Seccomp:", 8))
			inf->seccomp = (int)strtol(l + 8, NULL, 10);
	inf->trap_pending =
		(own & INFECT_SYNC_SIGNALS) || ((own | shared) & (1ULL << (SIGTRAP - 1)));
	free(inf->status);
	inf->status = buf;
	return 0;
}

const char *infect_status(const struct infect *inf)
{
	return inf->status;
}

static int save_regs(struct infect *inf)
{
	long r = sys_ptrace(PTRACE_GETREGS, inf->pid, NULL, &inf->regs);

	if (r) {
		pr_err("pid %d: cannot read registers: %s", inf->pid, strerror((int)-r));
		return (int)r;
	}
	r = sys_ptrace(PTRACE_GETSIGMASK, inf->pid, (void *)sizeof(uint64_t), &inf->sigmask);
	if (r) {
		pr_err("pid %d: cannot read the signal mask: %s", inf->pid, strerror((int)-r));
		return (int)r;
	}
	return 0;
}

static int save_state(struct infect *inf)
{
	return save_regs(inf) ?: read_status(inf);
}

/*
 * A thread under seccomp would be killed, or see errors, for the syscalls
 * amber injects: its filters are suspended while amber traces it (needs
 * CAP_SYS_ADMIN, and amber itself not under seccomp).
 */
static int suspend_seccomp(struct infect *inf)
{
	long r = sys_ptrace(PTRACE_SETOPTIONS, inf->pid, NULL,
			    (void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_SUSPEND_SECCOMP));

	if (r)
		pr_err("tid %d runs under seccomp (mode %d) and amber cannot suspend it to "
		       "dump it: %s%s",
		       inf->pid, inf->seccomp, strerror((int)-r),
		       r == -EPERM ? " (it needs CAP_SYS_ADMIN and amber not under seccomp "
				     "itself: run amber as root, outside any seccomp sandbox)"
				   : "");
	return (int)r;
}

int infect_seize_start(pid_t pid, struct infect *inf)
{
	long r;

	memset(inf, 0, sizeof(*inf));
	inf->pid = pid;
	r = sys_ptrace(PTRACE_SEIZE, pid, NULL, (void *)(long)PTRACE_O_TRACESYSGOOD);
	if (r) {
		if (r == -EPERM && geteuid())
			pr_err("cannot ptrace pid %d: permission denied (amber runs as uid %u "
			       "without CAP_SYS_PTRACE: it can trace only dumpable processes of "
			       "that uid; run it as root)",
			       pid, (unsigned)geteuid());
		else if (r == -EPERM)
			pr_err("cannot ptrace pid %d: permission denied (a kernel thread, traced "
			       "by another tracer, or refused by a security module?)",
			       pid);
		else if (r == -ESRCH)
			pr_err("pid %d does not exist", pid);
		else
			pr_err("cannot ptrace pid %d: %s", pid, strerror((int)-r));
		return (int)r;
	}
	r = sys_ptrace(PTRACE_INTERRUPT, pid, NULL, NULL);
	if (r) {
		pr_err("cannot interrupt pid %d: %s", pid, strerror((int)-r));
		sys_ptrace(PTRACE_DETACH, pid, NULL, NULL);
	}
	return (int)r;
}

int infect_seize_wait(struct infect *inf, int *stopsig)
{
	pid_t pid = inf->pid;
	int status, ret;
	long r;

	*stopsig = 0;
	for (;;) {
		r = sys_waitpid(pid, &status, __WALL);
		if (r < 0) {
			pr_err("waiting for pid %d to stop: %s", pid, strerror((int)-r));
			goto detach;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			pr_err("pid %d exited while being frozen", pid);
			return -ESRCH;
		}
		if (!WIFSTOPPED(status))
			continue;
		if (status >> 16 == PTRACE_EVENT_STOP) {
			int sig = WSTOPSIG(status);

			/* SIGTRAP: our interrupt; a job-control signal: it was stopped */
			if (is_job_stop_sig(sig))
				*stopsig = sig;
			break;
		}
		/*
		 * A signal arrived first: deliver it as it would have been, the
		 * interrupt stays pending and stops the task right after.
		 */
		r = sys_ptrace(PTRACE_CONT, pid, NULL, (void *)(long)WSTOPSIG(status));
		if (r) {
			pr_err("pid %d: cannot pass on signal %d: %s", pid, WSTOPSIG(status),
			       strerror((int)-r));
			goto detach;
		}
	}
	ret = save_state(inf);
	if (!ret && inf->seccomp)
		ret = suspend_seccomp(inf);
	if (ret) {
		r = ret;
		goto detach;
	}
	return 0;
detach:
	sys_ptrace(PTRACE_DETACH, pid, NULL, NULL);
	return (int)r;
}

int infect_seize(pid_t pid, struct infect *inf, int *stopsig)
{
	int ret = infect_seize_start(pid, inf);

	return ret ? ret : infect_seize_wait(inf, stopsig);
}

int infect_attach_stopped(pid_t pid, struct infect *inf)
{
	memset(inf, 0, sizeof(*inf));
	inf->pid = pid;
	/* a restored task gets its registers from the image at the end (regs.c) */
	inf->lazy_regs = true;
	return save_state(inf);
}

int infect_attach_new_thread(pid_t tid, struct infect *inf, const struct infect *creator)
{
	memset(inf, 0, sizeof(*inf));
	inf->pid = tid;
	inf->lazy_regs = true;
	inf->seccomp = creator->seccomp;
	inf->shstk = creator->shstk;
	inf->trap_pending = creator->trap_pending;
	return save_regs(inf);
}

/* The first `0f 05` in [start, end) of the tracee: any such byte pair executes as `syscall`. */
static int find_pair(struct infect *inf, unsigned long start, unsigned long end)
{
	enum { CHUNK = 64 << 10 };
	unsigned char *buf = malloc(CHUNK);
	int ret = -ENOENT;

	if (!buf)
		return -ENOMEM;
	/* chunks overlap by one byte: a pair across their border is found too */
	for (unsigned long at = start; ret == -ENOENT && at + 1 < end; at += CHUNK - 1) {
		size_t len = end - at < CHUNK ? end - at : CHUNK;

		if (infect_read(inf, at, buf, len)) {
			ret = -ENOENT; /* unreadable (a device's mapping): try the next one */
			break;
		}
		for (size_t i = 0; i + 1 < len; i++)
			if (buf[i] == 0x0f && buf[i + 1] == 0x05) {
				inf->syscall_ip = at + i;
				ret = 0;
				break;
			}
	}
	free(buf);
	return ret;
}

/*
 * The vDSO's `syscall` if the task has one; else (it unmapped it) one in its
 * own code, only read.  Restore maps its own later (infect_scratch_syscall).
 */
int infect_find_syscall(struct infect *inf)
{
	char path[64], *buf, *line, *save, *at;
	unsigned long vdso_start = 0, vdso_end = 0;
	struct {
		unsigned long start, end;
	} *code = NULL;
	size_t nr = 0, cap = 0;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/maps", inf->pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret)
		return ret;
	ret = -ENOENT;
	/* the vDSO's line first, without parsing the others (a process may have
	 * thousands of mappings) */
	for (at = buf; !vdso_start && (at = strstr(at, " [vdso]\n")); at++) {
		char *l = at, *nl = at + 7;
		struct vma v;
		const char *name;

		while (l > buf && l[-1] != '\n')
			l--;
		*nl = '\0';
		if (proc_maps_line(l, &v, &name) && !strcmp(name, "[vdso]"))
			vdso_start = v.start, vdso_end = v.end;
		*nl = '\n';
	}
	for (line = strtok_r(buf, "\n", &save); !vdso_start && line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct vma v;
		const char *name;

		/* [vsyscall] is emulated: only its entry points execute */
		if (!proc_maps_line(line, &v, &name) || !(v.prot & PROT_EXEC) ||
		    !strcmp(name, "[vsyscall]"))
			continue;
		if (nr == cap) {
			void *c = realloc(code, (cap = cap ? 2 * cap : 16) * sizeof(*code));

			if (!c) {
				ret = -ENOMEM;
				goto free_maps;
			}
			code = c;
		}
		code[nr].start = v.start, code[nr].end = v.end;
		nr++;
	}
	if (vdso_start) {
		ret = find_pair(inf, vdso_start, vdso_end);
		if (ret == -ENOENT)
			pr_err("pid %d: no syscall instruction in the vDSO", inf->pid);
		goto free_maps;
	}
	for (size_t i = 0; ret == -ENOENT && i < nr; i++)
		ret = find_pair(inf, code[i].start, code[i].end);
	if (!ret)
		pr_info("pid %d has no vDSO: injecting through the syscall instruction at %lx",
			inf->pid, inf->syscall_ip);
	else if (ret == -ENOENT)
		pr_err("pid %d has no vDSO and no syscall instruction in its executable "
		       "mappings: amber cannot make it run syscalls",
		       inf->pid);
free_maps:
	free(buf);
	free(code);
	return ret;
}

/*
 * Syscalls from here on through the `syscall` of the batch executor in the
 * scratch area: the task's own vDSO may go.  Gone with the scratch area.
 */
int infect_scratch_syscall(struct infect *inf)
{
	unsigned long code = inf->scratch + inf->scratch_size / 2;
	size_t i;
	int ret;

	for (i = 0; i + 1 < sizeof(pie_batch); i++)
		if (pie_batch[i] == 0x0f && pie_batch[i + 1] == 0x05)
			break;
	if (!inf->scratch || i + 1 >= sizeof(pie_batch))
		return -EINVAL;
	if (!inf->batch_loaded) {
		ret = infect_write(inf, code, pie_batch, sizeof(pie_batch));
		if (ret)
			return ret;
		inf->batch_loaded = true;
	}
	inf->syscall_ip = code + i;
	return 0;
}

/*
 * Every signal but SIGTRAP: our single-step and breakpoint traps are forced
 * SIGTRAPs, and the kernel resets the handler of a forced signal that is
 * blocked to SIG_DFL.  Unblocked, the trap just stops the task for us.
 */
int infect_block_signals(struct infect *inf)
{
	uint64_t all = inf->trap_pending ? ~0ULL : ~(1ULL << (SIGTRAP - 1));
	long r = sys_ptrace(PTRACE_SETSIGMASK, inf->pid, (void *)sizeof(all), &all);

	if (r) {
		pr_err("pid %d: cannot block signals: %s", inf->pid, strerror((int)-r));
		return (int)r;
	}
	inf->mask_blocked = true;
	return 0;
}

int infect_trap_mode(struct infect *inf)
{
	uint64_t mask;
	long r;

	if (inf->trap_pending)
		return 0;
	r = sys_ptrace(PTRACE_GETSIGMASK, inf->pid, (void *)sizeof(mask), &mask);
	mask |= 1ULL << (SIGTRAP - 1);
	if (!r)
		r = sys_ptrace(PTRACE_SETSIGMASK, inf->pid, (void *)sizeof(mask), &mask);
	if (r) {
		pr_err("pid %d: cannot block SIGTRAP: %s", inf->pid, strerror((int)-r));
		return (int)r;
	}
	inf->trap_pending = true;
	return 0;
}

int infect_unblock_signals(struct infect *inf)
{
	long r;

	if (!inf->mask_blocked)
		return 0;
	r = sys_ptrace(PTRACE_SETSIGMASK, inf->pid, (void *)sizeof(inf->sigmask), &inf->sigmask);
	if (r) {
		pr_err("pid %d: cannot restore the signal mask: %s", inf->pid, strerror((int)-r));
		return (int)r;
	}
	inf->mask_blocked = false;
	return 0;
}

/* Its next stop (0, *status says which), or -ESRCH once said that it died meanwhile. */
static int __attribute__((format(printf, 3, 4)))
wait_stop(struct infect *inf, int *status, const char *doing, ...)
{
	long r = sys_waitpid(inf->pid, status, __WALL);
	char what[96];
	va_list ap;

	if (r < 0)
		return (int)r;
	if (WIFSTOPPED(*status))
		return 0;
	va_start(ap, doing);
	vsnprintf(what, sizeof(what), doing, ap);
	va_end(ap);
	pr_err("pid %d died while %s (status 0x%x)", inf->pid, what, *status);
	return -ESRCH;
}

/*
 * With a SIGTRAP of the task's queued and blocked: run to the syscall's exit
 * stop.  These stops are no signals, so nothing is dequeued or forced.  The
 * kernel tells them apart only under PTRACE_O_TRACESYSGOOD, which dump and
 * restore both set.
 */
static long run_to_exit(struct infect *inf, long nr)
{
	struct {
		uint8_t op;
		uint8_t rest[87];
	} info;
	int status;
	long r;

	for (;;) {
		r = sys_ptrace(PTRACE_SYSCALL, inf->pid, NULL, NULL);
		if (r)
			return r;
		r = wait_stop(inf, &status, "running injected syscall %ld", nr);
		if (r)
			return r;
		memset(&info, 0, sizeof(info));
		r = sys_ptrace(PTRACE_GET_SYSCALL_INFO, inf->pid, (void *)sizeof(info), &info);
		if (r < 0)
			return r;
		if (info.op == PTRACE_SYSCALL_INFO_EXIT)
			return 0;
		/* its entry stop, or a ptrace event inside it: on to the exit */
		pr_debug("pid %d: stop 0x%x (op %u) during injection", inf->pid, status, info.op);
	}
}

static int do_syscall(struct infect *inf, long *ret, long nr, long a1, long a2, long a3, long a4,
		      long a5, long a6)
{
	struct user_regs_struct regs = inf->regs;
	int status;
	long r;

	regs.rax = nr;
	regs.rdi = a1;
	regs.rsi = a2;
	regs.rdx = a3;
	regs.r10 = a4;
	regs.r8 = a5;
	regs.r9 = a6;
	regs.rip = inf->syscall_ip;
	/* No syscall-restart fixups on resume: this is not an interrupted syscall. */
	regs.orig_rax = -1;
	r = sys_ptrace(PTRACE_SETREGS, inf->pid, NULL, &regs);
	if (r)
		goto fail;
	if (inf->trap_pending) {
		r = run_to_exit(inf, nr);
		if (r)
			goto fail;
		goto done;
	}
	r = sys_ptrace(PTRACE_SINGLESTEP, inf->pid, NULL, NULL);
	if (r)
		goto fail;
	for (;;) {
		r = wait_stop(inf, &status, "running injected syscall %ld", nr);
		if (r == -ESRCH)
			return -ESRCH;
		if (r)
			goto fail;
		if (WSTOPSIG(status) == SIGTRAP && !(status >> 16)) {
			inf->trapped = true;
			break;
		}
		/* A ptrace event inside the syscall (clone of a thread), or an
		 * unblockable signal: step on to the end of the syscall. */
		pr_debug("pid %d: stop 0x%x during injection", inf->pid, status);
		r = sys_ptrace(PTRACE_SINGLESTEP, inf->pid, NULL, NULL);
		if (r)
			goto fail;
	}
done:
	r = sys_ptrace(PTRACE_GETREGS, inf->pid, NULL, &regs);
	if (r)
		goto fail;
	if (regs.rip != inf->syscall_ip + 2) {
		pr_err("pid %d: injected syscall %ld stopped at 0x%llx, not after the syscall "
		       "instruction",
		       inf->pid, nr, regs.rip);
		return -EFAULT;
	}
	*ret = regs.rax;
	inf->nr_syscalls++;
	/* its own registers back at once: were amber killed now, it runs on from them */
	r = inf->lazy_regs ? 0 : sys_ptrace(PTRACE_SETREGS, inf->pid, NULL, &inf->regs);
	if (r)
		goto fail;
	return 0;
fail:
	/* the caller says what it was doing */
	pr_debug("pid %d: cannot inject syscall %ld: %s", inf->pid, nr, strerror((int)-r));
	return (int)r;
}

/* One round trip, counted and timed for --display-stats. */
int infect_syscall(struct infect *inf, long *ret, long nr, long a1, long a2, long a3, long a4,
		   long a5, long a6)
{
	int err;

	stats_start(ST_INJECT);
	err = do_syscall(inf, ret, nr, a1, a2, a3, a4, a5, a6);
	stats_stop(ST_INJECT);
	stats_add(SC_INJECTED, 1);
	return err;
}

long infect_call(struct infect *inf, long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	long ret;
	int err = infect_syscall(inf, &ret, nr, a1, a2, a3, a4, a5, a6);

	return err ? err : ret;
}

int infect_ask(struct infect *inf, long *ret, long nr, long a1, long a2, long a3)
{
	int err = infect_syscall(inf, ret, nr, a1, a2, a3, 0, 0, 0);

	if (err)
		pr_err("pid %d: cannot make it run syscall %ld: %s", inf->pid, nr, strerror(-err));
	return err;
}

static int scratch_map(struct infect *inf, unsigned long hint, size_t size, bool quiet)
{
	long flags = MAP_PRIVATE | MAP_ANONYMOUS | (hint ? MAP_FIXED_NOREPLACE : 0);
	/* executable for the batch executor; gone before the task runs again */
	long addr = infect_call(inf, __NR_mmap, hint, size, PROT_READ | PROT_WRITE | PROT_EXEC,
				flags, -1, 0);

	if (addr < 0 && addr > -4096) {
		if (!quiet)
			pr_err("pid %d: cannot map a scratch area: %s", inf->pid,
			       strerror((int)-addr));
		return (int)addr;
	}
	inf->scratch = addr;
	inf->scratch_size = size;
	inf->batch_loaded = false;
	return 0;
}

int infect_scratch_map(struct infect *inf, unsigned long hint, size_t size)
{
	return scratch_map(inf, hint, size, false);
}

int infect_scratch_try(struct infect *inf, unsigned long hint, size_t size)
{
	return scratch_map(inf, hint, size, true);
}

void infect_scratch_adopt(struct infect *inf, unsigned long addr, size_t size)
{
	inf->scratch = addr;
	inf->scratch_size = size;
	inf->batch_loaded = false;
}

#define BATCH_ENTRY 64

static long start_batch(struct infect *inf, unsigned long code, unsigned long table)
{
	struct user_regs_struct regs = inf->regs;
	long r;

	regs.rip = code;
	regs.r15 = table;
	regs.orig_rax = -1;
	r = sys_ptrace(PTRACE_SETREGS, inf->pid, NULL, &regs);
	return r ? r : sys_ptrace(PTRACE_CONT, inf->pid, NULL, NULL);
}

/* Until the batch started by start_batch() (r: its result) traps. */
static int wait_batch(struct infect *inf, unsigned long code, long r)
{
	struct user_regs_struct regs;
	int status;

	while (!r) {
		r = wait_stop(inf, &status, "running a batch of syscalls");
		if (r == -ESRCH)
			return -ESRCH;
		if (r)
			break;
		if (WSTOPSIG(status) == SIGTRAP && !(status >> 16)) {
			inf->trapped = true;
			r = sys_ptrace(PTRACE_GETREGS, inf->pid, NULL, &regs);
			if (!r && regs.rip != code + sizeof(pie_batch)) {
				pr_err("pid %d: the syscall batch trapped at 0x%llx", inf->pid,
				       regs.rip);
				return -EFAULT;
			}
			if (!r && !inf->lazy_regs) /* as in infect_syscall() */
				r = sys_ptrace(PTRACE_SETREGS, inf->pid, NULL, &inf->regs);
			return (int)r;
		}
		/* a ptrace event inside a syscall (a thread's clone): go on */
		r = sys_ptrace(PTRACE_CONT, inf->pid, NULL, NULL);
	}
	pr_debug("pid %d: cannot run a syscall batch: %s", inf->pid, strerror((int)-r));
	return (int)r;
}

/* How many syscalls one table holds (the executor's entry and the end marker aside). */
static size_t batch_cap(const struct infect *inf)
{
	size_t cap = (inf->scratch_size / 2) / BATCH_ENTRY;

	return inf->scratch && cap >= 3 ? cap - 2 : 0;
}

/* Where a batch's table goes by default: after the executor, in the scratch area's upper half. */
static unsigned long batch_table(const struct infect *inf)
{
	return inf->scratch + inf->scratch_size / 2 + BATCH_ENTRY;
}

/* k syscalls into the table (buf: room for k + 1 entries), and the task sent to run them. */
static int batch_begin(struct infect *inf, const struct infect_sc *sc, size_t k, int64_t *buf,
		       unsigned long table)
{
	unsigned long code = inf->scratch + inf->scratch_size / 2;
	int ret = 0;

	if (!inf->batch_loaded) {
		ret = infect_write(inf, code, pie_batch, sizeof(pie_batch));
		if (ret)
			return ret;
		inf->batch_loaded = true;
	}
	for (size_t i = 0; i < k; i++) {
		int64_t *e = buf + i * 8;

		e[0] = sc[i].nr;
		memcpy(e + 1, sc[i].a, sizeof(sc->a));
		e[7] = -ENOEXEC; /* not run */
	}
	buf[k * 8] = -1;
	ret = infect_write(inf, table, buf, (k + 1) * BATCH_ENTRY);
	return ret ? ret : (int)start_batch(inf, code, table);
}

/* Until the task's trap after the batch_begin() that returned ret; the k results. */
static int batch_end(struct infect *inf, struct infect_sc *sc, size_t k, int64_t *buf, int ret,
		     unsigned long table)
{
	unsigned long code = inf->scratch + inf->scratch_size / 2;

	ret = wait_batch(inf, code, ret);
	if (!ret)
		ret = infect_read(inf, table, buf, k * BATCH_ENTRY);
	stats_add(SC_BATCHES, 1);
	stats_add(SC_BATCHED, k);
	for (size_t i = 0; !ret && i < k; i++)
		sc[i].ret = buf[i * 8 + 7];
	inf->nr_syscalls += k;
	return ret;
}

int infect_batch_start_at(struct infect *inf, const struct infect_sc *sc, size_t n, size_t at)
{
	unsigned long table = batch_table(inf) + at * BATCH_ENTRY;
	int64_t *buf;
	int ret;

	if (inf->trap_pending || inf->started ||
	    table + (n + 1) * BATCH_ENTRY > inf->scratch + inf->scratch_size)
		return -EAGAIN;
	buf = malloc((n + 1) * BATCH_ENTRY);
	if (!buf)
		return -ENOMEM;
	ret = batch_begin(inf, sc, n, buf, table);
	free(buf);
	inf->started = !ret;
	inf->table = table;
	return ret;
}

int infect_batch_start(struct infect *inf, const struct infect_sc *sc, size_t n)
{
	return infect_batch_start_at(inf, sc, n, 0);
}

int infect_batch_wait(struct infect *inf, struct infect_sc *sc, size_t n)
{
	int64_t *buf = malloc((n + 1) * BATCH_ENTRY);
	int ret;

	if (!buf)
		return -ENOMEM; /* (the task is left running the batch: the restore ends) */
	inf->started = false;
	stats_start(ST_INJECT);
	ret = batch_end(inf, sc, n, buf, 0, inf->table);
	stats_stop(ST_INJECT);
	free(buf);
	return ret;
}

int infect_batch(struct infect *inf, struct infect_sc *sc, size_t n)
{
	size_t cap = batch_cap(inf);
	int64_t *buf;
	int ret = 0;

	if (inf->trap_pending) { /* one by one: the executor ends in a trap */
		for (size_t i = 0; i < n && !ret; i++)
			ret = infect_syscall(inf, &sc[i].ret, sc[i].nr, sc[i].a[0], sc[i].a[1],
					     sc[i].a[2], sc[i].a[3], sc[i].a[4], sc[i].a[5]);
		return ret;
	}
	if (!cap)
		return -EINVAL;
	buf = malloc((cap + 1) * BATCH_ENTRY);
	if (!buf)
		return -ENOMEM;
	for (size_t off = 0; off < n && !ret; off += cap) {
		size_t k = n - off < cap ? n - off : cap;

		stats_start(ST_INJECT);
		ret = batch_end(inf, sc + off, k, buf,
				batch_begin(inf, sc + off, k, buf, batch_table(inf)),
				batch_table(inf));
		stats_stop(ST_INJECT);
	}
	free(buf);
	return ret;
}

int infect_scratch_unmap(struct infect *inf)
{
	long r;

	if (!inf->scratch)
		return 0;
	r = infect_call(inf, __NR_munmap, inf->scratch, inf->scratch_size, 0, 0, 0, 0);
	if (r) {
		pr_err("pid %d: cannot unmap the scratch area: %s", inf->pid, strerror((int)-r));
		return (int)r;
	}
	inf->scratch = 0;
	return 0;
}

/* process_vm_* first; /proc/PID/mem (which can reach unreadable pages) as fallback. */
static int mem_xfer(struct infect *inf, unsigned long addr, void *buf, size_t len, bool write)
{
	struct iovec local = {buf, len}, remote = {(void *)addr, len};
	char path[64];
	ssize_t r;
	int fd;

	r = write ? sys_vm_writev(inf->pid, &local, 1, &remote, 1)
		  : sys_vm_readv(inf->pid, &local, 1, &remote, 1);
	if (r == (ssize_t)len)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/mem", inf->pid);
	fd = sys_open(path, write ? O_WRONLY | O_CLOEXEC : O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	r = write ? pwrite(fd, buf, len, addr) : sys_pread_full(fd, buf, len, addr);
	close(fd);
	if (r != (ssize_t)len) {
		pr_err("pid %d: cannot %s %zu bytes at 0x%lx", inf->pid, write ? "write" : "read",
		       len, addr);
		return -EFAULT;
	}
	return 0;
}

int infect_read(struct infect *inf, unsigned long addr, void *buf, size_t len)
{
	return mem_xfer(inf, addr, buf, len, false);
}

int infect_write(struct infect *inf, unsigned long addr, const void *buf, size_t len)
{
	return mem_xfer(inf, addr, (void *)buf, len, true);
}

int infect_restore_regs(struct infect *inf)
{
	long r = sys_ptrace(PTRACE_SETREGS, inf->pid, NULL, &inf->regs);

	if (r)
		pr_err("pid %d: cannot put its registers back: %s", inf->pid, strerror((int)-r));
	return (int)r;
}

/*
 * A step, or the batch's trap, ends in a signal-delivery stop: the kernel
 * keeps its SIGTRAP as the stop's signal, and delivers it once the tracer is
 * gone.  Were amber killed (or to crash) while the task waits there, the
 * SIGTRAP would kill it.  An interrupt, then a resume that drops the
 * SIGTRAP, moves it to an event stop before it runs an instruction: from
 * there it runs on if amber dies.
 */
int infect_park(struct infect *inf)
{
	int status;
	long r;

	if (!inf->trapped)
		return 0;
	r = sys_ptrace(PTRACE_INTERRUPT, inf->pid, NULL, NULL);
	if (!r)
		r = sys_ptrace(PTRACE_CONT, inf->pid, NULL, NULL);
	while (!r) {
		r = wait_stop(inf, &status, "being moved to an event stop");
		if (r == -ESRCH)
			return -ESRCH;
		if (r)
			break;
		if (status >> 16 == PTRACE_EVENT_STOP) {
			inf->trapped = false;
			return 0;
		}
		/* the interrupt is taken before any signal: nothing else stops it */
		pr_err("pid %d: stop 0x%x while being moved to an event stop", inf->pid, status);
		return -EIO;
	}
	pr_err("pid %d: cannot move it to an event stop: %s", inf->pid, strerror((int)-r));
	return (int)r;
}

int infect_detach(struct infect *inf)
{
	long r = sys_ptrace(PTRACE_DETACH, inf->pid, NULL, NULL);

	free(inf->status);
	inf->status = NULL;

	if (r && r != -ESRCH)
		pr_err("pid %d: cannot detach: %s", inf->pid, strerror((int)-r));
	return (int)r;
}
