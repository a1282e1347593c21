// SPDX-License-Identifier: MIT
/*
 * ptypair: both ends of a pseudo-terminal, held by the program.
 *
 *   ptypair DIR [gap|queued]
 *
 * Opens a master (/dev/ptmx) and its slave (O_NONBLOCK), gives the pair a
 * termios of its own (raw, special characters changed, 2400 baud) and a
 * 77x33 window, puts the master in packet mode, makes the slave exclusive
 * and locks the master again.  gap: a spare pty opened first and closed
 * after, so that the pair's number is not the lowest free one.  queued:
 * bytes written to the master stay unread on the slave.  DIR/pts holds
 * "/dev/pts/N MASTERFD SLAVEFD".  After DIR/go it checks all of that on the
 * same fds, and that data goes both ways (the master's reads carry the
 * packet-mode header).  outside: a child (its pid in DIR/child) holds only
 * the slave, the master stays with the parent; after go the child writes
 * "hi" on the slave and the parent reads it from the master.
 */
#include <asm/termbits.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include "prog.h"

int posix_openpt(int flags);
int grantpt(int fd);
int unlockpt(int fd);
int ptsname_r(int fd, char *buf, size_t len);

static int read_some(int fd, char *buf, size_t len)
{
	struct pollfd p = {fd, POLLIN, 0};

	if (poll(&p, 1, 2000) != 1)
		return -1;
	return (int)read(fd, buf, len);
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	const char *mode = argc > first ? argv[first] : "";
	struct termios2 set, now;
	struct winsize ws_set = {33, 77, 0, 0}, ws_now;
	char name[64], link[128], info[256], buf[64];
	int m, s, spare = -1, index, n, v, status;
	pid_t child = -1;

	if (!strcmp(mode, "gap") && (spare = posix_openpt(O_RDWR | O_NOCTTY)) < 0)
		prog_die("posix_openpt (spare)");
	m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m) || ptsname_r(m, name, sizeof(name)) ||
	    ioctl(m, TIOCGPTN, &index))
		prog_die("cannot make a pty");
	s = open(name, O_RDWR | O_NOCTTY | O_NONBLOCK);
	if (s < 0)
		prog_die("open %s", name);
	if (spare >= 0)
		close(spare);
	if (ioctl(s, TCGETS2, &set))
		prog_die("TCGETS2");
	set.c_iflag &= ~(ICRNL | IXON);
	set.c_lflag &= ~(ICANON | ECHO | ISIG);
	set.c_oflag &= ~OPOST;
	set.c_cc[VMIN] = 1;
	set.c_cc[VTIME] = 0;
	set.c_cc[VINTR] = 5;
	set.c_cc[VEOF] = 6;
	set.c_cflag = (set.c_cflag & ~CBAUD) | BOTHER;
	set.c_ispeed = set.c_ospeed = 2400;
	if (ioctl(s, TCSETS2, &set) || ioctl(s, TIOCSWINSZ, &ws_set) || ioctl(s, TCGETS2, &set))
		prog_die("cannot set the pty's termios");
	if (ioctl(m, TIOCPKT, &(int){1}) || ioctl(s, TIOCEXCL) || ioctl(m, TIOCSPTLCK, &(int){1}))
		prog_die("cannot set packet mode, exclusive mode or the lock");
	if (!strcmp(mode, "queued") && write(m, "queued\n", 7) != 7)
		prog_die("write to the master");
	snprintf(info, sizeof(info), "%s %d %d\n", name, m, s);
	prog_write_atomic("pts", info);
	if (!strcmp(mode, "outside")) {
		child = fork();
		if (child < 0)
			prog_die("fork");
		if (child == 0) {
			close(m);
			snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
			prog_write_atomic("child", buf);
			prog_wait_go();
			_exit(write(s, "hi", 2) == 2 ? 0 : 1);
		}
		close(s);
		while (access(prog_path("child"), F_OK))
			usleep(10000);
	}
	prog_ready();
	prog_wait_go();
	if (child > 0) {
		CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) &&
			      WEXITSTATUS(status) == 0,
		      "the child with the slave wrote to it (status %#x)", status);
		v = read_some(m, buf, sizeof(buf));
		if (prog_sabotage())
			v = 0;
		CHECK(v == 3 && buf[0] == TIOCPKT_DATA && !memcmp(buf + 1, "hi", 2),
		      "the parent read it from the master (%d bytes)", v);
		return prog_done();
	}

	if (prog_sabotage())
		set.c_cc[VEOF] = 4;
	{
		int r_ptn = ioctl(m, TIOCGPTN, &n), r_tio = ioctl(s, TCGETS2, &now);
		int r_ws = ioctl(m, TIOCGWINSZ, &ws_now), pkt = 0, lck = 0, excl = 0;
		int r_flags = ioctl(m, TIOCGPKT, &pkt) || ioctl(m, TIOCGPTLCK, &lck) ||
			      ioctl(s, TIOCGEXCL, &excl);
		char fdpath[64];
		ssize_t len;

		CHECK(!r_ptn && n == index, "master fd %d is still of pts %d (now %d)", m, index,
		      n);
		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", s);
		len = readlink(fdpath, link, sizeof(link) - 1);
		link[len > 0 ? len : 0] = 0;
		CHECK(!strcmp(link, name), "slave fd %d is %s (now %s)", s, name, link);
		CHECK(!r_tio && now.c_iflag == set.c_iflag && now.c_oflag == set.c_oflag &&
			      now.c_cflag == set.c_cflag && now.c_lflag == set.c_lflag &&
			      !memcmp(now.c_cc, set.c_cc, NCCS) && now.c_ispeed == set.c_ispeed &&
			      now.c_ospeed == set.c_ospeed,
		      "termios of the pair (lflag %#x, VINTR %d, VEOF %d, speed %u)", now.c_lflag,
		      now.c_cc[VINTR], now.c_cc[VEOF], now.c_ospeed);
		CHECK(!r_ws && ws_now.ws_row == ws_set.ws_row && ws_now.ws_col == ws_set.ws_col,
		      "window size %ux%u", ws_now.ws_col, ws_now.ws_row);
		CHECK(!r_flags && pkt, "master in packet mode (%d)", pkt);
		CHECK(!r_flags && lck, "master locked (%d)", lck);
		CHECK(!r_flags && excl, "slave exclusive (%d)", excl);
		CHECK(fcntl(s, F_GETFL) & O_NONBLOCK, "slave O_NONBLOCK");
	}
	if (!strcmp(mode, "queued")) {
		n = read_some(s, buf, sizeof(buf));
		CHECK(n == 7 && !memcmp(buf, "queued\n", 7),
		      "the queued bytes are still there (%d)", n);
	}
	n = (int)write(m, "ping", 4);
	v = read_some(s, buf, sizeof(buf));
	CHECK(n == 4 && v == 4 && !memcmp(buf, "ping", 4), "master to slave (%d bytes)", v);
	n = (int)write(s, "pong", 4);
	v = read_some(m, buf, sizeof(buf));
	CHECK(n == 4 && v == 5 && buf[0] == TIOCPKT_DATA && !memcmp(buf + 1, "pong", 4),
	      "slave to master, with the packet header (%d bytes)", v);
	return prog_done();
}
