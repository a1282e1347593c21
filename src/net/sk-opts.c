// SPDX-License-Identifier: MIT
/*
 * Socket options of inet and unix sockets (sk.h): one table, walked by the
 * dump, the image check and the restore.
 *
 * Dump: every option of the table that applies to the socket's family and
 * type is read on the socket and on a new socket of the same kind made in
 * amber (the same network namespace, so the same sysctl defaults); only
 * those that differ are saved, by name.  An option that the new socket
 * cannot read does not exist on this kernel for that kind of socket and is
 * skipped.  What the table knows but cannot be made again (an eBPF filter,
 * SOF_TIMESTAMPING_OPT_ID) is refused.
 *
 * Restore: the image's options are checked before any socket is made (a
 * known name, for this kind of socket, a well-formed value, the owner's to
 * set), then set in two steps, both with the image owner's rights so that
 * the kernel bounds what they ask: the early ones on the new socket before
 * it binds (SO_REUSEPORT, IP_FREEBIND, SO_BINDTODEVICE need that), the late
 * ones (buffer sizes, filters) once its queue is refilled.  Then every one
 * is read back: a value the kernel clamped fails the restore.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <netinet/icmp6.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <linux/net_tstamp.h>

#include "amber.h"
#include "log.h"
#include "owner.h"
#include "sk.h"
#include "sys.h"

/* linux/icmp.h and linux/udp.h would clash with the libc headers */
#define ICMP_FILTER	   1
#define ICMP_FILTER_SIZE   4 /* struct icmp_filter: a bit per ICMP type */
#define SOL_UDPLITE	   136
#define UDPLITE_SEND_CSCOV 10
#define UDPLITE_RECV_CSCOV 11
#ifndef SOL_ICMPV6
#define SOL_ICMPV6 58
#endif
#ifndef PACKET_VNET_HDR_SZ
#define PACKET_VNET_HDR_SZ 24
#endif
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83
#endif
#ifndef SO_BUF_LOCK
#define SO_BUF_LOCK 72
#endif
#ifndef SOCK_SNDBUF_LOCK
#define SOCK_SNDBUF_LOCK 1
#define SOCK_RCVBUF_LOCK 2
#endif
#define TCP_CA_NAME_MAX 16

/* families and types an option applies to */
#define F_UNIX	  1
#define F_INET4	  2
#define F_INET6	  4
#define F_INET	  (F_INET4 | F_INET6)
#define F_PACKET  8
#define F_NETLINK 16
#define F_ALL	  (F_UNIX | F_INET | F_PACKET | F_NETLINK)
#define T_STREAM  1
#define T_DGRAM	  2
#define T_SEQ	  4
#define T_RAW	  8
#define T_IP	  (T_STREAM | T_DGRAM | T_RAW) /* IP-level: any inet socket */
#define T_ALL	  (T_STREAM | T_DGRAM | T_SEQ | T_RAW)

enum kind {
	K_BOOL,	  /* int, 0 or 1 */
	K_INT,	  /* int */
	K_BUF,	  /* SO_SNDBUF/SO_RCVBUF: kept when the user set it (SO_BUF_LOCK bits) */
	K_RAW,	  /* a struct of size bytes */
	K_STR,	  /* a name of fewer than size bytes */
	K_FILTER, /* classic BPF program (SO_GET_FILTER / SO_ATTACH_FILTER) */
	K_MEMB,	  /* one multicast membership each: val the ifindex, data the group */
};

/* flags */
#define LATE	1 /* set after the queues are refilled */
#define NOT_EST 2 /* not on an established connection (what reads back is the connection's) */
#define PRIV	4 /* needs CAP_NET_ADMIN or CAP_NET_RAW */
#define PRIO	8 /* SO_PRIORITY: above 6 PRIV */

struct opt {
	const char *name;
	int level, opt;
	enum kind kind;
	unsigned size; /* K_RAW, K_STR */
	unsigned families, types, flags;
	int proto; /* only on sockets of this protocol (0: any) */
};

#define B(l, o, f, t, fl)                                                                          \
	{                                                                                          \
#o, l, o, K_BOOL, 0, f, t, fl                                                      \
	}
#define I(l, o, f, t, fl)                                                                          \
	{                                                                                          \
#o, l, o, K_INT, 0, f, t, fl                                                       \
	}
#define R(l, o, sz, f, t, fl)                                                                      \
	{                                                                                          \
#o, l, o, K_RAW, sz, f, t, fl                                                      \
	}

/*
 * In the order the restore sets them: IP_TOS before SO_PRIORITY (TOS sets
 * the priority too), the buffer sizes before SO_BUF_LOCK, the filter
 * before SO_LOCK_FILTER.
 */
