// SPDX-License-Identifier: MIT
/*
 * A packet socket's receive ring (PACKET_RX_RING, TPACKET_V1, V2 and V3):
 * its memory, and where the kernel is in it, which no interface shows or
 * sets.
 *
 * Dump: amber maps the ring (its dup of the socket) and copies it twice,
 * 2 ms apart, while the network goes on filling it.  V1/V2: the kernel fills
 * frames in turn, so it fills next the one after the newest frame (by time
 * stamp) that is the process's (TP_STATUS_USER) or was given back and did
 * not change between the copies; a frame that changed is a packet that came
 * during the copies, left out (the restored kernel fills it again).  V3: the
 * kernel fills one block at a time, numbered (seq_num); the newest block is
 * the one it fills, unless it was closed (its last packet's next offset is
 * 0): then every block was the process's and the kernel waits for the next
 * one (frozen).  The packets of the block it fills are taken from the
 * second copy (written completely by then), as many as the first copy's
 * header counts.  A copy caught between a packet's reservation and its
 * header is taken again.
 *
 * Restore: the new socket gets a ring of the same shape; amber binds it to
 * an ethertype of its own on lo and sends it frames from a second packet
 * socket until the kernel is where it was (V1/V2: so many frames; V3: at the
 * block it filled, led there by the live block headers, whichever blocks the
 * retire timer closes on the way; then the block's packets with their sizes,
 * each checked where it lands (the timer closing that block starts it all
 * again), or frozen at the block after them); then it writes the dumped
 * memory over the ring, the current block's header last, reads the
 * statistics (the frames counted there are amber's), and the socket is bound
 * as it was.  The mapping comes back at its address in the process
 * (packet_ring_ops).
 *
 * A transmit ring beside it (PACKET_TX_RING) is packet-tx.c's; the socket's
 * mapping holds both, this one first.
 *
 * Refused: a ring over PACKET_RING_MAX, a mapping of part of a ring, a ring
 * that changes under every copy.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "amber.h"
#include "infect.h"
#include "log.h"
#include "mem.h"
#include "sk.h"

#define REPLAY_PROTO 0x88b5	 /* IEEE 802 local experimental ethertype */
#define SNAP_TRIES   100
#define REPLAY_TRIES 10
#define JUNK_MAX     65000 /* bytes of a frame amber sends on lo (MTU 65536) */

#ifndef PACKET_VNET_HDR_SZ
#define PACKET_VNET_HDR_SZ 24
#endif

size_t packet_ring_len(const PacketRing *r)
{
	return (size_t)r->block_size * r->block_nr;
}

size_t packet_frame_off(const PacketRing *r, uint32_t i)
{
	uint32_t fpb = r->block_size / r->frame_size;

	return (size_t)(i / fpb) * r->block_size + (size_t)(i % fpb) * r->frame_size;
}

/* A V1/V2 frame's status and time stamp (ns). */
static void frame_info(const uint8_t *m, int version, size_t off, uint32_t *status, uint64_t *ts)
{
	if (version == TPACKET_V1) {
		struct tpacket_hdr h;

		memcpy(&h, m + off, sizeof(h));
		*status = (uint32_t)h.tp_status;
		*ts = h.tp_sec * 1000000000ULL + h.tp_usec * 1000ULL;
	} else {
		struct tpacket2_hdr h;

		memcpy(&h, m + off, sizeof(h));
		*status = h.tp_status;
		*ts = h.tp_sec * 1000000000ULL + h.tp_nsec;
	}
}

/* V1/V2: the frame the kernel fills next, or -EAGAIN (copy again). */
static int frames_head(PacketRing *r, int version, const uint8_t *c1, const uint8_t *c2)
{
	uint64_t newest = 0, oldest_late = UINT64_MAX;
	int64_t at = -1;

	for (uint32_t i = 0; i < r->frame_nr; i++) {
		uint32_t s1, s2;
		uint64_t t1, t2;

		frame_info(c1, version, packet_frame_off(r, i), &s1, &t1);
		frame_info(c2, version, packet_frame_off(r, i), &s2, &t2);
		if (((s1 & TP_STATUS_USER) || (!(s2 & TP_STATUS_USER) && t1 == t2)) && t1 &&
		    t1 >= newest) {
			newest = t1;
			at = i;
		}
		/* written between the copies */
		if (!(s1 & TP_STATUS_USER) && (s2 & TP_STATUS_USER) && t2 < oldest_late)
			oldest_late = t2;
	}
	/* a packet older than the newest was still being written: its frame would stay empty */
	if (oldest_late < newest)
		return -EAGAIN;
	r->head = at < 0 ? 0 : (uint32_t)((at + 1) % r->frame_nr);
	return 0;
}

