// SPDX-License-Identifier: MIT
/*
 * tcpstates: TCP sockets in states other than ESTABLISHED/LISTEN.
 *
 *   tcpstates DIR pending PORT   a listener on 127.0.0.1:PORT with one
 *     connection in its accept queue (the client closed its end, so the
 *     tree holds only the listener).  Dumped with --skip-in-flight, the
 *     listener comes back without it: accept() finds nothing, and a new
 *     connection made after go is accepted.
 *
 * FAM below is 4 (127.0.0.1), 6 (::1) or m (IPv6 sockets, dual-stack, over
 * ::ffff:127.0.0.1).  E is a process outside the tree ("tcpstates DIR peer
 * MODE FAM PORT", double-forked, in its own session): it writes its own
 * verdict to DIR/peer.result, which the root checks.
 *
 *   tcpstates DIR half FAM PORT   half-closed connections with data queued
 *     both ways (dump/restore with --tcp-established):
 *     - in the tree: a client that sent data and shut down its sending side
 *       (FIN_WAIT2), its server with that data unread (CLOSE_WAIT) and data
 *       of its own queued back; a connection whose server shut down its
 *       receiving side (SHUT_RD, still ESTABLISHED) with data queued both ways;
 *       one whose client shut down both sides (SHUT_RDWR) with data queued;
 *     - to E: one E sent data on and shut down (CLOSE_WAIT here, our data
 *       unread by E), one we sent data on and shut down (FIN_WAIT2, E's data
 *       unread here).
 *     After go: the states are the same (tcp_info), every queued byte reads
 *     back in order followed by EOF where a FIN came, sending goes on where
 *     it may (EPIPE where not), and closing one end gives the other EOF.
 *
 *   tcpstates DIR closing FAM PORT   the states a peer that does not answer
 *     leaves (an nft table of the program's own drops our packets to E, or
 *     one direction of a connection in the tree): FIN_WAIT1 (data and FIN
 *     unacknowledged), LAST_ACK and CLOSING, to E and with both ends in the
 *     tree.  After go they are still in those states; once the table is
 *     gone, the acknowledgements take them on (FIN_WAIT2, CLOSE, CLOSE), and
 *     the peers read the data and FINs.  (The table lets amber's own
 *     segments pass: fwmark 0xa3be.)
 *
 *   tcpstates DIR synsent FAM PORT   a non-blocking connect() in progress:
 *     E's listener has a full accept queue, so our SYN gets no answer
 *     (SYN_SENT).  After go E accepts, and the connect completes: POLLOUT,
 *     SO_ERROR 0, data reaches E.
 *
 *   tcpstates DIR close FAM PORT   connections (in the tree, and to E) with
 *     data queued, for --tcp-close: after go each is reset: recv says
 *     ECONNRESET, then EOF; send says EPIPE; tcp_info says CLOSE.  E sees its
 *     end closed (EOF or reset).
 *
 *   tcpstates DIR synsentb FAM PORT   the same, but a child of the tree is
 *     blocked in connect() on it: after go its connect() returns 0.
 *
 *   tcpstates DIR synsentr FAM PORT   the same as synsent, but the test
 *     kills E (its pid in DIR/peer.pid) between dump and restore: after go
 *     the connect() has failed, SO_ERROR ECONNREFUSED.
 *
 *   tcpstates DIR oob PORT [inline]   a connection in the tree with an urgent
 *     byte (MSG_OOB) not read yet (inline: received with SO_OOBINLINE, so
 *     only its mark would be lost): the dump must be refused.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "prog.h"

#define TMO 15000 /* ms */

static int fam;	   /* AF_INET, or AF_INET6 (also for m) */
static int mapped; /* m: IPv6 sockets over v4-mapped addresses */
static char famarg[4];

static socklen_t mkaddr(struct sockaddr_storage *ss, uint16_t port, int any)
{
	memset(ss, 0, sizeof(*ss));
	if (fam == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof(*in);
	}
	struct sockaddr_in6 *in6 = (void *)ss;

	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(port);
	if (mapped && any)
		in6->sin6_addr = in6addr_any;
	else if (mapped)
		inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6->sin6_addr);
	else
		in6->sin6_addr = in6addr_loopback;
	return sizeof(*in6);
}

static int listener(uint16_t port, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, port, 1);
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
	if (listen(l, backlog))
		prog_die("listen on %u", port);
	return l;
}

