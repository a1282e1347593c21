// SPDX-License-Identifier: MIT
/*
 * A packet socket's transmit ring (PACKET_TX_RING, TPACKET_V1, V2 and V3):
 * its frames as the process left them (queued ones, TP_STATUS_SEND_REQUEST,
 * go out when it next calls send()), and the frame the kernel takes next,
 * which no interface shows.
 *
 * Dump: the kernel takes frames in turn from its head, and a frame it cannot
 * make a packet of (length 0, or longer than a frame) it marks
 * TP_STATUS_WRONG_FORMAT and stops there, its head unmoved, nothing sent.
 * So, the process frozen and no frame being sent: every frame is copied,
 * then marked a queued frame of such a length, and one send() through
 * amber's dup of the socket marks the head; the copy is written back.  With PACKET_LOSS the kernel skips such a
 * frame and moves on: one frame at a time is offered until the kernel takes
 * it, then all the others, which brings the head round to it again.
 *
 * Restore: before the receive ring and the bind (the socket receives
 * nothing yet), the ring is made, as many frames as the head's number are
 * sent through it to lo under amber's own ethertype (nothing of the
 * process's leaves), and the dumped frames are written over it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "sk.h"

#define TX_PROTO    0x88b5 /* IEEE 802 local experimental ethertype, as the receive ring's */
#define TX_FILL	    60	   /* bytes of an Ethernet frame amber sends through the ring */
#define SEND_TRIES  1000   /* 1 ms apart: frames being sent, a full send buffer */

/* Frame i's status and length words (V1's status is an unsigned long: its low half). */
static volatile uint32_t *tx_word(uint8_t *m, const PacketRing *r, int version, uint32_t i,
				  bool len)
{
	size_t at = packet_frame_off(r, i);

	if (version == TPACKET_V3)
		at += len ? offsetof(struct tpacket3_hdr, tp_len)
			  : offsetof(struct tpacket3_hdr, tp_status);
	else if (version == TPACKET_V2)
		at += len ? offsetof(struct tpacket2_hdr, tp_len)
			  : offsetof(struct tpacket2_hdr, tp_status);
	else
		at += len ? offsetof(struct tpacket_hdr, tp_len)
			  : offsetof(struct tpacket_hdr, tp_status);
	return (volatile uint32_t *)(m + at);
}

static uint32_t status(uint8_t *m, const PacketRing *r, int version, uint32_t i)
{
	return __atomic_load_n(tx_word(m, r, version, i, false), __ATOMIC_ACQUIRE);
}

static void offer(uint8_t *m, const PacketRing *r, int version, uint32_t i, uint32_t len)
{
	*tx_word(m, r, version, i, true) = len;
	__atomic_store_n(tx_word(m, r, version, i, false), TP_STATUS_SEND_REQUEST,
			 __ATOMIC_RELEASE);
}

/* send() the queued frames (to must be given to a socket bound to no interface). */
static int kick(int fd, const struct sockaddr_ll *to, int flags)
{
	for (int t = 0; t < SEND_TRIES; t++) {
		if (sendto(fd, NULL, 0, flags, (const struct sockaddr *)to,
			   to ? sizeof(*to) : 0) >= 0)
			return 0;
		if (errno == EINVAL || errno == EMSGSIZE)
			return 0; /* the bad frame at the head: what the probe is for */
		if (errno != EAGAIN && errno != ENOBUFS)
			return -errno;
		usleep(1000);
	}
	return -EAGAIN;
}

/*
 * The head, from frames offered with a length no packet can have (bad: 0, or
 * more than a frame holds); -ENOENT if the kernel took none.
 */
static int probe(int fd, const struct sockaddr_ll *to, uint8_t *m, const PacketRing *r,
		 int version, bool loss, uint32_t bad, uint32_t *head)
{
	int found = -1, ret;

	if (!loss) {
		for (uint32_t i = 0; i < r->frame_nr; i++)
			offer(m, r, version, i, bad);
		ret = kick(fd, to, MSG_DONTWAIT);
		for (uint32_t i = 0; !ret && i < r->frame_nr; i++)
			if (status(m, r, version, i) == TP_STATUS_WRONG_FORMAT)
				found = found < 0 ? (int)i : -2;
		if (ret || found < 0)
			return ret ? ret : -ENOENT;
		*head = (uint32_t)found;
		return 0;
	}
	/* PACKET_LOSS: the kernel skips it and moves on */
	for (uint32_t i = 0; i < r->frame_nr && found < 0; i++) {
		for (uint32_t k = 0; k < r->frame_nr; k++)
			*tx_word(m, r, version, k, false) = TP_STATUS_AVAILABLE;
		offer(m, r, version, i, bad);
		ret = kick(fd, to, MSG_DONTWAIT);
		if (ret)
			return ret;
		if (status(m, r, version, i) != TP_STATUS_SEND_REQUEST)
			found = (int)i;
	}
	if (found < 0)
		return -ENOENT;
	/* the kernel is at found + 1: round the ring to found again */
	for (uint32_t k = 1; k < r->frame_nr; k++)
		offer(m, r, version, ((uint32_t)found + k) % r->frame_nr, bad);
	ret = kick(fd, to, MSG_DONTWAIT);
	for (uint32_t k = 0; !ret && k < r->frame_nr; k++)
		if (status(m, r, version, k) != TP_STATUS_AVAILABLE)
			ret = -EIO;
	*head = (uint32_t)found;
	return ret;
}