static const struct opt opts[] = {
	/* joined before bind like the rest; a group of size bytes */
	{"IP_ADD_MEMBERSHIP", SOL_IP, MCAST_JOIN_GROUP, K_MEMB, 4, F_INET, T_DGRAM | T_RAW, 0},
	{"IPV6_ADD_MEMBERSHIP", SOL_IPV6, MCAST_JOIN_GROUP, K_MEMB, 16, F_INET6, T_DGRAM | T_RAW,
	 0},
	B(SOL_IP, IP_MULTICAST_LOOP, F_INET, T_DGRAM | T_RAW, 0),
	I(SOL_IP, IP_MULTICAST_TTL, F_INET, T_DGRAM | T_RAW, 0),
	B(SOL_IP, IP_MULTICAST_ALL, F_INET, T_DGRAM | T_RAW, 0),
	I(SOL_IPV6, IPV6_MULTICAST_IF, F_INET6, T_DGRAM | T_RAW, 0),
	I(SOL_IPV6, IPV6_MULTICAST_HOPS, F_INET6, T_DGRAM | T_RAW, 0),
	B(SOL_IPV6, IPV6_MULTICAST_LOOP, F_INET6, T_DGRAM | T_RAW, 0),
	B(SOL_IPV6, IPV6_MULTICAST_ALL, F_INET6, T_DGRAM | T_RAW, 0),
	I(SOL_IP, IP_TOS, F_INET, T_IP, 0),
	I(SOL_IP, IP_TTL, F_INET, T_IP, 0),
	B(SOL_IP, IP_FREEBIND, F_INET, T_IP, 0),
	B(SOL_IP, IP_TRANSPARENT, F_INET, T_IP, PRIV),
	B(SOL_IP, IP_PKTINFO, F_INET, T_IP, 0),
	B(SOL_IP, IP_RECVERR, F_INET, T_IP, 0),
	I(SOL_IP, IP_MTU_DISCOVER, F_INET, T_IP, 0),
	B(SOL_IP, IP_RECVTOS, F_INET, T_IP, 0),
	B(SOL_IP, IP_RECVTTL, F_INET, T_IP, 0),
	B(SOL_IP, IP_RECVORIGDSTADDR, F_INET, T_DGRAM | T_RAW, 0),
	B(SOL_IP, IP_BIND_ADDRESS_NO_PORT, F_INET, T_IP, 0),
	I(SOL_IPV6, IPV6_TCLASS, F_INET6, T_IP, 0),
	I(SOL_IPV6, IPV6_UNICAST_HOPS, F_INET6, T_IP, 0),
	B(SOL_IPV6, IPV6_RECVPKTINFO, F_INET6, T_IP, 0),
	B(SOL_IPV6, IPV6_RECVERR, F_INET6, T_IP, 0),
	I(SOL_IPV6, IPV6_MTU_DISCOVER, F_INET6, T_IP, 0),
	B(SOL_IPV6, IPV6_RECVTCLASS, F_INET6, T_IP, 0),
	B(SOL_IPV6, IPV6_RECVHOPLIMIT, F_INET6, T_IP, 0),
	B(SOL_IPV6, IPV6_DONTFRAG, F_INET6, T_IP, 0),
	B(SOL_IPV6, IPV6_RECVORIGDSTADDR, F_INET6, T_DGRAM | T_RAW, 0),
	B(SOL_IPV6, IPV6_FREEBIND, F_INET6, T_IP, 0),
	B(SOL_IPV6, IPV6_TRANSPARENT, F_INET6, T_IP, PRIV),
	/* inet keeps SO_REUSEADDR in inet_sk_entry.reuseaddr (restore binds with it on) */
	B(SOL_SOCKET, SO_REUSEADDR, F_UNIX | F_PACKET | F_NETLINK, T_ALL, 0),
	B(SOL_SOCKET, SO_REUSEPORT, F_ALL, T_ALL, 0),
	I(SOL_SOCKET, SO_PRIORITY, F_ALL, T_ALL, PRIO),
	I(SOL_SOCKET, SO_MARK, F_ALL, T_ALL, PRIV),
	I(SOL_SOCKET, SO_RCVLOWAT, F_ALL, T_ALL, 0),
	R(SOL_SOCKET, SO_RCVTIMEO, sizeof(struct timeval), F_ALL, T_ALL, 0),
	R(SOL_SOCKET, SO_SNDTIMEO, sizeof(struct timeval), F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_KEEPALIVE, F_ALL, T_ALL, 0),
	R(SOL_SOCKET, SO_LINGER, sizeof(struct linger), F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_BROADCAST, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_OOBINLINE, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_PASSCRED, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_PASSSEC, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_PASSPIDFD, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_PASSRIGHTS, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_RXQ_OVFL, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_SELECT_ERR_QUEUE, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_ZEROCOPY, F_INET, T_STREAM | T_DGRAM, 0),
	{"SO_BINDTODEVICE", SOL_SOCKET, SO_BINDTODEVICE, K_STR, IFNAMSIZ, F_ALL, T_ALL, 0},
	B(SOL_SOCKET, SO_TIMESTAMP_OLD, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_TIMESTAMP_NEW, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_TIMESTAMPNS_OLD, F_ALL, T_ALL, 0),
	B(SOL_SOCKET, SO_TIMESTAMPNS_NEW, F_ALL, T_ALL, 0),
	R(SOL_SOCKET, SO_TIMESTAMPING_OLD, sizeof(struct so_timestamping), F_ALL, T_ALL, 0),
	R(SOL_SOCKET, SO_TIMESTAMPING_NEW, sizeof(struct so_timestamping), F_ALL, T_ALL, 0),
	/* unix keeps its buffer sizes in unix_sk_entry (the refill needs its own) */
	{"SO_SNDBUF", SOL_SOCKET, SO_SNDBUF, K_BUF, 0, F_INET | F_PACKET | F_NETLINK, T_ALL, LATE},
	{"SO_RCVBUF", SOL_SOCKET, SO_RCVBUF, K_BUF, 0, F_INET | F_PACKET | F_NETLINK, T_ALL, LATE},
	I(SOL_SOCKET, SO_BUF_LOCK, F_INET | F_PACKET | F_NETLINK, T_ALL, LATE),
	{"SO_ATTACH_FILTER", SOL_SOCKET, SO_ATTACH_FILTER, K_FILTER, 0, F_ALL, T_ALL, LATE},
	B(SOL_SOCKET, SO_LOCK_FILTER, F_ALL, T_ALL, LATE),
	B(SOL_TCP, TCP_NODELAY, F_INET, T_STREAM, 0),
	B(SOL_TCP, TCP_CORK, F_INET, T_STREAM, 0),
	I(SOL_TCP, TCP_USER_TIMEOUT, F_INET, T_STREAM, 0),
	{"TCP_CONGESTION", SOL_TCP, TCP_CONGESTION, K_STR, TCP_CA_NAME_MAX, F_INET, T_STREAM, 0},
	I(SOL_TCP, TCP_MAXSEG, F_INET, T_STREAM, NOT_EST),
	I(SOL_TCP, TCP_NOTSENT_LOWAT, F_INET, T_STREAM, 0),
	I(SOL_TCP, TCP_KEEPIDLE, F_INET, T_STREAM, 0),
	I(SOL_TCP, TCP_KEEPINTVL, F_INET, T_STREAM, 0),
	I(SOL_TCP, TCP_KEEPCNT, F_INET, T_STREAM, 0),
	I(SOL_TCP, TCP_FASTOPEN, F_INET, T_STREAM, NOT_EST),
	I(SOL_TCP, TCP_DEFER_ACCEPT, F_INET, T_STREAM, NOT_EST),
	I(SOL_TCP, TCP_LINGER2, F_INET, T_STREAM, 0),
	I(SOL_TCP, TCP_WINDOW_CLAMP, F_INET, T_STREAM, NOT_EST),
	B(SOL_TCP, TCP_THIN_LINEAR_TIMEOUTS, F_INET, T_STREAM, 0),
	I(SOL_TCP, TCP_SYNCNT, F_INET, T_STREAM, 0),
	B(SOL_TCP, TCP_SAVE_SYN, F_INET, T_STREAM, 0),
	B(SOL_TCP, TCP_INQ, F_INET, T_STREAM, 0),
	I(SOL_TCP, TCP_TX_DELAY, F_INET, T_STREAM, 0),
	B(SOL_TCP, TCP_FASTOPEN_CONNECT, F_INET, T_STREAM, 0),
	B(SOL_TCP, TCP_FASTOPEN_NO_COOKIE, F_INET, T_STREAM, 0),
	B(IPPROTO_UDP, UDP_CORK, F_INET, T_DGRAM, 0),
	I(IPPROTO_UDP, UDP_SEGMENT, F_INET, T_DGRAM, 0),
	B(IPPROTO_UDP, UDP_GRO, F_INET, T_DGRAM, 0),
	/* UDP-Lite, ICMP "ping" and raw sockets (sk-raw.c) */
	{"UDPLITE_SEND_CSCOV", SOL_UDPLITE, UDPLITE_SEND_CSCOV, K_INT, 0, F_INET, T_DGRAM, 0,
	 IPPROTO_UDPLITE},
	{"UDPLITE_RECV_CSCOV", SOL_UDPLITE, UDPLITE_RECV_CSCOV, K_INT, 0, F_INET, T_DGRAM, 0,
	 IPPROTO_UDPLITE},
	B(SOL_IP, IP_HDRINCL, F_INET4, T_RAW, 0),
	B(SOL_IP, IP_NODEFRAG, F_INET4, T_RAW, 0),
	{"ICMP_FILTER", SOL_RAW, ICMP_FILTER, K_RAW, ICMP_FILTER_SIZE, F_INET4, T_RAW, 0,
	 IPPROTO_ICMP},
	I(SOL_IPV6, IPV6_CHECKSUM, F_INET6, T_RAW, 0),
	B(SOL_IPV6, IPV6_HDRINCL, F_INET6, T_RAW, 0),
	{"ICMPV6_FILTER", SOL_ICMPV6, ICMP6_FILTER, K_RAW, sizeof(struct icmp6_filter), F_INET6,
	 T_RAW, 0, IPPROTO_ICMPV6},
	/* packet sockets (sk-packet.c): PACKET_VERSION and PACKET_RESERVE before bind */
	I(SOL_PACKET, PACKET_VERSION, F_PACKET, T_DGRAM | T_RAW, 0),
	I(SOL_PACKET, PACKET_RESERVE, F_PACKET, T_DGRAM | T_RAW, 0),
	B(SOL_PACKET, PACKET_AUXDATA, F_PACKET, T_DGRAM | T_RAW, 0),
	B(SOL_PACKET, PACKET_ORIGDEV, F_PACKET, T_DGRAM | T_RAW, 0),
	I(SOL_PACKET, PACKET_TIMESTAMP, F_PACKET, T_DGRAM | T_RAW, 0),
	B(SOL_PACKET, PACKET_LOSS, F_PACKET, T_DGRAM | T_RAW, 0),
	B(SOL_PACKET, PACKET_VNET_HDR, F_PACKET, T_RAW, 0),
	I(SOL_PACKET, PACKET_VNET_HDR_SZ, F_PACKET, T_RAW, 0),
	B(SOL_PACKET, PACKET_QDISC_BYPASS, F_PACKET, T_DGRAM | T_RAW, 0),
	B(SOL_PACKET, PACKET_IGNORE_OUTGOING, F_PACKET, T_DGRAM | T_RAW, 0),
	B(SOL_PACKET, PACKET_TX_HAS_OFF, F_PACKET, T_DGRAM | T_RAW, 0),
	/* netlink sockets (sk-netlink.c) */
	B(SOL_NETLINK, NETLINK_PKTINFO, F_NETLINK, T_DGRAM | T_RAW, 0),
	B(SOL_NETLINK, NETLINK_BROADCAST_ERROR, F_NETLINK, T_DGRAM | T_RAW, 0),
	B(SOL_NETLINK, NETLINK_NO_ENOBUFS, F_NETLINK, T_DGRAM | T_RAW, 0),
	B(SOL_NETLINK, NETLINK_LISTEN_ALL_NSID, F_NETLINK, T_DGRAM | T_RAW, PRIV),
	B(SOL_NETLINK, NETLINK_CAP_ACK, F_NETLINK, T_DGRAM | T_RAW, 0),
	B(SOL_NETLINK, NETLINK_EXT_ACK, F_NETLINK, T_DGRAM | T_RAW, 0),
	B(SOL_NETLINK, NETLINK_GET_STRICT_CHK, F_NETLINK, T_DGRAM | T_RAW, 0),
};

