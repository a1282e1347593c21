// SPDX-License-Identifier: MIT
/*
 * Inet sockets (IPv4, IPv6): TCP listening and unconnected sockets, UDP
 * sockets (bound, connected, with queued datagrams) and, with
 * --tcp-established, established TCP connections through TCP_REPAIR.
 *
 * An established connection is dumped in repair mode on amber's dup:
 * sequence numbers, both queues (MSG_PEEK), options and window.  The socket
 * stays in repair mode while the dump kills the tree, so closing it sends
 * neither FIN nor RST; if the process keeps running (-R, or a failed dump)
 * repair mode is turned off again without a packet.  Between the dump and
 * the restore the connection has no socket: the network lock (netlock.c)
 * drops its packets from just before repair mode until the restore, so that
 * the peer gets no reset.
 *
 * Restore builds every inet socket of the image at once (fd_type.prepare):
 * listeners and unconnected sockets, UDP sockets (refilled from a temporary
 * socket, then connected), then established connections in repair mode
 * (sequences, bind, connect without a packet, options, timestamps,
 * queues, window) and the FINs they had seen (sk-tcp.c), and only then is
 * the network unlocked and repair mode turned off, so that connections
 * between two restored sockets find their peer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "amber.h"
#include "log.h"
#include "netlock.h"
#include "sk.h"
#include "sk-tcp.h"
#include "sys.h"

#ifndef TCP_REPAIR_OFF_NO_WP
#define TCP_REPAIR_OFF_NO_WP -1
#endif
#define CHUNK (64 << 10)

static const char *const tcp_states[] = {
	[TCP_ESTABLISHED] = "ESTABLISHED",
	[TCP_SYN_SENT] = "SYN_SENT",
	[TCP_SYN_RECV] = "SYN_RECV",
	[TCP_FIN_WAIT1] = "FIN_WAIT1",
	[TCP_FIN_WAIT2] = "FIN_WAIT2",
	[TCP_TIME_WAIT] = "TIME_WAIT",
	[TCP_CLOSE] = "CLOSE",
	[TCP_CLOSE_WAIT] = "CLOSE_WAIT",
	[TCP_LAST_ACK] = "LAST_ACK",
	[TCP_LISTEN] = "LISTEN",
	[TCP_CLOSING] = "CLOSING",
};

static const char *state_name(unsigned s)
{
	return s < sizeof(tcp_states) / sizeof(tcp_states[0]) && tcp_states[s] ? tcp_states[s]
									       : "?";
}

/* Is inode ino in column col (from 1) of a /proc/net table (amber's network namespace)? */
static bool listed_in(const char *table, int col, uint64_t ino)
{
	char line[512];
	bool found = false;
	FILE *fp = sys_fopen_read(table);

	if (!fp)
		return false;
	while (!found && fgets(line, sizeof(line), fp)) {
		char *tok, *save = NULL;
		int i = 1;

		for (tok = strtok_r(line, " \t\n", &save); tok && i < col;
		     tok = strtok_r(NULL, " \t\n", &save))
			i++;
		found = tok && strtoull(tok, NULL, 10) == ino;
	}
	fclose(fp);
	return found;
}

/*
 * Connected, listening and bound TCP/UDP sockets are listed in
 * /proc/net/{tcp,udp}{,6}; a socket that is not bound yet (or a TCP one
 * only bound) is listed nowhere, so a socket of no other known family is
 * taken for one too: inet_dump() checks its family and refuses the rest.
 * UDP-Lite, raw and ping sockets are inet ones too (inet_extra(), sk-raw.c).
 */
static bool inet_match(const char *link, const struct stat *st)
{
	static const struct {
		const char *table;
		int col;
	} inet[] = {{"/proc/net/tcp", 10},
		    {"/proc/net/tcp6", 10},
		    {"/proc/net/udp", 10},
		    {"/proc/net/udp6", 10}},
	  other[] = {{"/proc/net/netlink", 10}, {"/proc/net/packet", 9}};

	if (!S_ISSOCK(st->st_mode))
		return false;
	for (size_t i = 0; i < sizeof(inet) / sizeof(inet[0]); i++)
		if (listed_in(inet[i].table, inet[i].col, st->st_ino))
			return true;
	if (unix_sk_type.match(link, st))
		return false;
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (listed_in(other[i].table, other[i].col, st->st_ino))
			return false;
	return true;
}

/*
 * One TCP socket as inet_diag lists it: its addresses (an IPv4 one in the
 * first 4 bytes), inode (0: no file, as a connection waiting in an accept
 * queue), state, queue lengths (a listener's: pending connections and
 * backlog), sk_shutdown bits, and how long ago it last received data.
 */
struct diag_sk {
	int family;
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	uint64_t ino;
	uint8_t state, shutdown;
	uint32_t rqueue, wqueue;
	uint32_t idle_ms; /* tcpi_last_data_recv */
};

/* Called for each socket listed; returns true to stop the walk. */
typedef bool (*diag_fn)(const struct diag_sk *d, void *arg);

/* Every TCP socket of family in one of states (a mask), in amber's network namespace. */
static int diag_walk(int family, uint32_t states, diag_fn fn, void *arg)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
		.nlh = {.nlmsg_len = sizeof(req),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
		.r = {.sdiag_family = (uint8_t)family,
		      .sdiag_protocol = IPPROTO_TCP,
		      .idiag_ext = 1 << (INET_DIAG_INFO - 1),
		      .idiag_states = states},
	};
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
	static char buf[32768];
	int s, ret = 0;
	bool done = false, stop = false;

	s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0)
		return -errno;
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
		ret = -errno;
		goto close_sock;
	}
	while (!done) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0) {
			ret = -errno;
			break;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			struct inet_diag_msg *m = NLMSG_DATA(h);
			struct rtattr *a = (struct rtattr *)(m + 1);
			int alen = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*m));
			struct diag_sk d = {.family = m->idiag_family};

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = true;
				break;
			}
			if (stop)
				continue; /* read to the end of the dump, not looked at */
			memcpy(d.src, m->id.idiag_src, sizeof(d.src));
			memcpy(d.dst, m->id.idiag_dst, sizeof(d.dst));
			d.sport = ntohs(m->id.idiag_sport);
			d.dport = ntohs(m->id.idiag_dport);
			d.ino = m->idiag_inode;
			d.state = m->idiag_state;
			d.rqueue = m->idiag_rqueue;
			d.wqueue = m->idiag_wqueue;
			for (; RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				const struct tcp_info *ti = RTA_DATA(a);

				if (a->rta_type == INET_DIAG_SHUTDOWN && RTA_PAYLOAD(a) >= 1)
					d.shutdown = *(uint8_t *)RTA_DATA(a);
				if (a->rta_type == INET_DIAG_INFO &&
				    RTA_PAYLOAD(a) >=
					    offsetof(struct tcp_info, tcpi_last_data_recv) +
						    sizeof(ti->tcpi_last_data_recv))
					d.idle_ms = ti->tcpi_last_data_recv;
			}
			stop = fn(&d, arg);
		}
	}
close_sock:
	close(s);
	return ret;
}

/*
 * What inet_diag tells of TCP socket ino in one of states (a mask): a
 * listener's backlog and pending connections, a connection's queue lengths,
 * and its sk_shutdown bits.
 */
struct tcp_diag {
	uint32_t rqueue, wqueue;
	uint8_t shutdown;
	uint8_t dst[16]; /* the peer's address (a connect in progress has no getpeername) */
	uint16_t dport;
	bool found;
	uint64_t ino;
};

static bool diag_by_ino(const struct diag_sk *s, void *arg)
{
	struct tcp_diag *d = arg;

	if (s->ino != d->ino)
		return false;
	memcpy(d->dst, s->dst, sizeof(d->dst));
	d->dport = s->dport;
	d->rqueue = s->rqueue;
	d->wqueue = s->wqueue;
	d->shutdown = s->shutdown;
	d->found = true;
	return true;
}

static int tcp_diag(int family, uint64_t ino, uint32_t states, struct tcp_diag *d)
{
	int ret;

	d->ino = ino;
	d->found = false;
	ret = diag_walk(family, states, diag_by_ino, d);
	return ret ? ret : d->found ? 0 : -ENOENT;
}

int inet_put_addr(InetSkEntry *e, const struct sockaddr_storage *ss, bool dst)
{
	const void *a;
	size_t len;
	unsigned port;
	ProtobufCBinaryData *b = dst ? &e->dst_addr : &e->src_addr;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		a = &in->sin_addr;
		len = 4;
		port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		a = &in6->sin6_addr;
		len = 16;
		port = ntohs(in6->sin6_port);
	}
	b->data = malloc(len);
	if (!b->data)
		return -ENOMEM;
	memcpy(b->data, a, len);
	b->len = len;
	if (dst) {
		e->has_dst_addr = e->has_dst_port = 1;
		e->dst_port = port;
	} else {
		e->src_port = port;
	}
	return 0;
}

socklen_t inet_get_addr(const InetSkEntry *e, bool dst, struct sockaddr_storage *ss)
{
	const ProtobufCBinaryData *b = dst ? &e->dst_addr : &e->src_addr;
	unsigned port = dst ? e->dst_port : e->src_port;

	memset(ss, 0, sizeof(*ss));
	if (e->family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		if (b->len == 4)
			memcpy(&in->sin_addr, b->data, 4);
		return sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		if (b->len == 16)
			memcpy(&in6->sin6_addr, b->data, 16);
		return sizeof(*in6);
	}
}

/* A wildcard address as a destination: the loopback one of its family. */
void inet_any_to_loopback(struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		struct sockaddr_in *in = (void *)ss;

		if (in->sin_addr.s_addr == htonl(INADDR_ANY))
			in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;

		if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
			in6->sin6_addr = in6addr_loopback;
	}
}

const char *inet_show_addr(const InetSkEntry *e, bool dst)
{
	static char out[2][INET6_ADDRSTRLEN + 16];
	static int k;
	char a[INET6_ADDRSTRLEN] = "?", *o = out[k++ % 2];
	const ProtobufCBinaryData *b = dst ? &e->dst_addr : &e->src_addr;

	if (b->len == 4 || b->len == 16)
		inet_ntop(b->len == 4 ? AF_INET : AF_INET6, b->data, a, sizeof(a));
	snprintf(o, sizeof(out[0]), e->family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
		 dst ? e->dst_port : e->src_port);
	return o;
}

