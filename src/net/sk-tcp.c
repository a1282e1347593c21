// SPDX-License-Identifier: MIT
/*
 * TCP connections past ESTABLISHED (sk-tcp.h).
 *
 * TCP repair rebuilds a connection only as ESTABLISHED: no socket option
 * sets a state, marks a FIN received or queues one to send.  So sk-inet.c
 * dumps a half-closed or closing connection with sequence numbers and
 * queues that leave its FINs out, rebuilds it ESTABLISHED, and then replays
 * what made it leave that state, in the order it happened, before the
 * network lock goes (a live peer's own retransmitted FIN would otherwise
 * find the connection a step behind, and take it to another state):
 *
 *  - a FIN the peer sent (CLOSE_WAIT, LAST_ACK, CLOSING): a FIN segment
 *    from the peer's address, at the receive sequence number, made here and
 *    sent through a raw socket; the socket takes it like the original one
 *    did (receive side shut, EOF after the queued data, state CLOSE_WAIT)
 *    and acknowledges it, which the peer takes as a duplicate ACK;
 *  - our own FIN (FIN_WAIT1/2, CLOSING, LAST_ACK): shutdown(SHUT_WR).  If
 *    it had left, still in repair mode with the send queue selected, which
 *    queues it as sent without a packet (the retransmission timer sends it
 *    again if no acknowledgement comes); FIN_WAIT2 then takes an
 *    acknowledgement of it, a segment from the peer again.  If unsent data
 *    was queued before it, after repair mode, behind that data.
 *
 * A received FIN counts one sequence number (rcv_nxt is one past it) and
 * stays out of SIOCINQ; a sent one counts one in write_seq and sits in the
 * write queue, in SIOCOUTQ until acknowledged and in SIOCOUTQNSD until sent,
 * but has no byte a peek could read: the dump takes it out of all of them.
 *
 * The segments carry fwmark TCP_REPLAY_MARK: they leave through this
 * host's output hooks like any packet, where a rule that drops the peer's
 * traffic would drop them too (sendto() says EPERM); the network lock's
 * rules let them pass.
 *
 * --tcp-close uses the same segments: a connection rebuilt ESTABLISHED is
 * sent a reset, so the process finds it reset (ECONNRESET, then EOF and
 * EPIPE) as if its peer had dropped it while it was away; a peer that the
 * dump left waiting behind the network lock is sent one too.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "sk-tcp.h"

bool tcp_state_connected(unsigned s)
{
	return s == TCP_ESTABLISHED || s == TCP_CLOSE_WAIT || s == TCP_FIN_WAIT1 ||
	       s == TCP_FIN_WAIT2 || s == TCP_LAST_ACK || s == TCP_CLOSING;
}

bool tcp_fin_sent(unsigned s)
{
	return s == TCP_FIN_WAIT1 || s == TCP_FIN_WAIT2 || s == TCP_LAST_ACK || s == TCP_CLOSING;
}

bool tcp_fin_acked(unsigned s)
{
	return s == TCP_FIN_WAIT2;
}

bool tcp_fin_received(unsigned s)
{
	return s == TCP_CLOSE_WAIT || s == TCP_LAST_ACK || s == TCP_CLOSING;
}

static uint32_t csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)(p[len - 1] << 8);
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* The IPv4 address of a 4-byte or v4-mapped 16-byte one, or false. */
static bool v4_of(const ProtobufCBinaryData *b, struct in_addr *a)
{
	if (b->len == 4)
		memcpy(a, b->data, 4);
	else if (b->len == 16 && !memcmp(b->data, v4mapped, 12))
		memcpy(a, b->data + 12, 4);
	else
		return false;
	return true;
}

