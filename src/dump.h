/* SPDX-License-Identifier: MIT */
#ifndef AMBER_DUMP_H
#define AMBER_DUMP_H

/* -EINTR (logged) once amber was asked to stop; long loops poll it. */
int dump_check_interrupted(void);

struct dump_ctx;
/*
 * fn(ctx, tid, arg) for each thread of ctx but its leader, in thread order,
 * in two halves on two CPUs when there are many; stops at the first error
 * (each half at its own), which it returns.
 */
int dump_each_thread(struct dump_ctx *ctx, int (*fn)(struct dump_ctx *, pid_t, void *), void *arg);

#endif
