// SPDX-License-Identifier: MIT
/*
 * sockets: a root P and a child C connected by sockets, each with data
 * queued in both directions at the dump, read back byte for byte after go.
 *
 *   sockets DIR unix   unix sockets only:
 *     - a socketpair of each type (stream, dgram, seqpacket) between P and C,
 *       three messages queued each way (datagram boundaries must survive);
 *     - a named stream listener (P) with C connected and accepted, data
 *       queued both ways; after restore the listener accepts a new client;
 *     - a named dgram socket (P) that C's connected socket sent datagrams to;
 *     - an abstract-name stream listener (P) with C connected and accepted;
 *     - a dgram socket bound to a relative name, holding a datagram from a
 *       socket of C's that is closed since;
 *     - an unbound unix stream socket and a bound, unconnected seqpacket one;
 *   sockets DIR all    the above, plus (dump/restore with --tcp-established):
 *     - an established TCP connection P <-> C with bytes in flight both ways
 *       (small buffers: the send queues hold unsent data), 2 MiB each way;
 *     - a TCP listener that accepts a new connection after restore, and a
 *       bound TCP socket that was neither connected nor listening;
 *     - a UDP socket (P) with two datagrams queued from C's connected socket;
 *     - an established TCP connection to E, a process outside the tree
 *       (double-forked, re-executed as "sockets DIR peer PORT"): E's bytes are
 *       queued in P's receive queue, P's in its send queue (E's window is
 *       full); after go E checks every byte and answers with its verdict.
 * After go every side also sends new data, so the restored connections must
 * still work, not only hold the old bytes.
 *
 *   sockets DIR extunix   a socketpair whose other end is held by a process
 *                         outside the tree ("sockets DIR hold FD"): the dump
 *                         must be refused; after go the pair still works.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <linux/sockios.h>

#include "prog.h"

#define TCP_N	      (2 << 20) /* bytes each way on the TCP connections */
#define EXT_K1	      20000	/* E -> P before the dump (fits P's receive buffer) */
#define EXT_K2	      30000	/* E -> P after its verdict */
#define SMALL_BUF     16384
#define IO_TIMEOUT_MS 30000

static const int sp_types[3] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET};
static const char *const sp_names[3] = {"stream", "dgram", "seqpacket"};
static const size_t msg_len[3] = {1, 777, 5000};
static const size_t ud_len[3] = {10, 1, 2000};
static const size_t udp_len[2] = {100, 1500};

static uint8_t pat_byte(uint64_t seed, size_t i)
{
	return (uint8_t)(prog_pat(seed, i / 8) >> ((i % 8) * 8));
}

static void fill_pat(uint8_t *b, size_t len, uint64_t seed, size_t off)
{
	for (size_t i = 0; i < len; i++)
		b[i] = pat_byte(seed, off + i);
}

/* Index of the first byte that differs from the pattern, or -1. */
static long check_pat(const uint8_t *b, size_t len, uint64_t seed, size_t off)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != pat_byte(seed, off + i))
			return (long)i;
	return -1;
}

static uint64_t seed_of(int kind, int dir, int idx)
{
	return 0x5eed0000ull | (uint64_t)kind << 8 | (uint64_t)dir << 4 | (uint64_t)idx;
}

enum {
	K_SP = 0,
	K_NAMED = 3,
	K_UDGRAM = 4,
	K_TCP = 5,
	K_UDP = 6,
	K_EXT = 7,
	K_AFTER = 8,
	K_ABS = 9,
	K_REL = 10,
};
enum { P2C = 0, C2P = 1, P2E = 2, E2P = 3, E2P_AFTER = 4 };

static int wait_fd(int fd, short ev)
{
	struct pollfd p = {.fd = fd, .events = ev};

	return poll(&p, 1, IO_TIMEOUT_MS) == 1 ? 0 : -1;
}