/* ---- repair mode around the dump ---- */

struct repaired {
	int pidfd; /* the process holding the socket */
	int fd;	   /* amber's dup: keeps the socket in repair mode until exit */
	int reuse; /* SO_REUSEADDR, which repair mode overwrites */
};

static struct repaired *repaired;
static size_t nr_repaired;

static int repair_off(int fd, int reuse)
{
	int off = TCP_REPAIR_OFF_NO_WP;

	if (setsockopt(fd, SOL_TCP, TCP_REPAIR, &off, sizeof(off)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse)))
		return -errno;
	return 0;
}

/*
 * Before a failed dump lets the processes run (dump_undo), or at exit: a
 * socket whose process is dead (the dump killed the tree) is closed still in
 * repair mode, so it goes without FIN or RST; one whose process lives on is
 * put back in normal mode first (a send in repair mode fails with EINVAL).
 */
static void repair_release(void)
{
	for (size_t i = 0; i < nr_repaired; i++) {
		struct pollfd p = {.fd = repaired[i].pidfd, .events = POLLIN};
		bool dead = poll(&p, 1, 0) == 1;

		if (!dead && repair_off(repaired[i].fd, repaired[i].reuse))
			pr_err("cannot turn TCP repair mode off on a socket of the running "
			       "process: "
			       "%m; its connection is stuck, restart it");
		close(repaired[i].fd);
		close(repaired[i].pidfd);
	}
	nr_repaired = 0;
}

static int repair_keep(struct dump_ctx *ctx, int dup, int reuse)
{
	struct repaired *n = realloc(repaired, (nr_repaired + 1) * sizeof(*n));
	int fd, pidfd;

	if (!n)
		return -ENOMEM;
	repaired = n;
	fd = fcntl(dup, F_DUPFD_CLOEXEC, 3);
	pidfd = fcntl(ctx->pidfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0 || pidfd < 0) {
		if (fd >= 0)
			close(fd);
		if (pidfd >= 0)
			close(pidfd);
		return -errno;
	}
	if (!nr_repaired && atexit(repair_release)) {
		close(fd);
		close(pidfd);
		return -ENOMEM;
	}
	repaired[nr_repaired++] = (struct repaired){pidfd, fd, reuse};
	ctx->tree->kill_waits = true; /* repair_release() keeps it for dead processes */
	return 0;
}

static int tcp_getopt(int fd, int opt, void *val, socklen_t len, const char *what, const char *name)
{
	if (getsockopt(fd, SOL_TCP, opt, val, &len)) {
		pr_err("%s: cannot read %s: %m", what, name);
		return -errno;
	}
	return 0;
}

static int set_repair_queue(int fd, int q, const char *what)
{
	if (setsockopt(fd, SOL_TCP, TCP_REPAIR_QUEUE, &q, sizeof(q))) {
		pr_err("%s: cannot select TCP repair queue %d: %m", what, q);
		return -errno;
	}
	return 0;
}

/* Peek at len bytes of the selected repair queue. */
static int peek_queue(int fd, uint32_t len, ProtobufCBinaryData *b, const char *what)
{
	ssize_t n;

	b->len = 0;
	b->data = malloc(len ? len : 1);
	if (!b->data)
		return -ENOMEM;
	if (!len)
		return 0;
	n = recv(fd, b->data, len, MSG_PEEK | MSG_DONTWAIT);
	if (n != (ssize_t)len) {
		/* a short peek: stopped at the mark of urgent data read with MSG_OOB */
		pr_err("%s: peeked %zd of the %u queued bytes: %m%s", what, n, len,
		       n >= 0 && n < (ssize_t)len ? " (urgent data read with MSG_OOB still marks "
						    "the queue: have the process read up to it)"
						  : "");
		return n < 0 ? -errno : -EIO;
	}
	b->len = len;
	return 0;
}

/*
 * Urgent data (MSG_OOB) waiting to be read: TCP repair cannot queue it again
 * (nor its mark), so it is refused.  A peek with MSG_OOB says: 1 byte, the
 * urgent byte is there; EAGAIN, the peer announced one that has not arrived;
 * EINVAL, none.  With SO_OOBINLINE the byte sits in the stream and only
 * its mark would be lost, but the peek says EINVAL whatever is pending: the
 * option is turned off for the peek (the process is frozen).
 */
static int check_urgent(int dup, const InetSkEntry *e, const char *what)
{
	int inl = 0, off = 0;
	socklen_t len = sizeof(inl);
	ssize_t n;
	char c;

	getsockopt(dup, SOL_SOCKET, SO_OOBINLINE, &inl, &len);
	if (inl && setsockopt(dup, SOL_SOCKET, SO_OOBINLINE, &off, sizeof(off))) {
		pr_err("%s: cannot look for urgent data: %m", what);
		return -errno;
	}
	n = recv(dup, &c, 1, MSG_OOB | MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && errno != EINVAL && errno != EAGAIN)
		pr_debug("%s: urgent data peek: %m", what);
	if (inl)
		setsockopt(dup, SOL_SOCKET, SO_OOBINLINE, &inl, sizeof(inl));
	if (n == 1 || (n < 0 && errno == EAGAIN)) {
		pr_err("%s: TCP connection %s -> %s has urgent data (MSG_OOB) %s, which amber "
		       "cannot restore (TCP repair has no urgent pointer); have the process "
		       "read it first",
		       what, inet_show_addr(e, false), inet_show_addr(e, true),
		       n == 1 ? "not read yet" : "announced by the peer and not arrived yet");
		return -EOPNOTSUPP;
	}
	return 0;
}

/*
 * A connect() in progress: only its addresses; the restore connects again
 * from the same address (a new SYN, new initial sequence number).  Data
 * sent with the SYN (TCP fast open) would be lost: refused.
 */
static int dump_syn_sent(uint64_t ino, InetSkEntry *e, const char *what)
{
	struct tcp_diag d = {0};
	size_t len = e->family == AF_INET ? 4 : 16;
	int ret;

	ret = tcp_diag((int)e->family, ino, 1 << TCP_SYN_SENT, &d);
	if (ret) {
		pr_err("%s: inet_diag cannot describe the TCP connect from %s: %s", what,
		       inet_show_addr(e, false), strerror(-ret));
		return ret;
	}
	e->dst_addr.data = malloc(len);
	if (!e->dst_addr.data)
		return -ENOMEM;
	memcpy(e->dst_addr.data, d.dst, len);
	e->dst_addr.len = len;
	e->has_dst_addr = e->has_dst_port = 1;
	e->dst_port = d.dport;
	if (d.wqueue > 1) {
		pr_err("%s: TCP connect %s -> %s in progress with %u bytes sent along its SYN "
		       "(TCP fast open), which amber cannot dump; dump again once it is "
		       "connected",
		       what, inet_show_addr(e, false), inet_show_addr(e, true), d.wqueue - 1);
		return -EOPNOTSUPP;
	}
	return 0;
}

/*
 * ---- connections waiting in a listener's accept queue ----
 *
 * The server's end of such a connection has no file, and only accept()
 * would read it, which a dump must not do.  When its client is a socket of
 * the tree and nothing was sent either way yet, the restore makes the
 * connection again: the listener first, then the client bound to its old
 * address and connect()ed afresh (a real handshake), one after another in
 * the order of the accept queue, before any process runs.  Only the
 * sequence numbers differ, which the program does not see.  The order is
 * the order of the handshakes, as the server's ends tell how long ago they
 * last received anything (their creation, since nothing came after).
 */

/* An address as IPv6 (an IPv4 one v4-mapped), to compare across families. */
static void as_v6(int family, const uint8_t *a, uint8_t out[16])
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};

	if (family == AF_INET) {
		memcpy(out, mapped, sizeof(mapped));
		memcpy(out + 12, a, 4);
	} else {
		memcpy(out, a, 16);
	}
}

static bool same_host(int fa, const uint8_t *a, int fb, const uint8_t *b)
{
	uint8_t x[16], y[16];

	as_v6(fa, a, x);
	as_v6(fb, b, y);
	return !memcmp(x, y, sizeof(x));
}

static bool is_wildcard(int family, const uint8_t *a)
{
	static const uint8_t zero[16];

	return !memcmp(a, zero, family == AF_INET ? 4 : 16);
}

/*
 * Is d a connection accepted on (or waiting on) listener l's address and
 * port?  It has its listener's family (v4-mapped addresses on a dual-stack
 * one), which tells a v6-only listener from an IPv4 one on the same port.
 */
static bool on_listener(const struct diag_sk *l, const struct diag_sk *d)
{
	return d->sport == l->sport && d->family == l->family &&
	       (is_wildcard(l->family, l->src) || same_host(l->family, l->src, d->family, d->src));
}

/* Is d the other end of c (addresses and ports crossed)? */
static bool crossed(const struct diag_sk *c, const struct diag_sk *d)
{
	return c->sport == d->dport && c->dport == d->sport &&
	       same_host(c->family, c->src, d->family, d->dst) &&
	       same_host(c->family, c->dst, d->family, d->src);
}

static const char *show_diag(const struct diag_sk *d, bool dst)
{
	static char out[4][INET6_ADDRSTRLEN + 16];
	static int k;
	char a[INET6_ADDRSTRLEN] = "?", *o = out[k++ % 4];

	inet_ntop(d->family, dst ? d->dst : d->src, a, sizeof(a));
	snprintf(o, sizeof(out[0]), d->family == AF_INET6 ? "[%s]:%u" : "%s:%u", a,
		 dst ? d->dport : d->sport);
	return o;
}

/* The states of a connection waiting in an accept queue (SYN_RECV: TCP fast open). */
#define WAITING_STATES (1u << TCP_ESTABLISHED | 1u << TCP_CLOSE_WAIT | 1u << TCP_SYN_RECV)
/* A socket that may be a client: connected or closing, not listening nor TIME_WAIT. */
#define CLIENT_STATES                                                                              \
	(1u << TCP_ESTABLISHED | 1u << TCP_FIN_WAIT1 | 1u << TCP_FIN_WAIT2 |                       \
	 1u << TCP_CLOSE_WAIT | 1u << TCP_LAST_ACK | 1u << TCP_CLOSING)

struct diag_find {
	const struct diag_sk *ref;
	bool (*match)(const struct diag_sk *ref, const struct diag_sk *d);
	struct diag_sk found;
	size_t n; /* how many matched (found: the first) */
};