static int connect_to(uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, port, 0);
	int c = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (c < 0 || connect(c, (struct sockaddr *)&ss, len))
		prog_die("connect to %u", port);
	return c;
}

static int accept_one(int l)
{
	int a = accept4(l, NULL, NULL, SOCK_CLOEXEC);

	if (a < 0)
		prog_die("accept");
	return a;
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

static uint8_t pat(int seed, size_t off)
{
	return (uint8_t)(seed * 131 + off * 7 + (off >> 8));
}

/* n bytes of stream seed from offset off */
static void send_pat(int fd, int seed, size_t off, size_t n)
{
	uint8_t b[4096];

	while (n) {
		size_t k = n < sizeof(b) ? n : sizeof(b);
		ssize_t w;

		for (size_t i = 0; i < k; i++)
			b[i] = pat(seed, off + i);
		w = send(fd, b, k, MSG_NOSIGNAL);
		if (w <= 0)
			prog_die("send %zu bytes of stream %d", k, seed);
		off += w;
		n -= w;
	}
}

/*
 * Read until EOF (eof) or n bytes (!eof), within TMO: 0 when exactly n bytes
 * of stream seed from off came (and then EOF if eof), else a description.
 */
static const char *recv_pat(int fd, int seed, size_t off, size_t n, int eof)
{
	static char why[128];
	uint8_t b[4096];
	size_t got = 0;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (!eof && got == n)
			return NULL;
		if (poll(&p, 1, TMO) != 1) {
			snprintf(why, sizeof(why), "timeout after %zu of %zu bytes", got, n);
			return why;
		}
		r = recv(fd, b, sizeof(b) < n - got + 1 ? sizeof(b) : n - got + 1, 0);
		if (r < 0) {
			snprintf(why, sizeof(why), "recv after %zu bytes: %s", got,
				 strerror(errno));
			return why;
		}
		if (r == 0) {
			if (got == n)
				return NULL;
			snprintf(why, sizeof(why), "EOF after %zu of %zu bytes", got, n);
			return why;
		}
		for (ssize_t i = 0; i < r; i++)
			if (b[i] != pat(seed, off + got + i)) {
				snprintf(why, sizeof(why), "byte %zu differs", got + i);
				return why;
			}
		got += r;
		if (got > n) {
			snprintf(why, sizeof(why), "more than %zu bytes", n);
			return why;
		}
	}
}

static int tstate(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	return getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len) ? -1 : ti.tcpi_state;
}

static const char *sname(int s)
{
	static const char *const n[] = {"?",	      "ESTABLISHED", "SYN_SENT",  "SYN_RECV",
					"FIN_WAIT1",  "FIN_WAIT2",   "TIME_WAIT", "CLOSE",
					"CLOSE_WAIT", "LAST_ACK",    "LISTEN",	  "CLOSING"};

	return s >= 0 && s < 12 ? n[s] : "?";
}

/* Wait (up to TMO) for fd to be in state want; the state it is in. */
static int wait_state(int fd, int want)
{
	int s = tstate(fd);

	for (int i = 0; i < TMO / 10 && s != want; i++) {
		usleep(10 * 1000);
		s = tstate(fd);
	}
	return s;
}

static void wait_file(const char *name)
{
	for (int i = 0; i < TMO / 10 && access(prog_path(name), F_OK); i++)
		usleep(10 * 1000);
	if (access(prog_path(name), F_OK))
		prog_die("%s did not come", name);
}

static void spawn_outside(const char *mode, uint16_t port)
{
	char ps[16];
	pid_t m = fork();
	int st;

	if (m < 0)
		prog_die("fork");
	if (m == 0) {
		if (fork() == 0) {
			setsid();
			snprintf(ps, sizeof(ps), "%u", port);
			execl("/proc/self/exe", "tcpstates", prog_path(""), "peer", mode, famarg,
			      ps, (char *)NULL);
			_exit(127);
		}
		_exit(0);
	}
	if (waitpid(m, &st, 0) != m)
		prog_die("waitpid");
}

