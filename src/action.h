/* SPDX-License-Identifier: MIT */
/*
 * --action-script (action.c): the user's scripts run at each stage of a dump
 * or restore, as CRIU runs them, with CRTOOLS_SCRIPT_ACTION naming the stage,
 * CRTOOLS_IMAGE_DIR the image directory and CRTOOLS_INIT_PID the root's pid.
 */
#ifndef AMBER_ACTION_H
#define AMBER_ACTION_H

#include <sys/types.h>

struct opts;

/* Every script for action; 0, or -errno if one could not run or exited non-zero. */
int action_run(const struct opts *o, const char *action, pid_t init_pid);

#endif