#define NR_OPTS	       (sizeof(opts) / sizeof(opts[0]))
#define MAX_FILTER_LEN BPF_MAXINSNS

static unsigned family_bit(int family)
{
	switch (family) {
	case AF_UNIX:
		return F_UNIX;
	case AF_INET:
		return F_INET4;
	case AF_INET6:
		return F_INET6;
	case AF_PACKET:
		return F_PACKET;
	case AF_NETLINK:
		return F_NETLINK;
	}
	return 0;
}

static unsigned type_bit(int type)
{
	switch (type) {
	case SOCK_STREAM:
		return T_STREAM;
	case SOCK_DGRAM:
		return T_DGRAM;
	case SOCK_RAW:
		return T_RAW;
	}
	return T_SEQ;
}

/* proto -1: a socket of its type's usual protocol (TCP, UDP), no protocol's own options */
static bool applies(const struct opt *o, int family, int type, int proto, bool established)
{
	return (o->families & family_bit(family)) && (o->types & type_bit(type)) &&
	       (!o->proto || o->proto == proto) && !(established && (o->flags & NOT_EST));
}

static const struct opt *opt_by_name(const char *name)
{
	for (size_t i = 0; i < NR_OPTS; i++)
		if (!strcmp(opts[i].name, name))
			return &opts[i];
	return NULL;
}