static int send_msg(int fd, const uint8_t *b, size_t len)
{
	size_t off = 0;

	do {
		ssize_t r = send(fd, b + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLOUT))
				return -1;
			continue;
		}
		if (r < 0)
			return -1;
		off += r;
	} while (off < len);
	return 0;
}

/* One message (datagram) or, for streams, exactly len bytes; returns the length got. */
static ssize_t recv_msg(int fd, uint8_t *b, size_t cap, size_t want, int stream)
{
	size_t got = 0;

	do {
		ssize_t r;

		if (wait_fd(fd, POLLIN))
			return -1;
		r = recv(fd, b + got, stream ? want - got : cap, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r < 0)
			return -1;
		if (!stream)
			return r;
		if (r == 0)
			break;
		got += r;
	} while (got < want);
	return (ssize_t)got;
}

/*
 * Full duplex: send slen pattern bytes (seed ss from offset soff) while
 * receiving rlen bytes checked against seed rs (from roff).  Returns 0 if
 * all went through and matched; -1 I/O error; else 1 + first bad offset.
 */
static long duplex(int fd, uint64_t ss, size_t soff, size_t slen, uint64_t rs, size_t roff,
		   size_t rlen)
{
	static uint8_t sb[65536], rb[65536];
	size_t sent = 0, got = 0;
	long bad = 0;
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	while (sent < slen || got < rlen) {
		struct pollfd p = {.fd = fd,
				   .events =
					   (sent < slen ? POLLOUT : 0) | (got < rlen ? POLLIN : 0)};

		if (poll(&p, 1, IO_TIMEOUT_MS) != 1) {
			bad = -1;
			break;
		}
		if (p.revents & POLLOUT) {
			size_t n = slen - sent > sizeof(sb) ? sizeof(sb) : slen - sent;
			ssize_t r;

			fill_pat(sb, n, ss, soff + sent);
			r = send(fd, sb, n, MSG_NOSIGNAL);
			if (r < 0 && errno != EAGAIN) {
				bad = -1;
				break;
			}
			if (r > 0)
				sent += r;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			size_t n = rlen - got > sizeof(rb) ? sizeof(rb) : rlen - got;
			ssize_t r = recv(fd, rb, n, 0);
			long at;

			if (r <= 0 && !(r < 0 && errno == EAGAIN)) {
				bad = -1;
				break;
			}
			if (r > 0) {
				at = check_pat(rb, r, rs, roff + got);
				if (at >= 0 && !bad)
					bad = 1 + (long)(roff + got) + at;
				got += r;
			}
		}
	}
	fcntl(fd, F_SETFL, fl);
	if (bad == 0 && (sent < slen || got < rlen))
		bad = -1;
	return bad;
}

/* Write pattern bytes without blocking until the socket takes no more (or max). */
static size_t fill_nonblock(int fd, uint64_t seed, size_t max)
{
	static uint8_t b[16384];
	size_t sent = 0;

	while (sent < max) {
		size_t n = max - sent > sizeof(b) ? sizeof(b) : max - sent;
		ssize_t r;

		fill_pat(b, n, seed, sent);
		r = send(fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		sent += r;
	}
	return sent;
}

static void small_bufs(int fd)
{
	int v = SMALL_BUF;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)))
		prog_die("SO_RCVBUF/SO_SNDBUF");
}

static struct sockaddr_un un_addr(const char *name, socklen_t *len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", prog_path(name));
	*len = sizeof(sa);
	return sa;
}

/* "@amber-e2e-sockets-PID" (P's pid: the same after the restore) */
static struct sockaddr_un abs_addr(pid_t root, socklen_t *len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "amber-e2e-sockets-%d", root);

	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	return sa;
}

static int tcp_listener(uint16_t *port, int small)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		prog_die("tcp socket");
	if (small)
		small_bufs(fd);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 8) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len))
		prog_die("tcp listener");
	*port = ntohs(sa.sin_port);
	return fd;
}