/* E's verdict: "ok" or what went wrong. */
static void peer_verdict(const char *what)
{
	char buf[512] = "";
	int fd;
	ssize_t n;

	wait_file("peer.result");
	fd = open(prog_path("peer.result"), O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
	buf[strcspn(buf, "\n")] = 0;
	CHECK(!strcmp(buf, "ok"), "the peer outside the tree: %s: %s", what, buf);
}

static void peer_result(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	strcat(buf, "\n");
	prog_write_atomic("peer.result", buf);
}

/* An nft table of our own dropping what we send from port sport to E. */
static char nft_table[64];
static void drop_none(void);

static int nft(const char *script)
{
	FILE *p = popen("nft -f - 2>&1", "w");

	if (!p)
		return -1;
	fputs(script, p);
	return pclose(p);
}

static void drop_to_peer(uint16_t sport, uint16_t dport)
{
	char s[512];

	if (!nft_table[0]) {
		snprintf(nft_table, sizeof(nft_table), "tcpstates-%d", (int)getpid());
		snprintf(s, sizeof(s),
			 "add table inet %1$s\n"
			 "add chain inet %1$s out { type filter hook output priority filter; "
			 "policy accept; }\n",
			 nft_table);
		if (nft(s))
			prog_die("nft table %s", nft_table);
		atexit(drop_none);
	}
	snprintf(s, sizeof(s),
		 "add rule inet %s out tcp sport %u tcp dport %u meta mark != 0xa3be drop\n",
		 nft_table, sport, dport);
	if (nft(s))
		prog_die("nft rule");
}

static void drop_none(void)
{
	char s[128];

	if (!nft_table[0])
		return;
	snprintf(s, sizeof(s), "delete table inet %s\n", nft_table);
	nft(s);
	nft_table[0] = 0;
}

/* ---- E, the peer outside the tree ---- */

static int peer_half(uint16_t port)
{
	int x1 = connect_to(port), x2 = connect_to(port);
	const char *w;

	send_pat(x1, 41, 0, 4000);
	shutdown(x1, SHUT_WR);
	send_pat(x2, 42, 0, 1800);
	prog_write_atomic("peer.ready", "1\n");
	prog_wait_go();
	w = recv_pat(x1, 31, 0, 3500, 1);
	if (w) {
		peer_result("x1 (its end CLOSE_WAIT): P's 2500 + 1000 bytes then EOF: %s", w);
		return 1;
	}
	w = recv_pat(x2, 32, 0, 3300, 1);
	if (w) {
		peer_result("x2 (its end FIN_WAIT2): P's 3300 bytes then EOF: %s", w);
		return 1;
	}
	send_pat(x2, 42, 1800, 900);
	close(x2);
	close(x1);
	peer_result("ok");
	return 0;
}

static int peer_closing(uint16_t port)
{
	int x3 = connect_to(port), x4 = connect_to(port), x5 = connect_to(port);
	const char *w;

	shutdown(x4, SHUT_WR);
	/* P acks our FIN late (delayed ACK); its drop must not catch that ACK */
	if (wait_state(x4, TCP_FIN_WAIT2) != TCP_FIN_WAIT2)
		prog_die("x4's FIN is not acked");
	prog_write_atomic("peer.ready", "1\n");
	wait_file("x5.shut");
	shutdown(x5, SHUT_WR);
	prog_write_atomic("peer.x5", "1\n");
	prog_wait_go();
	w = recv_pat(x3, 33, 0, 500, 1);
	if (!w)
		w = recv_pat(x4, 34, 0, 0, 1);
	if (!w)
		w = recv_pat(x5, 35, 0, 0, 1);
	if (w) {
		peer_result("our data and FINs after the drop ends: %s", w);
		return 1;
	}
	peer_result("ok");
	wait_file("peer.close"); /* P checks x3 in FIN_WAIT2 first */
	close(x3);
	close(x4);
	close(x5);
	return 0;
}

static int peer_synsent(uint16_t port)
{
	int l = listener(port, 0), f, a, b;
	const char *w;

	char pid[16];

	/* one connection fills the accept queue of backlog 0: later SYNs are dropped */
	f = connect_to(port);
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	prog_write_atomic("peer.pid", pid);
	prog_write_atomic("peer.ready", "1\n");
	prog_wait_go();
	a = accept_one(l);
	{
		struct pollfd p = {.fd = l, .events = POLLIN};

		b = poll(&p, 1, TMO) == 1 ? accept_one(l) : -1;
	}
	if (b < 0) {
		peer_result("the restored connect() never reached the listener");
		return 1;
	}
	w = recv_pat(b, 36, 0, 100, 1);
	if (w)
		peer_result("the restored connection's data: %s", w);
	else
		peer_result("ok");
	close(a);
	close(f);
	close(b);
	return !!w;
}

static int peer_close(uint16_t port)
{
	int x = connect_to(port);
	char c;
	ssize_t r;
	struct pollfd p = {.fd = x, .events = POLLIN};

	send_pat(x, 43, 0, 1000);
	prog_write_atomic("peer.ready", "1\n");
	prog_wait_go();
	/* P's 200 queued bytes may come first, then EOF or a reset */
	r = 1;
	while (r > 0 && poll(&p, 1, TMO) == 1)
		r = recv(x, &c, 1, 0);
	if (r > 0)
		peer_result("its end stays open");
	else
		peer_result("ok");
	return r > 0;
}

static int peer_main(const char *mode, uint16_t port)
{
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(mode, "half"))
		return peer_half(port);
	if (!strcmp(mode, "closing"))
		return peer_closing(port);
	if (!strcmp(mode, "synsent"))
		return peer_synsent(port);
	if (!strcmp(mode, "close"))
		return peer_close(port);
	return 2;
}

