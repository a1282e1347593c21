// SPDX-License-Identifier: MIT
/*
 * members: a tree of counting processes, to show that a dump failing on one
 * member leaves every one of them running as before.
 *
 *   members DIR [nodump=K]
 *
 * The root forks NR_KIDS children; every process (the root too) writes
 * "count N" (N = 0, 1, ...) to DIR/count-PID.log every 20 ms through an fd
 * without O_APPEND.  The root writes the children's pids to DIR/children
 * (one a line), and DIR/ready once every log has a line.  nodump=K: child K
 * (1..NR_KIDS) makes itself non-dumpable, so that only a tracer with
 * CAP_SYS_PTRACE may ptrace it, not even its own user.
 * When DIR/go appears every process checks that its log holds exactly
 * count 0..N-1 (N its in-memory count) and exits 0 if so.  The root then
 * waits for each child and writes DIR/status-PID ("exit N" or "signal N"):
 * it exits 0 if its own log is right and every child exited 0 or was
 * SIGKILLed (a test may kill one member on purpose: it reads status-PID).
 */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "prog.h"

#define NR_KIDS	  3
#define MAX_STEPS 15000 /* x 20 ms: 5 minutes, then give up */

static int has_line(pid_t pid)
{
	char name[64], buf[64];

	snprintf(name, sizeof(name), "count-%d.log", (int)pid);
	return prog_read_file(prog_path(name), buf, sizeof(buf)) > 0;
}

/* The root: ready once every process has written a line. */
static int try_ready(const pid_t *kids)
{
	for (int k = 0; k < NR_KIDS; k++)
		if (!has_line(kids[k]))
			return 0;
	prog_ready();
	return 1;
}

/*
 * Count until go, then check the log; returns 0 if it is right.  kids: the
 * root's children (NULL in a child).
 */
static int count(const pid_t *kids)
{
	int ready = !kids;

	struct timespec step = {0, 20 * 1000 * 1000};
	char name[64], line[64], *buf, *p;
	long n, expect, bad = 0;
	int fd;

	snprintf(name, sizeof(name), "count-%d.log", (int)getpid());
	fd = open(prog_path(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		prog_die("open %s", name);
	for (n = 0; n < MAX_STEPS && !prog_go_exists(); n++) {
		int len = snprintf(line, sizeof(line), "count %ld\n", n);

		if (write(fd, line, len) != len)
			prog_die("write %s", name);
		if (!ready)
			ready = try_ready(kids);
		nanosleep(&step, NULL);
	}
	close(fd);
	if (!prog_go_exists()) {
		fprintf(stderr, "FAIL: pid %d timed out waiting for go\n", (int)getpid());
		return 3;
	}
	if (kids && prog_sabotage())
		n++; /* the root's own check must then fail */
	buf = malloc(64 * (n + 1) + 1);
	if (!buf || prog_read_file(prog_path(name), buf, 64 * (n + 1) + 1) < 0)
		prog_die("read %s", name);
	for (expect = 0, p = buf; *p; expect++) {
		char want[64];
		int len = snprintf(want, sizeof(want), "count %ld\n", expect);

		if (strncmp(p, want, len))
			bad++;
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	free(buf);
	CHECK(!bad && expect == n, "pid %d: %s holds count 0..%ld (%ld lines, %ld bad)",
	      (int)getpid(), name, n - 1, expect, bad);
	return bad || expect != n;
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv), nodump = 0;
	char list[NR_KIDS * 16] = "", *end = list;
	pid_t kids[NR_KIDS];

	if (argc > first && sscanf(argv[first], "nodump=%d", &nodump) != 1)
		prog_die("usage: members DIR [nodump=K]");
	for (int k = 0; k < NR_KIDS; k++) {
		kids[k] = fork();
		if (kids[k] < 0)
			prog_die("fork");
		if (kids[k] == 0) {
			if (k + 1 == nodump && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
				prog_die("PR_SET_DUMPABLE");
			_exit(count(NULL) ? 1 : 0);
		}
		end += sprintf(end, "%d\n", (int)kids[k]);
	}
	prog_write_atomic("children", list);
	count(kids);
	for (int k = 0; k < NR_KIDS; k++) {
		char name[64], what[32];
		int st;

		if (waitpid(kids[k], &st, 0) != kids[k])
			prog_die("waitpid %d", (int)kids[k]);
		if (WIFEXITED(st))
			snprintf(what, sizeof(what), "exit %d\n", WEXITSTATUS(st));
		else
			snprintf(what, sizeof(what), "signal %d\n", WTERMSIG(st));
		snprintf(name, sizeof(name), "status-%d", (int)kids[k]);
		prog_write_atomic(name, what);
		CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
			      (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL),
		      "child %d: %s", (int)kids[k], what);
	}
	return prog_done();
}