static int tcp_connect(uint16_t port, int small)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		prog_die("tcp socket");
	if (small)
		small_bufs(fd);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return -1;
	return fd;
}

/* ---- E: the peer outside the tree ---- */

static int peer_main(uint16_t port)
{
	static uint8_t b[EXT_K2 + 1];
	int fd = tcp_connect(port, 1), outq = 1, i;
	long bad;

	if (fd < 0)
		prog_die("peer: connect to %u", port);
	fill_pat(b, EXT_K1, seed_of(K_EXT, E2P, 0), 0);
	if (send_msg(fd, b, EXT_K1))
		prog_die("peer: send");
	/* every byte acknowledged: nothing of ours is in flight during the dump */
	for (i = 0; i < 1000 && outq; i++) {
		if (ioctl(fd, SIOCOUTQ, &outq))
			prog_die("peer: SIOCOUTQ");
		usleep(10 * 1000);
	}
	prog_write_atomic("peer.ready", "1\n");
	prog_wait_go();
	bad = duplex(fd, 0, 0, 0, seed_of(K_EXT, P2E, 0), 0, TCP_N);
	if (bad)
		fprintf(stderr, "FAIL peer: the %d bytes from the tree: %s %ld\n", TCP_N,
			bad < 0 ? "I/O error" : "mismatch at", bad - 1);
	b[0] = bad == 0;
	fill_pat(b + 1, EXT_K2, seed_of(K_EXT, E2P_AFTER, 0), 0);
	if (send_msg(fd, b, EXT_K2 + 1))
		fprintf(stderr, "FAIL peer: sending the verdict: %s\n", strerror(errno));
	shutdown(fd, SHUT_WR);
	while (recv_msg(fd, b, sizeof(b), 1, 1) > 0)
		;
	return bad ? 1 : 0;
}

/* The outside holder of a socketpair end: echoes one byte after go. */
static int hold_main(int fd)
{
	char c;

	prog_wait_go();
	return read(fd, &c, 1) == 1 && write(fd, &c, 1) == 1 ? 0 : 1;
}

/*
 * Started from P but not its descendant: double fork, the middle exits at
 * once.  mode "peer" (arg: a port) or "hold" (arg: an inherited fd).
 */
static void spawn_outside(const char *mode, int arg)
{
	char ps[16];
	pid_t m = fork();
	int st;

	if (m < 0)
		prog_die("fork");
	if (m == 0) {
		if (fork() == 0) {
			/* Not in P's session: that would keep P's pid in use after the dump. */
			setsid();
			snprintf(ps, sizeof(ps), "%d", arg);
			execl("/proc/self/exe", "sockets", prog_path(""), mode, ps, (char *)NULL);
			_exit(127);
		}
		_exit(0);
	}
	if (waitpid(m, &st, 0) != m)
		prog_die("waitpid");
}

/* ---- the tree ---- */

struct state {
	int all;
	int sp[3][2];
	int ls, as, cs; /* named stream: listener, accepted, client */
	int ud, cd;	/* named dgram: receiver (P), connected sender (C) */
	int al, aa, ac; /* abstract stream: listener, accepted, client */
	int rel;	/* dgram bound to "rel.sock" in P's cwd */
	pid_t root;
	int us0, usq, tc; /* unconnected: unix stream, bound seqpacket, bound TCP */
	uint16_t tc_port;
	int tl, pt, ct; /* TCP: listener, accepted (P), client (C) */
	uint16_t tport;
	size_t p_sent, c_sent;
	int ul, cu; /* UDP: P's bound socket, C's connected one */
	struct sockaddr_in ul_addr;
	int px; /* TCP to E */
	size_t px_sent;
	int sync[2];
};

static void send_msgs(int fd, int kind, int dir)
{
	static uint8_t b[8192];

	for (int i = 0; i < 3; i++) {
		fill_pat(b, msg_len[i], seed_of(kind, dir, i), 0);
		if (send_msg(fd, b, msg_len[i]))
			prog_die("send %s message %d", sp_names[kind], i);
	}
}

