// SPDX-License-Identifier: MIT
/*
 * widetree: one process with more children than fit in one page of the
 * children file, and more than any fixed array of 1024 pids (a dump once
 * kept the first 1024 and left the rest running, unknown to the image).
 * argv[2]: the number of children (default 1100).  Each child blocks on a
 * pipe; after go the root closes its end, every child checks that its
 * parent is still the root and exits 0, and the root reaps every one of
 * them by pid.
 */
#include <signal.h>
#include <sys/wait.h>

#include "prog.h"

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 1100, p[2], bad = 0, reaped = 0;
	pid_t root = getpid(), *kids;

	prog_init(argc, argv);
	kids = calloc((size_t)n, sizeof(*kids));
	if (!kids || pipe(p))
		prog_die("setup");
	for (int i = 0; i < n; i++) {
		char c;

		kids[i] = fork();
		if (kids[i] < 0)
			prog_die("fork %d", i);
		if (kids[i] == 0) {
			close(p[1]);
			/* EOF once the root closes the pipe after go */
			_exit(read(p[0], &c, 1) == 0 && getppid() == root ? 0 : 1);
		}
	}
	close(p[0]);
	prog_ready();
	prog_wait_go();
	close(p[1]);
	if (prog_sabotage())
		kill(kids[n / 2], SIGKILL);
	for (int i = 0; i < n; i++) {
		int st = -1;

		if (waitpid(kids[i], &st, 0) != kids[i])
			continue;
		reaped++;
		bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	CHECK(reaped == n, "%d of %d children reaped by pid", reaped, n);
	CHECK(bad == 0, "%d children failed their checks (parent, pipe EOF)", bad);
	free(kids);
	return prog_done();
}
