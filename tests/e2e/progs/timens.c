// SPDX-License-Identifier: MIT
/*
 * Time namespaces (src/ns/timens.c).  C, the root's first child, stays in
 * amber's time namespace.  The root then unshares one (CLONE_NEWTIME) with
 * CLOCK_MONOTONIC and CLOCK_BOOTTIME ahead of the host's by OFF_MONO and
 * OFF_BOOT seconds, makes A in it, and setns()es into it itself: the root
 * and A share it.  Each reads its clocks before "go" and after: after the
 * restore they go on from where they were, without the host's offset and
 * without the time the image lay (DIR/paused, whole seconds the test
 * waited between dump and restore, which the namespace's clocks must not
 * count and the host's, C's, must), and
 * the vDSO's clock_gettime() (its data page is the namespace's, mem.c)
 * agrees with the system call's.  DIR/nspids lists "NAME PID" for the test,
 * which compares /proc/PID/ns/time.  With "unshared" the root does not
 * setns(): its time_for_children stays A's (refused at dump).
 */
#include <sched.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "prog.h"

#define OFF_MONO 1000000LL
#define OFF_BOOT 2000000LL
#define NSEC	 1000000000LL
#define MARGIN	 (NSEC + NSEC / 2) /* for the scheduling of a loaded machine */

static int64_t vdso_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts); /* glibc's: the vDSO's */
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

static int64_t sys_ns(clockid_t clk)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, clk, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

struct clocks {
	int64_t mono, boot, real;
};

static void read_clocks(struct clocks *c)
{
	c->real = vdso_ns(CLOCK_REALTIME);
	c->mono = vdso_ns(CLOCK_MONOTONIC);
	c->boot = vdso_ns(CLOCK_BOOTTIME);
}

static int64_t paused_ns(void)
{
	char buf[32];

	if (prog_read_file(prog_path("paused"), buf, sizeof(buf)) <= 0)
		return 0;
	return atoll(buf) * NSEC;
}

static void check_clock(const char *who, const char *name, clockid_t clk, int64_t before,
			int64_t after, int64_t least, int64_t limit)
{
	int64_t sys = sys_ns(clk), vdso = vdso_ns(clk);

	CHECK(after - before >= least && after - before <= limit,
	      "%s: %s went on by %.3f s (from %.3f to %.3f s), from %.3f s", who, name,
	      (after - before) / 1e9, least / 1e9, limit / 1e9, before / 1e9);
	CHECK(vdso >= sys && vdso - sys < NSEC / 2,
	      "%s: %s by the vDSO %.3f s, by the system call %.3f s", who, name, vdso / 1e9,
	      sys / 1e9);
}

/*
 * The checks of one process.  In the namespace: its offsets are kept, and the
 * clocks did not count the pause; in the host's they did.
 */
static void check(const char *who, const struct clocks *b, bool in_ns)
{
	int64_t least = 0, limit, paused = paused_ns();
	struct clocks a;

	read_clocks(&a);
	limit = a.real - b->real + MARGIN;
	if (in_ns)
		limit -= paused;
	else
		least = paused;
	check_clock(who, "CLOCK_MONOTONIC", CLOCK_MONOTONIC, b->mono, a.mono, least, limit);
	check_clock(who, "CLOCK_BOOTTIME", CLOCK_BOOTTIME, b->boot, a.boot, least, limit);
	if (in_ns)
		/* (the two clocks are read, and offset, microseconds apart) */
		CHECK(a.mono >= OFF_MONO * NSEC &&
			      a.boot - a.mono > (OFF_BOOT - OFF_MONO - 1) * NSEC,
		      "%s: CLOCK_MONOTONIC %.3f s, CLOCK_BOOTTIME %.3f s: the namespace's offsets",
		      who, a.mono / 1e9, a.boot / 1e9);
}

/* A and C: read the clocks, wait for go, check; the exit status says. */
static pid_t child(const char *who, bool in_ns)
{
	struct clocks b;
	pid_t pid = fork();

	if (pid)
		return pid;
	read_clocks(&b);
	prog_wait_go();
	check(who, &b, in_ns);
	_exit(prog_failures ? 1 : 0);
}

int main(int argc, char **argv)
{
	char buf[256];
	struct clocks b;
	bool unshared;
	pid_t a, c;
	int fd, st;
	FILE *f;

	unshared = argc > prog_init(argc, argv) && !strcmp(argv[argc - 1], "unshared");
	c = child("C", false);
	if (unshare(CLONE_NEWTIME)) {
		if (errno == EINVAL || errno == EPERM)
			return 77; /* no time namespaces here */
		prog_die("unshare(CLONE_NEWTIME)");
	}
	snprintf(buf, sizeof(buf), "monotonic %lld 0\nboottime %lld 0\n", OFF_MONO, OFF_BOOT);
	fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf))
		prog_die("write /proc/self/timens_offsets");
	close(fd);
	a = child("A", true);
	fd = open("/proc/self/ns/time_for_children", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (!unshared && setns(fd, CLONE_NEWTIME)))
		prog_die("setns into the new time namespace");
	close(fd);
	read_clocks(&b);
	CHECK(unshared || b.mono >= OFF_MONO * NSEC,
	      "root: CLOCK_MONOTONIC %.3f s in the namespace before", b.mono / 1e9);
	f = fopen(prog_path("nspids"), "w");
	if (!f)
		prog_die("nspids");
	fprintf(f, "root %d\nA %d\nC %d\n", getpid(), a, c);
	fclose(f);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		b.mono += 10 * NSEC;
	check("root", &b, !unshared);
	CHECK(waitpid(a, &st, 0) == a && WIFEXITED(st) && !WEXITSTATUS(st),
	      "A's checks (in the root's time namespace)");
	CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st),
	      "C's checks (in amber's time namespace)");
	return prog_done();
}
