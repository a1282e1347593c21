// SPDX-License-Identifier: MIT
/*
 * The progress line.  A thread of amber's wakes every 200 ms and, once the
 * dump or restore has run for a second (AMBER_PROGRESS_AFTER_MS for
 * tests), rewrites one line on stderr from stats.c's counters, in one
 * write.  Never without a terminal: logs and pipes get nothing of it.
 * Processes amber forks do not own the line (progress_clear does nothing
 * there: their copy of the mutex may be held).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "progress.h"
#include "stats.h"
#include "sys.h"

static struct {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t stop_cond;
	bool running, stop, shown, restore;
	pid_t owner;
	struct timespec t0;
	long after_ms;
} p = {.lock = PTHREAD_MUTEX_INITIALIZER, .stop_cond = PTHREAD_COND_INITIALIZER};

static double since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void draw(double secs)
{
	uint64_t pages = stats_get(p.restore ? SC_PAGES_RESTORED : SC_PAGES_WRITTEN);
	double mib = (double)pages * PAGE_SIZE / (1 << 20);
	char line[160];
	int n;

	n = snprintf(line, sizeof(line),
		     "\ramber: %s: %.0f MiB of pages %s, %.0f MiB/s, %llu/%llu "
		     "processes\033[K",
		     p.restore ? "restore" : "dump", mib, p.restore ? "restored" : "written",
		     secs > 0 ? mib / secs : 0, (unsigned long long)stats_get(SC_DONE),
		     (unsigned long long)stats_get(SC_PROCESSES));
	if (n > 0 && write(2, line, (size_t)n) == n)
		p.shown = true;
}

static void clear_locked(void)
{
	static const char clear[] = "\r\033[K";

	if (p.shown && write(2, clear, sizeof(clear) - 1) >= 0)
		p.shown = false;
}

static void *tick(void *arg)
{
	pthread_mutex_lock(&p.lock);
	while (!p.stop) {
		struct timespec until;
		double secs;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += 200 * 1000 * 1000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&p.stop_cond, &p.lock, &until);
		secs = since(&p.t0);
		if (!p.stop && secs * 1000 >= p.after_ms)
			draw(secs);
	}
	clear_locked();
	pthread_mutex_unlock(&p.lock);
	return arg;
}

void progress_start(bool restore)
{
	const char *after = getenv("AMBER_PROGRESS_AFTER_MS");
	pthread_condattr_t ca;

	if (p.running || !isatty(2))
		return;
	p.restore = restore;
	p.stop = p.shown = false;
	p.owner = getpid();
	p.after_ms = after ? strtol(after, NULL, 10) : 1000;
	clock_gettime(CLOCK_MONOTONIC, &p.t0);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p.stop_cond, &ca);
	pthread_condattr_destroy(&ca);
	/* without a progress line amber works as before */
	if (!sys_thread_start(&p.thread, tick, NULL))
		p.running = true;
}

void progress_stop(void)
{
	if (!p.running || getpid() != p.owner)
		return;
	pthread_mutex_lock(&p.lock);
	p.stop = true;
	pthread_cond_signal(&p.stop_cond);
	pthread_mutex_unlock(&p.lock);
	pthread_join(p.thread, NULL);
	p.running = false;
}

void progress_clear(void)
{
	if (!p.running || getpid() != p.owner)
		return;
	pthread_mutex_lock(&p.lock);
	clear_locked();
	pthread_mutex_unlock(&p.lock);
}
