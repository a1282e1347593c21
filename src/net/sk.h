/* SPDX-License-Identifier: MIT */
/*
 * Sockets: unix (sk-unix.c) and inet (sk-inet.c) kinds of fd_types[].
 * Sockets live in amber's network namespace: the dumped tree must share it.
 */
#ifndef AMBER_SK_H
#define AMBER_SK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "files.h"

extern const struct fd_type unix_sk_type;
extern const struct fd_type inet_sk_type;
extern const struct fd_type packet_sk_type;
extern const struct fd_type netlink_sk_type;

/*
 * Inet sockets beyond TCP and UDP (sk-raw.c): UDP-Lite, ICMP "ping" and raw
 * sockets, kept in inet_sk_entry like the others.  sk-inet.c hands them over:
 * inet_extra() tells which are; inet_extra_dump() fills e (family, type and
 * proto set); inet_extra_check() and inet_extra_open() restore one (fd: the
 * new socket, options before bind set, the late ones left to sk-inet.c).
 */
bool inet_extra(const InetSkEntry *e);
int inet_extra_dump(struct dump_ctx *ctx, int dup, InetSkEntry *e, const char *what);
int inet_extra_check(struct tree *t, const InetSkEntry *e, const char *who);
int inet_extra_open(struct tree *t, const InetSkEntry *e, const char *who, int *fd);

/*
 * sock_diag (sk-diag.c): the message describing socket inode ino, asked
 * with req (a packet_diag_req or netlink_diag_req of len bytes), whose
 * inode is at ino_off in the answer; *msg is malloc'ed (nlmsghdr
 * included).  -ENOENT: not listed.
 */
int sk_diag_find(const void *req, size_t len, size_t ino_off, uint64_t ino, void **msg);

/* Each attribute (struct nlattr) of such a message, after its fixed part of hdr bytes. */
#define sk_diag_for_each_attr(a, msg, hdr)                                                         \
	for (struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(msg) + NLA_ALIGN(hdr));       \
	     (char *)a + sizeof(*a) <= (char *)(msg) + (msg)->nlmsg_len &&                         \
	     a->nla_len >= sizeof(*a) &&                                                           \
	     (char *)a + a->nla_len <= (char *)(msg) + (msg)->nlmsg_len;                           \
	     a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len)))

/*
 * A packet socket's PACKET_RX_RING (packet-ring.c).  Dump: its memory and the
 * kernel's place in it into r (its shape filled from sock_diag), through
 * dup (map_len: the socket's rings' bytes, the receive ring's first).  The
 * transmit ring's bytes (tx_len) follow it in a mapping of the socket.
 * Restore: whether r is a ring the kernel makes (the caller says what is
 * corrupt), before any socket exists; make the ring on fd (not bound yet,
 * its early options set) and bring the kernel to its place, which leaves fd
 * bound to lo when packet_ring_replays(r).
 */
int packet_ring_dump(int dup, int version, PacketRing *r, size_t map_len, const char *what);
/* Dump: 0, or -EOPNOTSUPP (logged) for a ring (kind: its option's name) too big to dump. */
int packet_ring_fits(const PacketRing *r, const char *kind, const char *what);
bool packet_ring_sane(const PacketRing *r, int version);
bool packet_ring_replays(const PacketRing *r);
int packet_ring_restore(int fd, int type, int version, const PacketRing *r, size_t tx_len,
			const char *who);
#define PACKET_RING_MAX (64U << 20) /* bytes of one ring an image may hold */
size_t packet_ring_len(const PacketRing *r);
/* The virtio header's bytes before a packet on a SOCK_RAW packet socket. */
uint32_t packet_vnet_len(int fd, int type);
/* Where frame i of a ring of frames starts in its memory. */
size_t packet_frame_off(const PacketRing *r, uint32_t i);

/*
 * Its PACKET_TX_RING (packet-tx.c): dump, the process frozen, through dup
 * (bound: to an interface; rx_len: the receive ring's bytes before it in
 * the socket's mapping); check; restore on fd before its receive ring and
 * its bind.
 */
int packet_tx_dump(int dup, int version, int type, bool bound, PacketRing *r, size_t rx_len,
		   const char *what);
int packet_tx_check(const PacketRing *r, int version, const char *who);
int packet_tx_restore(int fd, int type, int version, const PacketRing *r, const char *who);

/* Is socket inode ino open in some process of the tree being dumped? */
bool sk_open_in_tree(struct tree *t, uint64_t ino);

/*
 * Copy what is queued for reading on fd without consuming it: MSG_PEEK
 * walked with SO_PEEK_OFF, which is put back as it was.  A datagram socket
 * gives one entry per datagram; a stream one chunks of its byte stream.
 */
int sk_peek_queue(int fd, bool stream, const char *what, SkQueued ***q, size_t *n);

/* The fd flags (O_NONBLOCK) of the dumped description, on a new socket. */
int sk_set_flags(int fd, const RegFile *f);

/*
 * Socket options (sk-opts.c).  Dump: those of fd that differ from a new
 * socket's of its family and type (established: a connection's), into
 * *opts; what cannot be made again is refused.
 */
int sk_opts_dump(int fd, int family, int type, bool established, const char *what, SkOpt ***opts,
		 size_t *n);
/* Restore, before any socket is made: known, well-formed, and the owner's to set? */
int sk_opts_check(struct tree *t, SkOpt **opts, size_t n, int family, int type, bool established,
		  const char *what);
/* The same for a socket of protocol proto, whose own options (UDPLITE_*, ICMP_FILTER) apply. */
int sk_opts_check_proto(struct tree *t, SkOpt **opts, size_t n, int family, int type, int proto,
			bool established, const char *what);
/*
 * Set them on fd with the owner's rights: !late before it binds, late once
 * its queues are refilled; late also reads every one back.
 */
int sk_opts_restore(struct tree *t, int fd, SkOpt **opts, size_t n, bool late, const char *what);
/*
 * sk-inet.c, for every inet kind: an address of e (dst: the peer's) to and
 * from a sockaddr (the image's bytes are copied only when of the family's
 * length), and "ADDR:PORT" for messages (two may be used at once).
 */
int inet_put_addr(InetSkEntry *e, const struct sockaddr_storage *ss, bool dst);
socklen_t inet_get_addr(const InetSkEntry *e, bool dst, struct sockaddr_storage *ss);
const char *inet_show_addr(const InetSkEntry *e, bool dst);
/* where a wildcard address is, the loopback address of its family (a destination) */
void inet_any_to_loopback(struct sockaddr_storage *ss);
/* "pid P: fd F (KIND socket:[INO])" of a socket of the image, for messages. */
const char *sk_who(struct tree *t, const RegFile *f, const char *kind);

#endif
