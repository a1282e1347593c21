// SPDX-License-Identifier: MIT
/*
 * A read lease on a file of its own (run as an unprivileged user: a lease
 * needs to own the file or CAP_LEASE) and an flock on it; after "go" both
 * must still be held.
 */
#include <sys/file.h>

#include "prog.h"

int main(int argc, char **argv)
{
	int fd;

	prog_init(argc, argv);
	close(open(prog_path("lease"), O_WRONLY | O_CREAT, 0644));
	fd = open(prog_path("lease"), O_RDONLY);
	if (fd < 0 || fcntl(fd, F_SETLEASE, F_RDLCK) || flock(fd, LOCK_SH))
		prog_die("lease");
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		fcntl(fd, F_SETLEASE, F_UNLCK);
	CHECK(fcntl(fd, F_GETLEASE) == F_RDLCK, "a read lease on its file (%d)",
	      fcntl(fd, F_GETLEASE));
	CHECK(flock(open(prog_path("lease"), O_RDONLY), LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK,
	      "its shared flock is held");
	return prog_done();
}