static bool diag_find_one(const struct diag_sk *d, void *arg)
{
	struct diag_find *f = arg;

	if (!f->match(f->ref, d))
		return false;
	if (!f->n++)
		f->found = *d;
	return false;
}

/* The sockets of either family in states that match ref: how many (the first in *out), or -errno.
 */
static int diag_find(const struct diag_sk *ref, uint32_t states,
		     bool (*match)(const struct diag_sk *ref, const struct diag_sk *d),
		     struct diag_sk *out)
{
	struct diag_find f = {.ref = ref, .match = match};
	int ret = diag_walk(AF_INET, states, diag_find_one, &f);

	if (!ret)
		ret = diag_walk(AF_INET6, states, diag_find_one, &f);
	if (ret)
		return ret;
	if (f.n)
		*out = f.found;
	return (int)f.n;
}

static bool is_ino(const struct diag_sk *ref, const struct diag_sk *d)
{
	return d->ino == ref->ino;
}

/* A client's end: a socket with a file, its addresses crossed with the waiting end ref's. */
static bool is_client_of(const struct diag_sk *ref, const struct diag_sk *d)
{
	return d->ino && crossed(ref, d);
}

/* The server's end waiting in an accept queue: no file yet. */
static bool is_waiting_end_of(const struct diag_sk *ref, const struct diag_sk *d)
{
	return !d->ino && crossed(ref, d);
}

static bool is_listener_of(const struct diag_sk *ref, const struct diag_sk *d)
{
	return on_listener(d, ref);
}

/* Which process of the dumped tree holds socket ino, at which fd: its pid, or 0. */
static pid_t tree_holder(struct tree *t, uint64_t ino, int *fd)
{
	char want[48];

	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	for (size_t p = 0; p < t->nr_procs; p++) {
		pid_t pid = t->dprocs[p]->pid;
		char path[320], link[64];
		struct dirent *d;
		DIR *dir;

		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
		dir = sys_opendir(path);
		if (!dir)
			continue;
		while ((d = readdir(dir))) {
			if (d->d_name[0] < '0' || d->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "/proc/%d/fd/%s", pid, d->d_name);
			if (sys_readlink(path, link, sizeof(link)) > 0 && !strcmp(link, want)) {
				*fd = atoi(d->d_name);
				closedir(dir);
				return pid;
			}
		}
		closedir(dir);
	}
	return 0;
}

/* What was exchanged on a waiting connection that a new handshake would not bring back. */
static const char *exchanged(const struct diag_sk *waiting, const struct diag_sk *client)
{
	static char why[128];

	if (waiting->rqueue || client->wqueue)
		snprintf(why, sizeof(why), "its client sent %u byte(s) on already",
			 waiting->rqueue + client->wqueue);
	else if (waiting->state == TCP_SYN_RECV)
		snprintf(why, sizeof(why), "is a TCP fast open one not acknowledged yet");
	else if (waiting->state != TCP_ESTABLISHED || client->state != TCP_ESTABLISHED ||
		 client->shutdown)
		snprintf(why, sizeof(why), "its client shut down (its end is %s)",
			 state_name(client->state));
	else if (client->rqueue)
		snprintf(why, sizeof(why), "its client received %u byte(s) on", client->rqueue);
	else
		return NULL;
	return why;
}

/* holder: where the client is, if what does not say it */
static int refuse_exchanged(const char *what, const struct diag_sk *client, const char *holder,
			    const char *why)
{
	pr_err("%s: the TCP connection %s -> %s%s waits in the accept queue of a listener of the "
	       "tree, and %s, which a new handshake cannot bring back; dump once the server has "
	       "accept()ed it, or with --skip-in-flight to drop it (its client then sees a reset)",
	       what, show_diag(client, false), show_diag(client, true), holder, why);
	return -EOPNOTSUPP;
}

struct waiting {
	struct diag_sk end;    /* the server's end, in the accept queue */
	struct diag_sk client; /* the client's end (ino 0: no socket has it) */
};

struct waiting_list {
	const struct diag_sk *l;
	struct waiting *w;
	size_t n, max;
};

static bool add_waiting(const struct diag_sk *d, void *arg)
{
	struct waiting_list *c = arg;

	if (d->ino || !on_listener(c->l, d))
		return false;
	if (c->n < c->max)
		c->w[c->n].end = *d;
	c->n++;
	return false;
}

/* The oldest handshake first: the end that received its last segment longest ago. */
static int by_age(const void *a, const void *b)
{
	uint32_t x = ((const struct waiting *)a)->end.idle_ms,
		 y = ((const struct waiting *)b)->end.idle_ms;

	return x > y ? -1 : x < y;
}

/*
 * Listener e (socket ino) has pending connections: each whose client is a
 * socket of the tree with nothing exchanged goes into e->pending, in accept
 * order; the others are refused, or dropped with --skip-in-flight.
 */
static int dump_waiting(struct dump_ctx *ctx, InetSkEntry *e, uint32_t pending, const char *what)
{
	struct diag_sk l = {.family = (int)e->family, .sport = (uint16_t)e->src_port};
	struct waiting_list c = {.l = &l, .max = pending};
	uint32_t dropped = 0;
	int ret;

	memcpy(l.src, e->src_addr.data, e->src_addr.len <= 16 ? e->src_addr.len : 16);
	c.w = calloc(pending, sizeof(*c.w));
	e->pending = calloc(pending, sizeof(*e->pending));
	if (!c.w || !e->pending) {
		ret = -ENOMEM;
		goto free_list;
	}
	ret = diag_walk(l.family, WAITING_STATES, add_waiting, &c);
	if (ret) {
		pr_err("%s: inet_diag cannot list the connections waiting on the listener %s: %s",
		       what, inet_show_addr(e, false), strerror(-ret));
		goto free_list;
	}
	if (c.n != pending) {
		pr_err("%s: TCP listener %s has %u connection(s) not accept()ed yet, but %zu "
		       "wait on its address and port (another listener there, SO_REUSEPORT?): "
		       "amber cannot tell which are its own; dump with --skip-in-flight to drop "
		       "them (their clients see a reset)",
		       what, inet_show_addr(e, false), pending, c.n);
		ret = -EOPNOTSUPP;
		goto free_list;
	}
	qsort(c.w, c.n, sizeof(*c.w), by_age);
	for (size_t i = 0; i < c.n; i++) {
		struct waiting *w = &c.w[i];
		const char *why = NULL;
		pid_t pid = 0;
		int fd = -1, n;

		n = diag_find(&w->end, CLIENT_STATES, is_client_of, &w->client);
		if (n < 0) {
			pr_err("%s: inet_diag cannot find the client of %s -> %s: %s", what,
			       show_diag(&w->end, false), show_diag(&w->end, true), strerror(-n));
			ret = n;
			goto free_list;
		}
		if (n)
			pid = tree_holder(ctx->tree, w->client.ino, &fd);
		if (pid)
			why = exchanged(&w->end, &w->client);
		if (pid && !why) {
			e->pending[e->n_pending++] = w->client.ino;
			pr_info("%s: the connection from %s (pid %d fd %d) waiting on %s comes "
				"back "
				"as number %zu of its accept queue",
				what, show_diag(&w->client, false), pid, fd,
				inet_show_addr(e, false), e->n_pending);
			continue;
		}
		if (!ctx->o->skip_in_flight) {
			if (pid) {
				char holder[48];

				snprintf(holder, sizeof(holder), " (pid %d fd %d)", pid, fd);
				ret = refuse_exchanged(what, &w->client, holder, why);
			} else {
				pr_err("%s: TCP listener %s has a connection from %s not "
				       "accept()ed "
				       "yet, and its client end is %s: amber cannot put a "
				       "connection "
				       "back into an accept queue, only connect a client of the "
				       "tree "
				       "again; dump the tree that holds the client too, or once "
				       "the "
				       "server accept()ed it, or with --skip-in-flight to drop it "
				       "(its client sees a reset)",
				       what, inet_show_addr(e, false), show_diag(&w->end, true),
				       n ? "held by a process outside the dumped tree"
					 : "closed already (no socket holds it)");
				ret = -EOPNOTSUPP;
			}
			goto free_list;
		}
		dropped++;
	}
	if (dropped)
		pr_warn("%s: --skip-in-flight: %u connection(s) to %s not accept()ed yet are "
			"dropped; their clients will see a reset",
			what, dropped, inet_show_addr(e, false));
free_list:
	free(c.w);
	return ret;
}

/*
 * An ESTABLISHED socket whose connection waits in the accept queue of a
 * listener of the tree: pending_on set, and 1 (the restore connects it
 * again, dump_waiting() puts it in the listener's order); 0 if it is not
 * one (accepted, or its server is outside the tree: an ordinary
 * connection); -errno refused.
 */
static int dump_waiting_client(struct dump_ctx *ctx, uint64_t ino, InetSkEntry *e, const char *what)
{
	struct diag_sk me = {.ino = ino}, end, l;
	pid_t pid = 0;
	int fd = -1, n;
	const char *why;

	n = diag_find(&me, CLIENT_STATES, is_ino, &me);
	if (n > 0)
		n = diag_find(&me, WAITING_STATES, is_waiting_end_of, &end);
	if (n > 0)
		n = diag_find(&end, 1u << TCP_LISTEN, is_listener_of, &l);
	if (n > 1) {
		pr_err("%s: TCP connection %s -> %s waits in an accept queue on a port where "
		       "%d sockets listen (SO_REUSEPORT?): amber cannot tell which; dump once "
		       "the server has accept()ed it",
		       what, inet_show_addr(e, false), inet_show_addr(e, true), n);
		return -EOPNOTSUPP;
	}
	if (n < 0) {
		pr_err("%s: inet_diag cannot describe the TCP connection %s -> %s: %s", what,
		       inet_show_addr(e, false), inet_show_addr(e, true), strerror(-n));
		return n;
	}
	if (n == 1)
		pid = tree_holder(ctx->tree, l.ino, &fd);
	if (!pid)
		return 0;
	why = exchanged(&end, &me);
	if (why && ctx->o->skip_in_flight)
		return 0; /* dropped by the listener's dump: an ordinary connection to nowhere */
	if (why)
		return refuse_exchanged(what, &me, "", why);
	e->has_pending_on = 1;
	e->pending_on = l.ino;
	return 1;
}