/* An option's value as the image holds it. */
struct val {
	int64_t i;
	uint8_t *data;
	size_t len;
};

/* Read o on fd; -errno (unlogged: the caller knows whether that is an error). */
static int get_opt(int fd, const struct opt *o, struct val *v)
{
	socklen_t len;
	int i = 0;

	v->data = NULL;
	v->len = 0;
	v->i = 0;
	switch (o->kind) {
	case K_BOOL:
	case K_INT:
	case K_BUF:
		len = sizeof(i);
		if (getsockopt(fd, o->level, o->opt, &i, &len))
			return -errno;
		v->i = o->kind == K_BOOL ? !!i : i;
		return 0;
	case K_RAW:
	case K_STR:
		v->data = calloc(1, o->size);
		if (!v->data)
			return -ENOMEM;
		len = o->size;
		if (getsockopt(fd, o->level, o->opt, v->data, &len))
			return -errno;
		/* a time left without l_onoff does nothing, and is not set again */
		if (o->opt == SO_LINGER && !((struct linger *)v->data)->l_onoff)
			((struct linger *)v->data)->l_linger = 0;
		/* the "other" timestamping variant reads as a 4-byte 0 */
		if (o->kind == K_RAW && len != o->size)
			memset(v->data, 0, o->size);
		v->len = o->kind == K_RAW ? o->size : strnlen((char *)v->data, len);
		return 0;
	case K_FILTER:
		/* the first call counts the instructions, the second copies them */
		len = 0;
		if (getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, NULL, &len))
			return -errno;
		if (!len)
			return 0;
		if (len > MAX_FILTER_LEN)
			return -E2BIG;
		v->data = malloc(len * sizeof(struct sock_filter));
		if (!v->data)
			return -ENOMEM;
		if (getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, v->data, &len))
			return -errno;
		v->len = len * sizeof(struct sock_filter);
		return 0;
	case K_MEMB:
		break; /* read by mc_member() */
	}
	return -EINVAL;
}