static void block_hdr(const uint8_t *m, const PacketRing *r, uint32_t b, struct tpacket_hdr_v1 *h)
{
	memcpy(h, m + (size_t)b * r->block_size + offsetof(struct tpacket_block_desc, hdr),
	       sizeof(*h));
}

static uint32_t pkt_step(const uint8_t *p)
{
	struct tpacket3_hdr h;

	memcpy(&h, p, sizeof(h));
	return (h.tp_mac + h.tp_snaplen + 7) & ~7U;
}

/*
 * V3: the block the kernel fills (or waits for), the sizes of the packets
 * in it, and its packets from c2 into c1; -EAGAIN: copy again.
 */
static int blocks_head(PacketRing *r, uint8_t *c1, const uint8_t *c2)
{
	struct tpacket_hdr_v1 h;
	uint64_t newest = 0;
	uint32_t n = 0, off, last = 0, *steps;
	uint8_t *blk;
	int dups = 0;

	for (uint32_t b = 0; b < r->block_nr; b++) {
		block_hdr(c1, r, b, &h);
		if (h.seq_num > newest) {
			newest = h.seq_num;
			n = b;
			dups = 0;
		} else if (h.seq_num && h.seq_num == newest) {
			dups++;
		}
	}
	if (!newest || dups)
		return -EAGAIN;
	block_hdr(c1, r, n, &h);
	blk = c1 + (size_t)n * r->block_size;
	if (h.num_pkts > r->block_size / 8)
		return -EAGAIN;
	steps = calloc(h.num_pkts + 1, sizeof(*steps));
	if (!steps)
		return -ENOMEM;
	off = h.offset_to_first_pkt;
	for (uint32_t k = 0; k < h.num_pkts; k++) {
		if (off < sizeof(struct tpacket_block_desc) ||
		    off + sizeof(struct tpacket3_hdr) > r->block_size)
			goto again;
		steps[k] = pkt_step(c2 + (size_t)n * r->block_size + off);
		if (steps[k] < sizeof(struct tpacket3_hdr) || steps[k] > r->block_size - off)
			goto again;
		last = off;
		off += steps[k];
	}
	if (h.num_pkts && off != h.blk_len)
		goto again;
	free(r->steps);
	r->steps = NULL;
	r->n_steps = 0;
	r->has_frozen = 1;
	if (!(h.block_status & TP_STATUS_USER) &&
	    (!h.num_pkts || ((struct tpacket3_hdr *)(void *)(blk + last))->tp_next_offset)) {
		/* it fills this one: its packets as they were written */
		r->head = n;
		r->frozen = 0;
		if (h.num_pkts) {
			memcpy(blk + h.offset_to_first_pkt,
			       c2 + (size_t)n * r->block_size + h.offset_to_first_pkt,
			       h.blk_len - h.offset_to_first_pkt);
			((struct tpacket3_hdr *)(void *)(blk + last))->tp_next_offset =
				steps[h.num_pkts - 1];
		}
		r->steps = steps;
		r->n_steps = h.num_pkts;
		return 0;
	}
	r->head = (n + 1) % r->block_nr;
	r->frozen = 1;
	free(steps);
	return 0;
again:
	free(steps);
	return -EAGAIN;
}

int packet_ring_fits(const PacketRing *r, const char *kind, const char *what)
{
	if (r->block_nr && r->frame_size && packet_ring_len(r) <= PACKET_RING_MAX)
		return 0;
	pr_err("%s: its %s of %u blocks of %u bytes is larger than the %u MiB amber dumps", what,
	       kind, r->block_nr, r->block_size, PACKET_RING_MAX >> 20);
	return -EOPNOTSUPP;
}

