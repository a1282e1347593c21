// SPDX-License-Identifier: MIT
/*
 * tcppending: TCP connections waiting in a listener's accept queue.
 *
 *   tcppending DIR ok FAM PORT   a listener on loopback (FAM 4: 127.0.0.1,
 *     6: ::1, m: a dual-stack IPv6 listener and IPv4 clients) and three
 *     children that connect()ed to it one after another (50 ms apart) and
 *     wait, bound to ports going down (so that the accept order is not the
 *     ports'); nobody accept()s.  After go the server accepts three
 *     connections, in the order the clients connected, each from the
 *     client's own port, and no fourth; each client sends its number, the
 *     server answers with it plus 100; the client shuts its side down, the
 *     server closes, and the client reads EOF, never a reset.
 *
 *   tcppending DIR data FAM PORT   one child client that sent 5 bytes
 *     before ready (nobody accepted): a dump must be refused.  After go (a
 *     refused dump leaves it running) the server accepts it and reads them.
 *
 *   tcppending DIR ext FAM PORT   the client is outside the tree (forked
 *     twice, in a session of its own; its pid in DIR/peer.pid): a dump must
 *     be refused.  After go the server accepts it and data flows both ways.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "prog.h"

#define NCLIENTS 3

static int fam = AF_INET, mapped;

static socklen_t mkaddr(struct sockaddr_storage *ss, uint16_t port, int server, int v4)
{
	memset(ss, 0, sizeof(*ss));
	if (v4) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		in6->sin6_addr = mapped && server ? in6addr_any : in6addr_loopback;
		return sizeof(*in6);
	}
}

static int listener(uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, port, 1, fam == AF_INET);
	int one = 1, zero = 0, l = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (mapped && setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero))))
		prog_die("listener socket");
	/* sockets of an earlier run may hold the port a little longer */
	for (int i = 0; bind(l, (struct sockaddr *)&ss, len); i++)
		if (errno != EADDRINUSE || i == 500)
			prog_die("bind to %u", port);
		else
			usleep(10 * 1000);
	if (listen(l, 8))
		prog_die("listen on %u", port);
	return l;
}

/* The clients: IPv4 ones for a dual-stack listener; from port sport if not 0. */
static int connect_to(uint16_t port, uint16_t sport)
{
	struct sockaddr_storage ss, src;
	int v4 = fam == AF_INET || mapped, one = 1;
	socklen_t len = mkaddr(&ss, port, 0, v4);
	int c = socket(v4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (c < 0 || setsockopt(c, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		prog_die("client socket");
	if (sport) {
		socklen_t slen = mkaddr(&src, sport, 0, v4);

		if (bind(c, (struct sockaddr *)&src, slen))
			prog_die("bind the client to %u", sport);
	}
	if (connect(c, (struct sockaddr *)&ss, len))
		prog_die("connect to %u", port);
	return c;
}

static uint16_t port_of(int fd, int peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&ss, &len))
		return 0;
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)&ss)->sin6_port);
}

/* How many connections wait in listener l's accept queue (tcp_info of a listener). */
static unsigned queued(int l)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(l, SOL_TCP, TCP_INFO, &ti, &len))
		prog_die("TCP_INFO");
	return ti.tcpi_unacked;
}

static void wait_queued(int l, unsigned n)
{
	for (int i = 0; queued(l) < n; i++)
		if (i == 5000)
			prog_die("the accept queue does not reach %u", n);
		else
			usleep(1000);
}

/* A client after go: its own port and peer as before, one byte each way, then EOF; its exit status.
 */
static int client_after_go(int c, uint16_t port, uint16_t sport, uint8_t num)
{
	uint8_t b = 0;
	ssize_t r;

	prog_wait_go();
	CHECK(port_of(c, 0) == sport, "client %u: still on its port %u (%u)", num, sport,
	      port_of(c, 0));
	CHECK(port_of(c, 1) == port, "client %u: connected to %u (%u)", num, port, port_of(c, 1));
	CHECK(send(c, &num, 1, MSG_NOSIGNAL) == 1, "client %u: sends its number", num);
	r = recv(c, &b, 1, 0);
	CHECK(r == 1 && b == num + 100, "client %u: the server's answer (%zd, %u, errno %d)", num,
	      r, b, r < 0 ? errno : 0);
	/* our FIN first: the TIME_WAIT is ours, on a port a rerun may bind again */
	CHECK(!shutdown(c, SHUT_WR), "client %u: shuts its side down", num);
	r = recv(c, &b, 1, 0);
	CHECK(r == 0, "client %u: EOF once the server closed, not a reset (%zd, errno %d)", num, r,
	      r < 0 ? errno : 0);
	return prog_failures ? 1 : 0; /* the verdict file is the server's */
}

