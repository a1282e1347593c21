// SPDX-License-Identifier: MIT
/*
 * tcpstates: TCP sockets in states other than ESTABLISHED/LISTEN.
 *
 *   tcpstates DIR pending PORT   a listener on 127.0.0.1:PORT with one
 *     connection in its accept queue (the client closed its end, so the
 *     tree holds only the listener).  Dumped with --skip-in-flight, the
 *     listener comes back without it: accept() finds nothing, and a new
 *     connection made after go is accepted.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "prog.h"

static int pending_main(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(port)};
	int one = 1, l, c, a;
	struct pollfd p;

	l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 8))
		prog_die("listener on %u", port);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa)))
		prog_die("connect to %u", port);
	close(c);
	p = (struct pollfd){.fd = l, .events = POLLIN};
	if (poll(&p, 1, 5000) != 1)
		prog_die("the connection is not in the accept queue");
	prog_ready();
	prog_wait_go();
	a = accept(l, NULL, NULL);
	if (prog_sabotage() && a < 0)
		a = 0;
	CHECK(a < 0 && errno == EAGAIN, "the dropped connection is not accepted (accept: %d)", a);
	c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0 && !connect(c, (struct sockaddr *)&sa, sizeof(sa)),
	      "a new client connects to the restored listener");
	p = (struct pollfd){.fd = l, .events = POLLIN};
	a = poll(&p, 1, 5000) == 1 ? accept(l, NULL, NULL) : -1;
	CHECK(a >= 0, "the restored listener accepts it");
	return prog_done();
}

int main(int argc, char **argv)
{
	int i = prog_init(argc, argv);

	if (argc > i + 1 && !strcmp(argv[i], "pending"))
		return pending_main((uint16_t)atoi(argv[i + 1]));
	fprintf(stderr, "usage: tcpstates DIR pending PORT\n");
	return 2;
}