int packet_ring_dump(int dup, int version, PacketRing *r, size_t map_len, const char *what)
{
	struct timespec gap = {0, 2 * 1000 * 1000};
	size_t len = packet_ring_len(r);
	uint8_t *c1 = NULL, *c2 = NULL;
	int ret = packet_ring_fits(r, "PACKET_RX_RING", what);
	void *m;

	if (ret)
		return ret;
	ret = -EAGAIN;
	m = mmap(NULL, map_len, PROT_READ, MAP_SHARED, dup, 0);
	if (m == MAP_FAILED) {
		pr_err("%s: cannot map its packet rings (%zu bytes): %m", what, map_len);
		return -errno;
	}
	c1 = malloc(len);
	c2 = malloc(len);
	for (int i = 0; c1 && c2 && ret == -EAGAIN && i < SNAP_TRIES; i++) {
		memcpy(c1, m, len);
		nanosleep(&gap, NULL);
		memcpy(c2, m, len);
		ret = version == TPACKET_V3 ? blocks_head(r, c1, c2)
					    : frames_head(r, version, c1, c2);
	}
	munmap(m, map_len);
	free(c2);
	if (!c1 || !c2)
		ret = -ENOMEM;
	if (ret == -EAGAIN)
		pr_err("%s: its PACKET_RX_RING changed under each of %d copies (packets kept "
		       "coming while one was being written); dump again when the traffic is "
		       "lighter",
		       what, SNAP_TRIES);
	if (ret) {
		free(c1);
		return ret;
	}
	r->data.data = c1;
	r->data.len = len;
	pr_info("%s: PACKET_RX_RING V%d, %u blocks of %u, the kernel at %s %u%s", what, version + 1,
		r->block_nr, r->block_size, version == TPACKET_V3 ? "block" : "frame", r->head,
		r->frozen ? " (frozen)" : "");
	return 0;
}

/* ---- restore ---- */

bool packet_ring_sane(const PacketRing *r, int version)
{
	uint64_t sum = 0;

	if (r->block_size < PAGE_SIZE || r->block_size % PAGE_SIZE || !r->block_nr ||
	    r->frame_size < TPACKET_ALIGNMENT || r->frame_size % TPACKET_ALIGNMENT ||
	    r->frame_size > r->block_size || packet_ring_len(r) > PACKET_RING_MAX ||
	    (uint64_t)(r->block_size / r->frame_size) * r->block_nr != r->frame_nr ||
	    r->data.len != packet_ring_len(r) ||
	    r->head >= (version == TPACKET_V3 ? r->block_nr : r->frame_nr) ||
	    (version != TPACKET_V3 && (r->n_steps || r->frozen)) || (r->frozen && r->n_steps) ||
	    r->n_steps > r->block_size / 8)
		return false;
	for (size_t i = 0; i < r->n_steps; i++) {
		if (r->steps[i] % 8 || r->steps[i] < sizeof(struct tpacket3_hdr) ||
		    r->steps[i] > r->block_size)
			return false;
		sum += r->steps[i];
	}
	return sum < r->block_size;
}

struct replay {
	int fd, tx, version;
	size_t tx_len; /* the transmit ring's bytes after the ring in the mapping */
	const PacketRing *r;
	uint8_t *m;
	struct sockaddr_ll to;
	uint32_t base;		 /* tp_mac + tp_snaplen less the frame's bytes */
	uint32_t off1;		 /* a V3 block's first packet offset */
	uint32_t cur, used, npk; /* V3: where the kernel is, as amber expects */
	const char *who;
};

static uint32_t rd32(const volatile void *p)
{
	return __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
}

static volatile struct tpacket_hdr_v1 *live_hdr(struct replay *p, uint32_t b)
{
	return (volatile struct tpacket_hdr_v1 *)(p->m + (size_t)b * p->r->block_size +
						  offsetof(struct tpacket_block_desc, hdr));
}

static int send_frame(struct replay *p, uint32_t len)
{
	static uint8_t frame[JUNK_MAX];

	frame[12] = REPLAY_PROTO >> 8;
	frame[13] = REPLAY_PROTO & 0xff;
	if (sendto(p->tx, frame, len, 0, (struct sockaddr *)&p->to, sizeof(p->to)) !=
	    (ssize_t)len) {
		pr_err("%s: cannot send amber's frames to the new ring on lo: %m%s", p->who,
		       errno == ENETDOWN ? " (lo is down in the socket's network namespace)" : "");
		return -errno;
	}
	return 0;
}

