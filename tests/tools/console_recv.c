// SPDX-License-Identifier: MIT
/*
 * console_recv SOCK IN OUT: the other end of runc's --console-socket.  It
 * listens on the unix socket SOCK, takes the pty master runc sends on the
 * first connection (SCM_RIGHTS), then relays: what is written to the FIFO IN
 * goes to the master (the container's terminal input), what the terminal
 * writes is appended to OUT.  It exits 0 when the terminal's last slave is
 * closed (the container is gone), 1 on an error.
 * Under AMBER_TEST_SABOTAGE=1 it puts the terminal back to echo and 80
 * columns first: a test of a restored terminal's settings must fail then.
 */
#include <asm/termbits.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int recv_master(int sk)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char name[256];
	struct iovec iov = {.iov_base = name, .iov_len = sizeof(name)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sk, &mh, MSG_CMSG_CLOEXEC) < 0) {
		perror("console_recv: recvmsg");
		return -1;
	}
	c = CMSG_FIRSTHDR(&mh);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
		fprintf(stderr, "console_recv: no fd came with runc's message\n");
		return -1;
	}
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* The sabotage: the settings a restore must have kept, undone. */
static int sabotage(int fd)
{
	struct termios2 tio;
	struct winsize ws;

	if (ioctl(fd, TCGETS2, &tio) || ioctl(fd, TIOCGWINSZ, &ws))
		return -1;
	tio.c_lflag |= ECHO;
	ws.ws_col = 80;
	return ioctl(fd, TCSETS2, &tio) || ioctl(fd, TIOCSWINSZ, &ws) ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int lsk, sk, m, in, out;
	char buf[4096];

	if (argc != 4 || strlen(argv[1]) >= sizeof(a.sun_path)) {
		fprintf(stderr, "usage: console_recv SOCK IN OUT\n");
		return 2;
	}
	strcpy(a.sun_path, argv[1]);
	lsk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lsk < 0 || bind(lsk, (struct sockaddr *)&a, sizeof(a)) || listen(lsk, 1)) {
		perror("console_recv: socket");
		return 1;
	}
	sk = accept4(lsk, NULL, NULL, SOCK_CLOEXEC);
	if (sk < 0) {
		perror("console_recv: accept");
		return 1;
	}
	m = recv_master(sk);
	close(sk);
	close(lsk);
	unlink(argv[1]);
	if (m < 0)
		return 1;
	if (ioctl(m, TIOCGPTN, &(int){0})) {
		fprintf(stderr, "console_recv: the fd runc sent is no pty master: %s\n",
			strerror(errno));
		return 1;
	}
	if (getenv("AMBER_TEST_SABOTAGE") && !strcmp(getenv("AMBER_TEST_SABOTAGE"), "1") &&
	    sabotage(m)) {
		perror("console_recv: sabotage");
		return 1;
	}
	/* O_RDWR: the FIFO never reads as ended between two writers */
	in = open(argv[2], O_RDWR | O_CLOEXEC);
	out = open(argv[3], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (in < 0 || out < 0) {
		perror("console_recv: open");
		return 1;
	}
	for (;;) {
		struct pollfd p[2] = {{.fd = m, .events = POLLIN}, {.fd = in, .events = POLLIN}};
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("console_recv: poll");
			return 1;
		}
		if (p[0].revents) {
			n = read(m, buf, sizeof(buf));
			if (n < 0 && errno == EIO)
				return 0; /* no slave open any more */
			if (n <= 0 || write(out, buf, n) != n) {
				perror("console_recv: relaying the terminal's output");
				return 1;
			}
		}
		if (p[1].revents) {
			n = read(in, buf, sizeof(buf));
			if (n <= 0 || write(m, buf, n) != n) {
				perror("console_recv: relaying to the terminal");
				return 1;
			}
		}
	}
}