static int dump_established(struct dump_ctx *ctx, int dup, InetSkEntry *e, const char *what)
{
	int on = 1, inq, outq, unsq, reuse = 0, peek_old = -1, zero = 0, ret;
	socklen_t len = sizeof(reuse);
	struct tcp_repair_window w;
	struct tcp_info ti;
	uint32_t seq = 0, mss, ts;
	const char *table;

	ret = check_urgent(dup, e, what);
	if (ret)
		return ret;
	/* Locked before repair mode: from here on the peer's packets get no reset. */
	ret = netlock_connection(ctx, e, what, &table);
	if (ret)
		return ret;
	if (table && !ctx->o->leave_running) {
		e->netlock_table = strdup(table);
		if (!e->netlock_table)
			return -ENOMEM;
	}
	getsockopt(dup, SOL_SOCKET, SO_REUSEADDR, &reuse, &len);
	if (setsockopt(dup, SOL_TCP, TCP_REPAIR, &on, sizeof(on))) {
		pr_err("%s: cannot enter TCP repair mode: %m (needs CAP_NET_ADMIN and a kernel "
		       "with "
		       "TCP_REPAIR)",
		       what);
		return -errno;
	}
	/* -R: read with the task frozen, then normal mode again (at "off" below). */
	if (!ctx->o->leave_running) {
		ret = repair_keep(ctx, dup, reuse);
		if (ret) {
			pr_err("%s: cannot keep the socket in repair mode until the dump ends: %s",
			       what, strerror(-ret));
			repair_off(dup, reuse);
			return ret;
		}
	}
	/*
	 * The peer's packets are dropped now, but one may have come since the
	 * state was read (its FIN, its ACK of ours): the queues follow the state.
	 */
	ret = tcp_getopt(dup, TCP_INFO, &ti, sizeof(ti), what, "TCP_INFO");
	if (ret)
		goto off;
	if (ti.tcpi_state != e->state) {
		if (!tcp_state_connected(ti.tcpi_state) ||
		    tcp_fin_sent(ti.tcpi_state) != tcp_fin_sent(e->state)) {
			pr_err("%s: TCP connection %s -> %s went from %s to %s during the dump; "
			       "dump again",
			       what, inet_show_addr(e, false), inet_show_addr(e, true),
			       state_name(e->state), state_name(ti.tcpi_state));
			ret = -EAGAIN;
			goto off;
		}
		pr_debug("%s: went from %s to %s before the network lock", what,
			 state_name(e->state), state_name(ti.tcpi_state));
		e->state = ti.tcpi_state;
		if (tcp_fin_received(e->state))
			e->shutdown |= TCP_SHUT_RCV;
	}
	if (ioctl(dup, SIOCINQ, &inq) || ioctl(dup, SIOCOUTQ, &outq) ||
	    ioctl(dup, SIOCOUTQNSD, &unsq)) {
		ret = -errno;
		pr_err("%s: cannot read the queue lengths: %m", what);
		goto off;
	}
	/* our FIN has no byte to peek at: out of the queues while unacknowledged (unsent) */
	if (tcp_fin_sent(e->state) && !tcp_fin_acked(e->state)) {
		outq -= outq > 0;
		unsq -= unsq > 0;
	}
	len = sizeof(peek_old);
	getsockopt(dup, SOL_SOCKET, SO_PEEK_OFF, &peek_old, &len);
	if (peek_old >= 0)
		setsockopt(dup, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero));
	ret = set_repair_queue(dup, TCP_RECV_QUEUE, what);
	if (!ret)
		ret = tcp_getopt(dup, TCP_QUEUE_SEQ, &seq, sizeof(seq), what, "TCP_QUEUE_SEQ");
	e->has_rcv_seq = e->has_rcv_queue = 1;
	e->rcv_seq = seq - tcp_fin_received(e->state); /* rcv_nxt is one past a FIN */
	if (!ret)
		ret = peek_queue(dup, (uint32_t)inq, &e->rcv_queue, what);
	if (peek_old >= 0)
		setsockopt(dup, SOL_SOCKET, SO_PEEK_OFF, &peek_old, sizeof(peek_old));
	if (!ret)
		ret = set_repair_queue(dup, TCP_SEND_QUEUE, what);
	if (!ret)
		ret = tcp_getopt(dup, TCP_QUEUE_SEQ, &seq, sizeof(seq), what, "TCP_QUEUE_SEQ");
	e->has_snd_seq = e->has_snd_queue = e->has_snd_queue_unsent = 1;
	e->snd_seq = seq - tcp_fin_sent(e->state); /* write_seq is one past ours */
	e->snd_queue_unsent = (uint32_t)unsq;
	if (!ret)
		ret = peek_queue(dup, (uint32_t)outq, &e->snd_queue, what);
	if (!ret)
		ret = set_repair_queue(dup, TCP_NO_QUEUE, what);
	if (!ret)
		ret = tcp_getopt(dup, TCP_INFO, &ti, sizeof(ti), what, "TCP_INFO");
	if (!ret)
		ret = tcp_getopt(dup, TCP_MAXSEG, &mss, sizeof(mss), what, "TCP_MAXSEG");
	if (!ret)
		ret = tcp_getopt(dup, TCP_REPAIR_WINDOW, &w, sizeof(w), what, "TCP_REPAIR_WINDOW");
	if (ret)
		goto off;
	e->has_mss = e->has_timestamps = e->has_sack = 1;
	e->mss = mss;
	e->timestamps = !!(ti.tcpi_options & TCPI_OPT_TIMESTAMPS);
	e->sack = !!(ti.tcpi_options & TCPI_OPT_SACK);
	if (ti.tcpi_options & TCPI_OPT_WSCALE) {
		e->has_snd_wscale = e->has_rcv_wscale = 1;
		e->snd_wscale = ti.tcpi_snd_wscale;
		e->rcv_wscale = ti.tcpi_rcv_wscale;
	}
	if (e->timestamps) {
		ret = tcp_getopt(dup, TCP_TIMESTAMP, &ts, sizeof(ts), what, "TCP_TIMESTAMP");
		if (ret)
			goto off;
		e->has_timestamp = 1;
		e->timestamp = ts;
	}
	e->has_snd_wl1 = e->has_snd_wnd = e->has_max_window = e->has_rcv_wnd = e->has_rcv_wup = 1;
	e->snd_wl1 = w.snd_wl1;
	e->snd_wnd = w.snd_wnd;
	e->max_window = w.max_window;
	e->rcv_wnd = w.rcv_wnd;
	e->rcv_wup = w.rcv_wup;
	/* an acknowledged FIN moved it one past the data the restore queues */
	if ((int32_t)(e->rcv_wup - e->rcv_seq) > 0)
		e->rcv_wup = e->rcv_seq;
off:
	/* -R: the process runs on with its connection; a failure is cleaned up at exit. */
	if (ctx->o->leave_running && repair_off(dup, reuse)) {
		pr_err("%s: cannot turn TCP repair mode off again: %m", what);
		ret = ret ? ret : -errno;
	}
	return ret;
}

static int inet_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	InetSkEntry *e = malloc(sizeof(*e));
	struct sockaddr_storage ss;
	socklen_t len;
	char what[96];
	int val, ret;
	struct tcp_info ti;

	if (!e)
		return -ENOMEM;
	inet_sk_entry__init(e);
	f->inet_sk = e;
	snprintf(what, sizeof(what), "pid %d: fd %d (socket:[%llu])", ctx->pid, fd,
		 (unsigned long long)f->ino);
	len = sizeof(val);
	if (getsockopt(dup, SOL_SOCKET, SO_DOMAIN, &val, &len))
		goto sockopt_fail;
	e->family = val;
	if (e->family == AF_NETLINK) { /* an unbound one is listed nowhere: not known as one */
		inet_sk_entry__free_unpacked(e, NULL);
		f->inet_sk = NULL;
		f->kind = netlink_sk_type.kind;
		return netlink_sk_type.dump(ctx, fd, dup, f);
	}
	len = sizeof(val);
	if (getsockopt(dup, SOL_SOCKET, SO_TYPE, &val, &len))
		goto sockopt_fail;
	e->type = val;
	len = sizeof(val);
	if (getsockopt(dup, SOL_SOCKET, SO_PROTOCOL, &val, &len))
		goto sockopt_fail;
	e->proto = val;
	if (inet_extra(e)) /* UDP-Lite, ping, raw: sk-raw.c */
		return inet_extra_dump(ctx, dup, e, what);
	if ((e->family != AF_INET && e->family != AF_INET6) ||
	    !((e->type == SOCK_STREAM && e->proto == IPPROTO_TCP) ||
	      (e->type == SOCK_DGRAM && e->proto == IPPROTO_UDP))) {
		pr_err("%s: a socket of family %u, type %u, protocol %u, which amber cannot dump "
		       "(only unix, packet and netlink sockets, and TCP, UDP, UDP-Lite, ping "
		       "and raw ones over IPv4/IPv6)",
		       what, e->family, e->type, e->proto);
		return -EOPNOTSUPP;
	}
	len = sizeof(ss);
	if (getsockname(dup, (struct sockaddr *)&ss, &len))
		goto sockopt_fail;
	ret = inet_put_addr(e, &ss, false);
	if (ret)
		return ret;
	len = sizeof(ss);
	if (!getpeername(dup, (struct sockaddr *)&ss, &len)) {
		ret = inet_put_addr(e, &ss, true);
		if (ret)
			return ret;
	}
	len = sizeof(val);
	if (getsockopt(dup, SOL_SOCKET, SO_REUSEADDR, &val, &len))
		goto sockopt_fail;
	e->has_reuseaddr = 1;
	e->reuseaddr = val;
	if (e->family == AF_INET6) {
		len = sizeof(val);
		if (getsockopt(dup, IPPROTO_IPV6, IPV6_V6ONLY, &val, &len))
			goto sockopt_fail;
		e->has_v6only = 1;
		e->v6only = val;
	}
	if (e->type == SOCK_DGRAM) {
		e->state = e->has_dst_addr ? TCP_ESTABLISHED : TCP_CLOSE;
		ret = sk_opts_dump(dup, (int)e->family, (int)e->type, false, what, &e->opts,
				   &e->n_opts);
		return ret ? ret : sk_peek_queue(dup, false, what, &e->dgrams, &e->n_dgrams);
	}
	len = sizeof(ti);
	if (getsockopt(dup, SOL_TCP, TCP_INFO, &ti, &len))
		goto sockopt_fail;
	e->state = ti.tcpi_state;
	/* before repair mode, which changes some (SO_REUSEADDR) */
	ret = sk_opts_dump(dup, (int)e->family, (int)e->type,
			   e->state != TCP_CLOSE && e->state != TCP_LISTEN, what, &e->opts,
			   &e->n_opts);
	if (ret)
		return ret;
	switch (e->state) {
	case TCP_CLOSE:
		return 0;
	case TCP_LISTEN: {
		struct tcp_diag d = {.wqueue = SOMAXCONN};
		uint32_t backlog, pending;

		ret = tcp_diag((int)e->family, f->ino, 1 << TCP_LISTEN, &d);
		backlog = d.wqueue;
		pending = d.rqueue;
		if (ret) {
			pr_err("%s: inet_diag cannot describe the listener %s: %s", what,
			       inet_show_addr(e, false), strerror(-ret));
			return ret;
		}
		e->has_backlog = 1;
		e->backlog = backlog;
		return pending ? dump_waiting(ctx, e, pending, what) : 0;
	}
	case TCP_SYN_SENT:
		return dump_syn_sent(f->ino, e, what);
	case TCP_ESTABLISHED:
	case TCP_CLOSE_WAIT:
	case TCP_FIN_WAIT1:
	case TCP_FIN_WAIT2:
	case TCP_LAST_ACK:
	case TCP_CLOSING: {
		struct tcp_diag d;

		ret = tcp_diag((int)e->family, f->ino, 1u << e->state, &d);
		if (ret) {
			pr_err("%s: inet_diag cannot describe the TCP connection %s -> %s (%s): %s",
			       what, inet_show_addr(e, false), inet_show_addr(e, true),
			       state_name(e->state), strerror(-ret));
			return ret;
		}
		e->has_shutdown = 1;
		e->shutdown = d.shutdown & (TCP_SHUT_RCV | TCP_SHUT_SEND);
		ret = e->state == TCP_ESTABLISHED ? dump_waiting_client(ctx, f->ino, e, what) : 0;
		if (ret)
			return ret < 0 ? ret : 0;
		if (ctx->o->tcp_close && !ctx->o->tcp_established) {
			/* closed by the dump (FIN or reset), restored reset */
			e->has_closed = e->closed = 1;
			pr_info("%s: --tcp-close: %s TCP connection %s -> %s closes with the dump "
				"and comes back reset",
				what, state_name(e->state), inet_show_addr(e, false),
				inet_show_addr(e, true));
			return 0;
		}
		if (!ctx->o->tcp_established) {
			pr_err("%s: %s TCP connection %s -> %s; dump (and restore) with "
			       "--tcp-established to take it along, or with --tcp-close to "
			       "have it come back reset",
			       what, state_name(e->state), inet_show_addr(e, false),
			       inet_show_addr(e, true));
			return -EOPNOTSUPP;
		}
		return dump_established(ctx, dup, e, what);
	}
	case TCP_SYN_RECV:
		pr_err("%s: TCP socket %s -> %s in state SYN_RECV (a TCP fast open connection "
		       "not yet acknowledged), which amber cannot dump; dump again once its "
		       "handshake is over",
		       what, inet_show_addr(e, false), inet_show_addr(e, true));
		return -EOPNOTSUPP;
	default:
		pr_err("%s: TCP socket %s in state %s (%u), which amber cannot dump: a process's "
		       "socket is not expected in it",
		       what, inet_show_addr(e, false), state_name(e->state), e->state);
		return -EOPNOTSUPP;
	}
