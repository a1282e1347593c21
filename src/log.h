/* SPDX-License-Identifier: MIT */
#ifndef AMBER_LOG_H
#define AMBER_LOG_H

enum { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern int log_level;
extern int log_fd; /* stderr, unless the restore child moved it out of the way */
/* The first and the last error logged (without the "amber: error: " prefix), for
 * amber swrk's answers; a forked worker clears them before its operation. */
#define LOG_ERR_MAX 1024
extern char log_first_err[LOG_ERR_MAX];
extern char log_last_err[LOG_ERR_MAX];

void log_catch_crashes(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pr_err(fmt, ...)   log_msg(LOG_ERR, fmt, ##__VA_ARGS__)
#define pr_warn(fmt, ...)  log_msg(LOG_WARN, fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...)  log_msg(LOG_INFO, fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) log_msg(LOG_DEBUG, fmt, ##__VA_ARGS__)

#endif