/* V1/V2: frame i is the process's; V3: the kernel is where amber expects (1 s). */
static int landed(struct replay *p, int64_t frame)
{
	for (int i = 0; i < 100000; i++) {
		if (frame >= 0) {
			if (rd32(p->m + packet_frame_off(p->r, (uint32_t)frame)) & TP_STATUS_USER)
				return 0;
		} else {
			volatile struct tpacket_hdr_v1 *h = live_hdr(p, p->cur);

			if (rd32(&h->num_pkts) == p->npk && rd32(&h->blk_len) == p->used)
				return 0;
			/* closed early (the retire timer) and the packet elsewhere: start again */
			if (rd32(&h->block_status) & TP_STATUS_USER)
				return -EAGAIN;
		}
		usleep(10);
	}
	pr_err("%s: a frame amber sent did not land in the new ring where expected", p->who);
	return -EIO;
}

/* V3: one of the dumped packets, of step bytes; the kernel moves on to the next block if it does not fit. */
static int inject(struct replay *p, uint32_t step)
{
	uint32_t len = step - p->base;
	int ret;

	if (step < p->base + ETH_HLEN || len > JUNK_MAX) {
		pr_err("%s: a packet of the ring's current block took %u bytes, which amber "
		       "cannot make with a frame on lo",
		       p->who, step);
		return -ERANGE;
	}
	if (p->used + step < p->r->block_size) {
		p->used += step;
		p->npk++;
	} else {
		p->cur = (p->cur + 1) % p->r->block_nr;
		p->used = p->off1 + step;
		p->npk = 1;
	}
	ret = send_frame(p, len);
	return ret ? ret : landed(p, -1);
}

/* V3: the block the kernel fills as the live headers show it, and the packets in the ring. */
struct live {
	uint32_t cur, npk, used, total;
	bool open; /* false: the newest block is closed (the kernel between blocks, or frozen) */
};

static void live_read(struct replay *p, struct live *l)
{
	uint64_t newest = 0;

	memset(l, 0, sizeof(*l));
	for (uint32_t b = 0; b < p->r->block_nr; b++) {
		volatile struct tpacket_hdr_v1 *h = live_hdr(p, b);
		uint64_t seq = __atomic_load_n((const uint64_t *)&h->seq_num, __ATOMIC_ACQUIRE);

		l->total += rd32(&h->num_pkts);
		if (seq > newest) {
			newest = seq;
			l->cur = b;
		}
	}
	l->npk = rd32(&live_hdr(p, l->cur)->num_pkts);
	l->used = rd32(&live_hdr(p, l->cur)->blk_len);
	l->open = !(rd32(&live_hdr(p, l->cur)->block_status) & TP_STATUS_USER);
}

/* V3: the ring once the kernel took the sent packets in and is in a block (1 s). */
static int settle(struct replay *p, struct live *l, uint32_t sent)
{
	struct live again;

	for (int i = 0; i < 100000; i++) {
		live_read(p, l);
		live_read(p, &again);
		if (l->total == sent && l->open && !memcmp(l, &again, sizeof(*l)))
			return 0;
		usleep(10);
	}
	pr_err("%s: a frame amber sent did not land in the new ring", p->who);
	return -EIO;
}

/* The biggest packet that fits in an empty block, or in what is left of the kernel's. */
static uint32_t junk_step(struct replay *p, const struct live *l, bool in_this)
{
	uint32_t room = (in_this ? p->r->block_size - l->used : p->r->block_size - p->off1) - 1;
	uint32_t step = room & ~7U;

	if (step > ((JUNK_MAX + p->base) & ~7U))
		step = (JUNK_MAX + p->base) & ~7U;
	return step;
}

enum reach {
	REACH_IN,    /* the kernel fills block k */
	REACH_EMPTY, /* it opened block k, empty (the retire timer closed the one before) */
	REACH_SPILL, /* it fills k - 1 so that a packet of first bytes opens k, or opened k empty */
};

/*
 * V3: amber's packets, and the retire timer, until the kernel is at block k
 * as asked.  Which blocks hold amber's packets and which the timer closed
 * early does not matter (the dump is written over them): only the block
 * the kernel fills does.  -EAGAIN: it went past (start again).
 */
