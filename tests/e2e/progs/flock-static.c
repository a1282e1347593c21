// SPDX-License-Identifier: MIT
/*
 * flock-static DIR: holds an flock on DIR/lock (exclusive) and a POSIX write lock on its
 * first 10 bytes, says ready, waits for go, then checks that both are still its own: a
 * new description of the file (opened by a child, which is another owner for both
 * kinds) can take neither.  Static, to run in a container's rootfs.
 */
#include <sys/file.h>
#include <sys/wait.h>

#include "prog.h"

/* In a child: can a new open of the file take the lock kind (1 flock, 2 POSIX)? */
static int taken_by_other(int kind)
{
	pid_t c = fork();
	int st;

	if (c == 0) {
		int fd = open(prog_path("lock"), O_RDWR);
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10};

		if (fd < 0)
			_exit(2);
		if (kind == 1)
			_exit(flock(fd, LOCK_EX | LOCK_NB) ? 1 : 0);
		_exit(fcntl(fd, F_SETLK, &fl) ? 1 : 0);
	}
	return c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 1;
}

int main(int argc, char **argv)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10};
	int fd;

	prog_init(argc, argv);
	fd = open(prog_path("lock"), O_RDWR | O_CREAT, 0644);
	if (fd < 0 || flock(fd, LOCK_EX) || fcntl(fd, F_SETLK, &fl))
		prog_die("lock %s", prog_path("lock"));
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		flock(fd, LOCK_UN);
	CHECK(taken_by_other(1), "the flock is still held");
	CHECK(taken_by_other(2), "the POSIX lock is still held");
	return prog_done();
}
