/* SPDX-License-Identifier: MIT */
/*
 * TCP states around the connection's end (sk-tcp.c), for sk-inet.c: which
 * FINs a state has sent and received, and segments from the peer made by
 * hand (a raw socket) to bring a restored socket to such a state.
 */
#ifndef AMBER_SK_TCP_H
#define AMBER_SK_TCP_H

#include <stdbool.h>
#include <stdint.h>

#include "amber.h"

/* fwmark of the segments amber sends for a peer, so that a firewall can let them pass */
#define TCP_REPLAY_MARK 0xa3be

#define TCP_SHUT_RCV  1 /* sk_shutdown's RCV_SHUTDOWN */
#define TCP_SHUT_SEND 2 /* SEND_SHUTDOWN */

/* A connected state amber takes: ESTABLISHED or one of the closing ones. */
bool tcp_state_connected(unsigned state);
/* Has a socket in state sent its FIN, had it acknowledged, received the peer's? */
bool tcp_fin_sent(unsigned state);
bool tcp_fin_acked(unsigned state);
bool tcp_fin_received(unsigned state);

/*
 * Send the socket of e (its src_addr:src_port) a segment from its peer
 * (dst_addr:dst_port), or with to_peer the peer one from it, with these
 * flags (TH_FIN, TH_RST, TH_ACK), sequence and acknowledgement numbers and
 * window, through a raw socket: the one way to make a socket take a FIN or a
 * reset that its peer sent before the dump.
 */
int tcp_inject(const InetSkEntry *e, bool to_peer, uint8_t flags, uint32_t seq, uint32_t ack,
	       uint16_t win);

/* Wait (up to 2 s) for the socket fd to reach one of states (a mask); else -ETIMEDOUT. */
int tcp_wait_state(int fd, unsigned states);

#endif
