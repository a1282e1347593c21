// SPDX-License-Identifier: MIT
/*
 * skfamilies: sockets of the families beyond unix, TCP and UDP, each with
 * options set; every option is read back after go and must equal what it
 * was, and each socket must still work.  Run in a network namespace of the
 * test's (tests.d/skfamilies.sh): lo up, a veth pair amf0/amf1, and
 * net.ipv4.ping_group_range covering root.
 *
 *   skfamilies DIR inet     UDP-Lite (v4, v6) with checksum coverages and queued
 *                           datagrams, ping sockets (v4, v6) bound to an id, raw
 *                           sockets: ICMP with ICMP_FILTER, protocol 253 with
 *                           IP_HDRINCL, ICMPv6 with its filter, v6 with IPV6_CHECKSUM
 *   skfamilies DIR packet   packet sockets on amf0/amf1: options, memberships,
 *                           fanout; a frame sent on amf1 arrives on amf0
 *   skfamilies DIR netlink  route sockets with groups and options, port ids,
 *                           usersock pair; a link change is notified
 *   skfamilies DIR rawq     a raw socket with a packet queued (refused at dump)
 *   skfamilies DIR ring     a SOCK_DGRAM packet socket with PACKET_LOSS and a mapped
 *                           PACKET_TX_RING (refused);
 *                           ring-mapped: a PACKET_RX_RING, its fd closed, the ring
 *                           mapped (refused)
 *   skfamilies DIR owner-raw, owner-packet  (as nobody with CAP_NET_RAW, then
 *                           dropped) a raw or a packet socket: root's restore of
 *                           nobody's image refuses them
 *   skfamilies DIR owner-ping  (as nobody) a ping socket bound to an id
 */
#include <arpa/inet.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "prog.h"

#define PORT_L4		    47301
#define PORT_L6		    47302
#define PING_ID4	    4711
#define PING_ID6	    4712
#define PROTO_X		    253 /* RFC 3692 experimental */
#define ETH_X		    0x88b5
#define ETH_F		    0x88b6
#define FANOUT		    4711
#define NL_PORT		    0x4711abcd
#define NL_USER		    47301
#define SOL_UDPLITE_	    136
#define UDPLITE_SEND_CSCOV_ 10
#define UDPLITE_RECV_CSCOV_ 11
#define ICMP_FILTER_	    1
#define MAX_RECS	    96

struct rec {
	int fd, level, opt;
	const char *what;
	socklen_t len;
	unsigned char val[64];
};

static struct rec recs[MAX_RECS];
static int nr_recs;

/* Set an option (if v), then remember what it reads as. */
static void rec_opt(int fd, const char *sk, int level, int opt, const char *name, const void *v,
		    socklen_t len)
{
	struct rec *r = &recs[nr_recs++];
	static char what[MAX_RECS][96];

	if (v && setsockopt(fd, level, opt, v, len))
		prog_die("setsockopt %s on %s", name, sk);
	snprintf(what[r - recs], sizeof(what[0]), "%s on %s", name, sk);
	*r = (struct rec){.fd = fd, .level = level, .opt = opt, .what = what[r - recs]};
	r->len = sizeof(r->val);
	if (getsockopt(fd, level, opt, r->val, &r->len))
		prog_die("getsockopt %s on %s", name, sk);
}

#define SET_INT(fd, sk, level, opt, v) rec_opt(fd, sk, level, opt, #opt, &(int){v}, sizeof(int))
#define SET(fd, sk, level, opt, v)     rec_opt(fd, sk, level, opt, #opt, &(v), sizeof(v))
#define KEEP(fd, sk, level, opt)       rec_opt(fd, sk, level, opt, #opt, NULL, 0)

static void check_recs(void)
{
	for (int i = 0; i < nr_recs; i++) {
		unsigned char v[64];
		socklen_t len = sizeof(v);

		CHECK(!getsockopt(recs[i].fd, recs[i].level, recs[i].opt, v, &len) &&
			      len == recs[i].len && !memcmp(v, recs[i].val, len),
		      "%s is as before the dump", recs[i].what);
	}
}