static bool same(const struct opt *o, const struct val *a, const struct val *b)
{
	if (o->kind == K_BOOL || o->kind == K_INT || o->kind == K_BUF)
		return a->i == b->i;
	return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

/* What a value the kernel gave back cannot be made again from. */
static const char *not_restorable(const struct opt *o, const struct val *v)
{
	if (o->kind == K_RAW && (o->opt == SO_TIMESTAMPING_OLD || o->opt == SO_TIMESTAMPING_NEW) &&
	    (((const struct so_timestamping *)v->data)->flags & SOF_TIMESTAMPING_OPT_ID))
		return "SOF_TIMESTAMPING_OPT_ID: the key of the next timestamp cannot be set";
	return NULL;
}

static int add_opt(SkOpt ***out, size_t *n, const struct opt *o, struct val *v)
{
	SkOpt **no = realloc(*out, (*n + 1) * sizeof(*no));
	SkOpt *s;

	if (!no)
		return -ENOMEM;
	*out = no;
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	sk_opt__init(s);
	s->name = strdup(o->name);
	if (!s->name) {
		free(s);
		return -ENOMEM;
	}
	if (o->kind == K_BOOL || o->kind == K_INT || o->kind == K_BUF || o->kind == K_MEMB) {
		s->has_val = 1;
		s->val = v->i;
	}
	if (o->kind != K_BOOL && o->kind != K_INT && o->kind != K_BUF) {
		s->has_data = 1;
		s->data.data = v->data ? v->data : malloc(1);
		s->data.len = v->len;
		v->data = NULL;
		if (!s->data.data) {
			free(s->name);
			free(s);
			return -ENOMEM;
		}
	}
	(*out)[(*n)++] = s;
	return 0;
}

static void mc_group(struct sockaddr_storage *ss, const struct opt *o, const uint8_t *group)
{
	memset(ss, 0, sizeof(*ss));
	if (o->size == 4) {
		struct sockaddr_in *in = (void *)ss;

		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, group, 4);
	} else {
		struct sockaddr_in6 *in6 = (void *)ss;

		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, group, 16);
	}
}

static const char *show_group(const struct opt *o, const uint8_t *group, int64_t ifindex)
{
	static char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 32];
	char a[INET6_ADDRSTRLEN] = "?", dev[IF_NAMESIZE] = "?";

	inet_ntop(o->size == 4 ? AF_INET : AF_INET6, group, a, sizeof(a));
	if (ifindex > 0 && ifindex <= INT32_MAX && !if_indextoname((unsigned)ifindex, dev))
		strcpy(dev, "?");
	snprintf(buf, sizeof(buf), "%s on %s (ifindex %lld)", a, dev, (long long)ifindex);
	return buf;
}

/*
 * Has fd joined group on ifindex?  The kernel tells (MCAST_MSFILTER) for a
 * group and an interface, not which groups: those come from /proc/net/igmp.
 */
