// SPDX-License-Identifier: MIT
/*
 * clonefs: a child made with clone(CLONE_FILES | CLONE_FS), not a thread.
 * After go the child opens a file at fd 77 and changes directory; the parent
 * must see both (one fd table, one fs_struct), which only holds if the restore
 * made the child with the same flags.
 */
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include "prog.h"

int main(int argc, char **argv)
{
	char cwd[4096] = "", want[4096];
	int st;
	pid_t child;

	prog_init(argc, argv);
	if (mkdir(prog_path("sub"), 0755) && errno != EEXIST)
		prog_die("mkdir");
	child = (pid_t)syscall(SYS_clone, CLONE_FILES | CLONE_FS | SIGCHLD, 0, 0, 0, 0);
	if (child < 0)
		prog_die("clone");
	if (child == 0) {
		int fd;

		while (!prog_go_exists())
			usleep(10 * 1000);
		fd = open(prog_path("ready"), O_RDONLY);
		if (fd < 0 || dup2(fd, 77) != 77 || chdir(prog_path("sub")))
			_exit(1);
		close(fd);
		_exit(0);
	}
	prog_ready();
	prog_wait_go();
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "child exit status 0x%x", st);
	if (prog_sabotage())
		close(77);
	CHECK(fcntl(77, F_GETFD) >= 0, "fd 77 opened by the child is in our table too");
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	snprintf(want, sizeof(want), "%s", prog_path("sub"));
	CHECK(!strcmp(cwd, want), "cwd changed by the child: %s", cwd);
	return prog_done();
}