static int reach(struct replay *p, uint32_t k, enum reach how, uint32_t first)
{
	uint32_t sent = 0, step, bs = p->r->block_size;
	/* an empty block comes only from the timer: wait for it twice over */
	long wait_us = 2000000L + 2000L * (long)(p->r->retire_tmo ? p->r->retire_tmo : 100);
	struct live l;
	int ret;

	for (;;) {
		ret = settle(p, &l, sent);
		if (ret)
			return ret;
		if (l.cur == k && (how == REACH_IN || !l.npk))
			break;
		if (how == REACH_SPILL && l.cur + 1 == k && l.used + first >= bs)
			break;
		if (l.cur >= k)
			return -EAGAIN;
		if (l.cur + 1 == k && how == REACH_EMPTY && l.npk) {
			/* the timer closes it */
			if (wait_us <= 0) {
				pr_err("%s: the ring's retire timer did not close block %u", p->who,
				       l.cur);
				return -EIO;
			}
			usleep(1000);
			wait_us -= 1000;
			continue;
		}
		if (l.cur + 1 == k && how == REACH_SPILL) {
			step = junk_step(p, &l, true);
			if (step < p->base + ETH_HLEN) {
				pr_err("%s: %u bytes are left in block %u of the new ring, fewer than "
				       "a frame on lo takes, and the block's first packet needs them",
				       p->who, bs - l.used, l.cur);
				return -ERANGE;
			}
		} else if (l.cur + 1 == k && how == REACH_EMPTY) {
			step = p->base + ETH_HLEN; /* one packet for the timer to close */
		} else {
			step = junk_step(p, &l, false);
		}
		if (sent > (uint32_t)k * (bs / 64 + 2) + 2) {
			pr_err("%s: the new ring did not come to block %u", p->who, k);
			return -EIO;
		}
		ret = send_frame(p, step - p->base);
		if (ret)
			return ret;
		sent++;
	}
	p->cur = l.cur;
	p->used = l.used;
	p->npk = l.npk;
	return 0;
}

static int replay_v3(struct replay *p)
{
	const PacketRing *r = p->r;
	uint32_t k = r->head, n = (k + r->block_nr - 1) % r->block_nr;
	int ret = 0;

	p->off1 = rd32(&live_hdr(p, 0)->offset_to_first_pkt);
	if (r->frozen) {
		struct live l = {.used = p->off1};

		/* every block the process's: the kernel fills n, then finds k (its own) taken */
		ret = reach(p, n, REACH_IN, 0);
		if (!ret && k != n)
			__atomic_store_n((uint32_t *)&live_hdr(p, k)->block_status, TP_STATUS_USER,
					 __ATOMIC_RELEASE);
		/* at most two packets: one in n if it is empty, one that does not fit */
		for (int i = 0; !ret && i < 3; i++) {
			uint32_t had = rd32(&live_hdr(p, n)->num_pkts);

			ret = send_frame(p, junk_step(p, &l, false) - p->base);
			for (int t = 0; !ret && t < 100000; t++) {
				if (rd32(&live_hdr(p, n)->block_status) & TP_STATUS_USER)
					return 0;
				if (rd32(&live_hdr(p, n)->num_pkts) != had)
					break;
				usleep(10);
			}
		}
		if (!ret)
			pr_err("%s: the new ring did not stop at block %u", p->who, k);
		return ret ? ret : -EIO;
	}
	if (!r->n_steps)
		return reach(p, k, REACH_EMPTY, 0);
	if (k)
		ret = reach(p, k, REACH_SPILL, r->steps[0]);
	for (size_t i = 0; !ret && i < r->n_steps; i++) {
		ret = inject(p, r->steps[i]);
		if (!ret && p->cur != k) {
			pr_err("%s: the new ring did not come to block %u as dumped", p->who, k);
			ret = -EIO;
		}
	}
	return ret;
}

static int make_ring(struct replay *p)
{
	const PacketRing *r = p->r;
	struct tpacket_req3 req = {
		.tp_block_size = r->block_size,
		.tp_block_nr = r->block_nr,
		.tp_frame_size = r->frame_size,
		.tp_frame_nr = r->frame_nr,
		.tp_retire_blk_tov = r->retire_tmo,
		.tp_sizeof_priv = r->sizeof_priv,
		.tp_feature_req_word = r->features,
	};
	socklen_t len = p->version == TPACKET_V3 ? sizeof(req) : sizeof(struct tpacket_req);

	if (setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &req, len)) {
		pr_err("%s: cannot make a PACKET_RX_RING of %u blocks of %u bytes: %m", p->who,
		       r->block_nr, r->block_size);
		return -errno;
	}
	/* the transmit ring, made first, follows in the mapping */
	p->m = mmap(NULL, packet_ring_len(r) + p->tx_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		    p->fd, 0);
	if (p->m == MAP_FAILED) {
		pr_err("%s: cannot map the new PACKET_RX_RING: %m", p->who);
		p->m = NULL;
		return -errno;
	}
	return 0;
}

