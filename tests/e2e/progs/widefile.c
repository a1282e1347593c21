// SPDX-License-Identifier: MIT
/*
 * widefile: one open file description shared by many processes (the root
 * opens a file, then forks argv[2] children, default 600), beside files
 * each child opens for itself.  With more than a thousand fds in the tree
 * the dump sorts them in two halves and merges them (files.c, sort_slots):
 * a merge that split the shared description's fds would give some
 * children an offset of their own.  After go every child appends one
 * byte through the shared fd at the shared offset (no O_APPEND), and the
 * root checks that the offset and the size both moved by one a child.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "prog.h"

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 600, fd, p[2], reaped = 0, bad = 0;
	pid_t *kids;
	off_t start;
	struct stat st;

	prog_init(argc, argv);
	kids = calloc((size_t)n, sizeof(*kids));
	fd = open(prog_path("shared"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (!kids || fd < 0 || write(fd, "start", 5) != 5 || pipe(p))
		prog_die("setup");
	for (int i = 0; i < n; i++) {
		char c;

		kids[i] = fork();
		if (kids[i] < 0)
			prog_die("fork %d", i);
		if (kids[i] == 0) {
			/* its own description of the same file: sorted beside the shared one */
			int own = open(prog_path("shared"), O_RDONLY);

			close(p[1]);
			if (own < 0 || read(p[0], &c, 1) != 1)
				_exit(1);
			/* at the shared offset, which every other child moves too */
			_exit(write(fd, "x", 1) == 1 && lseek(own, 0, SEEK_CUR) == 0 ? 0 : 1);
		}
	}
	close(p[0]);
	prog_ready();
	prog_wait_go();
	start = lseek(fd, 0, SEEK_CUR);
	CHECK(start == 5, "the shared offset is %lld, want 5", (long long)start);
	/* one child at a time (whichever reads the byte): each write moves the
	 * offset the next one uses */
	for (int i = 0; i < n; i++) {
		int st2 = -1;

		if (write(p[1], "g", 1) != 1 || waitpid(-1, &st2, 0) <= 0)
			break;
		reaped++;
		bad += !(WIFEXITED(st2) && WEXITSTATUS(st2) == 0);
	}
	CHECK(reaped == n, "%d of %d children reaped", reaped, n);
	CHECK(bad == 0, "%d children failed to write at the shared offset", bad);
	CHECK(lseek(fd, 0, SEEK_CUR) == 5 + n, "the shared offset is %lld, want %d",
	      (long long)lseek(fd, 0, SEEK_CUR), 5 + n);
	CHECK(fstat(fd, &st) == 0 && st.st_size == 5 + n, "the file has %lld bytes, want %d",
	      (long long)st.st_size, 5 + n);
	free(kids);
	return prog_done();
}