static int mc_member(int fd, const struct opt *o, int64_t ifindex, const uint8_t *group,
		     bool *member, const char *what)
{
	struct group_filter gf = {.gf_interface = (uint32_t)ifindex};
	socklen_t len = sizeof(gf);

	mc_group(&gf.gf_group, o, group);
	*member = false;
	if (getsockopt(fd, o->level, MCAST_MSFILTER, &gf, &len)) {
		/* ENOPROTOOPT: no IPv4 options on this socket (a raw IPv6 one), so no group */
		if (errno == EADDRNOTAVAIL || errno == ENOPROTOOPT)
			return 0;
		pr_err("%s: cannot tell whether it joined %s: %m", what,
		       show_group(o, group, ifindex));
		return -errno;
	}
	*member = true;
	if (gf.gf_fmode != MCAST_EXCLUDE || gf.gf_numsrc) {
		pr_err("%s: its membership of %s filters sources (%s mode, %u source(s)), which "
		       "amber does not keep",
		       what, show_group(o, group, ifindex),
		       gf.gf_fmode == MCAST_EXCLUDE ? "exclude" : "include", gf.gf_numsrc);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Every group of the namespace in /proc/net/igmp{,6} that fd joined. */
static int mc_dump(int fd, const struct opt *o, const char *what, SkOpt ***out, size_t *n)
{
	const char *table = o->size == 4 ? "/proc/net/igmp" : "/proc/net/igmp6";
	FILE *fp = sys_fopen_read(table);
	char line[256];
	int ifindex = 0, ret = 0;

	if (!fp) {
		pr_err("%s: cannot read %s to find its multicast memberships: %m", what, table);
		return -errno;
	}
	while (!ret && fgets(line, sizeof(line), fp)) {
		uint8_t group[16];
		struct val v = {0};
		bool member;

		if (o->size == 4) {
			unsigned g;

			/* "IDX DEVICE : ..." then a tab-indented line per group (raw hex) */
			if (line[0] >= '0' && line[0] <= '9') {
				ifindex = atoi(line);
				continue;
			}
			if (line[0] != '\t' || sscanf(line, " %x", &g) != 1)
				continue;
			memcpy(group, &g, 4);
		} else {
			char hex[33];

			if (sscanf(line, "%d %*s %32s", &ifindex, hex) != 2 || strlen(hex) != 32)
				continue;
			for (int i = 0; i < 16; i++)
				sscanf(hex + 2 * i, "%2hhx", &group[i]);
		}
		ret = mc_member(fd, o, ifindex, group, &member, what);
		if (ret || !member)
			continue;
		v.i = ifindex;
		v.len = o->size;
		v.data = malloc(o->size);
		if (!v.data) {
			ret = -ENOMEM;
			break;
		}
		memcpy(v.data, group, o->size);
		pr_debug("%s: member of %s", what, show_group(o, group, ifindex));
		ret = add_opt(out, n, o, &v);
		free(v.data);
	}
	fclose(fp);
	return ret;
}

/*
 * Options amber does not restore yet: refused when set, never dropped.  (A
 * TCP_MD5SIG key cannot be read back at all, so it cannot be seen here;
 * SO_INCOMING_CPU is the kernel's, not the user's, once data came in.)
 */
static const struct {
	int level, opt;
	const char *name;
} unkept[] = {
	{SOL_SOCKET, SO_BUSY_POLL, "SO_BUSY_POLL"},
	{SOL_SOCKET, SO_PEEK_OFF, "SO_PEEK_OFF"},
	{SOL_SOCKET, SO_TXTIME, "SO_TXTIME"},
	{SOL_SOCKET, SO_MAX_PACING_RATE, "SO_MAX_PACING_RATE"},
	{IPPROTO_IP, IP_OPTIONS, "IP_OPTIONS"},
	{IPPROTO_TCP, TCP_ULP, "TCP_ULP (kernel TLS or another upper layer)"},
};

static int check_unkept(int fd, int fresh, const char *what)
{
	for (size_t i = 0; i < sizeof(unkept) / sizeof(unkept[0]); i++) {
		uint8_t a[64] = {0}, b[64] = {0};
		socklen_t la = sizeof(a), lb = sizeof(b);

		if (getsockopt(fresh, unkept[i].level, unkept[i].opt, a, &la) ||
		    getsockopt(fd, unkept[i].level, unkept[i].opt, b, &lb))
			continue; /* not for this kind of socket, or not on this kernel */
		if (la == lb && !memcmp(a, b, la))
			continue;
		pr_err("%s: %s is set, which amber does not restore yet; unset it before the "
		       "dump",
		       what, unkept[i].name);
		return -EOPNOTSUPP;
	}
	return 0;
}

int sk_opts_dump(int fd, int family, int type, bool established, const char *what, SkOpt ***out,
		 size_t *n)
{
	int fresh, locks = 0, proto = 0, ret = 0;
	socklen_t len = sizeof(proto);

	/* the same protocol: a UDP-Lite, ICMP or raw socket's options are its own */
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len))
		proto = 0;
	len = sizeof(locks);
	fresh = socket(family, type | SOCK_CLOEXEC, proto);
	if (fresh < 0) {
		pr_err("%s: cannot make a new socket of its kind to compare its options with: %m",
		       what);
		return -errno;
	}
	/* kernels before 5.14 have no SO_BUF_LOCK: then the sizes are never kept */
	if (getsockopt(fd, SOL_SOCKET, SO_BUF_LOCK, &locks, &len))
		locks = 0;
	for (size_t i = 0; i < NR_OPTS && !ret; i++) {
		const struct opt *o = &opts[i];
		struct val def, cur;
		const char *why;

		if (!applies(o, family, type, proto, established))
			continue;
		if (o->kind == K_MEMB) {
			ret = mc_dump(fd, o, what, out, n);
			continue;
		}
		if (get_opt(fresh, o, &def)) {
			free(def.data);
			continue; /* not on this kernel for this kind of socket */
		}
		ret = get_opt(fd, o, &cur);
		if (ret == -EACCES && o->kind == K_FILTER) {
			pr_err("%s: an eBPF program is attached to the socket (SO_ATTACH_BPF), "
			       "which amber cannot dump (classic filters only)",
			       what);
			ret = -EOPNOTSUPP;
		} else if (ret == -E2BIG) {
			pr_err("%s: its socket filter has more than %d instructions", what,
			       MAX_FILTER_LEN);
		} else if (ret) {
			pr_err("%s: cannot read %s: %s", what, o->name, strerror(-ret));
		} else if (o->kind == K_BUF &&
			   !(locks & (o->opt == SO_SNDBUF ? SOCK_SNDBUF_LOCK : SOCK_RCVBUF_LOCK))) {
			; /* the kernel's choice, not the user's: a new socket makes its own */
		} else if (o->kind == K_BUF || !same(o, &cur, &def)) {
			/* a size the user set is kept even if today's default is the same */
			why = not_restorable(o, &cur);
			if (why) {
				pr_err("%s: %s is set with %s, which amber cannot restore", what,
				       o->name, why);
				ret = -EOPNOTSUPP;
			} else {
				pr_debug("%s: %s differs from a new socket's", what, o->name);
				ret = add_opt(out, n, o, &cur);
			}
		}
		free(def.data);
		free(cur.data);
	}
	if (!ret)
		ret = check_unkept(fd, fresh, what);
	close(fresh);
	return ret;
}

