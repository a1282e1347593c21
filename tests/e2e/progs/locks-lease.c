// SPDX-License-Identifier: MIT
/*
 * A read lease on a file of its own (run as an unprivileged user: a lease
 * needs to own the file or CAP_LEASE) and an flock on it; after "go" both
 * must still be held.  With the argument "mapped" ("mapped-ofd"): an
 * exclusive flock (OFD write lock) on a description that only a mapping
 * keeps (its fd closed), which amber cannot see through any fd and must
 * refuse.
 */
#include <sys/file.h>
#include <sys/mman.h>

#include "prog.h"

int main(int argc, char **argv)
{
	int fd, first = prog_init(argc, argv);

	if (first < argc && !strncmp(argv[first], "mapped", 6)) {
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

		fd = open(prog_path("mapped"), O_RDWR | O_CREAT, 0644);
		if (fd < 0 || ftruncate(fd, 4096) ||
		    (strcmp(argv[first], "mapped-ofd") ? flock(fd, LOCK_EX)
						       : fcntl(fd, F_OFD_SETLK, &fl)) ||
		    mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED)
			prog_die("mapped lock");
		close(fd);
		prog_ready();
		prog_wait_go();
		fd = open(prog_path("mapped"), O_RDWR);
		fl.l_type = F_RDLCK;
		CHECK(strcmp(argv[first], "mapped-ofd")
			      ? flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK
			      : !fcntl(fd, F_OFD_GETLK, &fl) && fl.l_type == F_WRLCK,
		      "the lock held through the mapping is still there");
		return prog_done();
	}
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