/* ---- the tree ---- */

static void check_state(int fd, int want, const char *what)
{
	int s = wait_state(fd, want);

	CHECK(s == want, "%s: state %s (want %s)", what, sname(s), sname(want));
}

static void check_recv(int fd, int seed, size_t off, size_t n, int eof, const char *what)
{
	const char *w = recv_pat(fd, seed, off, n, eof);

	CHECK(!w, "%s: %zu queued bytes%s read back in order: %s", what, n, eof ? " then EOF" : "",
	      w ? w : "yes");
}

static int half_main(uint16_t port)
{
	int l = listener(port, 8), a1, s1, b1, s2, d1, s3, x1, x2, sab;
	char c;

	spawn_outside("half", port);
	x1 = accept_one(l);
	x2 = accept_one(l);
	a1 = connect_to(port);
	s1 = accept_one(l);
	b1 = connect_to(port);
	s2 = accept_one(l);
	/* in the tree: a1 sends 3000 bytes and its FIN; s1 sends 2000 back, nobody reads */
	send_pat(a1, 1, 0, 3000);
	shutdown(a1, SHUT_WR);
	send_pat(s1, 2, 0, 2000);
	/* s2 has 1500 bytes from b1 and shuts its receiving side; b1 has 700 from s2 */
	send_pat(b1, 3, 0, 1500);
	send_pat(s2, 4, 0, 700);
	/* d1 sends 800 bytes, has 600 from s3 unread, and shuts down both sides */
	d1 = connect_to(port);
	s3 = accept_one(l);
	send_pat(d1, 5, 0, 800);
	send_pat(s3, 6, 0, 600);
	usleep(100 * 1000);
	shutdown(s2, SHUT_RD);
	shutdown(d1, SHUT_RDWR);
	/* E: x1 got E's 4000 bytes and FIN; x2 sends 3300 bytes and its FIN */
	wait_file("peer.ready");
	send_pat(x1, 31, 0, 2500);
	send_pat(x2, 32, 0, 3300);
	shutdown(x2, SHUT_WR);
	if (wait_state(a1, TCP_FIN_WAIT2) != TCP_FIN_WAIT2 ||
	    wait_state(s1, TCP_CLOSE_WAIT) != TCP_CLOSE_WAIT ||
	    wait_state(x1, TCP_CLOSE_WAIT) != TCP_CLOSE_WAIT ||
	    wait_state(x2, TCP_FIN_WAIT2) != TCP_FIN_WAIT2 ||
	    wait_state(d1, TCP_FIN_WAIT2) != TCP_FIN_WAIT2)
		prog_die("the connections did not reach their states (%s %s %s %s)",
			 sname(tstate(a1)), sname(tstate(s1)), sname(tstate(x1)),
			 sname(tstate(x2)));
	prog_ready();
	prog_wait_go();
	sab = prog_sabotage();

	check_state(a1, TCP_FIN_WAIT2, "in the tree, the client that shut down its sending side");
	check_state(s1, TCP_CLOSE_WAIT, "in the tree, its server");
	check_state(s2, TCP_ESTABLISHED,
		    "in the tree, the server that shut down its receiving side");
	check_state(b1, TCP_ESTABLISHED, "in the tree, its client");
	check_state(x1, TCP_CLOSE_WAIT, "to E, the connection E shut down");
	check_state(x2, sab ? TCP_FIN_WAIT1 : TCP_FIN_WAIT2, "to E, the one we shut down");
	check_recv(s1, 1, 0, 3000, 1, "CLOSE_WAIT in the tree: the client's");
	check_recv(a1, 2, 0, 2000, 0, "FIN_WAIT2 in the tree: the server's");
	send_pat(s1, 2, 2000, 1000);
	check_recv(a1, 2, 2000, 1000, 0, "FIN_WAIT2 in the tree: sent after the restore");
	CHECK(send(a1, "x", 1, MSG_NOSIGNAL) < 0 && errno == EPIPE,
	      "FIN_WAIT2: sending after SHUT_WR still says EPIPE");
	close(s1);
	check_recv(a1, 2, 3000, 0, 1, "FIN_WAIT2 in the tree, its server closed:");
	check_recv(s2, 3, 0, 1500, 1, "SHUT_RD: the data queued before, then");
	check_recv(b1, 4, 0, 700, 0, "SHUT_RD, its client: the server's");
	send_pat(s2, 4, 700, 300);
	check_recv(b1, 4, 700, 300, 0, "SHUT_RD: the server still sends;");
	check_recv(x1, 41, 0, 4000, 1, "CLOSE_WAIT to E: E's");
	send_pat(x1, 31, 2500, 1000);
	close(x1);
	check_recv(x2, 42, 0, 2700, 1, "FIN_WAIT2 to E: E's 1800 before the dump, 900 after,");
	CHECK(recv(s2, &c, 1, MSG_DONTWAIT) == 0, "SHUT_RD: recv says EOF at once");
	check_state(d1, TCP_FIN_WAIT2, "SHUT_RDWR in the tree");
	check_state(s3, TCP_CLOSE_WAIT, "SHUT_RDWR in the tree, its peer");
	check_recv(s3, 5, 0, 800, 1, "SHUT_RDWR, its peer: the");
	check_recv(d1, 6, 0, 600, 1, "SHUT_RDWR: the data queued before, then");
	CHECK(recv(d1, &c, 1, MSG_DONTWAIT) == 0, "SHUT_RDWR: recv says EOF at once");
	peer_verdict("our queued data then EOF on both connections");
	return prog_done();
}