int packet_tx_dump(int dup, int version, int type, bool bound, PacketRing *r, size_t rx_len,
		   const char *what)
{
	size_t len = packet_ring_len(r);
	struct sockaddr_ll lo = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("lo")};
	int loss = 0, ret = 0;
	uint8_t *m, *copy;
	bool sending = true;

	if (packet_ring_fits(r, "PACKET_TX_RING", what))
		return -EOPNOTSUPP;
	if (getsockopt(dup, SOL_PACKET, PACKET_LOSS, &loss, &(socklen_t){sizeof(loss)})) {
		pr_err("%s: cannot read PACKET_LOSS: %m", what);
		return -errno;
	}
	/*
	 * SOCK_RAW: a frame of length 0 is no packet on any device, and the
	 * kernel says nothing.  SOCK_DGRAM: the device's header code runs first
	 * and a tunnel's may make a packet of 0 bytes: a frame longer than a
	 * frame holds instead, which the kernel logs ("packet size is too
	 * long"), once per frame offered: so not with PACKET_LOSS.
	 */
	if (type == SOCK_DGRAM && (loss || !bound)) {
		pr_err("%s: a SOCK_DGRAM packet socket %s has a PACKET_TX_RING, whose place amber "
		       "cannot find without sending: %s",
		       what, loss ? "with PACKET_LOSS" : "bound to no interface",
		       loss ? "use SOCK_RAW, or close the ring before the dump"
			    : "bind the socket to its interface");
		return -EOPNOTSUPP;
	}
	m = mmap(NULL, rx_len + len, PROT_READ | PROT_WRITE, MAP_SHARED, dup, 0);
	if (m == MAP_FAILED) {
		pr_err("%s: cannot map its packet rings (%zu bytes): %m", what, rx_len + len);
		return -errno;
	}
	/* a frame sent is the kernel's until its packet is freed (TP_STATUS_SENDING) */
	for (int t = 0; sending && t < SEND_TRIES; t++) {
		sending = false;
		for (uint32_t i = 0; i < r->frame_nr && !sending; i++)
			sending = status(m + rx_len, r, version, i) & TP_STATUS_SENDING;
		if (sending)
			usleep(1000);
	}
	copy = sending ? NULL : malloc(len);
	if (copy) {
		memcpy(copy, m + rx_len, len);
		ret = probe(dup, bound ? NULL : &lo, m + rx_len, r, version, loss,
			    type == SOCK_RAW ? 0 : r->frame_size, &r->head);
		memcpy(m + rx_len, copy, len);
	}
	munmap(m, rx_len + len);
	if (sending) {
		pr_err("%s: its PACKET_TX_RING still had frames being sent after %d ms; dump again "
		       "once they are out",
		       what, SEND_TRIES);
		return -EBUSY;
	}
	if (!copy)
		return -ENOMEM;
	if (ret) {
		pr_err("%s: the kernel's place in its PACKET_TX_RING could not be found: %s", what,
		       ret == -ENOENT ? "it took none of the frames offered" : strerror(-ret));
		free(copy);
		return ret == -ENOENT ? -EIO : ret;
	}
	r->data.data = copy;
	r->data.len = len;
	pr_info("%s: PACKET_TX_RING V%d, %u frames of %u, the kernel at frame %u", what,
		version + 1, r->frame_nr, r->frame_size, r->head);
	return 0;
}

