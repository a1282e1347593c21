/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers for amber's end-to-end target programs.
 *
 * Protocol (driven by tests/e2e/run.sh):
 *   prog DIR [ARGS...]        (or env AMBER_T=DIR)
 *   1. the program sets up the state it is about to check;
 *   2. prog_ready() writes DIR/ready (atomically: ready.tmp + rename), containing the pid;
 *   3. prog_wait_go() sleeps in 10 ms steps until DIR/go exists
 *      (the test dumps and restores the program meanwhile);
 *   4. the program verifies its state with CHECK(): a passing check prints "ok: ..." on
 *      stdout, a failing one "FAIL ..." on stderr;
 *   5. prog_done() prints a summary, writes DIR/result ("0" or "1") and returns the exit
 *      status: 0 iff every check passed.
 *
 * Self-test of the checks: with AMBER_TEST_SABOTAGE=1 in the environment, each program
 * corrupts one value of its state after "go" (see prog_sabotage()), so it must exit 1.
 */
#ifndef AMBER_E2E_PROG_H
#define AMBER_E2E_PROG_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PROG_GO_STEPS 30000 /* x 10 ms = 5 minutes, then give up (no leaked processes) */

static char prog_dir[2048];
static int prog_checks, prog_failures;
static int prog_sabotage_flag;

__attribute__((unused)) static const char *prog_path(const char *name)
{
	static char buf[4][4096];
	static int n;
	char *b = buf[n++ % 4];

	snprintf(b, sizeof(buf[0]), "%s/%s", prog_dir, name);
	return b;
}

__attribute__((unused, format(printf, 4, 5))) static void prog_check(int ok, const char *expr,
								     int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	prog_checks++;
	if (ok) {
		printf("ok: %s\n", msg);
	} else {
		prog_failures++;
		fprintf(stderr, "FAIL line %d: %s  [%s]\n", line, msg, expr);
	}
}

/* CHECK(condition, "printf-style description", ...): counts failures. */
#define CHECK(cond, ...) prog_check(!!(cond), #cond, __LINE__, __VA_ARGS__)

__attribute__((noreturn, format(printf, 1, 2))) static void prog_die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	fprintf(stderr, "SETUP ERROR: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (errno %d: %s)\n", e, strerror(e));
	exit(2);
}

/* Returns the index of the first program-specific argument in argv. */
__attribute__((unused)) static int prog_init(int argc, char **argv)
{
	const char *d = getenv("AMBER_T");
	const char *s = getenv("AMBER_TEST_SABOTAGE");
	int first = 1;

	if (argc > 1 && argv[1][0]) {
		d = argv[1];
		first = 2;
	}
	if (!d || !*d) {
		fprintf(stderr, "usage: %s DIR [ARGS...]   (or AMBER_T=DIR %s)\n", argv[0],
			argv[0]);
		exit(2);
	}
	snprintf(prog_dir, sizeof(prog_dir), "%s", d);
	prog_sabotage_flag = s && !strcmp(s, "1");
	setvbuf(stdout, NULL, _IOLBF, 0);
	setvbuf(stderr, NULL, _IONBF, 0);
	return first;
}

/* After a chroot() into the work dir, its files are found from "/". */
__attribute__((unused)) static void prog_set_dir(const char *d)
{
	snprintf(prog_dir, sizeof(prog_dir), "%s", d);
}

/* Write NAME with CONTENT atomically (NAME.tmp, then rename). */
__attribute__((unused)) static void prog_write_atomic(const char *name, const char *content)
{
	char tmp[4096], dst[4096];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", prog_dir, name);
	snprintf(dst, sizeof(dst), "%s/%s", prog_dir, name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		prog_die("open %s", tmp);
	if (write(fd, content, strlen(content)) != (ssize_t)strlen(content))
		prog_die("write %s", tmp);
	close(fd);
	if (rename(tmp, dst))
		prog_die("rename %s", tmp);
}

__attribute__((unused)) static void prog_ready(void)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	prog_write_atomic("ready", buf);
}

__attribute__((unused)) static int prog_go_exists(void)
{
	return access(prog_path("go"), F_OK) == 0;
}

__attribute__((unused)) static void prog_wait_go(void)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	int i;

	for (i = 0; i < PROG_GO_STEPS; i++) {
		if (prog_go_exists())
			return;
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "FAIL: timed out waiting for %s\n", prog_path("go"));
	exit(3);
}

/*
 * n children, child k running fn(k, ready), which writes one byte to ready
 * once it set up; returns once every one has.
 */
__attribute__((unused)) static void prog_fork_ready(pid_t *kids, int n,
						    void (*fn)(int k, int ready))
{
	int p[2];
	char c;

	if (pipe(p))
		prog_die("pipe");
	for (int k = 0; k < n; k++) {
		kids[k] = fork();
		if (kids[k] < 0)
			prog_die("fork");
		if (!kids[k]) {
			close(p[0]);
			fn(k, p[1]);
			_exit(2);
		}
	}
	for (int k = 0; k < n; k++)
		if (read(p[0], &c, 1) != 1)
			prog_die("children not ready");
	close(p[0]);
	close(p[1]);
}

/* True when the program must corrupt one value before verifying (self-test). */
__attribute__((unused)) static int prog_sabotage(void)
{
	if (prog_sabotage_flag)
		fprintf(stderr, "note: AMBER_TEST_SABOTAGE=1, corrupting one value on purpose\n");
	return prog_sabotage_flag;
}

__attribute__((unused)) static int prog_done(void)
{
	int rc = prog_failures ? 1 : 0;

	printf("%d checks, %d failed\n", prog_checks, prog_failures);
	if (prog_failures)
		fprintf(stderr, "%d checks, %d failed\n", prog_checks, prog_failures);
	prog_write_atomic("result", rc ? "1\n" : "0\n");
	fflush(NULL);
	return rc;
}

/* Read a whole (small) file; returns its length or -1.  buf is NUL-terminated. */
__attribute__((unused)) static ssize_t prog_read_file(const char *path, char *buf, size_t size)
{
	ssize_t n, len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((size_t)len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = 0;
	return len;
}

/* The value of "Key:" in /proc/self/status (without leading blanks), or "". */
__attribute__((unused)) static const char *prog_status_field(const char *key)
{
	static char buf[8192], val[512];
	size_t kl = strlen(key);
	char *p;

	val[0] = 0;
	if (prog_read_file("/proc/self/status", buf, sizeof(buf)) < 0)
		return val;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, key, kl) && p[kl] == ':') {
			char *v = p + kl + 1, *e;

			while (*v == ' ' || *v == '\t')
				v++;
			e = strchrnul(v, '\n');
			snprintf(val, sizeof(val), "%.*s", (int)(e - v), v);
			break;
		}
	}
	return val;
}

/* A deterministic byte pattern: the value at offset OFF of a buffer seeded with SEED. */
__attribute__((unused)) static inline uint64_t prog_pat(uint64_t seed, uint64_t off)
{
	uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull ^ seed;

	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	return x | 1; /* never zero */
}

__attribute__((unused)) static void prog_fill(void *p, size_t len, uint64_t seed)
{
	uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = prog_pat(seed, i);
}

/* Returns the index of the first mismatching 8-byte word, or -1. */
__attribute__((unused)) static long prog_verify(const void *p, size_t len, uint64_t seed)
{
	const uint64_t *w = p;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != prog_pat(seed, i))
			return (long)i;
	return -1;
}

__attribute__((unused)) static int prog_all_zero(const void *p, size_t len)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (c[i])
			return 0;
	return 1;
}

#endif