static int closing_main(uint16_t port)
{
	int l = listener(port, 8), x3, x4, x5, c3, s3, c4, s4, c5, s5, sab;

	spawn_outside("closing", port);
	x3 = accept_one(l);
	x4 = accept_one(l);
	x5 = accept_one(l);
	wait_file("peer.ready");
	/* FIN_WAIT1: 500 bytes and the FIN dropped */
	drop_to_peer(port, port_of(x3, 1));
	send_pat(x3, 33, 0, 500);
	shutdown(x3, SHUT_WR);
	/* LAST_ACK: E's FIN came, ours is dropped */
	if (wait_state(x4, TCP_CLOSE_WAIT) != TCP_CLOSE_WAIT)
		prog_die("x4 is not in CLOSE_WAIT");
	drop_to_peer(port, port_of(x4, 1));
	shutdown(x4, SHUT_WR);
	/* CLOSING: our FIN dropped, then E's FIN */
	drop_to_peer(port, port_of(x5, 1));
	shutdown(x5, SHUT_WR);
	prog_write_atomic("x5.shut", "1\n");
	wait_file("peer.x5");
	/* the same three with both ends in the tree */
	c3 = connect_to(port);
	s3 = accept_one(l);
	drop_to_peer(port_of(c3, 0), port);
	send_pat(c3, 37, 0, 400);
	shutdown(c3, SHUT_WR);
	c4 = connect_to(port);
	s4 = accept_one(l);
	shutdown(c4, SHUT_WR);
	/*
	 * The ACK of a FIN is delayed: s4 is in CLOSE_WAIT before it goes out,
	 * and the drop below would catch it, leaving c4 in FIN_WAIT1.
	 */
	if (wait_state(s4, TCP_CLOSE_WAIT) != TCP_CLOSE_WAIT ||
	    wait_state(c4, TCP_FIN_WAIT2) != TCP_FIN_WAIT2)
		prog_die("c4's FIN is not received and acked");
	drop_to_peer(port, port_of(c4, 0));
	shutdown(s4, SHUT_WR);
	c5 = connect_to(port);
	s5 = accept_one(l);
	drop_to_peer(port, port_of(c5, 0));
	shutdown(s5, SHUT_WR);
	usleep(50 * 1000);
	shutdown(c5, SHUT_WR);
	if (wait_state(x3, TCP_FIN_WAIT1) != TCP_FIN_WAIT1 ||
	    wait_state(x4, TCP_LAST_ACK) != TCP_LAST_ACK ||
	    wait_state(x5, TCP_CLOSING) != TCP_CLOSING ||
	    wait_state(c3, TCP_FIN_WAIT1) != TCP_FIN_WAIT1 ||
	    wait_state(s4, TCP_LAST_ACK) != TCP_LAST_ACK ||
	    wait_state(c4, TCP_FIN_WAIT2) != TCP_FIN_WAIT2 ||
	    wait_state(s5, TCP_CLOSING) != TCP_CLOSING ||
	    wait_state(c5, TCP_FIN_WAIT1) != TCP_FIN_WAIT1)
		prog_die("the connections did not reach their states (%s %s %s, in the tree %s %s "
			 "%s %s %s %s)",
			 sname(tstate(x3)), sname(tstate(x4)), sname(tstate(x5)), sname(tstate(c3)),
			 sname(tstate(s3)), sname(tstate(c4)), sname(tstate(s4)), sname(tstate(c5)),
			 sname(tstate(s5)));
	prog_ready();
	prog_wait_go();
	sab = prog_sabotage();

	check_state(x3, sab ? TCP_FIN_WAIT2 : TCP_FIN_WAIT1, "our data and FIN unanswered");
	check_state(x4, TCP_LAST_ACK, "E's FIN, then ours unanswered");
	check_state(x5, TCP_CLOSING, "our FIN unanswered, then E's");
	check_state(c3, TCP_FIN_WAIT1, "in the tree, data and FIN dropped");
	check_state(s3, TCP_ESTABLISHED, "in the tree, its peer");
	check_state(s4, TCP_LAST_ACK, "in the tree, FIN received, ours dropped");
	check_state(c4, TCP_FIN_WAIT2, "in the tree, its peer");
	check_state(s5, TCP_CLOSING, "in the tree, our FIN dropped, then the peer's");
	check_state(c5, TCP_FIN_WAIT1, "in the tree, its peer");
	check_recv(x4, 0, 0, 0, 1, "LAST_ACK:");
	check_recv(x5, 0, 0, 0, 1, "CLOSING:");
	check_recv(s4, 0, 0, 0, 1, "LAST_ACK in the tree:");
	check_recv(s5, 0, 0, 0, 1, "CLOSING in the tree:");
	drop_none();
	check_state(x3, TCP_FIN_WAIT2, "FIN_WAIT1 once E answers");
	check_state(x4, TCP_CLOSE, "LAST_ACK once E answers");
	check_state(x5, TCP_CLOSE, "CLOSING once E answers (TIME_WAIT)");
	check_recv(s3, 37, 0, 400, 1, "in the tree, once the drop ends: the FIN_WAIT1 peer's");
	check_state(s3, TCP_CLOSE_WAIT, "in the tree, the FIN_WAIT1 peer's FIN came");
	check_state(c3, TCP_FIN_WAIT2, "in the tree, FIN_WAIT1 once acknowledged");
	check_recv(c4, 0, 0, 0, 1, "in the tree, the LAST_ACK peer's FIN:");
	check_state(s4, TCP_CLOSE, "in the tree, LAST_ACK once acknowledged");
	check_recv(c5, 0, 0, 0, 1, "in the tree, the CLOSING peer's FIN:");
	check_state(s5, TCP_CLOSE, "in the tree, CLOSING once acknowledged (TIME_WAIT)");
	check_state(c5, TCP_CLOSE, "in the tree, FIN_WAIT1 with the peer's FIN (TIME_WAIT)");
	peer_verdict("our 500 bytes and FINs once the drop ends");
	prog_write_atomic("peer.close", "1\n");
	return prog_done();
}

