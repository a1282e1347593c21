// SPDX-License-Identifier: MIT
/*
 * sockopts: sockets with non-default options of every kind amber keeps.
 * Each option is set, read back with getsockopt and recorded; after go each
 * is read again and must equal the record.  Also, by behaviour:
 *   - two TCP listeners in one SO_REUSEPORT group on port 47110: new
 *     connections after restore reach both;
 *   - classic BPF filters (drop datagrams starting with 'X') on a UDP and a
 *     unix dgram socket, locked: after restore 'X...' is dropped, the rest
 *     delivered, and the filter cannot be detached;
 *   - a UDP socket bound with IP_FREEBIND to 192.0.2.1, not on the machine;
 *   - an established TCP connection with options on both ends, which still
 *     carries data;
 *   - UDP and TCP over IPv6, unix socketpairs of stream and dgram type.
 *
 *   sockopts DIR       (dump/restore with --tcp-established)
 *   sockopts DIR mc    UDP sockets that joined 239.1.2.3 and ff12::4711 on lo as well
 *   sockopts DIR mcsrc a UDP socket that joined 239.1.2.3 from one source only
 *                      (which amber refuses to dump)
 *   sockopts DIR optid a UDP socket with SOF_TIMESTAMPING_OPT_ID (refused too)
 */
#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/net_tstamp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include "prog.h"

#define PORT_RP	  47110 /* the SO_REUSEPORT group */
#define PORT_U4	  47111
#define PORT_FB	  47112
#define PORT_U6	  47113
#define PORT_L6	  47114
#define PORT_MC	  47115
#define PORT_MC6  47116
#define FOREIGN	  "192.0.2.1" /* TEST-NET-1: on no interface */
#define MAX_RECS  128
#define N_CLIENTS 24

struct rec {
	int fd, level, opt;
	const char *what;
	socklen_t len;
	unsigned char val[64];
};

static struct rec recs[MAX_RECS];
static int nr_recs;

/* Set an option, read back what the kernel made of it, and remember that. */
static void set_rec(int fd, const char *sk, int level, int opt, const char *name, const void *v,
		    socklen_t len)
{
	struct rec *r = &recs[nr_recs++];
	static char what[MAX_RECS][96];

	if (setsockopt(fd, level, opt, v, len))
		prog_die("setsockopt %s on %s", name, sk);
	snprintf(what[r - recs], sizeof(what[0]), "%s on %s", name, sk);
	*r = (struct rec){.fd = fd, .level = level, .opt = opt, .what = what[r - recs]};
	r->len = sizeof(r->val);
	if (getsockopt(fd, level, opt, r->val, &r->len))
		prog_die("getsockopt %s on %s", name, sk);
}

#define SET_INT(fd, sk, level, opt, v) set_rec(fd, sk, level, opt, #opt, &(int){v}, sizeof(int))
#define SET(fd, sk, level, opt, v)     set_rec(fd, sk, level, opt, #opt, &(v), sizeof(v))

static int sock(int family, int type)
{
	int fd = socket(family, type | SOCK_CLOEXEC, 0);

	if (fd < 0)
		prog_die("socket");
	return fd;
}

static void bind4(int fd, const char *addr, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, addr, &a.sin_addr);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)))
		prog_die("bind %s:%d", addr, port);
}

static void bind6(int fd, int port)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6,
				 .sin6_port = htons(port),
				 .sin6_addr = IN6ADDR_LOOPBACK_INIT};

	if (bind(fd, (struct sockaddr *)&a, sizeof(a)))
		prog_die("bind [::1]:%d", port);
}

static int connect4(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = sock(AF_INET, SOCK_STREAM);

	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		prog_die("connect 127.0.0.1:%d", port);
	return fd;
}