sockopt_fail:
	pr_err("%s: cannot read the socket's address or options: %m", what);
	return -errno;
}

/*
 * Once every file is described: the listeners and the clients of their
 * waiting connections name each other (each side's dump decided alone, the
 * tree frozen); an image the restore would refuse is refused here.
 */
static int inet_dump_done(struct tree *t)
{
	for (size_t i = 0; i < t->files.n; i++) {
		const RegFile *f = t->files.f[i], *g = NULL;
		const InetSkEntry *e = f->inet_sk;
		bool listed = false;

		if (!e || !e->has_pending_on)
			continue;
		for (size_t k = 0; k < t->files.n && !g; k++)
			if (t->files.f[k]->inet_sk && t->files.f[k]->ino == e->pending_on)
				g = t->files.f[k];
		for (size_t k = 0; g && k < g->inet_sk->n_pending; k++)
			listed |= g->inet_sk->pending[k] == f->ino;
		if (!listed) {
			pr_err("TCP connection %s -> %s (socket:[%llu]) waits on the listener "
			       "socket:[%llu] of the tree, whose dump did not take it along; dump "
			       "again",
			       inet_show_addr(e, false), inet_show_addr(e, true),
			       (unsigned long long)f->ino, (unsigned long long)e->pending_on);
			return -EAGAIN;
		}
	}
	for (size_t i = 0; i < t->files.n; i++) {
		const InetSkEntry *e = t->files.f[i]->inet_sk;

		for (size_t k = 0; e && k < e->n_pending; k++) {
			bool found = false;

			for (size_t j = 0; j < t->files.n && !found; j++)
				found = t->files.f[j]->inet_sk &&
					t->files.f[j]->ino == e->pending[k] &&
					t->files.f[j]->inet_sk->has_pending_on;
			if (!found) {
				pr_err("TCP listener %s: the client socket:[%llu] of a connection "
				       "waiting on it was not dumped as one; dump again",
				       inet_show_addr(e, false), (unsigned long long)e->pending[k]);
				return -EAGAIN;
			}
		}
	}
	return 0;
}

/* ---- restore ---- */

struct isk {
	RegFile *f;
	InetSkEntry *e;
	int fd;
	char who[128]; /* pid, fd: for messages about its options */
};

static struct isk *isks;
static size_t nr_isks;

static struct tree *rtree; /* the restore inet_prepare() serves */

/* A new socket with the options that go before bind and connect. */
static int new_sock(struct isk *s)
{
	const InetSkEntry *e = s->e;
	int fd = socket((int)e->family, (int)e->type | SOCK_CLOEXEC, (int)e->proto), ret;

	if (fd < 0) {
		pr_err("cannot create a %s socket for %s: %m",
		       e->type == SOCK_STREAM ? "TCP" : "UDP", inet_show_addr(e, false));
		return -errno;
	}
	if (e->family == AF_INET6 && e->has_v6only) {
		int v = e->v6only;

		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof(v));
	}
	ret = sk_opts_restore(rtree, fd, e->opts, e->n_opts, false, s->who);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* With the image owner's rights: a port below 1024 needs CAP_NET_BIND_SERVICE. */
static int bind_src(int fd, const InetSkEntry *e)
{
	struct sockaddr_storage ss;
	socklen_t len = inet_get_addr(e, false, &ss);
	int ret = owner_enter(rtree);

	if (ret)
		return ret;
	/*
	 * The dumped process's socket can outlive it for a moment: an io_uring's
	 * registered files are let go by a kernel worker once the ring's last
	 * holder exited.  A port still held after a second is another's.
	 */
	for (int i = 0; bind(fd, (struct sockaddr *)&ss, len); i++) {
		if (errno == EADDRINUSE && i < 100) {
			usleep(10000);
			continue;
		}
		ret = -errno;
		pr_err("cannot bind a %s socket to %s: %m%s",
		       e->type == SOCK_STREAM ? "TCP" : "UDP", inet_show_addr(e, false),
		       errno == EADDRINUSE ? " (another socket holds the port; stop it)"
		       : errno == EACCES   ? " (the image's owner may not bind that port)"
					   : "");
		break;
	}
	owner_leave(rtree);
	return ret;
}

static int set_reuse(int fd, int v)
{
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v))) {
		pr_err("cannot set SO_REUSEADDR: %m");
		return -errno;
	}
	return 0;
}

static int open_listen_or_closed(struct isk *s)
{
	InetSkEntry *e = s->e;
	int ret;

	s->fd = new_sock(s);
	if (s->fd < 0)
		return s->fd;
	if (!e->src_port && e->state == TCP_CLOSE)
		return 0;
	ret = set_reuse(s->fd, 1);
	if (!ret)
		ret = bind_src(s->fd, e);
	if (!ret && e->state == TCP_LISTEN && listen(s->fd, (int)e->backlog)) {
		ret = -errno;
		pr_err("cannot listen on %s: %m", inet_show_addr(e, false));
	}
	if (!ret)
		ret = set_reuse(s->fd, e->reuseaddr);
	return ret;
}

/* Datagrams are sent by a temporary socket before the restored one connects. */
static int open_udp(struct isk *s)
{
	InetSkEntry *e = s->e;
	struct sockaddr_storage to;
	socklen_t len;
	int tmp, ret;

	s->fd = new_sock(s);
	if (s->fd < 0)
		return s->fd;
	ret = set_reuse(s->fd, e->reuseaddr);
	if (!ret && (e->src_port || e->n_dgrams))
		ret = bind_src(s->fd, e);
	if (ret || !e->n_dgrams)
		goto connect;
	len = sizeof(to);
	if (getsockname(s->fd, (struct sockaddr *)&to, &len)) {
		pr_err("UDP socket %s: cannot read back its address: %m", inet_show_addr(e, false));
		return -errno;
	}
	inet_any_to_loopback(&to);
	tmp = socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (tmp < 0) {
		pr_err("cannot create a UDP socket to refill %s: %m", inet_show_addr(e, false));
		return -errno;
	}
	for (size_t i = 0; i < e->n_dgrams && !ret; i++)
		if (sendto(tmp, e->dgrams[i]->data.data, e->dgrams[i]->data.len, 0,
			   (struct sockaddr *)&to, len) != (ssize_t)e->dgrams[i]->data.len)
			ret = -errno;
	close(tmp);
	if (ret) {
		pr_err("cannot refill the queue of UDP socket %s: %s", inet_show_addr(e, false),
		       strerror(-ret));
		return ret;
	}
	/* Loopback delivery is asynchronous: wait until every datagram is queued. */
	for (int i = 0; i < 200; i++) {
		SkQueued **q = NULL;
		size_t n = 0;

		ret = sk_peek_queue(s->fd, false, "restored UDP socket", &q, &n);
		for (size_t k = 0; k < n; k++) {
			free(q[k]->data.data);
			free(q[k]);
		}
		free(q);
		if (ret)
			return ret;
		if (n >= e->n_dgrams)
			break;
		usleep(10 * 1000);
		ret = -ETIMEDOUT;
	}
	if (ret) {
		pr_err("UDP socket %s: the refilled datagrams did not arrive",
		       inet_show_addr(e, false));
		return ret;
	}
connect:
	if (!ret && e->has_dst_addr) {
		struct sockaddr_storage ss;

		len = inet_get_addr(e, true, &ss);
		if (connect(s->fd, (struct sockaddr *)&ss, len)) {
			ret = -errno;
			pr_err("cannot connect UDP socket %s to %s: %m", inet_show_addr(e, false),
			       inet_show_addr(e, true));
		}
	}
	return ret;
}