/*
 * blocking: a child C of the tree is blocked in connect() on the socket they
 * share; after go it must return 0 and C exit 0.
 */
static int synsent_main(uint16_t port, int blocking, int refused)
{
	struct sockaddr_storage ss;
	socklen_t len = mkaddr(&ss, port, 0);
	int c = socket(fam, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = -1, sab, rc;
	struct pollfd p;
	pid_t child = -1;

	spawn_outside("synsent", port);
	wait_file("peer.ready");
	usleep(100 * 1000);
	if (blocking) {
		if (c < 0 || fcntl(c, F_SETFL, 0))
			prog_die("a blocking socket");
		child = fork();
		if (child < 0)
			prog_die("fork");
		if (child == 0)
			_exit(connect(c, (struct sockaddr *)&ss, len) ? 10 + errno : 0);
	} else if (c < 0 || !connect(c, (struct sockaddr *)&ss, len) || errno != EINPROGRESS)
		prog_die("a connect() that stays in progress");
	if (wait_state(c, TCP_SYN_SENT) != TCP_SYN_SENT)
		prog_die("the connect is not in SYN_SENT (%s)", sname(tstate(c)));
	usleep(200 * 1000);
	if (tstate(c) != TCP_SYN_SENT)
		prog_die("the connect left SYN_SENT (%s)", sname(tstate(c)));
	prog_ready();
	prog_wait_go();
	sab = prog_sabotage();
	if (blocking) {
		int st = -1;
		pid_t w = waitpid(child, &st, 0);

		CHECK(w == child && WIFEXITED(st) && WEXITSTATUS(st) == (sab ? 1 : 0),
		      "the child blocked in connect() sees it succeed (wait status 0x%x)", st);
		fcntl(c, F_SETFL, O_NONBLOCK);
	}
	p = (struct pollfd){.fd = c, .events = POLLOUT};
	rc = poll(&p, 1, TMO);
	if (refused) {
		CHECK(rc == 1 && (p.revents & POLLERR), "the connect() fails (revents 0x%x)",
		      p.revents);
		len = sizeof(err);
		rc = getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len);
		CHECK(!rc && err == (sab ? 0 : ECONNREFUSED), "SO_ERROR says ECONNREFUSED (%s)",
		      strerror(err));
		return prog_done();
	}
	CHECK(rc == 1 && (p.revents & POLLOUT) && !(p.revents & POLLERR),
	      "the connect() in progress completes once E accepts (revents 0x%x)", p.revents);
	len = sizeof(err);
	rc = getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len);
	CHECK(!rc && err == (sab ? ECONNREFUSED : 0), "SO_ERROR says it connected (%d)", err);
	rc = tstate(c);
	CHECK(rc == TCP_ESTABLISHED, "state %s", sname(rc));
	{
		int fl = fcntl(c, F_GETFL);

		CHECK(fl >= 0 && (fl & O_NONBLOCK), "non-blocking as it was");
		fcntl(c, F_SETFL, 0);
	}
	send_pat(c, 36, 0, 100);
	close(c);
	peer_verdict("the restored connect() brought our 100 bytes");
	return prog_done();
}