int packet_tx_check(const PacketRing *r, int version, const char *who)
{
	/* a frame ring as a V2 receive ring is; V3 sends frames too, of no block options */
	if (version < TPACKET_V1 || version > TPACKET_V3 || !packet_ring_sane(r, TPACKET_V2)) {
		pr_err("%s: the image holds a packet ring of a shape the kernel does not make, or "
		       "a position outside it; the image is corrupt",
		       who);
		return -EBADMSG;
	}
	if (version == TPACKET_V3 && (r->retire_tmo || r->sizeof_priv || r->features)) {
		pr_err("%s: the image holds a V3 transmit ring with block options, which the "
		       "kernel refuses; the image is corrupt",
		       who);
		return -EBADMSG;
	}
	return 0;
}

/* Frame i made a packet of amber's to lo: an Ethernet frame of TX_FILL bytes. */
static void fill(uint8_t *m, const PacketRing *r, int version, int type, uint32_t i,
		 uint32_t data_off, uint32_t vnet)
{
	uint8_t *f = m + packet_frame_off(r, i);
	uint8_t *d = f + data_off + vnet;
	uint32_t len = vnet + (type == SOCK_RAW ? TX_FILL : TX_FILL - ETH_HLEN);

	memset(f + data_off, 0, vnet + TX_FILL);
	if (type == SOCK_RAW) {
		d[12] = TX_PROTO >> 8;
		d[13] = TX_PROTO & 0xff;
	}
	/* where the data starts, should the socket say so (PACKET_TX_HAS_OFF) */
	if (version == TPACKET_V3)
		((struct tpacket3_hdr *)(void *)f)->tp_mac =
			((struct tpacket3_hdr *)(void *)f)->tp_net = (uint16_t)data_off;
	else if (version == TPACKET_V2)
		((struct tpacket2_hdr *)(void *)f)->tp_mac =
			((struct tpacket2_hdr *)(void *)f)->tp_net = (uint16_t)data_off;
	else
		((struct tpacket_hdr *)(void *)f)->tp_mac =
			((struct tpacket_hdr *)(void *)f)->tp_net = (uint16_t)data_off;
	offer(m, r, version, i, len);
}

int packet_tx_restore(int fd, int type, int version, const PacketRing *r, const char *who)
{
	static const uint32_t hdrlen[] = {TPACKET_HDRLEN, TPACKET2_HDRLEN, TPACKET3_HDRLEN};
	struct tpacket_req3 req = {
		.tp_block_size = r->block_size,
		.tp_block_nr = r->block_nr,
		.tp_frame_size = r->frame_size,
		.tp_frame_nr = r->frame_nr,
	};
	struct sockaddr_ll to = {.sll_family = AF_PACKET,
				 .sll_protocol = htons(TX_PROTO),
				 .sll_ifindex = (int)if_nametoindex("lo"),
				 .sll_halen = ETH_ALEN};
	uint32_t data_off = hdrlen[version] - (uint32_t)sizeof(struct sockaddr_ll);
	size_t len = packet_ring_len(r);
	uint32_t vnet = 0;
	int ret = 0;
	uint8_t *m;

	if (setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &req,
		       version == TPACKET_V3 ? sizeof(req) : sizeof(struct tpacket_req))) {
		pr_err("%s: cannot make a PACKET_TX_RING of %u blocks of %u bytes: %m", who,
		       r->block_nr, r->block_size);
		return -errno;
	}
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		pr_err("%s: cannot map the new PACKET_TX_RING: %m", who);
		return -errno;
	}
	if (r->head && !to.sll_ifindex) {
		pr_err("%s: no lo in the socket's network namespace, through which amber brings "
		       "the kernel to its place in the transmit ring",
		       who);
		ret = -ENODEV;
	}
	if (!ret && r->head) {
		vnet = packet_vnet_len(fd, type);
		if (data_off + vnet + TX_FILL > r->frame_size) {
			pr_err("%s: frames of %u bytes in the transmit ring are too small for the "
			       "frames amber sends to bring the kernel to its place",
			       who, r->frame_size);
			ret = -ERANGE;
		}
	}
	for (uint32_t i = 0; !ret && i < r->head; i++)
		fill(m, r, version, type, i, data_off, vnet);
	if (!ret && r->head && sendto(fd, NULL, 0, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
		pr_err("%s: cannot send amber's frames through the new transmit ring to lo: %m",
		       who);
		ret = -errno;
	}
	for (uint32_t i = 0; !ret && i < r->head; i++)
		if (status(m, r, version, i) != TP_STATUS_AVAILABLE) {
			pr_err("%s: the new transmit ring did not come to frame %u as dumped", who,
			       r->head);
			ret = -EIO;
		}
	if (!ret)
		memcpy(m, r->data.data, len);
	munmap(m, len);
	return ret;
}