static int tcp_setopt(int fd, int opt, const void *val, socklen_t len, const InetSkEntry *e,
		      const char *name)
{
	if (setsockopt(fd, SOL_TCP, opt, val, len)) {
		pr_err("TCP %s -> %s: cannot set %s: %m", inet_show_addr(e, false),
		       inet_show_addr(e, true), name);
		return -errno;
	}
	return 0;
}

/* Send len bytes into the selected repair queue (or normally), in chunks. */
static int fill(int fd, const uint8_t *data, size_t len, const InetSkEntry *e, const char *q)
{
	size_t off = 0;

	while (off < len) {
		size_t n = len - off > CHUNK ? CHUNK : len - off;
		ssize_t r = send(fd, data + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};

			if (poll(&p, 1, 2000) == 1)
				continue;
		}
		if (r <= 0) {
			pr_err("TCP %s -> %s: cannot refill the %s queue (%zu of %zu bytes): %m",
			       inet_show_addr(e, false), inet_show_addr(e, true), q, off, len);
			return r < 0 ? -errno : -EIO;
		}
		off += r;
	}
	return 0;
}

/* Everything but the unsent data, in repair mode: no packet leaves. */
static int open_established(struct isk *s)
{
	InetSkEntry *e = s->e;
	struct tcp_repair_opt opts[4];
	struct sockaddr_storage ss;
	int on = 1, q, n = 0, ret;
	uint32_t seq;
	socklen_t len;
	size_t sent = e->snd_queue.len - e->snd_queue_unsent;

	if (e->snd_queue_unsent > e->snd_queue.len) {
		pr_err("TCP %s -> %s: bad queue lengths in the image", inet_show_addr(e, false),
		       inet_show_addr(e, true));
		return -EBADMSG;
	}
	s->fd = new_sock(s);
	if (s->fd < 0)
		return s->fd;
	ret = tcp_setopt(s->fd, TCP_REPAIR, &on, sizeof(on), e, "TCP_REPAIR");
	q = TCP_RECV_QUEUE;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_REPAIR_QUEUE, &q, sizeof(q), e, "TCP_REPAIR_QUEUE");
	seq = e->rcv_seq - (uint32_t)e->rcv_queue.len;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_QUEUE_SEQ, &seq, sizeof(seq), e, "TCP_QUEUE_SEQ");
	q = TCP_SEND_QUEUE;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_REPAIR_QUEUE, &q, sizeof(q), e, "TCP_REPAIR_QUEUE");
	seq = e->snd_seq - (uint32_t)e->snd_queue.len;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_QUEUE_SEQ, &seq, sizeof(seq), e, "TCP_QUEUE_SEQ");
	if (!ret)
		ret = bind_src(s->fd, e);
	if (ret)
		return ret;
	len = inet_get_addr(e, true, &ss);
	if (connect(s->fd, (struct sockaddr *)&ss, len)) {
		pr_err("TCP %s -> %s: cannot reconnect in repair mode: %m",
		       inet_show_addr(e, false), inet_show_addr(e, true));
		return -errno;
	}
	if (e->has_mss)
		opts[n++] = (struct tcp_repair_opt){TCPOPT_MAXSEG, e->mss};
	if (e->has_snd_wscale)
		opts[n++] = (struct tcp_repair_opt){TCPOPT_WINDOW,
						    e->snd_wscale | (e->rcv_wscale << 16)};
	if (e->timestamps)
		opts[n++] = (struct tcp_repair_opt){TCPOPT_TIMESTAMP, 0};
	if (e->sack)
		opts[n++] = (struct tcp_repair_opt){TCPOPT_SACK_PERMITTED, 0};
	ret = n ? tcp_setopt(s->fd, TCP_REPAIR_OPTIONS, opts, n * sizeof(opts[0]), e,
			     "TCP_REPAIR_OPTIONS")
		: 0;
	if (!ret && e->has_timestamp)
		ret = tcp_setopt(s->fd, TCP_TIMESTAMP, &e->timestamp, sizeof(e->timestamp), e,
				 "TCP_TIMESTAMP");
	q = TCP_RECV_QUEUE;
	if (!ret && e->rcv_queue.len) {
		ret = tcp_setopt(s->fd, TCP_REPAIR_QUEUE, &q, sizeof(q), e, "TCP_REPAIR_QUEUE");
		if (!ret)
			ret = fill(s->fd, e->rcv_queue.data, e->rcv_queue.len, e, "receive");
	}
	q = TCP_SEND_QUEUE;
	if (!ret && sent) {
		ret = tcp_setopt(s->fd, TCP_REPAIR_QUEUE, &q, sizeof(q), e, "TCP_REPAIR_QUEUE");
		if (!ret)
			ret = fill(s->fd, e->snd_queue.data, sent, e, "send");
	}
	if (!ret && e->has_snd_wnd) {
		struct tcp_repair_window w = {
			.snd_wl1 = e->snd_wl1,
			.snd_wnd = e->snd_wnd,
			.max_window = e->max_window,
			.rcv_wnd = e->rcv_wnd,
			.rcv_wup = e->rcv_wup,
		};

		ret = tcp_setopt(s->fd, TCP_REPAIR_WINDOW, &w, sizeof(w), e, "TCP_REPAIR_WINDOW");
	}
	/* images of before sk_opts */
	if (!ret && e->has_nodelay)
		ret = tcp_setopt(s->fd, TCP_NODELAY, &(int){e->nodelay}, sizeof(int), e,
				 "TCP_NODELAY");
	return ret;
}

/*
 * A segment from the peer (sk-tcp.c): its FIN at our receive sequence, or
 * (ack_fin) an acknowledgement of ours; then wait for the state it brings
 * (CLOSING, or CLOSE if a live peer acknowledged our FIN sent just before).
 */
static int replay_peer(struct isk *s, bool ack_fin, unsigned want)
{
	InetSkEntry *e = s->e;
	uint32_t una = e->snd_seq - (uint32_t)e->snd_queue.len;
	uint32_t win = e->snd_wnd >> (e->has_snd_wscale ? e->snd_wscale : 0);
	int ret;

	ret = tcp_inject(e, false, ack_fin ? TH_ACK : TH_FIN | TH_ACK, e->rcv_seq,
			 ack_fin ? e->snd_seq + 1 : una, win > 0xffff ? 0xffff : (uint16_t)win);
	if (!ret)
		ret = tcp_wait_state(s->fd,
				     1u << want | (want == TCP_CLOSING ? 1u << TCP_CLOSE : 0));
	if (ret)
		pr_err("TCP %s -> %s: the replayed %s of the peer did not take it to %s: %s",
		       inet_show_addr(e, false), inet_show_addr(e, true),
		       ack_fin ? "acknowledgement of our FIN" : "FIN", state_name(want),
		       strerror(-ret));
	return ret;
}

/* Our FIN had left (nothing unsent before it): queued again as sent, in repair mode. */
static bool fin_on_wire(const InetSkEntry *e)
{
	return tcp_fin_sent(e->state) && !e->snd_queue_unsent;
}

static int shut_wr(struct isk *s)
{
	if (shutdown(s->fd, SHUT_WR)) {
		pr_err("TCP %s -> %s: cannot shut its sending side down again: %m",
		       inet_show_addr(s->e, false), inet_show_addr(s->e, true));
		return -errno;
	}
	return 0;
}

/*
 * Before the network lock goes, in repair mode: the FINs that were on the
 * wire, in the order the state says.  The peer's comes as a segment
 * (before ours: CLOSE_WAIT, LAST_ACK; after: CLOSING).  Ours is queued by
 * shutdown() with the send queue selected, which marks it sent without a
 * packet, like the data before it (the retransmission timer sends it again
 * if it is not acknowledged); an acknowledgement from the peer then makes
 * FIN_WAIT2.
 */
static int replay_fins(struct isk *s)
{
	InetSkEntry *e = s->e;
	int q = TCP_SEND_QUEUE, ret = 0;

	if (tcp_fin_received(e->state) && e->state != TCP_CLOSING)
		ret = replay_peer(s, false, TCP_CLOSE_WAIT);
	if (ret || !fin_on_wire(e))
		return ret;
	ret = tcp_setopt(s->fd, TCP_REPAIR_QUEUE, &q, sizeof(q), e, "TCP_REPAIR_QUEUE");
	if (!ret)
		ret = shut_wr(s);
	q = TCP_NO_QUEUE;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_REPAIR_QUEUE, &q, sizeof(q), e, "TCP_REPAIR_QUEUE");
	if (!ret && e->state == TCP_FIN_WAIT2)
		ret = replay_peer(s, true, TCP_FIN_WAIT2);
	if (!ret && e->state == TCP_CLOSING)
		ret = replay_peer(s, false, TCP_CLOSING);
	return ret;
}

/*
 * Leave repair mode (a window probe, if ESTABLISHED), then the unsent data,
 * then a FIN that waited behind it, and the peer's after that (CLOSING),
 * and a shutdown of the receiving side.
 */
static int finish_established(struct isk *s)
{
	InetSkEntry *e = s->e;
	int off = 0, ret;

	ret = tcp_setopt(s->fd, TCP_REPAIR, &off, sizeof(off), e, "TCP_REPAIR off");
	if (!ret)
		ret = set_reuse(s->fd, e->reuseaddr);
	if (!ret && e->snd_queue_unsent)
		ret = fill(s->fd, e->snd_queue.data + (e->snd_queue.len - e->snd_queue_unsent),
			   e->snd_queue_unsent, e, "send (unsent part)");
	if (!ret && tcp_fin_sent(e->state) && !fin_on_wire(e))
		ret = shut_wr(s);
	if (!ret && e->state == TCP_CLOSING && !fin_on_wire(e))
		ret = replay_peer(s, false, TCP_CLOSING);
	if (!ret && e->has_shutdown && (e->shutdown & TCP_SHUT_RCV) &&
	    !tcp_fin_received(e->state) && shutdown(s->fd, SHUT_RD)) {
		ret = -errno;
		pr_err("TCP %s -> %s: cannot shut its receiving side down again: %m",
		       inet_show_addr(e, false), inet_show_addr(e, true));
	}
	return ret;
}