static int sab_reset;

/* next use of a connection restored with --tcp-close: a reset */
static void check_reset(int fd, const char *what)
{
	char c;
	ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
	int e = errno;

	CHECK(r < 0 && e == (sab_reset ? ECONNREFUSED : ECONNRESET),
	      "%s: recv says ECONNRESET (%zd, %s)", what, r, r < 0 ? strerror(e) : "data");
	CHECK(recv(fd, &c, 1, MSG_DONTWAIT) == 0, "%s: then EOF", what);
	CHECK(send(fd, "x", 1, MSG_NOSIGNAL) < 0 && errno == EPIPE, "%s: send says EPIPE", what);
	CHECK(tstate(fd) == TCP_CLOSE, "%s: state %s", what, sname(tstate(fd)));
}

static int close_main(uint16_t port)
{
	int l = listener(port, 8), x, a, s, h1, h2;

	spawn_outside("close", port);
	x = accept_one(l);
	a = connect_to(port);
	s = accept_one(l);
	h1 = connect_to(port);
	h2 = accept_one(l);
	send_pat(a, 5, 0, 600);
	send_pat(s, 6, 0, 400);
	send_pat(x, 7, 0, 200);
	shutdown(h1, SHUT_WR); /* a half-closed one too */
	wait_file("peer.ready");
	if (wait_state(h2, TCP_CLOSE_WAIT) != TCP_CLOSE_WAIT)
		prog_die("h2 not in CLOSE_WAIT");
	usleep(100 * 1000);
	prog_ready();
	prog_wait_go();
	sab_reset = prog_sabotage();
	check_reset(a, "in the tree, client");
	check_reset(s, "in the tree, server");
	check_reset(x, "to E");
	check_reset(h1, "FIN_WAIT2 in the tree");
	{
		char c;
		ssize_t r = recv(h2, &c, 1, MSG_DONTWAIT);
		int err = 0;
		socklen_t len = sizeof(err);

		/* the FIN it had not read yet; the reset says EPIPE in CLOSE_WAIT */
		CHECK(r == 0, "CLOSE_WAIT in the tree: recv says EOF (%zd)", r);
		r = getsockopt(h2, SOL_SOCKET, SO_ERROR, &err, &len);
		CHECK(!r && err == EPIPE, "CLOSE_WAIT in the tree: SO_ERROR says EPIPE (%s)",
		      strerror(err));
		CHECK(tstate(h2) == TCP_CLOSE, "CLOSE_WAIT in the tree: state %s",
		      sname(tstate(h2)));
	}
	peer_verdict("its end closed");
	return prog_done();
}

