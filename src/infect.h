/* SPDX-License-Identifier: MIT */
/*
 * Syscall injection through ptrace: make a stopped tracee execute one
 * syscall at a time, using a `syscall` instruction found in its vDSO, and
 * read the result.  Dump uses it to ask the kernel what only the task itself
 * can ask (sigactions, timers, prctl values); restore uses it to rebuild the
 * child's address space and kernel state.
 */
#ifndef AMBER_INFECT_H
#define AMBER_INFECT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct infect {
	pid_t pid;
	struct user_regs_struct regs; /* registers when the task was stopped */
	unsigned long syscall_ip;     /* address of a `syscall` instruction */
	uint64_t sigmask;	      /* blocked mask when stopped */
	bool mask_blocked;	      /* all signals blocked by us */
	bool trap_pending;	      /* a trap would take a queued signal: syscall stops */
	int seccomp;		      /* its seccomp mode at seize (filters suspended) */
	bool shstk;		      /* its x86 user shadow stack is on */
	unsigned long scratch;	      /* scratch mapping made by infect_scratch_map() */
	size_t scratch_size;	      /* upper half: the batch executor and its table */
	bool batch_loaded;
	bool lazy_regs; /* restore: its registers stay as injection left them (regs.c sets them) */
	bool trapped;	/* in the SIGTRAP stop of a step or of the batch's trap (infect_park) */
	bool started;	/* a batch runs (infect_batch_start) */
	long nr_syscalls;
	char *status;	     /* its /proc/TID/status at the stop (infect_status) */
	unsigned long table; /* of the batch started (infect_batch_start_at) */
};

/* The /proc/TID/status text read when the task stopped (NULL: none; kept
 * until the detach).  Its name, ids, groups and capabilities do not change
 * while it is stopped: the dump takes them from it instead of reading the
 * files again (three syscalls each, for each of 10,000 threads). */
const char *infect_status(const struct infect *inf);
/* PTRACE_SEIZE + PTRACE_INTERRUPT; on success the task is stopped. *stopsig is
 * the group-stop signal if the task was already stopped by a job-control
 * signal, else 0. */
int infect_seize(pid_t pid, struct infect *inf, int *stopsig);
/* The same in two steps: PTRACE_SEIZE + PTRACE_INTERRUPT, then the wait for
 * the stop.  Between them the task may be frozen by its cgroup (freezer.c):
 * the interrupt stays pending and stops it before it runs again. */
int infect_seize_start(pid_t pid, struct infect *inf);
int infect_seize_wait(struct infect *inf, int *stopsig);
/* From the SIGTRAP stop injection leaves the task in to an event stop, which
 * is all the kernel leaves of ptrace if amber dies; 0 if it is in one. */
int infect_park(struct infect *inf);
/* Take over an already-seized, stopped tracee (restore). */
int infect_attach_stopped(pid_t pid, struct infect *inf);
/*
 * A thread made by a task amber drives (clone3), stopped at its creation:
 * what /proc would tell of it is its creator's (the seccomp mode and the
 * shadow stack are inherited, its own signal queue is empty), so its status
 * is not read (a JVM's 200 threads read theirs for ~12 ms).
 */
int infect_attach_new_thread(pid_t tid, struct infect *inf, const struct infect *creator);
int infect_find_syscall(struct infect *inf);
/* Use the syscall instruction of the scratch area's batch executor from now on. */
int infect_scratch_syscall(struct infect *inf);
/* Block every signal while syscalls are injected, and undo it. */
int infect_block_signals(struct infect *inf);
int infect_unblock_signals(struct infect *inf);
/* The kernel's synchronous signals (SYNCHRONOUS_MASK in kernel/signal.c). */
#define INFECT_SYNC_SIGNALS                                                                        \
	((1ULL << (SIGSEGV - 1)) | (1ULL << (SIGBUS - 1)) | (1ULL << (SIGILL - 1)) |               \
	 (1ULL << (SIGTRAP - 1)) | (1ULL << (SIGFPE - 1)) | (1ULL << (SIGSYS - 1)))

/*
 * A signal amber's traps would take is queued (found at seize, or queued
 * at restore: a SIGTRAP, or a synchronous signal in the thread's own
 * queue): from now on block SIGTRAP too and inject through syscall stops,
 * never through traps, so it stays queued as it is.
 */
int infect_trap_mode(struct infect *inf);
/* Run one syscall; returns 0 and the raw return value in *ret, or -errno of ptrace. */
int infect_syscall(struct infect *inf, long *ret, long nr, long a1, long a2, long a3, long a4,
		   long a5, long a6);
/* Convenience: the syscall's own return (negative errno on failure), or ptrace error. */
long infect_call(struct infect *inf, long nr, long a1, long a2, long a3, long a4, long a5, long a6);
/* Ask the task something: the syscall's own result (maybe -errno) goes to *ret;
 * what is returned is a failure to inject at all (logged), which ends a dump. */
int infect_ask(struct infect *inf, long *ret, long nr, long a1, long a2, long a3);
/* One syscall of a batch: ret is filled in by infect_batch(). */
struct infect_sc {
	long nr;
	long a[6];
	long ret;
};

/*
 * Run n syscalls with one stop instead of n: pie/batch.S runs them in turn
 * in the task (from the upper half of the scratch area) and every one runs,
 * whatever the others returned; look at each ->ret.  Returns 0, or -errno
 * if the task could not be made to run them.
 */
int infect_batch(struct infect *inf, struct infect_sc *sc, size_t n);
/*
 * The same in two steps, the task running the batch meanwhile (restore: one
 * process clears its address space on the other CPU while amber drives the
 * one before).  The start takes one table's worth (-EAGAIN: run it with
 * infect_batch()); nothing else may be injected until the wait.
 */
int infect_batch_start(struct infect *inf, const struct infect_sc *sc, size_t n);
/* The same on a table from entry at of the tables' area: threads of one
 * process, each on a table of its own, run their batches at once. */
int infect_batch_start_at(struct infect *inf, const struct infect_sc *sc, size_t n, size_t at);
int infect_batch_wait(struct infect *inf, struct infect_sc *sc, size_t n);
int infect_scratch_map(struct infect *inf, unsigned long hint, size_t size);
/* The same at hint only, and silent if something is there (-EEXIST). */
int infect_scratch_try(struct infect *inf, unsigned long hint, size_t size);
/* The task mapped a scratch area itself (read, write, exec) at addr. */
void infect_scratch_adopt(struct infect *inf, unsigned long addr, size_t size);
int infect_scratch_unmap(struct infect *inf);
int infect_read(struct infect *inf, unsigned long addr, void *buf, size_t len);
int infect_write(struct infect *inf, unsigned long addr, const void *buf, size_t len);
/* Put the registers back as they were at seize time. */
int infect_restore_regs(struct infect *inf);
/* Detach, leaving the task running from where it was stopped. */
int infect_detach(struct infect *inf);

#endif
