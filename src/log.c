// SPDX-License-Identifier: MIT
/* One line per message on stderr; errors are logged once, where they are understood. */
#include <stdarg.h>
#include <stdio.h>
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