/*
 * --tcp-close: the connection rebuilt in repair mode (no packet leaves),
 * then reset by a segment from its peer: the process finds it reset.
 */
static int open_reset(struct isk *s)
{
	InetSkEntry *e = s->e;
	struct sockaddr_storage ss;
	socklen_t len;
	int on = 1, q, ret;
	uint32_t seq;

	s->fd = new_sock(s);
	if (s->fd < 0)
		return s->fd;
	ret = tcp_setopt(s->fd, TCP_REPAIR, &on, sizeof(on), e, "TCP_REPAIR");
	q = TCP_RECV_QUEUE;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_REPAIR_QUEUE, &q, sizeof(q), e, "TCP_REPAIR_QUEUE");
	seq = e->has_rcv_seq ? e->rcv_seq : 0;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_QUEUE_SEQ, &seq, sizeof(seq), e, "TCP_QUEUE_SEQ");
	q = TCP_SEND_QUEUE;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_REPAIR_QUEUE, &q, sizeof(q), e, "TCP_REPAIR_QUEUE");
	seq = e->has_snd_seq ? e->snd_seq : 0;
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_QUEUE_SEQ, &seq, sizeof(seq), e, "TCP_QUEUE_SEQ");
	if (!ret)
		ret = bind_src(s->fd, e);
	if (ret)
		return ret;
	len = inet_get_addr(e, true, &ss);
	if (connect(s->fd, (struct sockaddr *)&ss, len)) {
		pr_err("TCP %s -> %s: cannot reconnect in repair mode: %m",
		       inet_show_addr(e, false), inet_show_addr(e, true));
		return -errno;
	}
	return 0;
}

static bool same_addr(const ProtobufCBinaryData *a, const ProtobufCBinaryData *b)
{
	return a->len == b->len && !memcmp(a->data, b->data, a->len);
}

/* Is the other end of connection e in the image too? */
static bool peer_in_image(const InetSkEntry *e)
{
	for (size_t i = 0; i < nr_isks; i++) {
		const InetSkEntry *p = isks[i].e;

		if (p != e && p->type == SOCK_STREAM && tcp_state_connected(p->state) &&
		    p->src_port == e->dst_port && p->dst_port == e->src_port &&
		    same_addr(&p->src_addr, &e->dst_addr) && same_addr(&p->dst_addr, &e->src_addr))
			return true;
	}
	return false;
}

static int finish_reset(struct isk *s)
{
	InetSkEntry *e = s->e;
	int off = TCP_REPAIR_OFF_NO_WP, ret = 0;
	uint32_t rcv = e->has_rcv_seq ? e->rcv_seq : 0, snd = e->has_snd_seq ? e->snd_seq : 0;

	/* its peer's FIN first: a reset in CLOSE_WAIT says EPIPE, not ECONNRESET */
	if (e->state == TCP_CLOSE_WAIT) {
		ret = tcp_inject(e, false, TH_FIN | TH_ACK, rcv++, snd, 0xffff);
		if (!ret)
			ret = tcp_wait_state(s->fd, 1u << TCP_CLOSE_WAIT);
		if (ret)
			pr_err("TCP %s -> %s: the replayed FIN of the peer did not take it to "
			       "CLOSE_WAIT: %s",
			       inet_show_addr(e, false), inet_show_addr(e, true), strerror(-ret));
	}
	if (!ret)
		ret = tcp_inject(e, false, TH_RST, rcv, 0, 0);
	/*
	 * Dumped with TCP repair, the peer heard nothing of the dump: it gets a
	 * reset too, at the sequence number it expects (snd_nxt; an older one
	 * gets a challenge ACK, which our closed port answers with a reset).  A
	 * peer in the image gets its own.
	 */
	if (!ret && !e->closed && e->has_snd_seq && !peer_in_image(e))
		ret = tcp_inject(e, true, TH_RST,
				 e->snd_seq - e->snd_queue_unsent + tcp_fin_sent(e->state), 0, 0);
	if (!ret) {
		ret = tcp_wait_state(s->fd, 1u << TCP_CLOSE);
		if (ret)
			pr_err("TCP %s -> %s: the reset sent to it did not close it: %s",
			       inet_show_addr(e, false), inet_show_addr(e, true), strerror(-ret));
	}
	if (!ret)
		ret = tcp_setopt(s->fd, TCP_REPAIR, &off, sizeof(off), e, "TCP_REPAIR off");
	if (!ret)
		ret = set_reuse(s->fd, e->reuseaddr);
	if (!ret)
		pr_info("--tcp-close: TCP %s -> %s (%s) comes back reset", inet_show_addr(e, false),
			inet_show_addr(e, true), state_name(e->state));
	return ret;
}

/*
 * A new socket bound to s's address and connect()ing to its peer, not
 * blocking; why names the connect for a message.  0 once the SYN is out.
 */
static int connect_again(struct isk *s, const char *why)
{
	InetSkEntry *e = s->e;
	struct sockaddr_storage ss;
	socklen_t len;
	int ret;

	s->fd = new_sock(s);
	if (s->fd < 0)
		return s->fd;
	ret = set_reuse(s->fd, 1);
	if (!ret)
		ret = bind_src(s->fd, e);
	if (!ret)
		ret = set_reuse(s->fd, e->reuseaddr);
	if (ret)
		return ret;
	if (fcntl(s->fd, F_SETFL, O_NONBLOCK)) {
		pr_err("TCP %s: cannot make it non-blocking: %m", inet_show_addr(e, false));
		return -errno;
	}
	len = inet_get_addr(e, true, &ss);
	if (connect(s->fd, (struct sockaddr *)&ss, len) && errno != EINPROGRESS) {
		pr_err("TCP %s -> %s: %s: %m", inet_show_addr(e, false), inet_show_addr(e, true),
		       why);
		return -errno;
	}
	return 0;
}

static int set_blocking(struct isk *s)
{
	if (fcntl(s->fd, F_SETFL, 0)) {
		pr_err("TCP %s: cannot make it blocking: %m", inet_show_addr(s->e, false));
		return -errno;
	}
	return 0;
}

/* A connect() in progress at the dump: connected again from its address, a new SYN. */
static int open_syn_sent(struct isk *s)
{
	/* EINPROGRESS: the outcome is the process's to see, as it was going to be */
	int ret = connect_again(s, "the connect() in progress at the dump fails now");

	return ret ? ret : set_blocking(s);
}

/* The entry of this prepare (one network namespace) of the socket of inode ino, or NULL. */
static struct isk *isk_by_ino(uint64_t ino)
{
	for (size_t i = 0; i < nr_isks; i++)
		if (isks[i].f->has_ino && isks[i].f->ino == ino)
			return &isks[i];
	return NULL;
}

/*
 * A client whose connection waited in listener l's accept queue, as number
 * queued of it: bound to its address again and connected, a new handshake;
 * the next one connects only once the server's end of this one is queued.
 */
static int connect_waiting(struct isk *s, struct isk *l, uint32_t queued)
{
	InetSkEntry *e = s->e;
	struct pollfd p;
	int err = 0, ret;
	socklen_t len;

	ret = connect_again(s, "cannot connect again to the listener it waited on");
	if (ret)
		return ret;
	p = (struct pollfd){.fd = s->fd, .events = POLLOUT};
	len = sizeof(err);
	if (poll(&p, 1, 5000) != 1 || getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		pr_err("TCP %s -> %s: the connect to the listener it waited on did not complete: "
		       "%s",
		       inet_show_addr(e, false), inet_show_addr(e, true),
		       err ? strerror(err) : "no answer in 5 s (its accept queue full?)");
		return err ? -err : -ETIMEDOUT;
	}
	ret = set_blocking(s);
	if (ret)
		return ret;
	/* the server's end is made when the handshake's last ACK arrives, just after */
	for (int i = 0; i < 5000; i++) {
		struct tcp_info ti;

		len = sizeof(ti);
		if (getsockopt(l->fd, SOL_TCP, TCP_INFO, &ti, &len)) {
			pr_err("TCP listener %s: cannot read its accept queue's length: %m",
			       inet_show_addr(l->e, false));
			return -errno;
		}
		if (ti.tcpi_unacked >= queued) /* a listener's: sk_ack_backlog */
			return 0;
		usleep(1000);
	}
	pr_err("TCP %s -> %s: connected again, but the listener's accept queue does not hold it",
	       inet_show_addr(e, false), inet_show_addr(e, true));
	return -ETIMEDOUT;
}

/* A listener's waiting connections, made again in the order of its accept queue. */
static int open_waiting(struct isk *l)
{
	int ret = 0;

	for (size_t k = 0; k < l->e->n_pending && !ret; k++) {
		struct isk *c = isk_by_ino(l->e->pending[k]);

		if (!c) { /* inet_check() saw it in the image: in another network namespace */
			pr_err("TCP listener %s: the client of its waiting connection %zu is not "
			       "in "
			       "its network namespace; the image is corrupt",
			       inet_show_addr(l->e, false), k + 1);
			return -EBADMSG;
		}
		ret = connect_waiting(c, l, (uint32_t)k + 1);
	}
	if (!ret && l->e->n_pending)
		pr_info("TCP listener %s: its %zu connection(s) not accept()ed yet are back",
			inet_show_addr(l->e, false), l->e->n_pending);
	return ret;
}

