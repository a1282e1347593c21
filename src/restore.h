/* SPDX-License-Identifier: MIT */
#ifndef AMBER_RESTORE_H
#define AMBER_RESTORE_H

#include <sched.h>

#include "amber.h"

/* do_restore() ORs this in when it returns the restored task's exit status. */
#define RESTORE_WAITED 0x10000

/* --pidfile: pid, a line, in path. */
int write_pidfile(const char *path, pid_t pid);

/* pstree.img into t->pstree, checked (fuzz/fuzz_records.c calls it too). */
int read_pstree(struct tree *t);
/* Last step before detach: registers, FPU, signal mask (regs.c). */
int restore_finish(struct restore_ctx *ctx);
/* Once nothing more is injected: each thread's CPU affinity (sched.c). */
int sched_restore_affinity(struct restore_ctx *ctx);
/* The syscall that unregisters the child's (amber's) rseq area, if it has
 * one (1; 0: none), run before its memory goes (mem.c, regs.c). */
struct infect_sc;
int regs_forget_rseq(struct restore_ctx *ctx, struct infect_sc *sc);
/* mem.c: start clearing the next process's address space while amber drives
 * this one (0 also when it cannot: then it is done at its turn); wait for it
 * before anything else is injected into it. */
int mem_clear_ahead(struct restore_ctx *ctx);
int mem_clear_done(struct restore_ctx *ctx);
/* The CPUs amber may use besides the one it drives processes on (the count;
 * 0: none, or amber is not pinned), for work of its own in a second thread. */
int restore_cpus_free(cpu_set_t *set);
/* Before and after a zombie dies: its parent sees nothing of it (signals.c). */
int signals_zombie_dies(struct restore_ctx *ctx, bool dead);

#endif