static void drop_ring(struct replay *p)
{
	struct tpacket_req3 req = {0};

	if (p->m)
		munmap(p->m, packet_ring_len(p->r) + p->tx_len);
	p->m = NULL;
	setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &req,
		   p->version == TPACKET_V3 ? sizeof(req) : sizeof(struct tpacket_req));
}

uint32_t packet_vnet_len(int fd, int type)
{
	int vnet = 0;
	socklen_t len = sizeof(vnet);

	if (type != SOCK_RAW)
		return 0;
	if (getsockopt(fd, SOL_PACKET, PACKET_VNET_HDR_SZ, &vnet, &len)) {
		len = sizeof(vnet);
		if (!getsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &vnet, &len) && vnet)
			vnet = 10; /* struct virtio_net_hdr */
	}
	return vnet > 0 ? (uint32_t)vnet : 0;
}

/* Where an injected frame's bytes start in the ring, less ETH_HLEN (af_packet's tpacket_rcv). */
static int ring_base(struct replay *p, int type)
{
	static const uint32_t hdrlen[] = {TPACKET_HDRLEN, TPACKET2_HDRLEN, TPACKET3_HDRLEN};
	int reserve = 0;
	socklen_t len = sizeof(reserve);
	uint32_t netoff;

	if (getsockopt(p->fd, SOL_PACKET, PACKET_RESERVE, &reserve, &len)) {
		pr_err("%s: cannot read PACKET_RESERVE: %m", p->who);
		return -errno;
	}
	netoff = TPACKET_ALIGN(hdrlen[p->version] + 16) + (uint32_t)reserve +
		 packet_vnet_len(p->fd, type);
	p->base = netoff - ETH_HLEN;
	return 0;
}

bool packet_ring_replays(const PacketRing *r)
{
	return r->head || r->n_steps || r->frozen;
}

/*
 * The dumped memory over the ring.  V3 with packets in the current block:
 * that block's header last, once it is seen open still (the retire timer
 * closes a block with packets: before the header is written back, the
 * kernel would have moved on from it unseen); -EAGAIN if it closed.
 */
static int write_back(struct replay *p)
{
	const PacketRing *r = p->r;
	size_t hdr = (size_t)r->head * r->block_size, len = sizeof(struct tpacket_block_desc);
	volatile struct tpacket_hdr_v1 *h = live_hdr(p, r->head);

	if (p->version != TPACKET_V3 || r->frozen || !r->n_steps) {
		memcpy(p->m, r->data.data, r->data.len);
		return 0;
	}
	memcpy(p->m, r->data.data, hdr);
	memcpy(p->m + hdr + len, r->data.data + hdr + len, r->data.len - hdr - len);
	if ((rd32(&h->block_status) & TP_STATUS_USER) || rd32(&h->num_pkts) != r->n_steps)
		return -EAGAIN;
	memcpy(p->m + hdr, r->data.data + hdr, len);
	return 0;
}

int packet_ring_restore(int fd, int type, int version, const PacketRing *r, size_t tx_len,
			const char *who)
{
	struct replay p = {
		.fd = fd, .tx = -1, .version = version, .r = r, .tx_len = tx_len, .who = who};
	struct tpacket_stats_v3 st;
	socklen_t len = sizeof(st);
	int ret = -EAGAIN;

	if (!packet_ring_replays(r)) {
		/* the kernel starts where it was: at the first frame of a ring it never filled */
		ret = make_ring(&p);
		if (!ret) {
			memcpy(p.m, r->data.data, r->data.len);
			munmap(p.m, packet_ring_len(r) + tx_len);
		}
		return ret;
	}

	p.to = (struct sockaddr_ll){.sll_family = AF_PACKET,
				    .sll_protocol = htons(REPLAY_PROTO),
				    .sll_ifindex = (int)if_nametoindex("lo")};
	if (!p.to.sll_ifindex) {
		pr_err("%s: no lo in the socket's network namespace, through which amber brings "
		       "the kernel to its place in the ring",
		       who);
		return -ENODEV;
	}
	ret = ring_base(&p, type);
	if (ret)
		return ret;
	if (bind(fd, (struct sockaddr *)&p.to, sizeof(p.to))) {
		pr_err("%s: cannot bind the packet socket to lo for its ring: %m", who);
		return -errno;
	}
	p.tx = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (p.tx < 0) {
		pr_err("%s: cannot make a packet socket to send to the ring: %m", who);
		return -errno;
	}
	ret = -EAGAIN;
	for (int t = 0; ret == -EAGAIN && t < REPLAY_TRIES; t++) {
		if (t)
			drop_ring(&p);
		ret = make_ring(&p);
		if (!ret && version == TPACKET_V3)
			ret = replay_v3(&p);
		for (uint32_t i = 0; !ret && version != TPACKET_V3 && i < r->head; i++) {
			ret = send_frame(&p, 60);
			if (!ret)
				ret = landed(&p, i);
		}
		if (!ret)
			ret = write_back(&p);
	}
	if (ret == -EAGAIN)
		pr_err("%s: the ring's retire timer closed blocks while amber refilled them, "
		       "%d times",
		       who, REPLAY_TRIES);
	if (!ret) {
		/* read, they start again from 0: amber's frames are not the process's */
		getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len);
	}
	if (p.m)
		munmap(p.m, packet_ring_len(r) + tx_len);
	close(p.tx);
	return ret;
}