/* The image's network locks go once every connection exists, before repair mode does. */
static int unlock_network(struct tree *t)
{
	for (size_t i = 0; i < nr_isks; i++) {
		const char *name = isks[i].e->netlock_table;
		bool seen = false;
		int ret;

		if (!name)
			continue;
		for (size_t k = 0; k < i && !seen; k++)
			seen = isks[k].e->netlock_table && !strcmp(isks[k].e->netlock_table, name);
		if (seen)
			continue;
		ret = netlock_unlock(t, name);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * What this restore cannot take: a connection without --tcp-established, or
 * in an image of another user's: TCP repair would set any connection state
 * its writer chose (sequence numbers to any peer) with amber's CAP_NET_ADMIN.
 */
static bool is_conn(const InetSkEntry *e)
{
	return e->type == SOCK_STREAM && tcp_state_connected(e->state) && !e->has_pending_on;
}

/* A client whose connection waited in an accept queue: connected again, no TCP repair. */
static bool is_waiting(const InetSkEntry *e)
{
	return e->type == SOCK_STREAM && e->has_pending_on;
}

/* Comes back reset: dumped with --tcp-close, or restored with it. */
static bool is_reset(const InetSkEntry *e, const struct opts *o)
{
	return is_conn(e) && (e->closed || o->tcp_close);
}

/* Is a TCP entry's state one amber makes, and consistent? */
static int check_tcp_state(const InetSkEntry *e)
{
	const char *why = NULL;

	if (is_waiting(e) && e->state != TCP_ESTABLISHED)
		why = "a connection waiting in an accept queue that is not ESTABLISHED";
	else if (!is_conn(e) && !is_waiting(e) && e->state != TCP_LISTEN && e->state != TCP_CLOSE &&
		 e->state != TCP_SYN_SENT)
		why = "a state amber does not restore";
	else if (e->n_pending && e->state != TCP_LISTEN)
		why = "connections waiting in its accept queue but not listening";
	else if ((is_conn(e) || is_waiting(e) || e->state == TCP_SYN_SENT) &&
		 (!e->has_dst_addr || (e->dst_addr.len != 4 && e->dst_addr.len != 16)))
		why = "a connection without a peer address";
	else if (e->has_shutdown && (e->shutdown & ~(TCP_SHUT_RCV | TCP_SHUT_SEND)))
		why = "unknown shutdown bits";
	else if (is_conn(e) && e->has_shutdown &&
		 (!!(e->shutdown & TCP_SHUT_SEND) != tcp_fin_sent(e->state) ||
		  (tcp_fin_received(e->state) && !(e->shutdown & TCP_SHUT_RCV))))
		why = "shutdown bits its state cannot have";
	else if (e->closed && !is_conn(e))
		why = "closed but not a connection";
	if (!why)
		return 0;
	pr_err("files.img: TCP socket %s in state %u (%s) with %s; the image is corrupt",
	       inet_show_addr(e, false), e->state, state_name(e->state), why);
	return -EBADMSG;
}

/*
 * What this restore cannot take: a connection without --tcp-established
 * (or --tcp-close), or in an image of another user's: TCP repair would set
 * any connection state its writer chose (sequence numbers to any peer) with
 * amber's CAP_NET_ADMIN, and the segments that replay a FIN or a reset come
 * from a raw socket.
 */
static int check_isk(const struct isk *s, struct tree *t)
{
	const struct opts *o = t->o;
	const InetSkEntry *e = s->e;

	if (is_conn(e) && !is_reset(e, o) && !o->tcp_established) {
		pr_err("the image holds the %s TCP connection %s -> %s; restore with "
		       "--tcp-established (or with --tcp-close to have it come back reset)",
		       state_name(e->state), inet_show_addr(e, false), inet_show_addr(e, true));
		return -EINVAL;
	}
	if (is_conn(e) && t->owner.switches) {
		pr_err("the image holds the %s TCP connection %s -> %s, and belongs to "
		       "uid %u: TCP repair would let its writer set any connection's state with "
		       "root's CAP_NET_ADMIN; only root's own images restore connections",
		       state_name(e->state), inet_show_addr(e, false), inet_show_addr(e, true),
		       t->owner.uid);
		return -EPERM;
	}
	if (inet_extra(e))
		return inet_extra_check(t, e, s->who);
	return sk_opts_check(
		t, e->opts, e->n_opts, (int)e->family, (int)e->type,
		e->type == SOCK_STREAM && e->state != TCP_CLOSE && e->state != TCP_LISTEN, s->who);
}

/* Every inet socket of the image at once: listeners before the connections on their ports. */
static int inet_prepare(struct tree *t, RegFile **files, size_t n, int *fds)
{
	int ret = 0;

	rtree = t;
	isks = calloc(n, sizeof(*isks));
	if (!isks)
		return -ENOMEM;
	nr_isks = n;
	for (size_t i = 0; i < n && !ret; i++) {
		isks[i] = (struct isk){.f = files[i], .e = files[i]->inet_sk, .fd = -1};
		snprintf(isks[i].who, sizeof(isks[i].who), "%s", sk_who(t, files[i], "inet"));
		if (!isks[i].e) {
			pr_err("files.img: inet socket entry %u has no socket state; the image is "
			       "corrupt",
			       files[i]->id);
			ret = -EBADMSG;
		} else if (isks[i].e->type == SOCK_STREAM) {
			ret = check_tcp_state(isks[i].e);
		}
	}
	/* what the image may hold, every entry, before what this restore may take */
	for (size_t i = 0; i < n && !ret; i++)
		ret = check_isk(&isks[i], t);
	/* listeners first: established sockets on their port bind with repair's force-reuse */
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (isks[i].e->type == SOCK_STREAM &&
		    (isks[i].e->state == TCP_LISTEN || isks[i].e->state == TCP_CLOSE))
			ret = open_listen_or_closed(&isks[i]);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (isks[i].e->type == SOCK_DGRAM && !inet_extra(isks[i].e))
			ret = open_udp(&isks[i]);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (inet_extra(isks[i].e))
			ret = inet_extra_open(t, isks[i].e, isks[i].who, &isks[i].fd);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (is_conn(isks[i].e))
			ret = is_reset(isks[i].e, t->o) ? open_reset(&isks[i])
							: open_established(&isks[i]);
	/*
	 * The FINs before the unlock: a live peer's own segments (a FIN it
	 * retransmits, its acknowledgement never came) stay dropped until the
	 * state they would have found is rebuilt, in order.  Ours pass the lock.
	 */
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (is_conn(isks[i].e) && !is_reset(isks[i].e, t->o))
			ret = replay_fins(&isks[i]);
	if (!ret)
		ret = unlock_network(t);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (is_reset(isks[i].e, t->o))
			ret = finish_reset(&isks[i]);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (is_conn(isks[i].e) && !is_reset(isks[i].e, t->o))
			ret = finish_established(&isks[i]);
	/* once the listeners in the tree exist: first what waited in their queues */
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (isks[i].e->type == SOCK_STREAM && isks[i].e->state == TCP_LISTEN)
			ret = open_waiting(&isks[i]);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (isks[i].e->type == SOCK_STREAM && isks[i].e->state == TCP_SYN_SENT)
			ret = open_syn_sent(&isks[i]);
	/* the filters once the queues are in, the buffer sizes after the refill's */
	for (size_t i = 0; i < nr_isks && !ret; i++)
		ret = sk_opts_restore(t, isks[i].fd, isks[i].e->opts, isks[i].e->n_opts, true,
				      isks[i].who);
	for (size_t i = 0; i < nr_isks && !ret; i++) {
		ret = sk_set_flags(isks[i].fd, isks[i].f);
		fds[i] = isks[i].fd;
	}
	return ret;
}

static const RegFile *rfile_by_ino(struct tree *t, uint64_t ino)
{
	for (size_t i = 0; i < t->nr_rfiles; i++)
		if (t->rfiles[i]->kind == FILE_KIND__FILE_INET_SK && t->rfiles[i]->inet_sk &&
		    t->rfiles[i]->has_ino && t->rfiles[i]->ino == ino)
			return t->rfiles[i];
	return NULL;
}

/* Does client c's connection go to listener l's address and port? */
static bool goes_to(const InetSkEntry *c, const InetSkEntry *l)
{
	uint8_t la[16] = {0}, ca[16] = {0};
	int lf = (int)l->family, cf = (int)c->family;

	if (c->dst_port != l->src_port || (l->src_addr.len != 4 && l->src_addr.len != 16) ||
	    (c->dst_addr.len != 4 && c->dst_addr.len != 16))
		return false;
	memcpy(la, l->src_addr.data, l->src_addr.len);
	memcpy(ca, c->dst_addr.data, c->dst_addr.len);
	lf = l->src_addr.len == 4 ? AF_INET : AF_INET6;
	cf = c->dst_addr.len == 4 ? AF_INET : AF_INET6;
	return is_wildcard(lf, la) || same_host(lf, la, cf, ca);
}

/*
 * Before anything is made: a listener's waiting connections name clients of
 * the image, in its network namespace, connected to it, that name it back,
 * once each; a restore would otherwise connect sockets the dump never saw
 * connected.
 */
static int inet_check(struct tree *t, const RegFile *f)
{
	const InetSkEntry *e = f->inet_sk, *o;
	const RegFile *g;
	const char *why = NULL;

	if (!e || (!e->n_pending && !e->has_pending_on))
		return 0;
	if (e->type != SOCK_STREAM || !f->has_ino)
		why = "not a TCP socket with an inode";
	else if (e->n_pending && (e->state != TCP_LISTEN || !e->has_backlog ||
				  e->n_pending > (size_t)e->backlog + 1))
		why = "more connections waiting than its backlog takes, or not a listener";
	for (size_t i = 0; !why && i < e->n_pending; i++) {
		g = rfile_by_ino(t, e->pending[i]);
		o = g ? g->inet_sk : NULL;
		if (!o || !o->has_pending_on || o->pending_on != f->ino || g->net_ns != f->net_ns ||
		    !goes_to(o, e))
			why = "a waiting connection whose client does not wait on it";
		for (size_t j = 0; !why && j < i; j++)
			if (e->pending[j] == e->pending[i])
				why = "a waiting connection listed twice";
	}
	if (!why && e->has_pending_on) {
		bool listed = false;

		g = rfile_by_ino(t, e->pending_on);
		o = g ? g->inet_sk : NULL;
		for (size_t i = 0; o && i < o->n_pending; i++)
			listed |= o->pending[i] == f->ino;
		if (!listed)
			why = "waiting on a listener that does not list it";
	}
	if (!why)
		return 0;
	pr_err("files.img: TCP socket %s (socket:[%llu]): %s; the image is corrupt",
	       inet_show_addr(e, false), (unsigned long long)f->ino, why);
	return -EBADMSG;
}

const struct fd_type inet_sk_type = {
	.name = "inet socket",
	.kind = FILE_KIND__FILE_INET_SK,
	.match = inet_match,
	.dump = inet_dump,
	.prepare = inet_prepare,
	.check = inet_check,
	.bounds_itself = true,
	.dump_done = inet_dump_done,
	.dump_undo = repair_release,
};
