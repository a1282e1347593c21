// SPDX-License-Identifier: MIT
/*
 * Sockets of a network namespace of its own (tests/e2e/tests.d/netns.sh
 * makes it: lo up with 10.77.0.1/24, a route, a sysctl, an nft table):
 * a TCP listener on 10.77.0.1:47400, an established connection to it with
 * data queued both ways, a UDP socket on 10.77.0.1:47401 with a datagram
 * queued.  After the restore: the sockets are in the process's namespace
 * (SIOCGSKNS), with their addresses, states and data; the connection
 * carries new data both ways; the listener accepts a new connection.
 *
 * netns DIR [noconn]   (noconn: no connection, for a restore without --tcp-established)
 */
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "prog.h"

#define ADDR "10.77.0.1"

static struct sockaddr_in at(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, ADDR, &a.sin_addr);
	return a;
}

static int tcp_state(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ? -1 : ti.tcpi_state;
}

/* the inode of the namespace the socket is in, and of the process's */
static int same_ns(int fd)
{
	struct stat a, b;
	int ns = ioctl(fd, SIOCGSKNS);
	int ok =
		ns >= 0 && !fstat(ns, &a) && !stat("/proc/self/ns/net", &b) && a.st_ino == b.st_ino;

	if (ns >= 0)
		close(ns);
	return ok;
}

static int local_is(int fd, int port)
{
	struct sockaddr_in a, want = at(port);
	socklen_t len = sizeof(a);

	return !getsockname(fd, (struct sockaddr *)&a, &len) &&
	       a.sin_addr.s_addr == want.sin_addr.s_addr && a.sin_port == want.sin_port;
}

static int read_all(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n < len) {
		ssize_t r = recv(fd, buf + n, len - n, 0);

		if (r <= 0)
			return -1;
		n += (size_t)r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char to_srv[] = "queued from the client", to_cli[] = "queued from the server";
	char want_srv[sizeof(to_srv)], want_dg[] = "datagram", buf[64];
	struct sockaddr_in l = at(47400), u = at(47401);
	int one = 1, lsn, cli = -1, srv = -1, udp, snd, c2, s2, conn;
	ssize_t n;

	conn = !(argc > prog_init(argc, argv) && !strcmp(argv[argc - 1], "noconn"));
	lsn = socket(AF_INET, SOCK_STREAM, 0);
	if (lsn < 0 || setsockopt(lsn, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lsn, (struct sockaddr *)&l, sizeof(l)) || listen(lsn, 8))
		prog_die("listen on " ADDR ":47400");
	if (conn) {
		cli = socket(AF_INET, SOCK_STREAM, 0);
		if (cli < 0 || connect(cli, (struct sockaddr *)&l, sizeof(l)))
			prog_die("connect to " ADDR ":47400");
		srv = accept(lsn, NULL, NULL);
		if (srv < 0)
			prog_die("accept");
		if (send(cli, to_srv, sizeof(to_srv), 0) != sizeof(to_srv) ||
		    send(srv, to_cli, sizeof(to_cli), 0) != sizeof(to_cli))
			prog_die("send");
	}
	udp = socket(AF_INET, SOCK_DGRAM, 0);
	snd = socket(AF_INET, SOCK_DGRAM, 0);
	if (udp < 0 || snd < 0 || bind(udp, (struct sockaddr *)&u, sizeof(u)) ||
	    sendto(snd, "datagram", 8, 0, (struct sockaddr *)&u, sizeof(u)) != 8)
		prog_die("udp on " ADDR ":47401");
	usleep(100 * 1000); /* the data is in the receive queues */

	prog_ready();
	prog_wait_go();

	memcpy(want_srv, to_srv, sizeof(to_srv));
	if (prog_sabotage()) /* the server's data, or without a connection the datagram */
		(conn ? want_srv : want_dg)[0] ^= 1;
	CHECK(same_ns(lsn) && same_ns(udp) && (!conn || (same_ns(cli) && same_ns(srv))),
	      "every socket is in the process's network namespace");
	CHECK(local_is(lsn, 47400) && local_is(udp, 47401) && (!conn || local_is(srv, 47400)),
	      "the sockets keep their addresses on " ADDR);
	CHECK(tcp_state(lsn) == TCP_LISTEN, "the listener listens");
	if (conn) {
		CHECK(tcp_state(cli) == TCP_ESTABLISHED && tcp_state(srv) == TCP_ESTABLISHED,
		      "the connection is established (%d, %d)", tcp_state(cli), tcp_state(srv));
		CHECK(!read_all(srv, buf, sizeof(to_srv)) && !memcmp(buf, want_srv, sizeof(to_srv)),
		      "the server reads what the client had queued");
		CHECK(!read_all(cli, buf, sizeof(to_cli)) && !memcmp(buf, to_cli, sizeof(to_cli)),
		      "the client reads what the server had queued");
		CHECK(send(cli, "after", 5, 0) == 5 && !read_all(srv, buf, 5) &&
			      !memcmp(buf, "after", 5),
		      "new data goes from the client to the server");
		CHECK(send(srv, "again", 5, 0) == 5 && !read_all(cli, buf, 5) &&
			      !memcmp(buf, "again", 5),
		      "new data goes from the server to the client");
	}
	n = recv(udp, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK(n == 8 && !memcmp(buf, want_dg, 8), "the queued datagram is there (%zd bytes)", n);
	c2 = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c2 >= 0 && !connect(c2, (struct sockaddr *)&l, sizeof(l)) &&
		      (s2 = accept(lsn, NULL, NULL)) >= 0 && same_ns(s2),
	      "the listener accepts a new connection");
	return prog_done();
}