/* getsockname of fd, to compare after restore */
struct name {
	int fd;
	const char *what;
	struct sockaddr_storage ss;
	socklen_t len;
};
static struct name names[32];
static int nr_names;

static void keep_name(int fd, const char *what)
{
	struct name *n = &names[nr_names++];

	n->fd = fd;
	n->what = what;
	n->len = sizeof(n->ss);
	if (getsockname(fd, (struct sockaddr *)&n->ss, &n->len))
		prog_die("getsockname %s", what);
}

static void check_names(void)
{
	for (int i = 0; i < nr_names; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);

		CHECK(!getsockname(names[i].fd, (struct sockaddr *)&ss, &len) &&
			      len == names[i].len && !memcmp(&ss, &names[i].ss, len),
		      "%s is bound to the same address", names[i].what);
	}
}

static int sock(int family, int type, int proto)
{
	int fd = socket(family, type | SOCK_CLOEXEC, proto);

	if (fd < 0)
		prog_die("socket(%d, %d, %d)", family, type, proto);
	return fd;
}

static void bind_in(int fd, const char *addr, int port)
{
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, addr, &in.sin_addr);
	if (bind(fd, (struct sockaddr *)&in, sizeof(in)))
		prog_die("bind %s:%d", addr, port);
}

static void bind_in6(int fd, int port)
{
	struct sockaddr_in6 in6 = {
		.sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_loopback};

	if (bind(fd, (struct sockaddr *)&in6, sizeof(in6)))
		prog_die("bind [::1]:%d", port);
}

/* a datagram within 2 s, or -1 */
static ssize_t recv_wait(int fd, void *buf, size_t len)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	if (poll(&p, 1, 2000) != 1)
		return -1;
	return recv(fd, buf, len, MSG_DONTWAIT);
}

static void send_to(int fd, const void *buf, size_t len, const struct sockaddr *to, socklen_t tl)
{
	if (sendto(fd, buf, len, 0, to, tl) != (ssize_t)len)
		prog_die("sendto");
}

/* ---------------------------------------------------------------- inet */

static int lite4, lite6, ping4, ping6, raw4, rawx, rawx2, raw6, raw6x;

