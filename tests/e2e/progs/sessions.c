// SPDX-License-Identifier: MIT
/*
 * sessions: a daemon whose session and process groups outlived their
 * leaders.  The launcher forks L, which calls setsid() and forks R, the
 * daemon, and exits: R is in session L, group L, both leaderless.  R, a
 * child subreaper, forks A, which calls setsid() and forks B, which calls
 * setpgid(0, 0) and forks C and E; C forks F; then B and A exit: C and E
 * are R's children now, in session A and group B, both leaderless, and F
 * is C's child in the same.
 *
 * After the restore every process checks its own parent, group and session,
 * and R that it has no child left to reap but C and E (the helpers that
 * remade the sessions are gone) and that no SIGCHLD came.
 *
 *   sessions DIR     (R writes DIR/ready with its pid: dump that one)
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "prog.h"

static volatile sig_atomic_t chld;

static void on_chld(int sig)
{
	(void)sig;
	chld++;
}

struct ids {
	pid_t ppid, pgid, sid;
};

static struct ids ids(void)
{
	return (struct ids){getppid(), getpgrp(), getsid(0)};
}

static void check_ids(const char *who, struct ids want, bool ppid_too)
{
	struct ids got = ids();

	if (ppid_too)
		CHECK(got.ppid == want.ppid, "%s: parent %d (want %d)", who, got.ppid, want.ppid);
	CHECK(got.pgid == want.pgid, "%s: process group %d (want %d)", who, got.pgid, want.pgid);
	CHECK(got.sid == want.sid, "%s: session %d (want %d)", who, got.sid, want.sid);
}

struct hello {
	char who;
	pid_t pid;
};

/* C, E and F: wait for go2 (R's own checks come first), check, exit. */
static void __attribute__((noreturn)) member(char who, int ready_fd, pid_t child, pid_t parent)
{
	struct hello h = {who, getpid()};
	struct ids want = ids();
	char name[2] = {who, 0};
	int st;

	if (write(ready_fd, &h, sizeof(h)) != sizeof(h))
		_exit(2);
	close(ready_fd);
	while (access(prog_path("go2"), F_OK))
		usleep(10000);
	want.ppid = parent; /* C and E: R's, once B has exited */
	check_ids(name, want, true);
	if (child)
		CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		      "%s: its child passed its checks", name);
	_exit(prog_failures ? 1 : 0);
}

int main(int argc, char **argv)
{
	int rd[2], st, fails = 0, got_chld;
	pid_t l, a, r, c = 0, e = 0, f = 0;
	struct ids want;
	struct hello h;

	prog_init(argc, argv);
	if (pipe(rd))
		prog_die("pipe");
	l = fork();
	if (l < 0)
		prog_die("fork");
	if (l > 0) {
		waitpid(l, &st, 0);
		return 0; /* the launcher: R reports ready itself */
	}
	/* L */
	if (setsid() < 0)
		prog_die("setsid L");
	if (fork())
		_exit(0);
	/* R: re-parented to init when L exits */
	r = getpid();
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		prog_die("subreaper");
	a = fork();
	if (!a) {
		pid_t b;

		if (setsid() < 0)
			_exit(2);
		b = fork();
		if (!b) {
			if (setpgid(0, 0))
				_exit(2);
			if (!fork()) {
				pid_t ff = fork();

				if (!ff)
					member('F', rd[1], 0, getppid());
				member('C', rd[1], ff, r);
			}
			if (!fork())
				member('E', rd[1], 0, r);
			_exit(0);
		}
		waitpid(b, &st, 0);
		_exit(0);
	}
	close(rd[1]);
	for (int n = 0; n < 3; n++) {
		if (read(rd[0], &h, sizeof(h)) != sizeof(h))
			prog_die("the members did not start");
		*(h.who == 'C' ? &c : h.who == 'E' ? &e : &f) = h.pid;
	}
	/* A, and B once it is ours: C and E are our children now, F is C's */
	waitpid(a, &st, 0);
	while (waitpid(-1, &st, WNOHANG) > 0)
		;
	signal(SIGCHLD, on_chld);
	want = ids();
	prog_ready();
	prog_wait_go();
	got_chld = chld;

	check_ids("R", want, false);
	CHECK(kill(want.sid, 0) && errno == ESRCH, "R's session leader %d is gone", want.sid);
	CHECK(kill(getpgid(c), 0) && errno == ESRCH, "C's group leader %d is gone", getpgid(c));
	CHECK(kill(getsid(c), 0) && errno == ESRCH, "C's session leader %d is gone", getsid(c));
	CHECK(getsid(c) != want.sid && getpgid(c) != getsid(c) && getpgid(e) == getpgid(c) &&
		      getpgid(f) == getpgid(c),
	      "C, E and F share a group %d in session %d", getpgid(c), getsid(c));
	CHECK(waitpid(-1, &st, WNOHANG) == 0, "R has nothing to reap before its members exit");
	CHECK(!got_chld, "R got no SIGCHLD from the restore (%d)", got_chld);
	prog_write_atomic("go2", "");
	for (int i = 0; i < 2; i++) {
		pid_t p = waitpid(-1, &st, 0);

		if ((p != c && p != e) || !WIFEXITED(st) || WEXITSTATUS(st))
			fails++;
	}
	CHECK(!fails, "C and E were R's children and passed their own checks");
	CHECK(waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD, "R has no other child");
	return prog_done();
}
