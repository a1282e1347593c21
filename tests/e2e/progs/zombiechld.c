/* SPDX-License-Identifier: MIT */
/*
 * Zombies whose parents stopped waiting for them after they died:
 *   R (the root): its child Z exited with status 5, then R set SIGCHLD to
 *      SIG_IGN (which reaps later children at once, not Z);
 *   C (R's child): its child ZC exited with status 6, then C installed a
 *      SIGCHLD handler with SA_NOCLDWAIT.
 * After go: both actions are as set, Z and ZC are still zombies with their
 * statuses, C's handler did not run for ZC's old death, and a new child of
 * each is reaped by the kernel (C's handler runs for it once).  C sends its
 * verdict to R through a pipe.
 */
#include <signal.h>
#include <sys/wait.h>

#include "prog.h"

static volatile sig_atomic_t handled;

static void on_chld(int sig)
{
	(void)sig;
	handled++;
}

static char state_of(pid_t pid)
{
	char path[64], buf[512], *q;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (prog_read_file(path, buf, sizeof(buf)) <= 0 || !(q = strrchr(buf, ')')))
		return 0;
	return q[2];
}

static void wait_zombie(pid_t pid)
{
	for (int i = 0; i < 500 && state_of(pid) != 'Z'; i++)
		usleep(10 * 1000);
	if (state_of(pid) != 'Z')
		prog_die("child %d did not become a zombie", pid);
}

/* A new child dies; the kernel reaps it: waitpid finds nothing. */
static int new_child_autoreaped(void)
{
	pid_t k = fork();
	int st;

	if (k < 0)
		prog_die("fork");
	if (!k)
		_exit(0);
	for (int i = 0; i < 500 && state_of(k); i++)
		usleep(10 * 1000);
	return waitpid(k, &st, WNOHANG) < 0 && errno == ECHILD;
}

static int child_main(int out, int ready)
{
	struct sigaction sa = {0};
	pid_t zc = fork(), r;
	int st = -1;

	if (zc < 0)
		prog_die("fork");
	if (!zc)
		_exit(6);
	wait_zombie(zc);
	sa.sa_handler = on_chld;
	sa.sa_flags = SA_NOCLDWAIT | SA_RESTART;
	if (sigaction(SIGCHLD, &sa, NULL))
		prog_die("sigaction");
	if (write(ready, "r", 1) != 1)
		prog_die("write");
	prog_wait_go();
	sigaction(SIGCHLD, NULL, &sa);
	CHECK(sa.sa_handler == on_chld && (sa.sa_flags & SA_NOCLDWAIT),
	      "C: the SA_NOCLDWAIT handler is kept");
	CHECK(handled == 0, "C: its handler did not run for ZC (%d runs)", (int)handled);
	CHECK(state_of(zc) == 'Z', "C: ZC %d is still a zombie (state %c)", zc, state_of(zc));
	r = waitpid(zc, &st, WNOHANG);
	CHECK(r == zc && WIFEXITED(st) && WEXITSTATUS(st) == 6,
	      "C: ZC reaped (%d) with wait status 0x%x", r, st);
	CHECK(new_child_autoreaped(), "C: a new child is reaped by the kernel");
	for (int i = 0; i < 100 && handled != 1; i++)
		usleep(10 * 1000);
	CHECK(handled == 1, "C: its handler ran once for the new child (%d runs)", (int)handled);
	if (write(out, prog_failures ? "0" : "1", 1) != 1)
		_exit(2);
	_exit(0);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	int p[2], r[2], st = -1;
	pid_t z, c;
	char v = 0;
	ssize_t n;

	prog_init(argc, argv);
	if (pipe(p) || pipe(r))
		prog_die("pipe");
	c = fork();
	if (c < 0)
		prog_die("fork");
	if (!c)
		return child_main(p[1], r[1]);
	close(p[1]);
	close(r[1]);
	if (read(r[0], &v, 1) != 1)
		prog_die("C did not set up");
	z = fork();
	if (z < 0)
		prog_die("fork");
	if (!z)
		_exit(5);
	wait_zombie(z);
	signal(SIGCHLD, SIG_IGN);
	prog_ready();
	prog_wait_go();
	sigaction(SIGCHLD, NULL, &sa);
	CHECK(sa.sa_handler == SIG_IGN, "R: SIGCHLD is still ignored");
	CHECK(state_of(z) == 'Z', "R: Z %d is still a zombie (state %c)", z, state_of(z));
	c = waitpid(z, &st, WNOHANG);
	CHECK(c == z && WIFEXITED(st) && WEXITSTATUS(st) == (prog_sabotage() ? 6 : 5),
	      "R: Z reaped (%d) with wait status 0x%x", c, st);
	CHECK(new_child_autoreaped(), "R: a new child is reaped by the kernel");
	v = '?';
	n = read(p[0], &v, 1);
	CHECK(n == 1 && v == '1', "R: C's checks passed (read %zd, verdict %c, %s)", n, v ? v : '-',
	      n < 0 ? strerror(errno) : "");
	return prog_done();
}
