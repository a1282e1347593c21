// SPDX-License-Identifier: MIT
/*
 * zombielead: sessions and groups whose leader is a zombie.  R, a child
 * subreaper, forks:
 *  - Z1, which calls setsid(), forks M (M forks N) and exits with status 3:
 *    Z1 is a zombie leading session Z1, M is R's child now, N is M's;
 *  - Z2, which calls setpgid(0, 0), forks G and is killed by SIGTERM: G is
 *    R's child in group Z2 of R's session, whose leader is a zombie;
 *  - Z3, which calls setsid() and exits with status 5: a zombie leading a
 *    session of its own and nothing else.
 * R reaps none of them.  After the restore R checks, before reaping, that
 * each zombie still leads its session or group and has its name (from
 * /proc), then reaps them with their statuses; M, N and G check their own
 * parent, group and session and report to R.
 *
 *   zombielead DIR
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "prog.h"

struct ids {
	pid_t ppid, pgid, sid;
};

/* pid's parent, group and session, and its name, from /proc/PID/stat */
static int stat_ids(pid_t pid, struct ids *ids, char *comm, size_t len, char *state)
{
	char path[64], buf[512], *lp, *rp;
	int fd, n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	lp = strchr(buf, '(');
	rp = strrchr(buf, ')');
	if (!lp || !rp)
		return -1;
	snprintf(comm, len, "%.*s", (int)(rp - lp - 1), lp + 1);
	return sscanf(rp + 2, "%c %d %d %d", state, &ids->ppid, &ids->pgid, &ids->sid) == 4 ? 0
											    : -1;
}

/* M, N, G: wait for go2, check parent, group, session; exit 0 if all hold. */
static void __attribute__((noreturn)) member(const char *who, struct ids want, pid_t child)
{
	int st;

	while (access(prog_path("go2"), F_OK))
		usleep(10000);
	CHECK(getppid() == want.ppid, "%s: parent %d (want %d)", who, getppid(), want.ppid);
	CHECK(getpgrp() == want.pgid, "%s: group %d (want %d)", who, getpgrp(), want.pgid);
	CHECK(getsid(0) == want.sid, "%s: session %d (want %d)", who, getsid(0), want.sid);
	if (child)
		CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		      "%s: its child passed its checks", who);
	_exit(prog_failures ? 1 : 0);
}

static void check_zombie(const char *who, pid_t z, pid_t want_pgid, pid_t want_sid,
			 const char *want_comm)
{
	struct ids got = {0, 0, 0};
	char comm[64] = "?", state = '?';
	int ret = stat_ids(z, &got, comm, sizeof(comm), &state);

	CHECK(!ret && state == 'Z' && got.ppid == getpid() && got.pgid == want_pgid &&
		      got.sid == want_sid && !strcmp(comm, want_comm),
	      "%s %d: a zombie (%c), R's child (%d), group %d (want %d), session %d (want %d), "
	      "named %s (want %s)",
	      who, z, state, got.ppid, got.pgid, want_pgid, got.sid, want_sid, comm, want_comm);
}

int main(int argc, char **argv)
{
	int pm[2], st, fails = 0;
	pid_t r = getpid(), z1, z2, z3, m, g, p;
	struct ids rid = {getppid(), getpgrp(), getsid(0)};

	prog_init(argc, argv);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		prog_die("subreaper");
	if (pipe(pm))
		prog_die("pipe");
	z1 = fork();
	if (!z1) {
		pid_t n;

		prctl(PR_SET_NAME, "zl-z1");
		if (setsid() < 0)
			_exit(2);
		m = fork();
		if (!m) {
			struct ids want = {r, getpgrp(), getsid(0)};

			n = fork();
			if (!n) {
				struct ids wn = {getppid(), getpgrp(), getsid(0)};

				member("N", wn, 0);
			}
			member("M", want, n);
		}
		if (write(pm[1], &m, sizeof(m)) != sizeof(m))
			_exit(2);
		_exit(3);
	}
	if (read(pm[0], &m, sizeof(m)) != sizeof(m))
		prog_die("Z1 did not start M");
	z2 = fork();
	if (!z2) {
		prctl(PR_SET_NAME, "zl-z2");
		if (setpgid(0, 0))
			_exit(2);
		g = fork();
		if (!g) {
			struct ids want = {r, getpgrp(), getsid(0)};

			member("G", want, 0);
		}
		if (write(pm[1], &g, sizeof(g)) != sizeof(g))
			_exit(2);
		raise(SIGTERM);
		_exit(2);
	}
	if (read(pm[0], &g, sizeof(g)) != sizeof(g))
		prog_die("Z2 did not start G");
	z3 = fork();
	if (!z3) {
		prctl(PR_SET_NAME, "zl-z3");
		if (setsid() < 0)
			_exit(2);
		_exit(5);
	}
	/* Z1 writes M's pid, then Z2 G's (Z2 is forked after Z1 wrote) */
	/* every zombie dead, M and G ours */
	for (int i = 0; i < 200; i++) {
		struct ids x;
		char c[64], s1 = 0, s2 = 0, s3 = 0;

		if (!stat_ids(z1, &x, c, sizeof(c), &s1) && !stat_ids(z2, &x, c, sizeof(c), &s2) &&
		    !stat_ids(z3, &x, c, sizeof(c), &s3) && s1 == 'Z' && s2 == 'Z' && s3 == 'Z' &&
		    !stat_ids(m, &x, c, sizeof(c), &s1) && x.ppid == r &&
		    !stat_ids(g, &x, c, sizeof(c), &s1) && x.ppid == r)
			break;
		usleep(10000);
	}
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		waitpid(z3, &st, 0);
	CHECK(getsid(0) == rid.sid && getpgrp() == rid.pgid, "R: group %d, session %d as before",
	      getpgrp(), getsid(0));
	check_zombie("Z1", z1, z1, z1, "zl-z1");
	check_zombie("Z2", z2, z2, rid.sid, "zl-z2");
	check_zombie("Z3", z3, z3, z3, "zl-z3");
	st = -1;
	p = waitpid(z1, &st, 0);
	CHECK(p == z1 && WIFEXITED(st) && WEXITSTATUS(st) == 3,
	      "Z1 reaped with exit status 3 (%#x)", st);
	st = -1;
	p = waitpid(z2, &st, 0);
	CHECK(p == z2 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
	      "Z2 reaped, killed by SIGTERM (%#x)", st);
	st = -1;
	p = waitpid(z3, &st, 0);
	CHECK(p == z3 && WIFEXITED(st) && WEXITSTATUS(st) == 5,
	      "Z3 reaped with exit status 5 (%#x)", st);
	prog_write_atomic("go2", "");
	for (int i = 0; i < 2; i++) {
		p = waitpid(-1, &st, 0);

		if ((p != m && p != g) || !WIFEXITED(st) || WEXITSTATUS(st))
			fails++;
	}
	CHECK(!fails, "M and G were R's children and passed their own checks");
	CHECK(waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD, "R has no other child");
	return prog_done();
}
