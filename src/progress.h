/* SPDX-License-Identifier: MIT */
/*
 * A progress line on the terminal for a dump or restore that takes long
 * (progress.c): pages moved, rate, processes done, from stats.c's counters.
 * Only when stderr is a terminal; log lines clear it first.
 */
#ifndef AMBER_PROGRESS_H
#define AMBER_PROGRESS_H

#include <stdbool.h>

void progress_start(bool restore);
/* Clears the line; before anything else is printed at the end. */
void progress_stop(void);
/* log.c, before a message: the line goes, the next tick redraws it. */
void progress_clear(void);

#endif
