// SPDX-License-Identifier: MIT
/*
 * ttyraw: a raw-mode program on its terminal (stdin), as an editor or top.
 *
 *   ttyraw DIR
 *
 * Puts the terminal in raw mode (no ICANON, no ECHO, VMIN=1, VTIME=0, VINTR
 * ^B, VQUIT ^G, VEOF ^D... changed, a 4800 baud output speed) and a 101x37
 * window size of its own, then writes DIR/ready.  Each key read on stdin, as
 * soon as it is typed (without Enter: only raw mode delivers it alone), is
 * written to DIR/keys as "key C".  When DIR/go appears it checks that the
 * terminal's whole termios2 and window size are still the ones it set, then
 * gives the terminal its first settings back.
 */
#include <asm/termbits.h>
#include <poll.h>
#include <sys/ioctl.h>

#include "prog.h"

int main(int argc, char **argv)
{
	struct termios2 orig, set, now;
	struct winsize ws_orig, ws_set = {37, 101, 808, 592}, ws_now;
	int kfd, keys = 0;

	prog_init(argc, argv);
	if (ioctl(0, TCGETS2, &orig) || ioctl(0, TIOCGWINSZ, &ws_orig))
		prog_die("stdin is not a terminal");
	set = orig;
	set.c_iflag &= ~(ICRNL | IXON | INLCR | BRKINT);
	set.c_iflag |= IGNPAR;
	set.c_lflag &= ~(ICANON | ECHO | ECHOE | ECHOK | IEXTEN);
	set.c_oflag &= ~ONLCR;
	set.c_cc[VMIN] = 1;
	set.c_cc[VTIME] = 0;
	set.c_cc[VINTR] = 2;  /* ^B */
	set.c_cc[VQUIT] = 7;  /* ^G */
	set.c_cc[VSUSP] = 0;  /* none */
	set.c_cc[VERASE] = 8; /* ^H */
	set.c_cc[VKILL] = 21;
	set.c_cflag = (set.c_cflag & ~CBAUD) | BOTHER;
	set.c_ospeed = 4800;
	set.c_ispeed = 4800;
	if (ioctl(0, TCSETS2, &set) || ioctl(0, TIOCSWINSZ, &ws_set))
		prog_die("cannot set the terminal");
	/* what the kernel kept of it is what must come back */
	if (ioctl(0, TCGETS2, &set))
		prog_die("TCGETS2");
	kfd = open(prog_path("keys"), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (kfd < 0)
		prog_die("open keys");
	prog_ready();
	while (!prog_go_exists()) {
		struct pollfd p = {0, POLLIN, 0};
		char c, line[16];

		if (poll(&p, 1, 100) <= 0 || !(p.revents & POLLIN))
			continue;
		if (read(0, &c, 1) != 1)
			continue;
		snprintf(line, sizeof(line), "key %c\n", c);
		if (write(kfd, line, strlen(line)) < 0)
			prog_die("write keys");
		keys++;
	}
	if (ioctl(0, TCGETS2, &now) || ioctl(0, TIOCGWINSZ, &ws_now))
		prog_die("TCGETS2 after go");
	if (prog_sabotage())
		set.c_cc[VINTR] = 3;
	CHECK(now.c_iflag == set.c_iflag && now.c_oflag == set.c_oflag &&
		      now.c_cflag == set.c_cflag && now.c_lflag == set.c_lflag &&
		      now.c_line == set.c_line,
	      "termios flags iflag %#x oflag %#x cflag %#x lflag %#x (set %#x %#x %#x %#x)",
	      now.c_iflag, now.c_oflag, now.c_cflag, now.c_lflag, set.c_iflag, set.c_oflag,
	      set.c_cflag, set.c_lflag);
	CHECK(!memcmp(now.c_cc, set.c_cc, NCCS), "special characters: VINTR %d VMIN %d VTIME %d",
	      now.c_cc[VINTR], now.c_cc[VMIN], now.c_cc[VTIME]);
	CHECK(now.c_ispeed == set.c_ispeed && now.c_ospeed == set.c_ospeed,
	      "speeds %u/%u (set %u/%u)", now.c_ispeed, now.c_ospeed, set.c_ispeed, set.c_ospeed);
	CHECK(ws_now.ws_row == ws_set.ws_row && ws_now.ws_col == ws_set.ws_col &&
		      ws_now.ws_xpixel == ws_set.ws_xpixel && ws_now.ws_ypixel == ws_set.ws_ypixel,
	      "window size %ux%u (%ux%u px), set %ux%u", ws_now.ws_col, ws_now.ws_row,
	      ws_now.ws_xpixel, ws_now.ws_ypixel, ws_set.ws_col, ws_set.ws_row);
	CHECK(keys > 0, "%d key(s) read one by one", keys);
	ioctl(0, TCSETS2, &orig);
	ioctl(0, TIOCSWINSZ, &ws_orig);
	return prog_done();
}
