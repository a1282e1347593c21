/* SPDX-License-Identifier: MIT */
/* Terminals (tty.c): the job's terminal with --shell-job, pseudo-terminals. */
#ifndef AMBER_TTY_H
#define AMBER_TTY_H

#include "amber.h"
#include "files.h"

/*
 * Dump, fd of ctx's process is the job's terminal (FILE_TTY): its termios
 * and window size into f->tty.
 */
int tty_dump_job(struct dump_ctx *ctx, int fd, RegFile *f);

/* fd_types[] (fd-types.c): the master before the slave (whose restore needs it). */
extern const struct fd_type pty_master_type, pty_slave_type, devtty_type;

#endif
