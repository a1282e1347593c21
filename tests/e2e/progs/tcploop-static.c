// SPDX-License-Identifier: MIT
/*
 * tcploop: an established TCP connection over 127.0.0.1 inside one process
 * (a container's whole network: --tcp-established has something to keep).
 *
 *   tcploop DIR PORT
 *
 * It listens on 127.0.0.1:PORT, connects to it and accepts, then every
 * ~100 ms sends the next 8-byte sequence number on the client end and reads
 * one on the server end, always one message behind, so that one is queued
 * in the server's receive queue when the dump comes; the server end echoes
 * each number back, read by the client the same way.  DIR/ready appears
 * after the first step.  After go it checks that every number came in
 * order both ways (none lost, none twice), that the connection still
 * carries new data, and that the listener accepts a new connection.
 * Linked statically (the Makefile adds -static for names containing
 * "static"): it runs in a rootfs without a libc.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "prog.h"

#define MAX_STEPS 3000 /* x 100 ms: 5 minutes, then give up */

static int xfer(int fd, uint64_t *v, int send_it)
{
	ssize_t n = send_it ? send(fd, v, sizeof(*v), 0) : recv(fd, v, sizeof(*v), MSG_WAITALL);

	return n == sizeof(*v) ? 0 : -1;
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	struct timespec step = {0, 100 * 1000 * 1000};
	struct sockaddr_in a = {.sin_family = AF_INET};
	uint64_t sent = 0, got = 0, echoed = 0, back = 0, v, bad = 0;
	int lfd, cfd, sfd, nfd, one = 1;
	long n;

	if (argc <= first)
		prog_die("usage: tcploop DIR PORT");
	a.sin_port = htons((uint16_t)atoi(argv[first]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || cfd < 0)
		prog_die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 4))
		prog_die("listen on 127.0.0.1:%s", argv[first]);
	if (connect(cfd, (struct sockaddr *)&a, sizeof(a)))
		prog_die("connect");
	sfd = accept(lfd, NULL, NULL);
	if (sfd < 0)
		prog_die("accept");
	/* one message ahead each way: the queues are never empty */
	if (xfer(cfd, &sent, 1))
		prog_die("send");
	sent++;
	for (n = 0; n < MAX_STEPS && !prog_go_exists(); n++) {
		v = sent;
		if (xfer(cfd, &v, 1))
			prog_die("send %lu", (unsigned long)sent);
		sent++;
		if (xfer(sfd, &v, 0))
			prog_die("server recv");
		bad += v != got++;
		if (xfer(sfd, &v, 1))
			prog_die("echo %lu", (unsigned long)v);
		echoed++;
		if (got > 1) {
			if (xfer(cfd, &v, 0))
				prog_die("client recv");
			bad += v != back++;
		}
		if (n == 0)
			prog_ready();
		nanosleep(&step, NULL);
	}
	if (!prog_go_exists()) {
		fprintf(stderr, "FAIL: timed out waiting for go\n");
		return 3;
	}
	if (prog_sabotage())
		got++;
	/* what is still queued, in order: sent - got numbers to the server, got - back echoes */
	while (got < sent && !xfer(sfd, &v, 0)) {
		bad += v != got++;
		if (xfer(sfd, &v, 1))
			break;
		echoed++;
	}
	while (back < echoed && !xfer(cfd, &v, 0))
		bad += v != back++;
	CHECK(bad == 0 && got == sent && back == sent,
	      "every number came in order both ways (%lu sent, %lu received, %lu echoed, %lu bad)",
	      (unsigned long)sent, (unsigned long)got, (unsigned long)back, (unsigned long)bad);
	nfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(nfd >= 0 && !connect(nfd, (struct sockaddr *)&a, sizeof(a)) &&
		      accept(lfd, NULL, NULL) >= 0,
	      "the listener accepts a new connection");
	return prog_done();
}