static void inet_setup(void)
{
	struct sockaddr_in l4 = {.sin_family = AF_INET,
				 .sin_port = htons(PORT_L4),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in6 l6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons(PORT_L6),
				  .sin6_addr = in6addr_loopback};
	int tx;
	uint32_t filt;
	struct icmp6_filter f6;

	lite4 = sock(AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE);
	SET_INT(lite4, "UDP-Lite v4", SOL_UDPLITE_, UDPLITE_SEND_CSCOV_, 20);
	SET_INT(lite4, "UDP-Lite v4", SOL_UDPLITE_, UDPLITE_RECV_CSCOV_, 8);
	bind_in(lite4, "127.0.0.1", PORT_L4);
	keep_name(lite4, "UDP-Lite v4");
	lite6 = sock(AF_INET6, SOCK_DGRAM, IPPROTO_UDPLITE);
	SET_INT(lite6, "UDP-Lite v6", SOL_UDPLITE_, UDPLITE_SEND_CSCOV_, 12);
	SET_INT(lite6, "UDP-Lite v6", IPPROTO_IPV6, IPV6_V6ONLY, 1);
	bind_in6(lite6, PORT_L6);
	keep_name(lite6, "UDP-Lite v6");
	/* queued: two on each, from a UDP-Lite socket that covers 8 bytes only */
	tx = sock(AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE);
	setsockopt(tx, SOL_UDPLITE_, UDPLITE_SEND_CSCOV_, &(int){8}, sizeof(int));
	send_to(tx, "lite-1", 6, (struct sockaddr *)&l4, sizeof(l4));
	send_to(tx, "lite-2", 6, (struct sockaddr *)&l4, sizeof(l4));
	close(tx);
	tx = sock(AF_INET6, SOCK_DGRAM, IPPROTO_UDPLITE);
	send_to(tx, "lite6-1", 7, (struct sockaddr *)&l6, sizeof(l6));
	close(tx);

	ping4 = sock(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
	SET_INT(ping4, "ping v4", SOL_IP, IP_TTL, 33);
	SET_INT(ping4, "ping v4", SOL_IP, IP_RECVTTL, 1);
	bind_in(ping4, "127.0.0.1", PING_ID4);
	keep_name(ping4, "ping v4");
	ping6 = sock(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6);
	SET_INT(ping6, "ping v6", IPPROTO_IPV6, IPV6_UNICAST_HOPS, 44);
	bind_in6(ping6, PING_ID6);
	keep_name(ping6, "ping v6");

	/* raw ICMP that lets echo replies only through */
	raw4 = sock(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	filt = ~(1u << ICMP_ECHOREPLY);
	rec_opt(raw4, "raw ICMP", SOL_RAW, ICMP_FILTER_, "ICMP_FILTER", &filt, sizeof(filt));
	SET_INT(raw4, "raw ICMP", SOL_IP, IP_TOS, 0x10);
	bind_in(raw4, "127.0.0.1", 0);
	keep_name(raw4, "raw ICMP");
	/* protocol 253 with IP_HDRINCL: the sender writes the IP header */
	rawx = sock(AF_INET, SOCK_RAW, PROTO_X);
	SET_INT(rawx, "raw 253", SOL_IP, IP_HDRINCL, 1);
	bind_in(rawx, "127.0.0.2", 0);
	keep_name(rawx, "raw 253");
	rawx2 = sock(AF_INET, SOCK_RAW, PROTO_X);
	KEEP(rawx2, "raw 253 receiver", SOL_IP, IP_HDRINCL);
	bind_in(rawx2, "127.0.0.1", 0);
	keep_name(rawx2, "raw 253 receiver");
	raw6 = sock(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
	ICMP6_FILTER_SETBLOCKALL(&f6);
	ICMP6_FILTER_SETPASS(ICMP6_ECHO_REPLY, &f6);
	SET(raw6, "raw ICMPv6", IPPROTO_ICMPV6, ICMP6_FILTER, f6);
	raw6x = sock(AF_INET6, SOCK_RAW, PROTO_X);
	SET_INT(raw6x, "raw6 253", IPPROTO_IPV6, IPV6_CHECKSUM, 2);
	bind_in6(raw6x, 0);
	keep_name(raw6x, "raw6 253");
}

static uint16_t csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (len & 1)
		s += (uint32_t)b[len - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return htons((uint16_t)~s);
}

static void inet_check(bool sabotage)
{
	char buf[256];
	ssize_t n;
	struct sockaddr_in l4 = {.sin_family = AF_INET,
				 .sin_port = htons(PORT_L4),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_loopback};
	struct icmphdr echo = {.type = ICMP_ECHO, .un.echo.sequence = htons(7)};
	struct icmp6_hdr echo6 = {.icmp6_type = ICMP6_ECHO_REQUEST};
	int tx;

	if (sabotage)
		setsockopt(lite4, SOL_UDPLITE_, UDPLITE_SEND_CSCOV_, &(int){30}, sizeof(int));
	n = recv(lite4, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK(n == 6 && !memcmp(buf, "lite-1", 6), "UDP-Lite v4: first queued datagram kept");
	n = recv(lite4, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK(n == 6 && !memcmp(buf, "lite-2", 6), "UDP-Lite v4: second queued datagram kept");
	n = recv(lite6, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK(n == 7 && !memcmp(buf, "lite6-1", 7), "UDP-Lite v6: queued datagram kept");
	/* RECV_CSCOV 8 still accepts a datagram covering 8 bytes, and refuses less */
	tx = sock(AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE);
	setsockopt(tx, SOL_UDPLITE_, UDPLITE_SEND_CSCOV_, &(int){8}, sizeof(int));
	send_to(tx, "after", 5, (struct sockaddr *)&l4, sizeof(l4));
	n = recv_wait(lite4, buf, sizeof(buf));
	CHECK(n == 5 && !memcmp(buf, "after", 5), "UDP-Lite v4 receives after restore");
	close(tx);

	/* ping: the reply comes back to the id the socket was bound to */
	send_to(ping4, &echo, sizeof(echo), (struct sockaddr *)&lo, sizeof(lo));
	n = recv_wait(ping4, buf, sizeof(buf));
	CHECK(n >= (ssize_t)sizeof(echo) && ((struct icmphdr *)buf)->type == ICMP_ECHOREPLY &&
		      ntohs(((struct icmphdr *)buf)->un.echo.id) == PING_ID4,
	      "ping v4: echo reply to id %d", PING_ID4);
	/* the raw ICMP socket saw the reply, and its filter kept the request out */
	n = recv_wait(raw4, buf, sizeof(buf));
	CHECK(n >= 28 && buf[20] == ICMP_ECHOREPLY, "raw ICMP: got the echo reply (type %d)",
	      n >= 28 ? buf[20] : -1);
	n = recv(raw4, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK(n < 0, "raw ICMP: ICMP_FILTER kept the echo request out");
	send_to(ping6, &echo6, sizeof(echo6), (struct sockaddr *)&lo6, sizeof(lo6));
	n = recv_wait(ping6, buf, sizeof(buf));
	CHECK(n >= (ssize_t)sizeof(echo6) &&
		      ((struct icmp6_hdr *)buf)->icmp6_type == ICMP6_ECHO_REPLY &&
		      ntohs(((struct icmp6_hdr *)buf)->icmp6_id) == PING_ID6,
	      "ping v6: echo reply to id %d", PING_ID6);
	n = recv_wait(raw6, buf, sizeof(buf));
	CHECK(n >= 8 && ((struct icmp6_hdr *)buf)->icmp6_type == ICMP6_ECHO_REPLY,
	      "raw ICMPv6: got the echo reply");
	n = recv(raw6, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK(n < 0, "raw ICMPv6: ICMP6_FILTER kept the echo request out");

	/* IP_HDRINCL: our own header, from 127.0.0.2 to the receiver bound to 127.0.0.1 */
	{
		struct iphdr ip = {.ihl = 5, .version = 4, .ttl = 9, .protocol = PROTO_X};
		char pkt[sizeof(ip) + 8];

		ip.tot_len = htons(sizeof(pkt));
		ip.saddr = htonl(0x7f000002);
		ip.daddr = htonl(INADDR_LOOPBACK);
		ip.check = csum(&ip, sizeof(ip));
		memcpy(pkt, &ip, sizeof(ip));
		memcpy(pkt + sizeof(ip), "hdrincl!", 8);
		send_to(rawx, pkt, sizeof(pkt), (struct sockaddr *)&lo, sizeof(lo));
		n = recv_wait(rawx2, buf, sizeof(buf));
		CHECK(n == (ssize_t)sizeof(pkt) && !memcmp(buf + 20, "hdrincl!", 8) &&
			      ((struct iphdr *)buf)->ttl == 9 &&
			      ((struct iphdr *)buf)->saddr == htonl(0x7f000002),
		      "raw 253: a packet with our own IP header (ttl 9) arrived");
	}
	/* IPV6_CHECKSUM 2: the kernel fills in the checksum at offset 2 */
	{
		char pkt[8] = "ab\0\0data";

		send_to(raw6x, pkt, sizeof(pkt), (struct sockaddr *)&lo6, sizeof(lo6));
		n = recv_wait(raw6x, buf, sizeof(buf));
		CHECK(n == 8 && (buf[2] || buf[3]) && !memcmp(buf + 4, "data", 4),
		      "raw6 253: IPV6_CHECKSUM filled in a checksum");
	}
}

/* nobody's ping socket: still bound to its id, and answered */
static void ping_check(bool sabotage)
{
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct icmphdr echo = {.type = ICMP_ECHO, .un.echo.sequence = htons(9)};
	char buf[256];
	ssize_t n;

	if (sabotage) {
		close(ping4);
		ping4 = sock(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
	}
	send_to(ping4, &echo, sizeof(echo), (struct sockaddr *)&lo, sizeof(lo));
	n = recv_wait(ping4, buf, sizeof(buf));
	CHECK(n >= (ssize_t)sizeof(echo) && ((struct icmphdr *)buf)->type == ICMP_ECHOREPLY &&
		      ntohs(((struct icmphdr *)buf)->un.echo.id) == PING_ID4,
	      "nobody's ping socket: echo reply to id %d", PING_ID4);
}

/* ---------------------------------------------------------------- packet */

static int pk_rx, pk_tx, pk_f1, pk_f2, pk_v;
static int if0, if1;

static void bind_ll(int fd, int proto, int ifindex)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET, .sll_protocol = htons(proto), .sll_ifindex = ifindex};

	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		prog_die("bind packet socket to %x on %d", proto, ifindex);
}

static bool dev_mcast_has(const char *dev, const char *addr)
{
	char buf[8192], pat[128];

	snprintf(pat, sizeof(pat), "%s", addr);
	if (prog_read_file("/proc/net/dev_mcast", buf, sizeof(buf)) < 0)
		return false;
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
		if (strstr(l, dev) && strstr(l, pat))
			return true;
	return false;
}

/* IFLA_PROMISCUITY of interface ifindex (the flags do not show a packet socket's) */
static int promisc(int ifindex)
{
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = {.h = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = RTM_GETLINK,
		       .nlmsg_flags = NLM_F_REQUEST},
		 .i = {.ifi_family = AF_UNSPEC, .ifi_index = ifindex}};
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	char buf[8192];
	int fd = sock(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE), ret = -1;
	ssize_t n;

	send_to(fd, &req, sizeof(req), (struct sockaddr *)&kernel, sizeof(kernel));
	n = recv_wait(fd, buf, sizeof(buf));
	close(fd);
	if (n <= 0 || ((struct nlmsghdr *)buf)->nlmsg_type != RTM_NEWLINK)
		return -1;
	{
		struct nlmsghdr *h = (struct nlmsghdr *)buf;
		int len = (int)IFLA_PAYLOAD(h);

		for (struct rtattr *a = IFLA_RTA(NLMSG_DATA(h)); RTA_OK(a, len);
		     a = RTA_NEXT(a, len))
			if (a->rta_type == IFLA_PROMISCUITY)
				ret = (int)*(uint32_t *)RTA_DATA(a);
	}
	return ret;
}

static void packet_setup(void)
{
	struct packet_mreq mc = {.mr_type = PACKET_MR_MULTICAST,
				 .mr_alen = 6,
				 .mr_address = {0x33, 0x33, 0, 0, 0x47, 0x11}};
	struct packet_mreq pr = {.mr_type = PACKET_MR_PROMISC};
	int fan = FANOUT | (PACKET_FANOUT_LB << 16);

	if0 = (int)if_nametoindex("amf0");
	if1 = (int)if_nametoindex("amf1");
	if (!if0 || !if1)
		prog_die("no veth amf0/amf1 (run in the test's namespace)");
	mc.mr_ifindex = pr.mr_ifindex = if0;
	pk_rx = sock(AF_PACKET, SOCK_RAW, 0);
	SET_INT(pk_rx, "packet rx", SOL_PACKET, PACKET_VERSION, TPACKET_V2);
	SET_INT(pk_rx, "packet rx", SOL_PACKET, PACKET_RESERVE, 64);
	SET_INT(pk_rx, "packet rx", SOL_PACKET, PACKET_AUXDATA, 1);
	SET_INT(pk_rx, "packet rx", SOL_PACKET, PACKET_ORIGDEV, 1);
	SET_INT(pk_rx, "packet rx", SOL_PACKET, PACKET_TIMESTAMP, 1 << 6);
	SET_INT(pk_rx, "packet rx", SOL_PACKET, PACKET_LOSS, 1);
	SET_INT(pk_rx, "packet rx", SOL_SOCKET, SO_RCVBUF, 300000);
	bind_ll(pk_rx, ETH_X, if0);
	keep_name(pk_rx, "packet rx");
	if (setsockopt(pk_rx, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mc, sizeof(mc)) ||
	    setsockopt(pk_rx, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &pr, sizeof(pr)))
		prog_die("PACKET_ADD_MEMBERSHIP");
	pk_tx = sock(AF_PACKET, SOCK_DGRAM, htons(ETH_X));
	SET_INT(pk_tx, "packet tx", SOL_PACKET, PACKET_QDISC_BYPASS, 1);
	bind_ll(pk_tx, 0, if1); /* bound to amf1, receiving nothing */
	keep_name(pk_tx, "packet tx");
	pk_f1 = sock(AF_PACKET, SOCK_RAW, 0);
	bind_ll(pk_f1, ETH_F, if0);
	SET(pk_f1, "fanout 1", SOL_PACKET, PACKET_FANOUT, fan);
	pk_f2 = sock(AF_PACKET, SOCK_RAW, 0);
	bind_ll(pk_f2, ETH_F, if0);
	SET(pk_f2, "fanout 2", SOL_PACKET, PACKET_FANOUT, fan);
	pk_v = sock(AF_PACKET, SOCK_RAW, 0);
	SET_INT(pk_v, "packet vnet", SOL_PACKET, PACKET_VNET_HDR, 1);
	SET_INT(pk_v, "packet vnet", SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
	keep_name(pk_v, "packet vnet (unbound)");
}

static void packet_check(bool sabotage)
{
	struct sockaddr_ll to = {.sll_family = AF_PACKET,
				 .sll_protocol = htons(ETH_X),
				 .sll_ifindex = if1,
				 .sll_halen = 6,
				 .sll_addr = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
	char buf[256], cbuf[256];
	struct iovec iov = {buf, sizeof(buf)};
	struct sockaddr_ll from;
	struct msghdr mh = {.msg_name = &from,
			    .msg_namelen = sizeof(from),
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct pollfd p = {.fd = pk_rx, .events = POLLIN};
	bool aux = false;
	ssize_t n = -1;

	if (sabotage)
		setsockopt(pk_rx, SOL_PACKET, PACKET_DROP_MEMBERSHIP,
			   &(struct packet_mreq){.mr_ifindex = if0, .mr_type = PACKET_MR_PROMISC},
			   sizeof(struct packet_mreq));
	CHECK(dev_mcast_has("amf0", "333300004711"),
	      "amf0 has the multicast membership 33:33:0:0:47:11");
	CHECK(promisc(if0) == 1, "amf0 is promiscuous once (PACKET_MR_PROMISC): %d", promisc(if0));
	send_to(pk_tx, "packet-after-restore", 20, (struct sockaddr *)&to, sizeof(to));
	if (poll(&p, 1, 2000) == 1)
		n = recvmsg(pk_rx, &mh, MSG_DONTWAIT);
	for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		aux |= c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA;
	CHECK(n == 14 + 20 && !memcmp(buf + 14, "packet-after-restore", 20),
	      "a frame sent on amf1 arrives on amf0 (%zd bytes)", n);
	CHECK(aux, "it carries PACKET_AUXDATA");
	CHECK(n > 0 && from.sll_ifindex == if0, "it came in on amf0");
}

/* ---------------------------------------------------------------- netlink */

static int nl_ev, nl_req, nl_un, nl_ua, nl_ub;

static void bind_nl(int fd, uint32_t port, uint32_t groups)
{
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK, .nl_pid = port, .nl_groups = groups};

	if (bind(fd, (struct sockaddr *)&nl, sizeof(nl)))
		prog_die("bind netlink %u", port);
}

static void netlink_setup(void)
{
	struct sockaddr_nl ua = {.nl_family = AF_NETLINK, .nl_pid = NL_USER};
	int g = RTNLGRP_IPV6_IFADDR;

	nl_ev = sock(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
	bind_nl(nl_ev, 0, RTMGRP_LINK); /* the kernel picks the port */
	if (setsockopt(nl_ev, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &g, sizeof(g)))
		prog_die("NETLINK_ADD_MEMBERSHIP");
	SET_INT(nl_ev, "route events", SOL_NETLINK, NETLINK_PKTINFO, 1);
	SET_INT(nl_ev, "route events", SOL_NETLINK, NETLINK_NO_ENOBUFS, 1);
	SET_INT(nl_ev, "route events", SOL_NETLINK, NETLINK_LISTEN_ALL_NSID, 1);
	SET_INT(nl_ev, "route events", SOL_NETLINK, NETLINK_BROADCAST_ERROR, 1);
	keep_name(nl_ev, "route events");
	nl_req = sock(AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE);
	bind_nl(nl_req, NL_PORT, 0);
	SET_INT(nl_req, "route requests", SOL_NETLINK, NETLINK_CAP_ACK, 1);
	SET_INT(nl_req, "route requests", SOL_NETLINK, NETLINK_EXT_ACK, 1);
	SET_INT(nl_req, "route requests", SOL_NETLINK, NETLINK_GET_STRICT_CHK, 1);
	keep_name(nl_req, "route requests");
	nl_un = sock(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC);
	keep_name(nl_un, "generic (unbound)");
	nl_ua = sock(AF_NETLINK, SOCK_RAW, NETLINK_USERSOCK);
	bind_nl(nl_ua, NL_USER, 0);
	keep_name(nl_ua, "usersock a");
	nl_ub = sock(AF_NETLINK, SOCK_RAW, NETLINK_USERSOCK);
	if (connect(nl_ub, (struct sockaddr *)&ua, sizeof(ua)))
		prog_die("connect usersock");
	keep_name(nl_ub, "usersock b");
}

static void netlink_check(bool sabotage)
{
	uint32_t groups[4] = {0};
	socklen_t len = sizeof(groups);
	char buf[8192], cbuf[128];
	struct iovec iov = {buf, sizeof(buf)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	struct {
		struct nlmsghdr h;
		struct ifinfomsg i;
	} req = {.h = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = RTM_GETLINK,
		       .nlmsg_flags = NLM_F_REQUEST,
		       .nlmsg_seq = 77},
		 .i = {.ifi_family = AF_UNSPEC, .ifi_index = 1}};
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	struct ifreq ifr = {0};
	bool pktinfo = false;
	ssize_t n;
	int fd;

	if (sabotage)
		setsockopt(nl_ev, SOL_NETLINK, NETLINK_DROP_MEMBERSHIP, &(int){RTNLGRP_LINK},
			   sizeof(int));
	CHECK(!getsockopt(nl_ev, SOL_NETLINK, NETLINK_LIST_MEMBERSHIPS, groups, &len) &&
		      groups[0] == ((1u << (RTNLGRP_LINK - 1)) | (1u << (RTNLGRP_IPV6_IFADDR - 1))),
	      "route events: member of RTNLGRP_LINK and RTNLGRP_IPV6_IFADDR (0x%x)", groups[0]);
	/* a request answered to the port bound */
	send_to(nl_req, &req, sizeof(req), (struct sockaddr *)&kernel, sizeof(kernel));
	n = recv_wait(nl_req, buf, sizeof(buf));
	CHECK(n > 0 && ((struct nlmsghdr *)buf)->nlmsg_type == RTM_NEWLINK &&
		      ((struct nlmsghdr *)buf)->nlmsg_seq == 77 &&
		      ((struct nlmsghdr *)buf)->nlmsg_pid == NL_PORT,
	      "route requests: RTM_GETLINK answered to port 0x%x", NL_PORT);
	/* a link change (lo's MTU, in the test's namespace) is notified with its group */
	fd = sock(AF_INET, SOCK_DGRAM, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ifr.ifr_mtu = 65000;
	if (ioctl(fd, SIOCSIFMTU, &ifr))
		prog_die("SIOCSIFMTU lo");
	close(fd);
	n = -1;
	{
		struct pollfd p = {.fd = nl_ev, .events = POLLIN};

		if (poll(&p, 1, 2000) == 1)
			n = recvmsg(nl_ev, &mh, MSG_DONTWAIT);
	}
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		pktinfo |= c->cmsg_level == SOL_NETLINK && c->cmsg_type == NETLINK_PKTINFO &&
			   ((struct nl_pktinfo *)CMSG_DATA(c))->group == RTNLGRP_LINK;
	CHECK(n > 0 && ((struct nlmsghdr *)buf)->nlmsg_type == RTM_NEWLINK,
	      "route events: the link change was notified");
	CHECK(pktinfo, "route events: with NETLINK_PKTINFO naming RTNLGRP_LINK");
	send_to(nl_ub, "user-msg", 8, NULL, 0);
	n = recv_wait(nl_ua, buf, sizeof(buf));
	CHECK(n == 8 && !memcmp(buf, "user-msg", 8), "usersock: b's message reached a's port");
}

/* ---------------------------------------------------------------- owner */

static void drop_caps(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {{0}};

	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (syscall(SYS_capset, &h, d))
		prog_die("capset");
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	const char *mode = argc > first ? argv[first] : "";
	bool sab;

	if (!strcmp(mode, "inet")) {
		inet_setup();
	} else if (!strcmp(mode, "packet")) {
		packet_setup();
	} else if (!strcmp(mode, "netlink")) {
		netlink_setup();
	} else if (!strcmp(mode, "rawq")) {
		struct sockaddr_in lo = {.sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

		raw4 = sock(AF_INET, SOCK_RAW, PROTO_X);
		send_to(raw4, "queued", 6, (struct sockaddr *)&lo, sizeof(lo));
	} else if (!strcmp(mode, "ring") || !strcmp(mode, "ring-mapped")) {
		/*
		 * a TPACKET_V2 transmit ring on a SOCK_DGRAM socket with PACKET_LOSS,
		 * mapped; "ring-mapped": a receive ring, its fd closed
		 */
		struct tpacket_req req = {.tp_block_size = 4096,
					  .tp_block_nr = 4,
					  .tp_frame_size = 2048,
					  .tp_frame_nr = 8};
		void *ring;

		pk_rx = sock(AF_PACKET, strcmp(mode, "ring") ? SOCK_RAW : SOCK_DGRAM, 0);
		if (setsockopt(pk_rx, SOL_PACKET, PACKET_VERSION, &(int){TPACKET_V2},
			       sizeof(int)) ||
		    (!strcmp(mode, "ring") &&
		     setsockopt(pk_rx, SOL_PACKET, PACKET_LOSS, &(int){1}, sizeof(int))) ||
		    setsockopt(pk_rx, SOL_PACKET,
			       strcmp(mode, "ring") ? PACKET_RX_RING : PACKET_TX_RING, &req,
			       sizeof(req)))
			prog_die("PACKET_RX_RING");
		ring = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, pk_rx, 0);
		if (ring == MAP_FAILED)
			prog_die("mmap the ring");
		if (!strcmp(mode, "ring-mapped"))
			close(pk_rx);
	} else if (!strcmp(mode, "owner-ping")) {
		ping4 = sock(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
		bind_in(ping4, "127.0.0.1", PING_ID4);
		keep_name(ping4, "nobody's ping v4");
	} else if (!strcmp(mode, "owner-raw")) {
		raw4 = sock(AF_INET, SOCK_RAW, IPPROTO_ICMP);
		drop_caps();
	} else if (!strcmp(mode, "owner-packet")) {
		pk_rx = sock(AF_PACKET, SOCK_DGRAM, 0);
		drop_caps();
	} else {
		fprintf(stderr,
			"usage: skfamilies DIR inet|packet|netlink|rawq|owner-raw|owner-packet\n");
		return 2;
	}
	prog_ready();
	prog_wait_go();
	sab = prog_sabotage();
	if (!strcmp(mode, "inet"))
		inet_check(sab);
	else if (!strcmp(mode, "packet"))
		packet_check(sab);
	else if (!strcmp(mode, "netlink"))
		netlink_check(sab);
	else if (!strcmp(mode, "owner-ping"))
		ping_check(sab);
	else if (sab)
		CHECK(0, "sabotaged");
	check_names();
	check_recs();
	return prog_done();
}
