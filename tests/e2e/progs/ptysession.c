// SPDX-License-Identifier: MIT
/*
 * ptysession: a session on a pseudo-terminal of the tree, as sshd makes one.
 *
 *   ptysession DIR [closed]
 *
 * The root holds the master; its child S calls setsid() and opens the slave
 * without O_NOCTTY, so that it becomes S's controlling terminal; S's child
 * J makes a group of its own, which S makes the terminal's foreground
 * group.  DIR/info holds "S J /dev/pts/N".  closed: S and J close every fd
 * on the slave (the terminal stays their controlling terminal).  devtty:
 * J holds /dev/tty (its fd number in DIR/devtty), opened before the dump,
 * and writes through it after.  After
 * DIR/go: S checks the terminal's session (TIOCGSID) and foreground group,
 * J that /dev/tty opens and is in the foreground; the root that both
 * passed and that J's line reaches the master.
 */
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>

#include "prog.h"

static int check_s(pid_t j, int s)
{
	pid_t sid = 0, fg;
	int t = open("/dev/tty", O_RDWR);

	if (t < 0)
		return 10;
	if (ioctl(t, TIOCGSID, &sid) || sid != getpid())
		return 11;
	fg = tcgetpgrp(t);
	if (fg != j)
		return 12;
	return 0;
}

static int check_j(int t)
{
	if (t < 0)
		t = open("/dev/tty", O_RDWR);

	if (t < 0)
		return 20;
	if (tcgetpgrp(t) != getpgrp() || getpgrp() != getpid())
		return 21;
	if (write(t, "J\n", 2) != 2)
		return 22;
	return 0;
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	int closed = argc > first && !strcmp(argv[first], "closed");
	int devtty = argc > first && !strcmp(argv[first], "devtty");
	char name[64], buf[256];
	int m, st_s = 0, n;
	pid_t s_pid;

	m = posix_openpt(O_RDWR | O_NOCTTY);
	if (m < 0 || grantpt(m) || unlockpt(m) || ptsname_r(m, name, sizeof(name)))
		prog_die("cannot make a pty");
	s_pid = fork();
	if (s_pid < 0)
		prog_die("fork");
	if (s_pid == 0) {
		pid_t j;
		int s;

		close(m);
		if (setsid() < 0 || (s = open(name, O_RDWR)) < 0)
			prog_die("setsid, open %s", name);
		j = fork();
		if (j == 0) {
			int t = -1;

			setpgid(0, 0);
			while (tcgetpgrp(s) != getpid())
				usleep(10000);
			if (closed)
				close(s);
			if (devtty) {
				t = open("/dev/tty", O_RDWR | O_NONBLOCK);
				if (t < 0)
					prog_die("open /dev/tty");
				snprintf(buf, sizeof(buf), "%d\n", t);
				prog_write_atomic("devtty", buf);
			}
			prog_write_atomic("jready", "1\n");
			prog_wait_go();
			if (t >= 0 && !(fcntl(t, F_GETFL) & O_NONBLOCK))
				_exit(23);
			_exit(check_j(t));
		}
		setpgid(j, j);
		signal(SIGTTOU, SIG_IGN);
		if (tcsetpgrp(s, j))
			prog_die("tcsetpgrp");
		while (access(prog_path("jready"), F_OK))
			usleep(10000);
		snprintf(buf, sizeof(buf), "%d %d %s\n", (int)getpid(), (int)j, name);
		if (closed)
			close(s);
		prog_write_atomic("info", buf);
		prog_wait_go();
		n = check_s(j, s);
		if (waitpid(j, &st_s, 0) != j || !WIFEXITED(st_s))
			_exit(30);
		_exit(n ? n : WEXITSTATUS(st_s));
	}
	while (access(prog_path("info"), F_OK))
		usleep(10000);
	prog_ready();
	prog_wait_go();
	n = waitpid(s_pid, &st_s, 0) == s_pid;
	if (prog_sabotage())
		st_s = 0x100; /* as if S had exited 1 */
	CHECK(n && WIFEXITED(st_s) && WEXITSTATUS(st_s) == 0,
	      "the session leader and its foreground job passed their checks (status %#x: "
	      "exit %d)",
	      st_s, WIFEXITED(st_s) ? WEXITSTATUS(st_s) : -1);
	{
		struct pollfd p = {m, POLLIN, 0};

		n = poll(&p, 1, 2000) == 1 ? (int)read(m, buf, sizeof(buf) - 1) : -1;
	}
	CHECK(n >= 2 && !memcmp(buf, "J", 1), "the job's line reached the master (%d bytes)", n);
	return prog_done();
}