int tcp_inject(const InetSkEntry *e, bool to_peer, uint8_t flags, uint32_t seq, uint32_t ack,
	       uint16_t win)
{
	const ProtobufCBinaryData *from = to_peer ? &e->src_addr : &e->dst_addr;
	const ProtobufCBinaryData *dest = to_peer ? &e->dst_addr : &e->src_addr;
	union {
		struct {
			struct iphdr ip;
			struct tcphdr th;
		} v4;
		struct {
			struct ip6_hdr ip;
			struct tcphdr th;
		} v6;
	} pkt;
	struct tcphdr th = {
		.source = htons((uint16_t)(to_peer ? e->src_port : e->dst_port)),
		.dest = htons((uint16_t)(to_peer ? e->dst_port : e->src_port)),
		.seq = htonl(seq),
		.ack_seq = htonl(ack),
		.doff = sizeof(struct tcphdr) / 4,
		.window = htons(win),
	};
	struct sockaddr_storage to = {0};
	struct in_addr s4, d4;
	uint32_t sum;
	size_t len;
	int fd, family, ret = 0;

	th.th_flags = flags;
	if (v4_of(from, &s4) && v4_of(dest, &d4)) {
		struct sockaddr_in *in = (void *)&to;
		uint8_t pseudo[12];

		family = AF_INET;
		memcpy(pseudo, &s4, 4);
		memcpy(pseudo + 4, &d4, 4);
		pseudo[8] = 0;
		pseudo[9] = IPPROTO_TCP;
		pseudo[10] = 0;
		pseudo[11] = sizeof(th);
		sum = csum_add(csum_add(0, pseudo, sizeof(pseudo)), &th, sizeof(th));
		th.check = csum_fold(sum);
		pkt.v4.ip = (struct iphdr){.version = 4,
					   .ihl = 5,
					   .tot_len = htons(sizeof(pkt.v4)),
					   .frag_off = htons(IP_DF),
					   .ttl = 64,
					   .protocol = IPPROTO_TCP,
					   .saddr = s4.s_addr,
					   .daddr = d4.s_addr};
		pkt.v4.th = th;
		len = sizeof(pkt.v4);
		in->sin_family = AF_INET;
		in->sin_addr = d4;
	} else if (from->len == 16 && dest->len == 16) {
		struct sockaddr_in6 *in6 = (void *)&to;
		uint8_t pseudo[40] = {0};

		family = AF_INET6;
		memcpy(pseudo, from->data, 16);
		memcpy(pseudo + 16, dest->data, 16);
		pseudo[35] = sizeof(th);
		pseudo[39] = IPPROTO_TCP;
		sum = csum_add(csum_add(0, pseudo, sizeof(pseudo)), &th, sizeof(th));
		th.check = csum_fold(sum);
		memset(&pkt.v6.ip, 0, sizeof(pkt.v6.ip));
		pkt.v6.ip.ip6_flow = htonl(6u << 28);
		pkt.v6.ip.ip6_plen = htons(sizeof(th));
		pkt.v6.ip.ip6_nxt = IPPROTO_TCP;
		pkt.v6.ip.ip6_hlim = 64;
		memcpy(&pkt.v6.ip.ip6_src, from->data, 16);
		memcpy(&pkt.v6.ip.ip6_dst, dest->data, 16);
		pkt.v6.th = th;
		len = sizeof(pkt.v6);
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, dest->data, 16);
	} else {
		pr_err("TCP connection: addresses of lengths %zu and %zu, not of one family",
		       e->src_addr.len, e->dst_addr.len);
		return -EINVAL;
	}
	/* IPPROTO_RAW: the header is ours (IP_HDRINCL; IPv6 too since Linux 4.5) */
	fd = socket(family, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	if (fd < 0) {
		pr_err("cannot create a raw socket to send a %s: %m (needs CAP_NET_RAW)",
		       flags & TH_RST ? "reset" : "FIN");
		return -errno;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_MARK, &(int){TCP_REPLAY_MARK}, sizeof(int)))
		pr_debug("cannot mark the replayed segment: %m");
	if (sendto(fd, &pkt, len, 0, (struct sockaddr *)&to,
		   family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) !=
	    (ssize_t)len) {
		ret = -errno;
		pr_err("cannot send a %s %s: %m", flags & TH_RST ? "reset" : "FIN",
		       to_peer ? "to the peer" : "from the peer");
	}
	close(fd);
	return ret;
}

int tcp_wait_state(int fd, unsigned states)
{
	for (int i = 0; i < 2000; i++) {
		struct tcp_info ti;
		socklen_t len = sizeof(ti);

		if (getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &len))
			return -errno;
		if (ti.tcpi_state < 32 && (states & (1u << ti.tcpi_state)))
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}