/* The three queued messages of a socketpair, then one sent after go. */
static void check_msgs(int fd, int kind, int dir, uint64_t sab)
{
	static uint8_t b[16384];
	int stream = sp_types[kind] == SOCK_STREAM;

	for (int i = 0; i < 3; i++) {
		ssize_t n = recv_msg(fd, b, sizeof(b), msg_len[i], stream);
		uint64_t seed = seed_of(kind, dir, i) + (i == 2 ? sab : 0);

		CHECK(n == (ssize_t)msg_len[i] && check_pat(b, n, seed, 0) < 0,
		      "%s socketpair %s: queued message %d: %zd bytes (want %zu) intact",
		      sp_names[kind], dir == P2C ? "P->C" : "C->P", i, n, msg_len[i]);
	}
}

static void after_send(int fd, int kind, int dir)
{
	uint8_t b[64];

	fill_pat(b, sizeof(b), seed_of(K_AFTER, dir, kind), 0);
	if (send_msg(fd, b, sizeof(b)))
		CHECK(0, "kind %d: send after restore: %s", kind, strerror(errno));
}

static void after_recv(int fd, int kind, int dir, int stream, const char *what)
{
	uint8_t b[256];
	ssize_t n = recv_msg(fd, b, sizeof(b), 64, stream);

	CHECK(n == 64 && check_pat(b, 64, seed_of(K_AFTER, dir, kind), 0) < 0,
	      "%s: a message sent after the restore arrives (%zd bytes)", what, n);
}

