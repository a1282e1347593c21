// SPDX-License-Identifier: MIT
/*
 * exchange: what an attacker owning an image directory can do while root
 * restores from it: swap files by name, atomically, over and over.
 *
 *   exchange DIR A B [C D...]   renameat2(RENAME_EXCHANGE) A with B, C with D,
 *                               ... in DIR, in a loop, until killed
 *
 * A random pair is swapped each time, as fast as the scheduler lets it, so
 * that each name points at either file at any moment a reader looks.  Exits
 * 2 if a swap fails (the directory is not the caller's, a name is missing).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned int seed = (unsigned int)getpid();
	int dirfd;

	if (argc < 4 || (argc - 2) % 2) {
		fprintf(stderr, "usage: exchange DIR A B [C D...]\n");
		return 2;
	}
	dirfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		fprintf(stderr, "exchange: cannot open %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	for (;;) {
		/* a random pair each time: the pairs' states are independent */
		int i = 2 + 2 * (rand_r(&seed) % ((argc - 2) / 2));

		if (renameat2(dirfd, argv[i], dirfd, argv[i + 1], RENAME_EXCHANGE)) {
			fprintf(stderr, "exchange: %s <-> %s: %s\n", argv[i], argv[i + 1],
				strerror(errno));
			return 2;
		}
		sched_yield();
	}
}
