// SPDX-License-Identifier: MIT
/*
 * tree: a process tree.  The root forks
 *   A: a child in its own process group, reading a pipe that holds bytes
 *      written before the dump, and sharing a file description (offset) with
 *      the root; A forks a grandchild G that sleeps in the same group;
 *   S: a child that made its own session (setsid);
 *   Z: a child that exited with status 7 and was not reaped (a zombie);
 * and the root and A share MAP_SHARED|MAP_ANONYMOUS memory.
 * After go: pids, parents, groups and sessions must be those of before, the
 * pipe data arrives, a write by A moves the offset the root sees and a store
 * by A in the shared memory is seen by the root, the root's
 * waitpid() on Z returns exit status 7, and every child exits 0 (its own
 * checks passed).
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "prog.h"

static int child_checks(pid_t want_ppid, pid_t want_pgid, pid_t want_sid)
{
	return getppid() == want_ppid && getpgid(0) == want_pgid && getsid(0) == want_sid;
}

int main(int argc, char **argv)
{
	pid_t root = getpid(), a, s, z, g = 0;
	int p[2], gp[2], fd, st;
	pid_t r;
	volatile long *shared =
		mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	off_t before, after;
	long gbuf;

	prog_init(argc, argv);
	if (shared == MAP_FAILED)
		prog_die("mmap");
	shared[0] = 1111;
	shared[1000] = 2222;
	fd = open(prog_path("shared.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "root", 4) != 4 || pipe(p) || pipe(gp))
		prog_die("setup");
	z = fork();
	if (z == 0)
		_exit(7);
	a = fork();
	if (a == 0) {
		char buf[16] = "";
		int ok;

		setpgid(0, 0);
		g = fork();
		if (g == 0) {
			while (!prog_go_exists())
				usleep(10 * 1000);
			/* in A's group (A is its parent), not in the session's */
			_exit(getpgid(0) == getppid() && getpgid(0) != getsid(0) ? 0 : 1);
		}
		if (write(gp[1], &g, sizeof(g)) != sizeof(g))
			_exit(2);
		while (!prog_go_exists())
			usleep(10 * 1000);
		ok = read(p[0], buf, 5) == 5 && !memcmp(buf, "hello", 5);
		ok &= child_checks(root, getpid(), getsid(root));
		ok &= write(fd, "A", 1) == 1; /* moves the shared offset */
		ok &= shared[0] == 1111 && shared[1000] == 2222;
		shared[1] = 3333;
		ok &= waitpid(g, &st, 0) == g && WIFEXITED(st) && WEXITSTATUS(st) == 0;
		_exit(ok ? 0 : 1);
	}
	s = fork();
	if (s == 0) {
		setsid();
		while (!prog_go_exists())
			usleep(10 * 1000);
		_exit(child_checks(root, getpid(), getpid()) ? 0 : 1);
	}
	if (read(gp[0], &gbuf, sizeof(g)) != sizeof(g))
		prog_die("grandchild pid");
	g = (pid_t)gbuf;
	if (write(p[1], "hello", 5) != 5)
		prog_die("pipe");
	/* wait until Z is a zombie and S made its session */
	for (int i = 0; i < 500; i++) {
		char path[64], state = 0, *q, buf[512] = "";
		int f;

		snprintf(path, sizeof(path), "/proc/%d/stat", z);
		f = open(path, O_RDONLY);
		if (f >= 0 && read(f, buf, sizeof(buf) - 1) > 0 && (q = strrchr(buf, ')')))
			state = q[2];
		if (f >= 0)
			close(f);
		if (state == 'Z' && getsid(s) == s && getpgid(a) == a)
			break;
		usleep(10 * 1000);
	}
	before = lseek(fd, 0, SEEK_CUR);
	prog_ready();
	prog_wait_go();
	/* G checks its own group (it may be gone by now) */
	CHECK(getpgid(a) == a && getsid(s) == s,
	      "groups and sessions: A leads %d, S leads session %d", getpgid(a), getsid(s));
	st = -1;
	r = waitpid(z, &st, 0);
	CHECK(r == z && WIFEXITED(st) && WEXITSTATUS(st) == (prog_sabotage() ? 8 : 7),
	      "zombie %d reaped (%d) with wait status 0x%x", z, r, st);
	st = -1;
	r = waitpid(a, &st, 0);
	CHECK(r == a && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "child A (pipe, group, shared offset, grandchild) wait status 0x%x", st);
	st = -1;
	r = waitpid(s, &st, 0);
	CHECK(r == s && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "child S (own session) wait status 0x%x", st);
	CHECK(shared[1] == 3333 && shared[0] == 1111, "shared memory: A's store seen (%ld)",
	      shared[1]);
	after = lseek(fd, 0, SEEK_CUR);
	CHECK(after == before + 1, "shared offset moved by A: %ld -> %ld", (long)before,
	      (long)after);
	return prog_done();
}