static int child(struct state *s)
{
	static uint8_t b[4096];
	socklen_t len;
	struct sockaddr_un sa;
	long bad;

	for (int k = 0; k < 3; k++) {
		close(s->sp[k][0]);
		send_msgs(s->sp[k][1], k, C2P);
	}
	sa = un_addr("us.sock", &len);
	s->cs = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->cs < 0 || connect(s->cs, (struct sockaddr *)&sa, len))
		prog_die("connect us.sock");
	fill_pat(b, 3000, seed_of(K_NAMED, C2P, 0), 0);
	if (send_msg(s->cs, b, 3000))
		prog_die("send named");
	sa = un_addr("ud.sock", &len);
	s->cd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s->cd < 0 || connect(s->cd, (struct sockaddr *)&sa, len))
		prog_die("connect ud.sock");
	for (int i = 0; i < 3; i++) {
		fill_pat(b, ud_len[i], seed_of(K_UDGRAM, C2P, i), 0);
		if (send_msg(s->cd, b, ud_len[i]))
			prog_die("send dgram");
	}
	sa = abs_addr(s->root, &len);
	s->ac = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	fill_pat(b, 2500, seed_of(K_ABS, C2P, 0), 0);
	if (s->ac < 0 || connect(s->ac, (struct sockaddr *)&sa, len) || send_msg(s->ac, b, 2500))
		prog_die("abstract stream");
	{
		int tmp = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		sa = un_addr("rel.sock", &len);
		fill_pat(b, 333, seed_of(K_REL, C2P, 0), 0);
		if (tmp < 0 || sendto(tmp, b, 333, 0, (struct sockaddr *)&sa, len) != 333)
			prog_die("sendto rel.sock");
		close(tmp);
	}
	if (s->all) {
		s->ct = tcp_connect(s->tport, 1);
		if (s->ct < 0)
			prog_die("tcp connect");
		s->c_sent = fill_nonblock(s->ct, seed_of(K_TCP, C2P, 0), TCP_N);
		s->cu = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (s->cu < 0)
			prog_die("udp socket");
		for (int i = 0; i < 2; i++) {
			fill_pat(b, udp_len[i], seed_of(K_UDP, C2P, i), 0);
			if (sendto(s->cu, b, udp_len[i], 0, (struct sockaddr *)&s->ul_addr,
				   sizeof(s->ul_addr)) != (ssize_t)udp_len[i])
				prog_die("udp sendto");
		}
		if (connect(s->cu, (struct sockaddr *)&s->ul_addr, sizeof(s->ul_addr)))
			prog_die("udp connect");
	}
	if (write(s->sync[1], "c", 1) != 1)
		prog_die("sync");
	while (!prog_go_exists())
		usleep(10 * 1000);

	for (int k = 0; k < 3; k++)
		check_msgs(s->sp[k][1], k, P2C, 0);
	{
		ssize_t n = recv_msg(s->cs, b, sizeof(b), 4000, 1);

		CHECK(n == 4000 && check_pat(b, n, seed_of(K_NAMED, P2C, 0), 0) < 0,
		      "named stream P->C: 4000 queued bytes intact (%zd)", n);
	}
	for (int k = 0; k < 3; k++)
		after_recv(s->sp[k][1], k, P2C, sp_types[k] == SOCK_STREAM, "socketpair P->C");
	for (int k = 0; k < 3; k++)
		after_send(s->sp[k][1], k, C2P);
	after_send(s->cs, K_NAMED, C2P);
	after_send(s->cd, K_UDGRAM, C2P);
	if (s->all) {
		bad = duplex(s->ct, seed_of(K_TCP, C2P, 0), s->c_sent, TCP_N - s->c_sent,
			     seed_of(K_TCP, P2C, 0), 0, TCP_N);
		CHECK(bad == 0,
		      "TCP P<->C (child): %zu bytes were queued to send; %d received: %s %ld",
		      s->c_sent, TCP_N,
		      bad < 0 ? "I/O error"
		      : bad   ? "mismatch at"
			      : "all intact",
		      bad - 1);
		after_send(s->cu, K_UDP, C2P);
	}
	return prog_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	static uint8_t b[65536];
	int first = prog_init(argc, argv), st;
	struct state s = {0};
	struct sockaddr_un sa;
	socklen_t len;
	uint16_t xport;
	pid_t c;
	uint64_t sab;

	if (argc > first + 1 && !strcmp(argv[first], "peer"))
		return peer_main((uint16_t)atoi(argv[first + 1]));
	if (argc > first + 1 && !strcmp(argv[first], "hold"))
		return hold_main(atoi(argv[first + 1]));
	if (argc > first && !strcmp(argv[first], "extunix")) {
		int sv[2];
		char c = 0;

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || fcntl(sv[0], F_SETFD, FD_CLOEXEC))
			prog_die("socketpair");
		spawn_outside("hold", sv[1]);
		close(sv[1]);
		prog_ready();
		prog_wait_go();
		CHECK(write(sv[0], "x", 1) == 1 && recv_msg(sv[0], (uint8_t *)&c, 1, 1, 1) == 1 &&
			      c == (prog_sabotage() ? 'y' : 'x'),
		      "the socketpair with the process outside the tree still works ('%c')", c);
		return prog_done();
	}
	s.all = argc > first && !strcmp(argv[first], "all");
	signal(SIGPIPE, SIG_IGN);
	s.px = -1;
	if (s.all) {
		int xl = tcp_listener(&xport, 0);

		spawn_outside("peer", xport);
		s.px = accept4(xl, NULL, NULL, SOCK_CLOEXEC);
		if (s.px < 0)
			prog_die("accept from the peer");
		close(xl);
	}
	for (int k = 0; k < 3; k++)
		if (socketpair(AF_UNIX, sp_types[k] | SOCK_CLOEXEC, 0, s.sp[k]))
			prog_die("socketpair %s", sp_names[k]);
	sa = un_addr("us.sock", &len);
	s.ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s.ls < 0 || bind(s.ls, (struct sockaddr *)&sa, len) || listen(s.ls, 5))
		prog_die("listen us.sock");
	sa = un_addr("ud.sock", &len);
	s.ud = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s.ud < 0 || bind(s.ud, (struct sockaddr *)&sa, len))
		prog_die("bind ud.sock");
	s.root = getpid();
	sa = un_addr("sq.sock", &len);
	s.us0 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	s.usq = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s.us0 < 0 || s.usq < 0 || bind(s.usq, (struct sockaddr *)&sa, len))
		prog_die("unconnected unix sockets");
	sa = abs_addr(s.root, &len);
	s.al = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s.al < 0 || bind(s.al, (struct sockaddr *)&sa, len) || listen(s.al, 3))
		prog_die("listen on an abstract name");
	{
		struct sockaddr_un rel = {.sun_family = AF_UNIX, .sun_path = "rel.sock"};

		s.rel = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (chdir(prog_path("")) || s.rel < 0 ||
		    bind(s.rel, (struct sockaddr *)&rel, sizeof(rel)))
			prog_die("bind rel.sock in %s", prog_path(""));
	}
	if (s.all) {
		s.tl = tcp_listener(&s.tport, 1);
		{
			struct sockaddr_in a = {.sin_family = AF_INET,
						.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
			socklen_t al = sizeof(a);

			s.tc = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (s.tc < 0 || bind(s.tc, (struct sockaddr *)&a, al) ||
			    getsockname(s.tc, (struct sockaddr *)&a, &al))
				prog_die("bound TCP socket");
			s.tc_port = ntohs(a.sin_port);
		}
		s.ul = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		s.ul_addr = (struct sockaddr_in){.sin_family = AF_INET,
						 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		len = sizeof(s.ul_addr);
		if (s.ul < 0 || bind(s.ul, (struct sockaddr *)&s.ul_addr, len) ||
		    getsockname(s.ul, (struct sockaddr *)&s.ul_addr, &len))
			prog_die("udp bind");
	}
	if (pipe2(s.sync, O_CLOEXEC))
		prog_die("pipe");
	c = fork();
	if (c < 0)
		prog_die("fork");
	if (c == 0)
		_exit(child(&s));
	for (int k = 0; k < 3; k++) {
		close(s.sp[k][1]);
		send_msgs(s.sp[k][0], k, P2C);
	}
	if (read(s.sync[0], b, 1) != 1)
		prog_die("child setup failed");
	s.as = accept4(s.ls, NULL, NULL, SOCK_CLOEXEC);
	if (s.as < 0)
		prog_die("accept us.sock");
	fill_pat(b, 4000, seed_of(K_NAMED, P2C, 0), 0);
	if (send_msg(s.as, b, 4000))
		prog_die("send named");
	s.aa = accept4(s.al, NULL, NULL, SOCK_CLOEXEC);
	if (s.aa < 0)
		prog_die("accept on the abstract name");
	if (s.all) {
		s.pt = accept4(s.tl, NULL, NULL, SOCK_CLOEXEC);
		if (s.pt < 0)
			prog_die("tcp accept");
		s.p_sent = fill_nonblock(s.pt, seed_of(K_TCP, P2C, 0), TCP_N);
		for (int i = 0; i < 1500 && access(prog_path("peer.ready"), F_OK); i++)
			usleep(10 * 1000);
		if (access(prog_path("peer.ready"), F_OK))
			prog_die("the peer outside the tree is not ready");
		s.px_sent = fill_nonblock(s.px, seed_of(K_EXT, P2E, 0), TCP_N);
		usleep(200 * 1000); /* let the windows settle */
	}
	prog_ready();
	prog_wait_go();
	sab = prog_sabotage() ? 1 : 0;

	for (int k = 0; k < 3; k++)
		after_send(s.sp[k][0], k, P2C);
	for (int k = 0; k < 3; k++)
		check_msgs(s.sp[k][0], k, C2P, k == 0 ? sab : 0);
	{
		ssize_t n = recv_msg(s.as, b, sizeof(b), 3000, 1);

		CHECK(n == 3000 && check_pat(b, n, seed_of(K_NAMED, C2P, 0), 0) < 0,
		      "named stream C->P: 3000 queued bytes intact (%zd)", n);
	}
	for (int i = 0; i < 3; i++) {
		ssize_t n = recv_msg(s.ud, b, sizeof(b), 0, 0);

		CHECK(n == (ssize_t)ud_len[i] && check_pat(b, n, seed_of(K_UDGRAM, C2P, i), 0) < 0,
		      "named dgram: queued datagram %d is %zd bytes (want %zu), intact", i, n,
		      ud_len[i]);
	}
	{
		struct sockaddr_un got;
		socklen_t gl = sizeof(got);
		int nc;

		sa = un_addr("us.sock", &len);
		CHECK(!getsockname(s.as, (struct sockaddr *)&got, &gl) &&
			      !strcmp(got.sun_path, sa.sun_path),
		      "the accepted named socket is still called %s", sa.sun_path);
		nc = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(nc >= 0 && !connect(nc, (struct sockaddr *)&sa, len),
		      "a new client connects to the restored listener %s", sa.sun_path);
		st = accept4(s.ls, NULL, NULL, SOCK_CLOEXEC);
		CHECK(st >= 0 && write(nc, "new!", 4) == 4 && recv_msg(st, b, 8, 4, 1) == 4 &&
			      !memcmp(b, "new!", 4),
		      "the restored unix listener accepts it and data flows");
	}
	{
		struct sockaddr_un got;
		socklen_t gl = sizeof(got);
		ssize_t n = recv_msg(s.aa, b, sizeof(b), 2500, 1);
		int nc, na;

		CHECK(n == 2500 && check_pat(b, n, seed_of(K_ABS, C2P, 0), 0) < 0,
		      "abstract stream C->P: 2500 queued bytes intact (%zd)", n);
		sa = abs_addr(s.root, &len);
		CHECK(!getsockname(s.aa, (struct sockaddr *)&got, &gl) && gl == len &&
			      !memcmp(&got, &sa, len),
		      "the accepted socket is still called @%s", sa.sun_path + 1);
		nc = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		na = nc >= 0 && !connect(nc, (struct sockaddr *)&sa, len)
			     ? accept4(s.al, NULL, NULL, SOCK_CLOEXEC)
			     : -1;
		CHECK(na >= 0, "a new client connects to the restored abstract listener");
		n = recv_msg(s.rel, b, sizeof(b), 0, 0);
		CHECK(n == 333 && check_pat(b, n, seed_of(K_REL, C2P, 0), 0) < 0,
		      "relative-name dgram: the queued datagram is intact (%zd bytes)", n);
		gl = sizeof(got);
		CHECK(!getsockname(s.rel, (struct sockaddr *)&got, &gl) &&
			      !strcmp(got.sun_path, "rel.sock"),
		      "the socket is still bound to the relative name rel.sock");
	}
	{
		struct sockaddr_un got;
		socklen_t gl = sizeof(got), vl = sizeof(int);
		int type = -1, acc = -1;

		CHECK(!getsockopt(s.us0, SOL_SOCKET, SO_TYPE, &type, &vl) && type == SOCK_STREAM &&
			      !getsockopt(s.us0, SOL_SOCKET, SO_ACCEPTCONN, &acc, &vl) &&
			      acc == 0 && getpeername(s.us0, (struct sockaddr *)&got, &gl) &&
			      errno == ENOTCONN,
		      "the unbound unix stream socket is one still, unconnected");
		sa = un_addr("sq.sock", &len);
		gl = sizeof(got);
		CHECK(!getsockopt(s.usq, SOL_SOCKET, SO_TYPE, &type, &vl) &&
			      type == SOCK_SEQPACKET &&
			      !getsockname(s.usq, (struct sockaddr *)&got, &gl) &&
			      !strcmp(got.sun_path, sa.sun_path),
		      "the unconnected seqpacket socket is still bound to sq.sock");
	}
	for (int k = 0; k < 3; k++)
		after_recv(s.sp[k][0], k, C2P, sp_types[k] == SOCK_STREAM, "socketpair C->P");
	after_recv(s.as, K_NAMED, C2P, 1, "named stream C->P");
	after_recv(s.ud, K_UDGRAM, C2P, 0, "named dgram from C's connected socket");

	if (s.all) {
		long bad = duplex(s.pt, seed_of(K_TCP, P2C, 0), s.p_sent, TCP_N - s.p_sent,
				  seed_of(K_TCP, C2P, 0), 0, TCP_N);
		struct sockaddr_in ua;
		socklen_t ul = sizeof(ua);
		int nc, na;

		CHECK(bad == 0,
		      "TCP P<->C (root): %zu bytes were queued to send; %d received: %s %ld",
		      s.p_sent, TCP_N,
		      bad < 0 ? "I/O error"
		      : bad   ? "mismatch at"
			      : "all intact",
		      bad - 1);
		bad = duplex(s.px, seed_of(K_EXT, P2E, 0), s.px_sent, TCP_N - s.px_sent,
			     seed_of(K_EXT, E2P, 0), 0, EXT_K1);
		CHECK(bad == 0,
		      "TCP to the peer outside the tree: %zu bytes were queued to send, the %d "
		      "queued from it arrive: %s %ld",
		      s.px_sent, EXT_K1,
		      bad < 0 ? "I/O error"
		      : bad   ? "mismatch at"
			      : "intact",
		      bad - 1);
		b[0] = 0xff;
		nc = (int)recv_msg(s.px, b, 1, 1, 1);
		CHECK(nc == 1 && b[0] == 1,
		      "the peer outside the tree got all %d bytes intact (its verdict: %d)", TCP_N,
		      b[0]);
		bad = duplex(s.px, 0, 0, 0, seed_of(K_EXT, E2P_AFTER, 0), 0, EXT_K2);
		CHECK(bad == 0, "the peer's %d bytes sent after the restore arrive (%ld)", EXT_K2,
		      bad);

		CHECK(!getsockname(s.ul, (struct sockaddr *)&ua, &ul) &&
			      ua.sin_port == s.ul_addr.sin_port,
		      "UDP socket still bound to port %u", ntohs(s.ul_addr.sin_port));
		for (int i = 0; i < 2; i++) {
			ssize_t n = recv_msg(s.ul, b, sizeof(b), 0, 0);

			CHECK(n == (ssize_t)udp_len[i] &&
				      check_pat(b, n, seed_of(K_UDP, C2P, i), 0) < 0,
			      "UDP: queued datagram %d is %zd bytes (want %zu), intact", i, n,
			      udp_len[i]);
		}
		after_recv(s.ul, K_UDP, C2P, 0, "UDP from C's connected socket");

		nc = tcp_connect(s.tport, 0);
		na = nc >= 0 ? accept4(s.tl, NULL, NULL, SOCK_CLOEXEC) : -1;
		CHECK(na >= 0 && write(nc, "tcp!", 4) == 4 && recv_msg(na, b, 8, 4, 1) == 4 &&
			      !memcmp(b, "tcp!", 4),
		      "the restored TCP listener on port %u accepts a new connection", s.tport);
		ul = sizeof(ua);
		CHECK(!getsockname(s.tc, (struct sockaddr *)&ua, &ul) &&
			      ntohs(ua.sin_port) == s.tc_port && !listen(s.tc, 1) &&
			      (nc = tcp_connect(s.tc_port, 0)) >= 0,
		      "the bound TCP socket still holds port %u (and can listen there)", s.tc_port);
	}
	st = -1;
	c = waitpid(c, &st, 0) == c ? c : -1;
	CHECK(c > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "child C's own checks (wait status 0x%x)", st);
	return prog_done();
}