static int oob_main(uint16_t port, int inl)
{
	int l = listener(port, 8), a = connect_to(port), s = accept_one(l), one = 1;
	char c = 0;

	if (inl && setsockopt(s, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one)))
		prog_die("SO_OOBINLINE");
	send_pat(a, 8, 0, 100);
	if (send(a, "U", 1, MSG_OOB) != 1)
		prog_die("send MSG_OOB");
	usleep(100 * 1000);
	prog_ready();
	prog_wait_go();
	if (inl) {
		int mark = -1, r;

		check_recv(s, 8, 0, 100, 0, "the stream before the urgent byte");
		r = ioctl(s, SIOCATMARK, &mark);
		CHECK(r == 0 && mark == !prog_sabotage(), "at the urgent mark (%d)", mark);
		r = (int)recv(s, &c, 1, 0);
		CHECK(r == 1 && c == 'U', "the urgent byte inline ('%c')", c);
		return prog_done();
	}
	one = (int)recv(s, &c, 1, MSG_OOB);
	CHECK(one == 1 && c == (prog_sabotage() ? 'V' : 'U'),
	      "the urgent byte is still there ('%c')", c);
	check_recv(s, 8, 0, 100, 0, "the stream");
	return prog_done();
}

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

static void set_fam(const char *f)
{
	snprintf(famarg, sizeof(famarg), "%s", f);
	fam = !strcmp(f, "4") ? AF_INET : AF_INET6;
	mapped = !strcmp(f, "m");
}

int main(int argc, char **argv)
{
	int i = prog_init(argc, argv), rc;

	signal(SIGPIPE, SIG_IGN);
	if (argc > i + 1 && !strcmp(argv[i], "pending"))
		return pending_main((uint16_t)atoi(argv[i + 1]));
	if (argc > i + 1 && !strcmp(argv[i], "oob")) {
		set_fam("4");
		return oob_main((uint16_t)atoi(argv[i + 1]), argc > i + 2);
	}
	if (argc > i + 3 && !strcmp(argv[i], "peer")) {
		set_fam(argv[i + 2]);
		return peer_main(argv[i + 1], (uint16_t)atoi(argv[i + 3]));
	}
	if (argc > i + 2) {
		uint16_t port = (uint16_t)atoi(argv[i + 2]);

		set_fam(argv[i + 1]);
		rc = 2;
		if (!strcmp(argv[i], "half"))
			rc = half_main(port);
		else if (!strcmp(argv[i], "closing"))
			rc = closing_main(port);
		else if (!strcmp(argv[i], "synsent"))
			rc = synsent_main(port, 0, 0);
		else if (!strcmp(argv[i], "synsentb"))
			rc = synsent_main(port, 1, 0);
		else if (!strcmp(argv[i], "synsentr"))
			rc = synsent_main(port, 0, 1);
		else if (!strcmp(argv[i], "close"))
			rc = close_main(port);
		drop_none();
		if (rc != 2)
			return rc;
	}
	fprintf(stderr, "usage: tcpstates DIR pending|oob PORT, tcpstates DIR "
			"half|closing|synsent|close 4|6|m PORT\n");
	return 2;
}
