// SPDX-License-Identifier: MIT
/*
 * counter: the demo program, and the "keeps working" test for a plain program.
 *
 *   counter DIR [tty]
 *
 * Every ~100 ms it writes "count N" (N = 0, 1, 2, ...) to DIR/count.log through one fd
 * opened without O_APPEND, so a restored process only continues the file correctly if its
 * count, its fd and the fd's offset all came back.  With "tty" it also writes "tick N" to
 * stdout (the --shell-job test runs it in a tmux pane).  DIR/ready appears after the first
 * line.  When DIR/go appears it checks that count.log holds exactly count 0..N-1, with N its
 * own in-memory count, and exits 0 if so.  Built twice: counter (dynamic, glibc) and
 * counter-static.
 */
#include <time.h>

#include "prog.h"

#define MAX_STEPS 3000 /* x 100 ms: 5 minutes, then give up */

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	int tty = argc > first && !strcmp(argv[first], "tty");
	struct timespec step = {0, 100 * 1000 * 1000};
	char tty_before[256] = "", line[64], *buf, *p;
	long n, expect, bad = 0;
	int fd;

	if (tty && ttyname_r(1, tty_before, sizeof(tty_before)))
		prog_die("stdout is not a terminal");
	fd = open(prog_path("count.log"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		prog_die("open count.log");
	for (n = 0; n < MAX_STEPS && !prog_go_exists(); n++) {
		int len = snprintf(line, sizeof(line), "count %ld\n", n);

		if (write(fd, line, len) != len)
			prog_die("write count.log");
		if (tty)
			printf("tick %ld\n", n);
		if (n == 0)
			prog_ready();
		nanosleep(&step, NULL);
	}
	if (!prog_go_exists()) {
		fprintf(stderr, "FAIL: timed out waiting for go\n");
		return 3;
	}
	if (prog_sabotage())
		n++;

	buf = malloc(64 * (n + 1) + 1);
	if (prog_read_file(prog_path("count.log"), buf, 64 * (n + 1) + 1) < 0)
		prog_die("read count.log");
	for (expect = 0, p = buf; *p; expect++) {
		char want[64];
		int len = snprintf(want, sizeof(want), "count %ld\n", expect);

		if (strncmp(p, want, len)) {
			if (!bad++)
				fprintf(stderr, "  line %ld is \"%.*s\", expected \"count %ld\"\n",
					expect + 1, (int)strcspn(p, "\n"), p, expect);
			p += strcspn(p, "\n");
			p += *p == '\n';
		} else {
			p += len;
		}
	}
	CHECK(bad == 0 && expect == n, "count.log holds count 0..%ld (%ld lines, %ld bad)", n - 1,
	      expect, bad);
	if (tty) {
		char now[256] = "";

		ttyname_r(1, now, sizeof(now));
		CHECK(!strcmp(now, tty_before), "stdout is still the terminal %s (now %s)",
		      tty_before, now);
	}
	return prog_done();
}