/* The server after go: accept one connection, expect from port sport (0: any). */
static int serve_one(int l, uint16_t sport, uint8_t num, int sabotage)
{
	struct pollfd p = {.fd = l, .events = POLLIN};
	uint8_t b = 0;
	int a = poll(&p, 1, 5000) == 1 ? accept4(l, NULL, NULL, SOCK_CLOEXEC) : -1;
	uint16_t from;

	CHECK(a >= 0, "connection %u is accepted (errno %d)", num, a < 0 ? errno : 0);
	if (a < 0)
		return -1;
	from = port_of(a, 1);
	if (sport)
		CHECK(from == sport + sabotage, "connection %u comes from client port %u (%u)", num,
		      sport, from);
	CHECK(recv(a, &b, 1, 0) == 1 && b == num, "connection %u: the client's byte (%u)", num, b);
	b = num + 100;
	CHECK(send(a, &b, 1, MSG_NOSIGNAL) == 1, "connection %u: the answer is sent", num);
	CHECK(recv(a, &b, 1, 0) == 0, "connection %u: the client's EOF", num);
	close(a);
	return 0;
}

static int ok_main(uint16_t port)
{
	uint16_t sports[NCLIENTS];
	pid_t kids[NCLIENTS];
	struct pollfd p;
	int l = listener(port), pfd[2];

	if (pipe(pfd))
		prog_die("pipe");
	for (int i = 0; i < NCLIENTS; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			prog_die("fork");
		if (!kids[i]) {
			/* ports going down: the accept order is not the ports' */
			int c = connect_to(port,
					   (uint16_t)(47340 + (port - 47300) * 4 + NCLIENTS - i));

			sports[i] = port_of(c, 0);
			if (write(pfd[1], &sports[i], sizeof(sports[i])) != sizeof(sports[i]))
				prog_die("write");
			close(l);
			exit(client_after_go(c, port, sports[i], (uint8_t)(i + 1)));
		}
		if (read(pfd[0], &sports[i], sizeof(sports[i])) != sizeof(sports[i]))
			prog_die("a client's port");
		wait_queued(l, (unsigned)i + 1);
		/* the next handshake some clock ticks later: the dump orders them by age */
		usleep(50 * 1000);
	}
	prog_ready();
	prog_wait_go();
	for (int i = 0; i < NCLIENTS; i++)
		serve_one(l, sports[i], (uint8_t)(i + 1), i == 1 && prog_sabotage());
	p = (struct pollfd){.fd = l, .events = POLLIN};
	CHECK(poll(&p, 1, 100) == 0, "no other connection waits");
	for (int i = 0; i < NCLIENTS; i++) {
		int st = -1;

		waitpid(kids[i], &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d passed its checks (%#x)",
		      i + 1, st);
	}
	return prog_done();
}

/* data: a client of the tree that sent something; ext: a client outside it. */
static int refused_main(uint16_t port, int ext)
{
	int l = listener(port), st = -1;
	uint8_t num = 1;
	pid_t kid = fork();

	if (kid < 0)
		prog_die("fork");
	if (!kid) {
		int c;

		close(l);
		if (ext) {
			char buf[32];

			setsid();
			if (fork())
				_exit(0);
			snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
			prog_write_atomic("peer.pid", buf);
		}
		c = connect_to(port, 0);
		if (!ext && send(c, "early", 5, 0) != 5)
			prog_die("send");
		prog_write_atomic(ext ? "peer.ready" : "client.ready", "1\n");
		if (ext) {
			uint8_t b = 0;

			/* the program's verdict is the server's; this one just answers */
			prog_wait_go();
			if (send(c, &num, 1, MSG_NOSIGNAL) != 1 || recv(c, &b, 1, 0) != 1)
				_exit(1);
			_exit(0);
		}
		exit(client_after_go(c, port, port_of(c, 0), num));
	}
	if (ext)
		waitpid(kid, &st, 0);
	while (access(prog_path(ext ? "peer.ready" : "client.ready"), F_OK))
		usleep(10 * 1000);
	wait_queued(l, 1);
	prog_ready();
	prog_wait_go();
	if (ext) {
		serve_one(l, 0, num, 0);
	} else {
		struct pollfd p = {.fd = l, .events = POLLIN};
		char b[8] = "";
		int a = poll(&p, 1, 5000) == 1 ? accept4(l, NULL, NULL, SOCK_CLOEXEC) : -1;

		CHECK(a >= 0 && recv(a, b, 5, MSG_WAITALL) == 5 &&
			      !memcmp(b, prog_sabotage() ? "Early" : "early", 5),
		      "the early data is there (%s)", b);
		CHECK(a >= 0 && recv(a, &num, 1, 0) == 1 && num == 1, "the client's byte");
		num = 101;
		CHECK(a >= 0 && send(a, &num, 1, MSG_NOSIGNAL) == 1, "the answer is sent");
		CHECK(a >= 0 && recv(a, &num, 1, 0) == 0, "the client's EOF");
		close(a);
		waitpid(kid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the client passed its checks (%#x)",
		      st);
	}
	return prog_done();
}

int main(int argc, char **argv)
{
	int i = prog_init(argc, argv);

	signal(SIGPIPE, SIG_IGN);
	if (argc > i + 2) {
		uint16_t port = (uint16_t)atoi(argv[i + 2]);

		fam = strcmp(argv[i + 1], "4") ? AF_INET6 : AF_INET;
		mapped = !strcmp(argv[i + 1], "m");
		if (!strcmp(argv[i], "ok"))
			return ok_main(port);
		if (!strcmp(argv[i], "data"))
			return refused_main(port, 0);
		if (!strcmp(argv[i], "ext"))
			return refused_main(port, 1);
	}
	fprintf(stderr, "usage: tcppending DIR ok|data|ext 4|6|m PORT\n");
	return 2;
}