static bool needs_priv(const struct opt *o, const SkOpt *s)
{
	/* sk_set_prio_allowed(): TC_PRIO_BESTEFFORT..TC_PRIO_INTERACTIVE are anyone's */
	return (o->flags & PRIV) || ((o->flags & PRIO) && (s->val < 0 || s->val > 6));
}

int sk_opts_check(struct tree *t, SkOpt **s, size_t n, int family, int type, bool established,
		  const char *what)
{
	return sk_opts_check_proto(t, s, n, family, type, -1, established, what);
}

int sk_opts_check_proto(struct tree *t, SkOpt **s, size_t n, int family, int type, int proto,
			bool established, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		const struct opt *o = s[i]->name ? opt_by_name(s[i]->name) : NULL;
		bool is_int;

		if (!o) {
			pr_err("%s: the image holds socket option '%s', which amber does not know; "
			       "the image is corrupt",
			       what, s[i]->name ? s[i]->name : "");
			return -EBADMSG;
		}
		if (!applies(o, family, type, proto, established)) {
			pr_err("%s: the image holds %s, which does not apply to this kind of "
			       "socket; the image is corrupt",
			       what, o->name);
			return -EBADMSG;
		}
		for (size_t k = 0; k < i; k++)
			if (!strcmp(s[k]->name, s[i]->name) &&
			    (o->kind != K_MEMB ||
			     (s[k]->val == s[i]->val && s[k]->data.len == s[i]->data.len &&
			      !memcmp(s[k]->data.data, s[i]->data.data, s[i]->data.len)))) {
				pr_err("%s: the image holds %s twice; the image is corrupt", what,
				       o->name);
				return -EBADMSG;
			}
		is_int = o->kind == K_BOOL || o->kind == K_INT || o->kind == K_BUF;
		if (o->kind == K_MEMB && (!s[i]->has_val || !s[i]->has_data || s[i]->val <= 0 ||
					  s[i]->val > INT32_MAX || s[i]->data.len != o->size ||
					  (o->size == 4 ? (s[i]->data.data[0] & 0xf0) != 0xe0
							: s[i]->data.data[0] != 0xff))) {
			pr_err("%s: the image holds an %s that is not a multicast group of %u "
			       "bytes "
			       "on an interface; the image is corrupt",
			       what, o->name, o->size);
			return -EBADMSG;
		}
		if (o->kind != K_MEMB &&
		    (is_int != s[i]->has_val || is_int == s[i]->has_data ||
		     (is_int && (s[i]->val < INT32_MIN || s[i]->val > INT32_MAX)) ||
		     (o->kind == K_BOOL && s[i]->val != 0 && s[i]->val != 1) ||
		     (o->kind == K_BUF && s[i]->val <= 0) ||
		     (o->kind == K_RAW && s[i]->data.len != o->size) ||
		     (o->kind == K_STR &&
		      (s[i]->data.len >= o->size || memchr(s[i]->data.data, 0, s[i]->data.len))))) {
			pr_err("%s: the image holds a value of %s out of its range or of the wrong "
			       "size; the image is corrupt",
			       what, o->name);
			return -EBADMSG;
		}
		if (o->kind == K_FILTER &&
		    (!s[i]->data.len || s[i]->data.len % sizeof(struct sock_filter) ||
		     s[i]->data.len / sizeof(struct sock_filter) > MAX_FILTER_LEN)) {
			pr_err("%s: the image holds a socket filter of %zu bytes, not 1 to %d "
			       "instructions of %zu bytes; the image is corrupt",
			       what, s[i]->data.len, MAX_FILTER_LEN, sizeof(struct sock_filter));
			return -EBADMSG;
		}
		if (o->kind == K_RAW && not_restorable(o, &(struct val){.data = s[i]->data.data})) {
			pr_err("%s: the image asks for %s with %s", what, o->name,
			       not_restorable(o, &(struct val){.data = s[i]->data.data}));
			return -EBADMSG;
		}
		if (t->owner.switches && needs_priv(o, s[i])) {
			pr_err("%s: the image asks for %s = %lld, which needs CAP_NET_ADMIN, and "
			       "belongs to uid %u: only root's own images set it",
			       what, o->name, (long long)s[i]->val, t->owner.uid);
			return -EPERM;
		}
	}
	return 0;
}

