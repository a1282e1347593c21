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

/*
 * Restore with orphan_pts_master: the job's terminal is a new pty of the
 * tree's devpts (the mount devpts, a mount fd, or the tree's /dev/ptmx if
 * -1) with the image's termios, made once (none if the image has no job's
 * terminal); 0 or -errno (logged).  tty_orphan_peer: its slave for f.
 */
int tty_orphan_open(struct tree *t, int devpts);
int tty_orphan_peer(const RegFile *f);

/* fd_types[] (fd-types.c): the master before the slave (whose restore needs it). */
extern const struct fd_type pty_master_type, pty_slave_type, devtty_type;

#endif
