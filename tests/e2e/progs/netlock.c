// SPDX-License-Identifier: MIT
/*
 * netlock: TCP connections whose peers keep sending while the tree is dumped
 * and restored (amber's network lock).
 *
 *   netlock DIR   the root P with two connections, each streaming to P:
 *     - from E, a process outside the tree (double-forked, re-executed as
 *       "netlock DIR peer PORT");
 *     - from C, P's child, over loopback.
 *   A sender writes 1 KiB of pattern every 2 ms, blocking when P's small
 *   receive buffer is full (so it probes P's window all through the dump),
 *   until it sees DIR/go; then 256 KiB more, shuts its side down and writes
 *   DIR/NAME.sent: "BYTES ERRNO" (ERRNO 0 unless a send failed: a reset).
 *   P reads as long as it runs; after go it reads both streams to their end
 *   and checks every byte in order, the count each sender reports, and that
 *   no send failed.  DIR/ports lists the ports of both connections (for the
 *   test to find the lock's rules).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "prog.h"

#define CHUNK	 1024
#define AFTER_GO (256 << 10)
#define RCVBUF	 16384

static uint8_t pat(uint64_t i, int k)
{
	uint64_t x = ((i >> 3) + 1) * 0x9E3779B97F4A7C15ULL + (uint64_t)k * 0x632BE59BD9B4E019ULL;

	return (uint8_t)(x >> (8 * (i & 7)));
}

static int send_all(int fd, const uint8_t *b, size_t len)
{
	while (len) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static int stream(int fd, const char *name, int k)
{
	struct timeval tv = {120, 0};
	static uint8_t b[CHUNK];
	uint64_t off = 0, extra = 0;
	char res[64], file[64];
	int err = 0;

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (extra < AFTER_GO) {
		for (int i = 0; i < CHUNK; i++)
			b[i] = pat(off + i, k);
		if (send_all(fd, b, CHUNK)) {
			err = errno ? errno : EIO;
			break;
		}
		off += CHUNK;
		if (prog_go_exists())
			extra += CHUNK;
		else
			usleep(2000);
	}
	shutdown(fd, SHUT_WR);
	snprintf(res, sizeof(res), "%llu %d\n", (unsigned long long)off, err);
	snprintf(file, sizeof(file), "%s.sent", name);
	prog_write_atomic(file, res);
	return err ? 1 : 0;
}

static int tcp_listener(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), v = RCVBUF;

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		prog_die("tcp listener");
	*port = ntohs(a.sin_port);
	return fd;
}

static int tcp_connect(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		prog_die("tcp connect to %u", port);
	return fd;
}

static uint16_t port_of(int fd, bool peer)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&a, &len))
		prog_die("getsockname");
	return ntohs(a.sin_port);
}

struct rx {
	const char *name;
	int fd, k;
	uint64_t got;
	long bad; /* offset + 1 of the first wrong byte */
	bool eof;
};

static void drain(struct rx *r)
{
	uint8_t b[65536];
	ssize_t n = recv(r->fd, b, sizeof(b), MSG_DONTWAIT);

	if (n == 0)
		r->eof = true;
	for (ssize_t i = 0; i < n; i++)
		if (!r->bad && b[i] != pat(r->got + i, r->k))
			r->bad = (long)(r->got + i) + 1;
	if (n > 0)
		r->got += (uint64_t)n;
}

static void check_stream(struct rx *r)
{
	unsigned long long sent = 0;
	char buf[64] = "";
	int err = -1;

	for (int i = 0;
	     i < 3000 && prog_read_file(prog_path(r->name[0] == 'E' ? "e.sent" : "c.sent"), buf,
					sizeof(buf)) <= 0;
	     i++)
		usleep(10 * 1000);
	sscanf(buf, "%llu %d", &sent, &err);
	CHECK(err == 0, "%s sent without an error (no reset): errno %d", r->name, err);
	CHECK(!r->bad && r->got == sent + (prog_sabotage() ? 1 : 0),
	      "%s: %llu bytes received in order, %llu sent (first bad byte at %ld)", r->name,
	      (unsigned long long)r->got, sent, r->bad - 1);
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv), l, st;
	struct rx rx[2] = {{.name = "E (outside the tree)", .k = 1}, {.name = "C (child)", .k = 2}};
	uint16_t port;
	char ports[128];
	pid_t c, m;

	signal(SIGPIPE, SIG_IGN);
	if (argc > first + 1 && !strcmp(argv[first], "peer"))
		return stream(tcp_connect((uint16_t)atoi(argv[first + 1])), "e", 1);
	l = tcp_listener(&port);
	m = fork();
	if (m < 0)
		prog_die("fork");
	if (m == 0) {
		if (fork() == 0) {
			char ps[16];

			setsid(); /* not in P's session, which would keep P's pid in use */
			snprintf(ps, sizeof(ps), "%u", port);
			execl("/proc/self/exe", "netlock", prog_path(""), "peer", ps, (char *)NULL);
			_exit(127);
		}
		_exit(0);
	}
	if (waitpid(m, &st, 0) != m)
		prog_die("waitpid");
	rx[0].fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	c = fork();
	if (c < 0)
		prog_die("fork");
	if (c == 0) {
		close(l);
		_exit(stream(tcp_connect(port), "c", 2));
	}
	rx[1].fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (rx[0].fd < 0 || rx[1].fd < 0)
		prog_die("accept");
	snprintf(ports, sizeof(ports), "%u %u %u\n", port, port_of(rx[0].fd, true),
		 port_of(rx[1].fd, true));
	prog_write_atomic("ports", ports);
	prog_ready();
	/* 10 ms without data counts as a step towards prog.h's timeout */
	for (int idle = 0; idle < PROG_GO_STEPS && (!rx[0].eof || !rx[1].eof);) {
		struct pollfd p[2] = {{.fd = rx[0].eof ? -1 : rx[0].fd, .events = POLLIN},
				      {.fd = rx[1].eof ? -1 : rx[1].fd, .events = POLLIN}};
		int n = poll(p, 2, 10);

		if (n < 0 && errno != EINTR)
			prog_die("poll");
		idle += n <= 0;
		for (int k = 0; k < 2; k++)
			if (!rx[k].eof && p[k].revents)
				drain(&rx[k]);
	}
	CHECK(rx[0].eof && rx[1].eof, "both streams ended");
	check_stream(&rx[0]);
	check_stream(&rx[1]);
	CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "C exited with 0 (status %#x)", st);
	return prog_done();
}