static int set_opt(int fd, const struct opt *o, const SkOpt *s)
{
	int v = (int)s->val;

	switch (o->kind) {
	case K_BOOL:
	case K_INT:
		return setsockopt(fd, o->level, o->opt, &v, sizeof(v)) ? -errno : 0;
	case K_BUF:
		/* the kernel doubles what it is given; FORCE passes net.core.[rw]mem_max */
		v /= 2;
		if (!setsockopt(fd, SOL_SOCKET,
				o->opt == SO_SNDBUF ? SO_SNDBUFFORCE : SO_RCVBUFFORCE, &v,
				sizeof(v)))
			return 0;
		if (errno != EPERM)
			return -errno;
		return setsockopt(fd, SOL_SOCKET, o->opt, &v, sizeof(v)) ? -errno : 0;
	case K_RAW:
	case K_STR:
		return setsockopt(fd, o->level, o->opt, s->data.data, s->data.len) ? -errno : 0;
	case K_FILTER: {
		struct sock_fprog prog = {
			.len = (unsigned short)(s->data.len / sizeof(struct sock_filter)),
			.filter = (struct sock_filter *)s->data.data,
		};

		return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ? -errno
											 : 0;
	}
	case K_MEMB: {
		struct group_req gr = {.gr_interface = (uint32_t)s->val};

		mc_group(&gr.gr_group, o, s->data.data);
		return setsockopt(fd, o->level, MCAST_JOIN_GROUP, &gr, sizeof(gr)) ? -errno : 0;
	}
	}
	return -EINVAL;
}

static void show_val(char *buf, size_t size, const struct opt *o, const struct val *v)
{
	if (o->kind == K_BOOL || o->kind == K_INT || o->kind == K_BUF)
		snprintf(buf, size, "%lld", (long long)v->i);
	else if (o->kind == K_STR)
		snprintf(buf, size, "'%.*s'", (int)v->len, (const char *)v->data);
	else
		snprintf(buf, size, "%zu bytes", v->len);
}

/* Read each back: the kernel clamps some values (buffer sizes, timeouts) without a word. */
static int verify(int fd, SkOpt **s, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		const struct opt *o = opt_by_name(s[i]->name);
		struct val want = {.i = s[i]->val, .data = s[i]->data.data, .len = s[i]->data.len};
		struct val got;
		char a[64], b[64];
		bool member;
		int ret;

		if (o->kind == K_MEMB) {
			ret = mc_member(fd, o, s[i]->val, s[i]->data.data, &member, what);
			if (!ret && !member) {
				pr_err("%s: %s of %s did not hold", what, o->name,
				       show_group(o, s[i]->data.data, s[i]->val));
				ret = -EIO;
			}
			if (ret)
				return ret;
			continue;
		}
		ret = get_opt(fd, o, &got);

		if (ret) {
			free(got.data);
			pr_err("%s: cannot read %s back: %s", what, o->name, strerror(-ret));
			return ret;
		}
		if (!same(o, &got, &want)) {
			show_val(a, sizeof(a), o, &got);
			show_val(b, sizeof(b), o, &want);
			free(got.data);
			pr_err("%s: %s is %s once set, not %s as in the image (%s)", what, o->name,
			       a, b,
			       o->kind == K_BUF
				       ? "the kernel sets twice what it is given, at least "
					 "its minimum and at most net.core.[rw]mem_max "
					 "without CAP_NET_ADMIN"
				       : "the kernel limits it by a sysctl, or another option "
					 "changed it");
			return -ERANGE;
		}
		free(got.data);
	}
	return 0;
}

int sk_opts_restore(struct tree *t, int fd, SkOpt **s, size_t n, bool late, const char *what)
{
	int ret = owner_enter(t);

	if (ret)
		return ret;
	/* in the table's order, whatever the image's */
	for (size_t i = 0; i < NR_OPTS && !ret; i++) {
		if (!(opts[i].flags & LATE) != !late)
			continue;
		for (size_t k = 0; k < n && !ret; k++) {
			if (strcmp(s[k]->name, opts[i].name))
				continue;
			ret = set_opt(fd, &opts[i], s[k]);
			if (ret && opts[i].kind == K_MEMB)
				pr_err("%s: cannot join %s (%s): %s", what,
				       show_group(&opts[i], s[k]->data.data, s[k]->val),
				       opts[i].name, strerror(-ret));
			else if (ret)
				pr_err("%s: cannot set %s: %s", what, opts[i].name, strerror(-ret));
		}
	}
	if (!ret && late)
		ret = verify(fd, s, n, what);
	owner_leave(t);
	return ret;
}

const char *sk_who(struct tree *t, const RegFile *f, const char *kind)
{
	static char buf[2][128];
	static int k;
	char *b = buf[k++ % 2];

	for (size_t p = 0; p < t->nr_procs; p++) {
		struct restore_ctx *ctx = t->rprocs[p];

		for (size_t i = 0; i < ctx->nr_fds; i++)
			if (ctx->fds[i]->file_id == f->id) {
				snprintf(b, sizeof(buf[0]), "pid %d: fd %u (%s socket:[%llu])",
					 ctx->pid, ctx->fds[i]->fd, kind,
					 (unsigned long long)f->ino);
				return b;
			}
	}
	snprintf(b, sizeof(buf[0]), "%s socket:[%llu] (in flight)", kind,
		 (unsigned long long)f->ino);
	return b;
}