/* ---- the process's mapping of the rings ---- */

/* A mapping of the socket's rings is both, the receive ring first (0: none). */
static size_t rings_len(const PacketSkEntry *e)
{
	return (e && e->rx_ring ? packet_ring_len(e->rx_ring) : 0) +
	       (e && e->tx_ring ? packet_ring_len(e->tx_ring) : 0);
}

int packet_vma_file(struct dump_ctx *ctx, struct vma *v)
{
	for (size_t i = 0; i < ctx->files->n; i++) {
		const RegFile *f = ctx->files->f[i];

		if (f->kind != FILE_KIND__FILE_PACKET_SK || f->ino != v->ino)
			continue;
		if (!rings_len(f->packet_sk) || v->pgoff ||
		    v->end - v->start != rings_len(f->packet_sk)) {
			pr_err("pid %d: mapping %lx-%lx is part of the rings of packet "
			       "socket:[%lu] (offset %#lx); amber restores a mapping of them whole",
			       ctx->pid, v->start, v->end, v->ino, v->pgoff);
			return -EOPNOTSUPP;
		}
		v->kind = VMA_KIND__VMA_PACKET_RING;
		v->file_id = (int)i;
		return 0;
	}
	return 1;
}

static int ring_restore_read(struct restore_ctx *ctx)
{
	for (size_t i = 0; ctx->mm && i < ctx->mm->n_vmas; i++) {
		const VmaEntry *e = ctx->mm->vmas[i];
		const RegFile *f;

		if (e->kind != VMA_KIND__VMA_PACKET_RING)
			continue;
		f = e->has_file_id && e->file_id < ctx->nr_files ? ctx->files[e->file_id] : NULL;
		if (!f || f->kind != FILE_KIND__FILE_PACKET_SK || !rings_len(f->packet_sk) ||
		    e->pgoff || e->end - e->start != rings_len(f->packet_sk) ||
		    mem_vma_fd(ctx, e) < 0 || (e->prot & PROT_EXEC)) {
			pr_err("mm-%d.img: mapping %llx-%llx is not a packet ring of the "
			       "process's; "
			       "the image is corrupt",
			       ctx->pid, (unsigned long long)e->start, (unsigned long long)e->end);
			return -EBADMSG;
		}
	}
	return 0;
}

static int ring_restore_inject(struct restore_ctx *ctx)
{
	int ret = 0;

	for (size_t i = 0; !ret && !ctx->shares_vm && ctx->mm && i < ctx->mm->n_vmas; i++) {
		const VmaEntry *e = ctx->mm->vmas[i];
		long len = (long)(e->end - e->start), r;

		if (e->kind != VMA_KIND__VMA_PACKET_RING)
			continue;
		r = infect_call(&ctx->inf, SYS_mmap, (long)e->start, len, e->prot,
				MAP_SHARED | MAP_FIXED_NOREPLACE, mem_vma_fd(ctx, e), 0);
		ret = mem_vma_placed(ctx, e, r, "packet ring");
	}
	return ret;
}

const struct resource_ops packet_ring_ops = {
	.name = "packet rings",
	.restore_read = ring_restore_read,
	.restore_inject = ring_restore_inject,
};
