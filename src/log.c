// SPDX-License-Identifier: MIT
/* One line per message on stderr; errors are logged once, where they are understood. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "progress.h"

int log_level = LOG_WARN;
int log_fd = 2;
char log_first_err[LOG_ERR_MAX];
char log_last_err[LOG_ERR_MAX];

void log_msg(int level, const char *fmt, ...)
{
	static const char *const tag[] = {"error", "warning", "info", "debug"};
	char line[1024];
	int n = 0, pre;
	va_list ap;

	if (level > log_level && level != LOG_ERR)
		return;
	if (level >= LOG_INFO) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		n = snprintf(line, sizeof(line), "(%ld.%06ld) ", (long)ts.tv_sec % 1000,
			     ts.tv_nsec / 1000);
	}
	n += snprintf(line + n, sizeof(line) - n, "amber: %s: ", tag[level]);
	pre = n;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	/* kept for amber swrk's answer (cr_errmsg), also when the level hides it */
	if (level == LOG_ERR) {
		if (!log_first_err[0])
			snprintf(log_first_err, sizeof(log_first_err), "%s", line + pre);
		snprintf(log_last_err, sizeof(log_last_err), "%s", line + pre);
	}
	if (level > log_level)
		return;
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	progress_clear();
	/* One write per line, so lines of several processes do not mix. */
	if (write(log_fd, line, n) < 0)
		return;
}

/*
 * A crash says so in the log: amber swrk's clients read the log, not its
 * stderr, and only learn that the operation's process died.  Only
 * async-signal-safe calls; the default action follows (SA_RESETHAND).
 */
/* v in decimal at line + n; the new length (async-signal-safe) */
static size_t put_dec(char *line, size_t n, long v)
{
	char num[24];
	size_t k = 0;

	do
		num[k++] = (char)('0' + v % 10);
	while ((v /= 10) && k < sizeof(num));
	while (k)
		line[n++] = num[--k];
	return n;
}

static void on_crash(int sig, siginfo_t *si, void *uc)
{
	static const char hex[] = "0123456789abcdef";
	const char *name = sigabbrev_np(sig);
	char line[160] = "amber: error: pid ";
	uintptr_t at = (uintptr_t)si->si_addr;
	size_t n = put_dec(line, strlen(line), getpid());

	memcpy(line + n, " killed by SIG", 14);
	n += 14;
	for (size_t i = 0; name && name[i] && n < 60; i++)
		line[n++] = name[i];
	if (si->si_code <= 0) { /* sent (kill, tgkill): who sent it, not where */
		memcpy(line + n, " (sent by pid ", 14);
		n = put_dec(line, n + 14, si->si_pid);
		line[n++] = ')';
	} else {
		memcpy(line + n, " at 0x", 6);
		n += 6;
		for (int shift = (int)sizeof(at) * 8 - 4; shift >= 0; shift -= 4)
			line[n++] = hex[(at >> shift) & 0xf];
	}
	memcpy(line + n, ": a bug in amber\n", 17);
	n += 17;
	(void)uc;
	if (write(log_fd, line, n) < 0)
		n = 0;
	raise(sig); /* the default action now: also for a signal sent with kill() */
}

void log_catch_crashes(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
	struct sigaction sa = {.sa_sigaction = on_crash,
			       .sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER};

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}
