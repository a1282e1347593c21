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
 * queues, window), and only once all exist is the network unlocked and
 * repair mode turned off, so that connections between two restored sockets
 * find their peer.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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
	FILE *fp = fopen(table, "re");

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

/* A listener's backlog and pending connections, from inet_diag. */
static int listen_diag(int family, uint64_t ino, uint32_t *backlog, uint32_t *pending)
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
		      .idiag_states = 1 << TCP_LISTEN},
	};
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
	static char buf[32768];
	int s, ret = -ENOENT;
	bool done = false;

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

			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = true;
				break;
			}
			if (m->idiag_inode == ino) {
				*pending = m->idiag_rqueue;
				*backlog = m->idiag_wqueue;
				ret = 0;
			}
		}
	}
close_sock:
	close(s);
	return ret;
}

static int put_addr(InetSkEntry *e, const struct sockaddr_storage *ss, bool dst)
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

static socklen_t get_addr(const InetSkEntry *e, bool dst, struct sockaddr_storage *ss)
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

static const char *show_addr(const InetSkEntry *e, bool dst)
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
		pr_err("%s: peeked %zd of the %u queued bytes: %m", what, n, len);
		return n < 0 ? -errno : -EIO;
	}
	b->len = len;
	return 0;
}

static int dump_established(struct dump_ctx *ctx, int dup, InetSkEntry *e, const char *what)
{
	int on = 1, inq, outq, unsq, reuse = 0, peek_old = -1, zero = 0, ret;
	socklen_t len = sizeof(reuse);
	struct tcp_repair_window w;
	struct tcp_info ti;
	uint32_t seq = 0, mss, ts;
	const char *table;

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
	if (ioctl(dup, SIOCINQ, &inq) || ioctl(dup, SIOCOUTQ, &outq) ||
	    ioctl(dup, SIOCOUTQNSD, &unsq)) {
		ret = -errno;
		pr_err("%s: cannot read the queue lengths: %m", what);
		goto off;
	}
	len = sizeof(peek_old);
	getsockopt(dup, SOL_SOCKET, SO_PEEK_OFF, &peek_old, &len);
	if (peek_old >= 0)
		setsockopt(dup, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero));
	ret = set_repair_queue(dup, TCP_RECV_QUEUE, what);
	if (!ret)
		ret = tcp_getopt(dup, TCP_QUEUE_SEQ, &seq, sizeof(seq), what, "TCP_QUEUE_SEQ");
	e->has_rcv_seq = e->has_rcv_queue = 1;
	e->rcv_seq = seq;
	if (!ret)
		ret = peek_queue(dup, (uint32_t)inq, &e->rcv_queue, what);
	if (peek_old >= 0)
		setsockopt(dup, SOL_SOCKET, SO_PEEK_OFF, &peek_old, sizeof(peek_old));
	if (!ret)
		ret = set_repair_queue(dup, TCP_SEND_QUEUE, what);
	if (!ret)
		ret = tcp_getopt(dup, TCP_QUEUE_SEQ, &seq, sizeof(seq), what, "TCP_QUEUE_SEQ");
	e->has_snd_seq = e->has_snd_queue = e->has_snd_queue_unsent = 1;
	e->snd_seq = seq;
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
	ret = put_addr(e, &ss, false);
	if (ret)
		return ret;
	len = sizeof(ss);
	if (!getpeername(dup, (struct sockaddr *)&ss, &len)) {
		ret = put_addr(e, &ss, true);
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
	ret = sk_opts_dump(dup, (int)e->family, (int)e->type, e->state == TCP_ESTABLISHED, what,
			   &e->opts, &e->n_opts);
	if (ret)
		return ret;
	switch (e->state) {
	case TCP_CLOSE:
		return 0;
	case TCP_LISTEN: {
		uint32_t backlog = SOMAXCONN, pending = 0;

		ret = listen_diag(e->family, f->ino, &backlog, &pending);
		if (ret) {
			pr_err("%s: inet_diag cannot describe the listener %s: %s", what,
			       show_addr(e, false), strerror(-ret));
			return ret;
		}
		e->has_backlog = 1;
		e->backlog = backlog;
		if (pending && !ctx->o->skip_in_flight) {
			pr_err("%s: TCP listener %s has %u connection(s) not accept()ed yet, "
			       "which amber cannot dump; dump with --skip-in-flight to drop them "
			       "(their clients see a reset)",
			       what, show_addr(e, false), pending);
			return -EOPNOTSUPP;
		}
		if (pending)
			pr_warn("%s: --skip-in-flight: %u connection(s) to %s not accept()ed yet "
				"are dropped; their clients will see a reset",
				what, pending, show_addr(e, false));
		return 0;
	}
	case TCP_ESTABLISHED:
		if (!ctx->o->tcp_established) {
			pr_err("%s: established TCP connection %s -> %s; dump (and restore) with "
			       "--tcp-established to take it along",
			       what, show_addr(e, false), show_addr(e, true));
			return -EOPNOTSUPP;
		}
		return dump_established(ctx, dup, e, what);
	default:
		pr_err("%s: TCP socket %s in state %s, which amber cannot dump (only LISTEN, "
		       "ESTABLISHED and unconnected ones)",
		       what, show_addr(e, false), state_name(e->state));
		return -EOPNOTSUPP;
	}
sockopt_fail:
	pr_err("%s: cannot read the socket's address or options: %m", what);
	return -errno;
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
		       e->type == SOCK_STREAM ? "TCP" : "UDP", show_addr(e, false));
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
	socklen_t len = get_addr(e, false, &ss);
	int ret = owner_enter(rtree);

	if (ret)
		return ret;
	if (bind(fd, (struct sockaddr *)&ss, len)) {
		ret = -errno;
		pr_err("cannot bind a %s socket to %s: %m%s",
		       e->type == SOCK_STREAM ? "TCP" : "UDP", show_addr(e, false),
		       errno == EADDRINUSE ? " (another socket holds the port; stop it)"
		       : errno == EACCES   ? " (the image's owner may not bind that port)"
					   : "");
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
		pr_err("cannot listen on %s: %m", show_addr(e, false));
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
		pr_err("UDP socket %s: cannot read back its address: %m", show_addr(e, false));
		return -errno;
	}
	if (to.ss_family == AF_INET) {
		struct sockaddr_in *in = (void *)&to;

		if (in->sin_addr.s_addr == htonl(INADDR_ANY))
			in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else {
		struct sockaddr_in6 *in6 = (void *)&to;

		if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
			in6->sin6_addr = in6addr_loopback;
	}
	tmp = socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (tmp < 0) {
		pr_err("cannot create a UDP socket to refill %s: %m", show_addr(e, false));
		return -errno;
	}
	for (size_t i = 0; i < e->n_dgrams && !ret; i++)
		if (sendto(tmp, e->dgrams[i]->data.data, e->dgrams[i]->data.len, 0,
			   (struct sockaddr *)&to, len) != (ssize_t)e->dgrams[i]->data.len)
			ret = -errno;
	close(tmp);
	if (ret) {
		pr_err("cannot refill the queue of UDP socket %s: %s", show_addr(e, false),
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
		pr_err("UDP socket %s: the refilled datagrams did not arrive", show_addr(e, false));
		return ret;
	}
connect:
	if (!ret && e->has_dst_addr) {
		struct sockaddr_storage ss;

		len = get_addr(e, true, &ss);
		if (connect(s->fd, (struct sockaddr *)&ss, len)) {
			ret = -errno;
			pr_err("cannot connect UDP socket %s to %s: %m", show_addr(e, false),
			       show_addr(e, true));
		}
	}
	return ret;
}

static int tcp_setopt(int fd, int opt, const void *val, socklen_t len, const InetSkEntry *e,
		      const char *name)
{
	if (setsockopt(fd, SOL_TCP, opt, val, len)) {
		pr_err("TCP %s -> %s: cannot set %s: %m", show_addr(e, false), show_addr(e, true),
		       name);
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
			       show_addr(e, false), show_addr(e, true), q, off, len);
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
		pr_err("TCP %s -> %s: bad queue lengths in the image", show_addr(e, false),
		       show_addr(e, true));
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
	len = get_addr(e, true, &ss);
	if (connect(s->fd, (struct sockaddr *)&ss, len)) {
		pr_err("TCP %s -> %s: cannot reconnect in repair mode: %m", show_addr(e, false),
		       show_addr(e, true));
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

/* Every socket exists: leave repair mode (a window probe), then the unsent data. */
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
static int check_isk(const struct isk *s, struct tree *t)
{
	const struct opts *o = t->o;

	if (!s->e) {
		pr_err("files.img: inet socket entry %u has no socket state; the image is corrupt",
		       s->f->id);
		return -EBADMSG;
	}
	if (s->e->type == SOCK_STREAM && s->e->state == TCP_ESTABLISHED && !o->tcp_established) {
		pr_err("the image holds the established TCP connection %s -> %s; restore "
		       "with --tcp-established",
		       show_addr(s->e, false), show_addr(s->e, true));
		return -EINVAL;
	}
	if (s->e->type == SOCK_STREAM && s->e->state == TCP_ESTABLISHED && t->owner.switches) {
		pr_err("the image holds the established TCP connection %s -> %s, and belongs to "
		       "uid %u: TCP repair would let its writer set any connection's state with "
		       "root's CAP_NET_ADMIN; only root's own images restore connections",
		       show_addr(s->e, false), show_addr(s->e, true), t->owner.uid);
		return -EPERM;
	}
	if (inet_extra(s->e))
		return inet_extra_check(t, s->e, s->who);
	return sk_opts_check(t, s->e->opts, s->e->n_opts, (int)s->e->family, (int)s->e->type,
			     s->e->type == SOCK_STREAM && s->e->state == TCP_ESTABLISHED, s->who);
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
		ret = check_isk(&isks[i], t);
	}
	/* listeners first: established sockets on their port bind with repair's force-reuse */
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (isks[i].e->type == SOCK_STREAM && isks[i].e->state != TCP_ESTABLISHED)
			ret = open_listen_or_closed(&isks[i]);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (isks[i].e->type == SOCK_DGRAM && !inet_extra(isks[i].e))
			ret = open_udp(&isks[i]);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (inet_extra(isks[i].e))
			ret = inet_extra_open(t, isks[i].e, isks[i].who, &isks[i].fd);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (isks[i].e->type == SOCK_STREAM && isks[i].e->state == TCP_ESTABLISHED)
			ret = open_established(&isks[i]);
	if (!ret)
		ret = unlock_network(t);
	for (size_t i = 0; i < nr_isks && !ret; i++)
		if (isks[i].e->type == SOCK_STREAM && isks[i].e->state == TCP_ESTABLISHED)
			ret = finish_established(&isks[i]);
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

const struct fd_type inet_sk_type = {
	.name = "inet socket",
	.kind = FILE_KIND__FILE_INET_SK,
	.match = inet_match,
	.dump = inet_dump,
	.prepare = inet_prepare,
	.bounds_itself = true,
	.dump_undo = repair_release,
};