/* Drop what starts with 'X' at offset off (UDP: after the 8-byte header). */
static void attach_filter(int fd, const char *sk, unsigned off)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, off),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 'X', 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0),
		BPF_STMT(BPF_RET | BPF_K, 0xffff),
	};
	struct sock_fprog p = {.len = 4, .filter = f};
	struct sock_filter got[8];
	socklen_t n = 8;

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &p, sizeof(p)))
		prog_die("SO_ATTACH_FILTER on %s", sk);
	if (getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, got, &n) || n != 4)
		prog_die("SO_GET_FILTER on %s", sk);
	SET_INT(fd, sk, SOL_SOCKET, SO_LOCK_FILTER, 1);
}

/* send "Xdrop" then "keep" to fd from from; fd must receive "keep" only */
static void check_filter(int from, int fd, const struct sockaddr *to, socklen_t tolen,
			 const char *sk)
{
	char buf[64];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	if (sendto(from, "Xdrop", 5, 0, to, tolen) != 5 ||
	    sendto(from, "keep", 4, 0, to, tolen) != 4)
		prog_die("send to %s", sk);
	n = poll(&p, 1, 5000) == 1 ? recv(fd, buf, sizeof(buf), MSG_DONTWAIT) : -1;
	CHECK(n == 4 && !memcmp(buf, "keep", 4), "%s: the filter dropped 'Xdrop' and let 'keep' in",
	      sk);
	p.revents = 0;
	CHECK(poll(&p, 1, 200) == 0, "%s: nothing else arrived", sk);
	CHECK(setsockopt(fd, SOL_SOCKET, SO_DETACH_FILTER, &(int){0}, sizeof(int)) &&
		      errno == EPERM,
	      "%s: the filter is still locked (SO_DETACH_FILTER: %s)", sk, strerror(errno));
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv), l1, l2, l6, c, a, u4, fb, u6, up[2], ud[2], tx;
	int mc = -1, mc6 = -1, tc;
	bool with_mc = argc > first && !strcmp(argv[first], "mc");
	bool mc_src = argc > first && !strcmp(argv[first], "mcsrc");
	bool opt_id = argc > first && !strcmp(argv[first], "optid");
	int sp[2];
	struct linger lg = {1, 7}, lg2 = {1, 0};
	struct timeval rt = {2, 500000}, st = {3, 0};
	struct so_timestamping ts = {.flags = SOF_TIMESTAMPING_RX_SOFTWARE |
					      SOF_TIMESTAMPING_SOFTWARE};
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(PORT_U4)};
	struct sockaddr_in6 sa6 = {0};
	socklen_t len;
	int hits[2] = {0, 0};
	char buf[64];

	/* the SO_REUSEPORT group, and most of SOL_SOCKET, IP and TCP */
	l1 = sock(AF_INET, SOCK_STREAM);
	l2 = sock(AF_INET, SOCK_STREAM);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_REUSEPORT, 1);
	SET_INT(l2, "listener 2", SOL_SOCKET, SO_REUSEPORT, 1);
	SET_INT(l1, "listener 1", SOL_IP, IP_TOS, 0x20);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_PRIORITY, 5);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_MARK, 42);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_RCVBUF, 65536);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_SNDBUF, 98304);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_RCVLOWAT, 3);
	SET(l1, "listener 1", SOL_SOCKET, SO_RCVTIMEO, rt);
	SET(l1, "listener 1", SOL_SOCKET, SO_SNDTIMEO, st);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_KEEPALIVE, 1);
	SET(l1, "listener 1", SOL_SOCKET, SO_LINGER, lg);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_OOBINLINE, 1);
	SET_INT(l1, "listener 1", SOL_SOCKET, SO_TIMESTAMP, 1);
	SET_INT(l1, "listener 1", SOL_IP, IP_TTL, 33);
	SET_INT(l1, "listener 1", SOL_IP, IP_RECVERR, 1);
	SET_INT(l1, "listener 1", SOL_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_NODELAY, 1);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_USER_TIMEOUT, 12345);
	set_rec(l1, "listener 1", SOL_TCP, TCP_CONGESTION, "TCP_CONGESTION", "reno", 4);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_MAXSEG, 1200);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_NOTSENT_LOWAT, 100000);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_KEEPIDLE, 77);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_KEEPINTVL, 11);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_KEEPCNT, 4);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_FASTOPEN, 5);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_LINGER2, 33);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_WINDOW_CLAMP, 40000);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_THIN_LINEAR_TIMEOUTS, 1);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_SYNCNT, 3);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_SAVE_SYN, 1);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_INQ, 1);
	SET_INT(l1, "listener 1", SOL_TCP, TCP_TX_DELAY, 10);
	SET_INT(l2, "listener 2", SOL_IP, IP_BIND_ADDRESS_NO_PORT, 1);
	SET_INT(l2, "listener 2", SOL_IP, IP_TRANSPARENT, 1);
	SET_INT(l2, "listener 2", SOL_IP, IP_PKTINFO, 1);
	SET_INT(l2, "listener 2", SOL_TCP, TCP_CORK, 1);
	bind4(l1, "127.0.0.1", PORT_RP);
	bind4(l2, "127.0.0.1", PORT_RP);
	if (listen(l1, 64) || listen(l2, 64))
		prog_die("listen");

	/* an established connection with options on both ends */
	c = connect4(PORT_RP);
	{
		struct pollfd p[2] = {{.fd = l1, .events = POLLIN}, {.fd = l2, .events = POLLIN}};

		if (poll(p, 2, 5000) < 1)
			prog_die("accept: nothing");
		a = accept4(p[0].revents ? l1 : l2, NULL, NULL, SOCK_CLOEXEC);
		if (a < 0)
			prog_die("accept");
	}
	SET_INT(c, "client", SOL_SOCKET, SO_KEEPALIVE, 1);
	SET_INT(c, "client", SOL_TCP, TCP_KEEPIDLE, 99);
	SET_INT(c, "client", SOL_TCP, TCP_USER_TIMEOUT, 5000);
	/* IP_TOS sets the priority too: the last word is SO_PRIORITY's */
	SET_INT(c, "client", SOL_IP, IP_TOS, 0x08);
	SET_INT(c, "client", SOL_SOCKET, SO_PRIORITY, 3);
	SET_INT(c, "client", SOL_TCP, TCP_NODELAY, 1);
	set_rec(c, "client", SOL_TCP, TCP_CONGESTION, "TCP_CONGESTION", "reno", 4);
	SET(c, "client", SOL_SOCKET, SO_LINGER, lg2);
	SET_INT(c, "client", SOL_SOCKET, SO_SNDBUF, 131072);
	SET_INT(a, "accepted", SOL_TCP, TCP_NOTSENT_LOWAT, 4096);
	SET(a, "accepted", SOL_SOCKET, SO_RCVTIMEO, rt);
	SET_INT(a, "accepted", SOL_TCP, TCP_LINGER2, 20);
	SET_INT(a, "accepted", SOL_IP, IP_TTL, 17);
	SET_INT(a, "accepted", SOL_TCP, TCP_KEEPCNT, 2);

	/* a TCP socket neither bound nor connected */
	tc = sock(AF_INET6, SOCK_STREAM);
	SET_INT(tc, "unbound tcp6", SOL_TCP, TCP_FASTOPEN_CONNECT, 1);
	SET_INT(tc, "unbound tcp6", SOL_TCP, TCP_FASTOPEN_NO_COOKIE, 1);
	SET_INT(tc, "unbound tcp6", SOL_SOCKET, SO_KEEPALIVE, 1);
	SET_INT(tc, "unbound tcp6", SOL_IPV6, IPV6_V6ONLY, 1);
	SET_INT(tc, "unbound tcp6", SOL_IP, IP_TOS, 0x04);

	/* UDP v4: a filter, a device, IP options */
	u4 = sock(AF_INET, SOCK_DGRAM);
	SET_INT(u4, "udp4", SOL_SOCKET, SO_BROADCAST, 1);
	set_rec(u4, "udp4", SOL_SOCKET, SO_BINDTODEVICE, "SO_BINDTODEVICE", "lo", 3);
	SET_INT(u4, "udp4", SOL_IP, IP_PKTINFO, 1);
	SET_INT(u4, "udp4", SOL_IP, IP_RECVERR, 1);
	SET_INT(u4, "udp4", SOL_IP, IP_TOS, 0x10);
	SET_INT(u4, "udp4", SOL_IP, IP_MTU_DISCOVER, IP_PMTUDISC_PROBE);
	SET_INT(u4, "udp4", SOL_SOCKET, SO_TIMESTAMPNS, 1);
	SET_INT(u4, "udp4", SOL_SOCKET, SO_RCVBUF, 30000);
	SET_INT(u4, "udp4", SOL_IP, IP_RECVTOS, 1);
	SET_INT(u4, "udp4", SOL_IP, IP_RECVTTL, 1);
	SET_INT(u4, "udp4", SOL_IP, IP_RECVORIGDSTADDR, 1);
	SET_INT(u4, "udp4", SOL_SOCKET, SO_RXQ_OVFL, 1);
	SET_INT(u4, "udp4", SOL_SOCKET, SO_ZEROCOPY, 1);
	SET_INT(u4, "udp4", IPPROTO_UDP, UDP_SEGMENT, 1000);
	SET_INT(u4, "udp4", IPPROTO_UDP, UDP_GRO, 1);
	SET_INT(u4, "udp4", IPPROTO_UDP, UDP_CORK, 1);
	bind4(u4, "127.0.0.1", PORT_U4);
	attach_filter(u4, "udp4", 8);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);

	/* IP_FREEBIND: an address on no interface */
	fb = sock(AF_INET, SOCK_DGRAM);
	SET_INT(fb, "freebind", SOL_IP, IP_FREEBIND, 1);
	bind4(fb, FOREIGN, PORT_FB);

	/* IPv6: UDP and a TCP listener */
	u6 = sock(AF_INET6, SOCK_DGRAM);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_V6ONLY, 1);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_TCLASS, 0x28);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_UNICAST_HOPS, 9);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_RECVPKTINFO, 1);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_RECVERR, 1);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
	SET(u6, "udp6", SOL_SOCKET, SO_TIMESTAMPING, ts);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_RECVTCLASS, 1);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_RECVHOPLIMIT, 1);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_DONTFRAG, 1);
	SET_INT(u6, "udp6", SOL_IPV6, IPV6_RECVORIGDSTADDR, 1);
	bind6(u6, PORT_U6);
	l6 = sock(AF_INET6, SOCK_STREAM);
	SET_INT(l6, "listener6", SOL_IPV6, IPV6_TCLASS, 0x48);
	SET_INT(l6, "listener6", SOL_TCP, TCP_DEFER_ACCEPT, 3);
	SET_INT(l6, "listener6", SOL_TCP, TCP_KEEPCNT, 7);
	SET_INT(l6, "listener6", SOL_SOCKET, SO_REUSEADDR, 1);
	bind6(l6, PORT_L6);
	if (listen(l6, 8))
		prog_die("listen6");

	/* unix: a stream pair and a filtered dgram pair */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, up) ||
	    socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ud))
		prog_die("socketpair");
	SET_INT(up[0], "unix stream", SOL_SOCKET, SO_PASSCRED, 1);
	SET_INT(up[0], "unix stream", SOL_SOCKET, SO_PASSSEC, 1);
	SET(up[0], "unix stream", SOL_SOCKET, SO_SNDTIMEO, st);
	SET_INT(up[0], "unix stream", SOL_SOCKET, SO_PRIORITY, 2);
	SET_INT(up[1], "unix stream peer", SOL_SOCKET, SO_KEEPALIVE, 1);
	SET_INT(up[1], "unix stream peer", SOL_SOCKET, SO_RCVLOWAT, 5);
	SET_INT(up[1], "unix stream peer", SOL_SOCKET, SO_TIMESTAMPNS_NEW, 1);
	SET_INT(up[1], "unix stream peer", SOL_SOCKET, SO_SELECT_ERR_QUEUE, 1);
	SET_INT(up[0], "unix stream", SOL_SOCKET, SO_TIMESTAMP_NEW, 1);
	SET(ud[1], "unix dgram peer", SOL_SOCKET, SO_TIMESTAMPING_NEW, ts);
	SET_INT(ud[0], "unix dgram", SOL_SOCKET, SO_TIMESTAMP, 1);
	SET_INT(ud[0], "unix dgram", SOL_SOCKET, SO_MARK, 7);
	SET_INT(ud[0], "unix dgram", SOL_SOCKET, SO_PASSCRED, 1);
	attach_filter(ud[0], "unix dgram", 0);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp))
		prog_die("socketpair seqpacket");
	SET_INT(sp[0], "unix seqpacket", SOL_SOCKET, SO_PASSCRED, 1);
	SET(sp[0], "unix seqpacket", SOL_SOCKET, SO_LINGER, lg);
	SET_INT(sp[1], "unix seqpacket peer", SOL_SOCKET, SO_RCVLOWAT, 9);
	if (opt_id) {
		struct so_timestamping id = {.flags = SOF_TIMESTAMPING_TX_SOFTWARE |
						      SOF_TIMESTAMPING_SOFTWARE |
						      SOF_TIMESTAMPING_OPT_ID};

		tx = sock(AF_INET, SOCK_DGRAM);
		SET(tx, "udp with OPT_ID", SOL_SOCKET, SO_TIMESTAMPING, id);
	}

	if (with_mc) {
		struct ip_mreqn m = {.imr_ifindex = (int)if_nametoindex("lo")};

		mc = sock(AF_INET, SOCK_DGRAM);
		SET_INT(mc, "multicast", SOL_SOCKET, SO_REUSEADDR, 1);
		inet_pton(AF_INET, "239.1.2.3", &m.imr_multiaddr);
		bind4(mc, "0.0.0.0", PORT_MC);
		if (setsockopt(mc, SOL_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)))
			prog_die("IP_ADD_MEMBERSHIP 239.1.2.3 on lo");
		SET_INT(mc, "multicast", SOL_IP, IP_MULTICAST_TTL, 3);
		SET_INT(mc, "multicast", SOL_IP, IP_MULTICAST_LOOP, 1);

		struct ipv6_mreq m6 = {.ipv6mr_interface = m.imr_ifindex};

		mc6 = sock(AF_INET6, SOCK_DGRAM);
		inet_pton(AF_INET6, "ff12::4711", &m6.ipv6mr_multiaddr);
		sa6 = (struct sockaddr_in6){.sin6_family = AF_INET6, .sin6_port = htons(PORT_MC6)};
		if (bind(mc6, (struct sockaddr *)&sa6, sizeof(sa6)))
			prog_die("bind [::]:%d", PORT_MC6);
		if (setsockopt(mc6, SOL_IPV6, IPV6_ADD_MEMBERSHIP, &m6, sizeof(m6)))
			prog_die("IPV6_ADD_MEMBERSHIP ff12::4711 on lo");
		SET_INT(mc6, "multicast6", SOL_IPV6, IPV6_MULTICAST_IF, m.imr_ifindex);
		SET_INT(mc6, "multicast6", SOL_IPV6, IPV6_MULTICAST_HOPS, 2);
	}
	if (mc_src) {
		struct ip_mreq_source m = {0};

		mc = sock(AF_INET, SOCK_DGRAM);
		inet_pton(AF_INET, "239.1.2.3", &m.imr_multiaddr);
		m.imr_interface.s_addr = htonl(INADDR_LOOPBACK);
		m.imr_sourceaddr.s_addr = htonl(INADDR_LOOPBACK);
		if (setsockopt(mc, SOL_IP, IP_ADD_SOURCE_MEMBERSHIP, &m, sizeof(m)))
			prog_die("IP_ADD_SOURCE_MEMBERSHIP 239.1.2.3 from 127.0.0.1");
	}

	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		recs[nr_recs / 2].val[0] ^= 1;
	if (prog_sabotage() && mc6 >= 0) {
		struct ipv6_mreq m6 = {.ipv6mr_interface = if_nametoindex("lo")};

		inet_pton(AF_INET6, "ff12::4711", &m6.ipv6mr_multiaddr);
		setsockopt(mc6, SOL_IPV6, IPV6_DROP_MEMBERSHIP, &m6, sizeof(m6));
	}
	for (int i = 0; i < nr_recs; i++) {
		struct rec *r = &recs[i];
		unsigned char got[64];
		socklen_t n = sizeof(got);
		int ok = !getsockopt(r->fd, r->level, r->opt, got, &n);

		CHECK(ok && n == r->len && !memcmp(got, r->val, n), "%s kept (%d bytes, first %d)",
		      r->what, (int)n, r->len >= 4 ? *(int *)r->val : r->val[0]);
	}

	/* the group: new connections reach both listeners */
	for (int i = 0; i < N_CLIENTS; i++) {
		int k = connect4(PORT_RP), s;
		struct pollfd p[2] = {{.fd = l1, .events = POLLIN}, {.fd = l2, .events = POLLIN}};

		if (poll(p, 2, 5000) < 1)
			break;
		s = accept4(p[0].revents ? l1 : l2, NULL, NULL, SOCK_CLOEXEC);
		hits[p[0].revents ? 0 : 1]++;
		close(s);
		close(k);
	}
	CHECK(hits[0] && hits[1] && hits[0] + hits[1] == N_CLIENTS,
	      "SO_REUSEPORT group: %d connections to listener 1, %d to listener 2", hits[0],
	      hits[1]);

	/* the connection carries data */
	CHECK(send(a, "ping", 4, 0) == 4 && recv(c, buf, sizeof(buf), 0) == 4 &&
		      !memcmp(buf, "ping", 4),
	      "the established connection carries data");

	/* filters */
	tx = sock(AF_INET, SOCK_DGRAM);
	check_filter(tx, u4, (struct sockaddr *)&sa, sizeof(sa), "udp4");
	close(tx);
	check_filter(ud[1], ud[0], NULL, 0, "unix dgram");

	/* the foreign address */
	len = sizeof(sa);
	CHECK(!getsockname(fb, (struct sockaddr *)&sa, &len) &&
		      !strcmp(inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf)), FOREIGN) &&
		      ntohs(sa.sin_port) == PORT_FB,
	      "IP_FREEBIND socket bound to %s:%d", buf, ntohs(sa.sin_port));
	len = sizeof(sa6);
	CHECK(!getsockname(u6, (struct sockaddr *)&sa6, &len) && ntohs(sa6.sin6_port) == PORT_U6,
	      "udp6 bound to port %d", ntohs(sa6.sin6_port));

	if (with_mc) {
		struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(PORT_MC)};
		struct pollfd p = {.fd = mc, .events = POLLIN};
		struct in_addr lo = {htonl(INADDR_LOOPBACK)};
		ssize_t n = -1;

		tx = sock(AF_INET, SOCK_DGRAM);
		inet_pton(AF_INET, "239.1.2.3", &to.sin_addr);
		setsockopt(tx, SOL_IP, IP_MULTICAST_IF, &lo, sizeof(lo));
		if (sendto(tx, "mcast", 5, 0, (struct sockaddr *)&to, sizeof(to)) == 5 &&
		    poll(&p, 1, 5000) == 1)
			n = recv(mc, buf, sizeof(buf), MSG_DONTWAIT);
		CHECK(n == 5, "the multicast group 239.1.2.3 on lo is still joined");
		close(tx);

		/* lo has no IPv6 multicast route: the kernel's word on the membership */
		struct group_filter gf = {.gf_interface = if_nametoindex("lo")};
		struct sockaddr_in6 *g6 = (struct sockaddr_in6 *)&gf.gf_group;

		len = sizeof(gf);
		g6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, "ff12::4711", &g6->sin6_addr);
		CHECK(!getsockopt(mc6, SOL_IPV6, MCAST_MSFILTER, &gf, &len) &&
			      gf.gf_fmode == MCAST_EXCLUDE && !gf.gf_numsrc,
		      "the multicast group ff12::4711 on lo is still joined (%s)", strerror(errno));
	}
	return prog_done();
}
