// SPDX-License-Identifier: MIT
/*
 * packetring MODE: a packet socket bound to lo (ethertype 0x88b6) with a
 * PACKET_RX_RING mapped, frames sent to it by a second packet socket, each
 * carrying a sequence number; the program reads the ring as libpcap does,
 * at an index of its own, and gives frames and blocks back.
 *   v1, v2: 16 frames; 35 frames read and given back (the ring wrapped
 *       twice), 5 left unread: the kernel fills the frame 5 after the
 *       program's; the mapping advised MADV_DONTFORK and MADV_DONTDUMP.
 *   v3: 4 blocks of 4 KiB (retire timer 60 s); blocks read and given back
 *       until the ring wrapped, one closed block left unread and 3 packets
 *       in the block the kernel fills.
 *   v3frozen: two blocks read, then every block closed and unread: the
 *       kernel waits (frozen) for the block after them; the frames sent
 *       then are dropped.
 *   v3empty: retire timer 20 ms: the kernel fills a block after a block
 *       the timer closed, with no packet yet.
 *   v2part: v2, and the ring mapped a second time, of which the last page
 *       is unmapped (the dump is refused).
 * After "go": the unread frames or blocks are there with their numbers, in
 * order, then new frames land where the program looks next, right after
 * the old ones (v3: in the same block), numbered on; PACKET_STATISTICS
 * counts only the new frames; no frame of another ethertype is in the ring.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "prog.h"

#define PROTO 0x88b6
#define BSZ   4096
#define BNR   4

static int rx, tx, version;
static uint8_t *ring;
static struct sockaddr_ll lo;
static uint32_t next_seq; /* the next frame's number */
static uint32_t idx;	  /* the frame (v1, v2) or block (v3) the program reads next */

static void send_one(void)
{
	uint8_t f[1100] = {0};
	uint32_t len = 60 + (next_seq * 37) % 700;

	f[12] = PROTO >> 8;
	f[13] = PROTO & 0xff;
	memcpy(f + 14, &next_seq, 4);
	if (sendto(tx, f, len, 0, (struct sockaddr *)&lo, sizeof(lo)) != (ssize_t)len)
		prog_die("sendto");
	next_seq++;
}

static volatile uint32_t *status_at(uint32_t i)
{
	if (version == TPACKET_V3)
		return (volatile uint32_t *)(ring + (size_t)i * BSZ +
					     offsetof(struct tpacket_block_desc,
						      hdr.bh1.block_status));
	return (volatile uint32_t *)(ring + (size_t)i * 1024);
}

static int wait_user(uint32_t i, int ms)
{
	for (int k = 0; k < ms * 10; k++) {
		if (__atomic_load_n(status_at(i), __ATOMIC_ACQUIRE) & TP_STATUS_USER)
			return 1;
		usleep(100);
	}
	return 0;
}

static void give_back(uint32_t i)
{
	__atomic_store_n(status_at(i), TP_STATUS_KERNEL, __ATOMIC_RELEASE);
}

/* v1/v2: the number in frame i (-1: not ours). */
static int64_t frame_seq(uint32_t i)
{
	uint8_t *f = ring + (size_t)i * 1024;
	uint32_t mac = version == TPACKET_V1 ? ((struct tpacket_hdr *)f)->tp_mac
					     : ((struct tpacket2_hdr *)f)->tp_mac;
	uint32_t s;

	if (f[mac + 12] != PROTO >> 8 || f[mac + 13] != (PROTO & 0xff))
		return -1;
	memcpy(&s, f + mac + 14, 4);
	return s;
}

/* v3: block i's numbers must run on from *want; returns its packet count or -1. */
static int block_seqs(uint32_t i, uint32_t *want)
{
	struct tpacket_block_desc *b = (void *)(ring + (size_t)i * BSZ);
	uint8_t *p = (uint8_t *)b + b->hdr.bh1.offset_to_first_pkt;
	uint32_t n = b->hdr.bh1.num_pkts;

	for (uint32_t k = 0; k < n; k++) {
		struct tpacket3_hdr *h = (void *)p;
		uint32_t s;

		if (p[h->tp_mac + 12] != PROTO >> 8 || p[h->tp_mac + 13] != (PROTO & 0xff))
			return -1;
		memcpy(&s, p + h->tp_mac + 14, 4);
		if (s != *want)
			return -1;
		(*want)++;
		p += h->tp_next_offset;
	}
	return (int)n;
}

static void setup_ring(unsigned tmo)
{
	struct tpacket_req3 req = {BSZ, BNR, 1024, BSZ / 1024 * BNR, tmo, 0, 0};

	if (version == TPACKET_V3)
		req.tp_frame_size = 2048, req.tp_frame_nr = BSZ / 2048 * BNR;
	rx = socket(AF_PACKET, SOCK_RAW, 0);
	tx = socket(AF_PACKET, SOCK_RAW, 0);
	if (rx < 0 || tx < 0)
		prog_die("socket");
	if (setsockopt(rx, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) ||
	    setsockopt(rx, SOL_PACKET, PACKET_RX_RING, &req,
		       version == TPACKET_V3 ? sizeof(req) : sizeof(struct tpacket_req)))
		prog_die("PACKET_RX_RING");
	ring = mmap(NULL, BSZ * BNR, PROT_READ | PROT_WRITE, MAP_SHARED, rx, 0);
	if (ring == MAP_FAILED)
		prog_die("mmap");
	lo = (struct sockaddr_ll){.sll_family = AF_PACKET,
				  .sll_protocol = htons(PROTO),
				  .sll_ifindex = (int)if_nametoindex("lo")};
	if (bind(rx, (struct sockaddr *)&lo, sizeof(lo)))
		prog_die("bind");
}

static unsigned stats_packets(unsigned *drops)
{
	struct tpacket_stats_v3 st = {0};
	socklen_t len = sizeof(st);

	if (getsockopt(rx, SOL_PACKET, PACKET_STATISTICS, &st, &len))
		prog_die("PACKET_STATISTICS");
	if (drops)
		*drops = st.tp_drops;
	return st.tp_packets;
}

/* The VmFlags of the mapping at addr, from /proc/self/smaps ("" if none). */
static const char *vmflags_at(const void *addr)
{
	static char line[512], flags[512];
	char start[32];
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	flags[0] = 0;
	snprintf(start, sizeof(start), "%lx-", (unsigned long)addr);
	while (f && fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' '))
			in = !strncmp(line, start, strlen(start));
		else if (in && !strncmp(line, "VmFlags:", 8))
			snprintf(flags, sizeof(flags), "%s", line + 8);
	}
	if (f)
		fclose(f);
	return flags;
}

static int frames(int part)
{
	const uint32_t nf = BSZ / 1024 * BNR;
	uint32_t sent_after, ok = 0;
	unsigned drops;

	setup_ring(0);
	if (madvise(ring, BSZ * BNR, MADV_DONTFORK) || madvise(ring, BSZ * BNR, MADV_DONTDUMP))
		prog_die("madvise");
	for (int k = 0; k < 35; k++) {
		send_one();
		if (!wait_user(idx, 2000) || frame_seq(idx) != k)
			prog_die("frame %d", k);
		give_back(idx);
		idx = (idx + 1) % nf;
	}
	for (int k = 0; k < 5; k++)
		send_one();
	if (!wait_user((idx + 4) % nf, 2000))
		prog_die("the 5 unread frames");
	stats_packets(NULL);
	if (part) {
		uint8_t *again = mmap(NULL, BSZ * BNR, PROT_READ | PROT_WRITE, MAP_SHARED, rx, 0);

		if (again == MAP_FAILED || munmap(again + BSZ * BNR - 4096, 4096))
			prog_die("a part of a second mapping");
	}
	prog_ready();
	prog_wait_go();

	for (uint32_t k = 35; k < 40; k++) {
		ok += wait_user(idx, 10) && frame_seq(idx) == k;
		give_back(idx);
		idx = (idx + 1) % nf;
	}
	CHECK(ok == 5, "the 5 unread frames, 35..39, at the program's index (%u)", ok);
	CHECK(strstr(vmflags_at(ring), " dc") && strstr(vmflags_at(ring), " dd"),
	      "the ring's mapping is still MADV_DONTFORK and MADV_DONTDUMP (VmFlags:%s)",
	      vmflags_at(ring));
	CHECK(!(*status_at(idx) & TP_STATUS_USER), "no other frame is the program's");
	ok = 0;
	for (uint32_t k = 40; k < 50; k++) {
		send_one();
		ok += wait_user(idx, 2000) && frame_seq(idx) == k;
		give_back(idx);
		idx = (idx + 1) % nf;
	}
	CHECK(ok == 10, "10 new frames, 40..49, land where the program reads next (%u)", ok);
	sent_after = stats_packets(&drops);
	CHECK(sent_after == (prog_sabotage() ? 11u : 10u) && !drops,
	      "PACKET_STATISTICS counts the 10 new frames (%u, %u dropped)", sent_after, drops);
	return prog_done();
}

/* v3: send until block idx is closed; returns 0 on a timeout */
static int fill_until_closed(uint32_t b)
{
	for (int k = 0; k < 200; k++) {
		if (*status_at(b) & TP_STATUS_USER)
			return 1;
		send_one();
		usleep(200);
	}
	return wait_user(b, 200);
}

static int blocks(const char *mode)
{
	uint32_t want = 0, n_old = 0, before_go, sent_after;
	unsigned drops;
	int n;

	setup_ring(!strcmp(mode, "v3empty") ? 20 : 60000);
	/* blocks read and given back until the ring wrapped (5 of them) */
	for (int k = 0; k < (!strcmp(mode, "v3frozen") ? 2 : 5); k++) {
		if (!fill_until_closed(idx) || block_seqs(idx, &want) <= 0)
			prog_die("block %u (%d)", idx, k);
		give_back(idx);
		idx = (idx + 1) % BNR;
	}
	if (!strcmp(mode, "v3")) {
		/* one closed and unread, and 3 packets in the next one */
		if (!fill_until_closed(idx))
			prog_die("the unread block");
		send_one();
		send_one();
	} else if (!strcmp(mode, "v3frozen")) {
		/* every block closed and unread: the kernel drops what comes */
		for (uint32_t b = 0; b < BNR; b++)
			if (!fill_until_closed((idx + b) % BNR))
				prog_die("block %u", (idx + b) % BNR);
		for (int k = 0; k < 3; k++)
			send_one();
		usleep(20000);
	} else {
		/* the timer closes the last block; the one after it stays empty */
		send_one();
		if (!wait_user(idx, 2000) || block_seqs(idx, &want) <= 0)
			prog_die("the block the timer closes");
		give_back(idx);
		idx = (idx + 1) % BNR;
		usleep(100000);
	}
	stats_packets(NULL);
	before_go = next_seq;
	prog_ready();
	prog_wait_go();

	if (!strcmp(mode, "v3")) {
		n = wait_user(idx, 10) ? block_seqs(idx, &want) : -1;
		CHECK(n > 0, "the unread block %u, its packets numbered on (%d)", idx, n);
		give_back(idx);
		idx = (idx + 1) % BNR;
		n_old = 3;
	} else if (!strcmp(mode, "v3frozen")) {
		uint32_t got = 0;

		for (uint32_t b = 0; b < BNR; b++) {
			n = wait_user(idx, 10) ? block_seqs(idx, &want) : -1;
			got += n > 0;
			give_back(idx);
			idx = (idx + 1) % BNR;
		}
		CHECK(got == BNR, "the %u unread blocks, their packets numbered on (%u)", BNR, got);
		want = before_go; /* the 3 dropped ones are gone */
	}
	CHECK(!(*status_at(idx) & TP_STATUS_USER), "block %u is not the program's yet", idx);
	if (!fill_until_closed(idx)) {
		CHECK(0, "new packets do not fill block %u", idx);
		return prog_done();
	}
	if (prog_sabotage())
		want++;
	n = block_seqs(idx, &want);
	CHECK(n > (int)n_old,
	      "block %u: %u packets from before and new ones after, numbered on (%d)", idx, n_old,
	      n);
	sent_after = stats_packets(&drops);
	CHECK(sent_after == next_seq - before_go && !drops,
	      "PACKET_STATISTICS counts the %u new frames (%u, %u dropped)", next_seq - before_go,
	      sent_after, drops);
	return prog_done();
}

/* A transmit frame's status and length words (V1's status is an unsigned long). */
static volatile uint32_t *tx_word(uint8_t *base, uint32_t i, int len)
{
	uint8_t *f = base + (size_t)i * 1024;

	if (version == TPACKET_V3)
		return (volatile uint32_t *)(f + (len ? offsetof(struct tpacket3_hdr, tp_len)
						      : offsetof(struct tpacket3_hdr, tp_status)));
	if (version == TPACKET_V2)
		return (volatile uint32_t *)(f + (len ? offsetof(struct tpacket2_hdr, tp_len)
						      : offsetof(struct tpacket2_hdr, tp_status)));
	return (volatile uint32_t *)(f + (len ? offsetof(struct tpacket_hdr, tp_len)
					      : offsetof(struct tpacket_hdr, tp_status)));
}

/* Frame i of the transmit ring filled with frame number seq, queued (not sent). */
static void tx_queue(uint8_t *base, uint32_t i, uint32_t seq)
{
	static const uint32_t hdrlen[] = {TPACKET_HDRLEN, TPACKET2_HDRLEN, TPACKET3_HDRLEN};
	uint8_t *d = base + (size_t)i * 1024 + hdrlen[version] - sizeof(struct sockaddr_ll);
	uint32_t len = 60 + (seq * 37) % 700;

	if (__atomic_load_n(tx_word(base, i, 0), __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE)
		prog_die("transmit frame %u is not free", i);
	memset(d, 0, len);
	d[12] = PROTO >> 8;
	d[13] = PROTO & 0xff;
	memcpy(d + 14, &seq, 4);
	*tx_word(base, i, 1) = len;
	__atomic_store_n(tx_word(base, i, 0), TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
}

/* The next frame rx receives (its number), -1 if none in 2 s or not ours. */
static int64_t rx_next(int rxs)
{
	uint8_t f[2048];
	uint32_t s;
	struct timeval tv = {2, 0};
	ssize_t n;

	setsockopt(rxs, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recv(rxs, f, sizeof(f), 0);
	if (n < 18 || f[12] != PROTO >> 8 || f[13] != (PROTO & 0xff))
		return -1;
	memcpy(&s, f + 14, 4);
	return s;
}

/*
 * tx1loss, tx2, tx3: a SOCK_RAW packet socket on lo with a PACKET_TX_RING of
 * 16 frames of 1024 bytes (tx1loss: TPACKET_V1 and PACKET_LOSS; tx2: V2 and a
 * receive ring of 4 blocks too, both in one mapping; tx3: V3), and a plain
 * packet socket receiving its frames (ethertype 0x88b6).  21 frames sent
 * through the ring and received (it wrapped once: the kernel at frame 5),
 * then frames 5 and 6 queued and not sent.  After "go": a send() sends the two
 * queued frames, numbered 21 and 22, first; 20 new frames through the ring
 * at the program's index arrive numbered on, each frame free again once
 * sent; nothing else arrives (amber's own frames do not).
 */
static int txring(const char *mode)
{
	struct tpacket_req3 req = {BSZ, BNR, 1024, BSZ / 1024 * BNR, 0, 0, 0};
	const uint32_t nf = BSZ / 1024 * BNR;
	int txs, rxs, one = 1, ok = 0;
	uint32_t seq = 0, i = 0;
	uint8_t *map, *txm;
	size_t rx_len = 0;

	txs = socket(AF_PACKET, SOCK_RAW, 0);
	rxs = socket(AF_PACKET, SOCK_RAW, htons(PROTO));
	if (txs < 0 || rxs < 0)
		prog_die("socket");
	if (setsockopt(txs, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) ||
	    (!strcmp(mode, "tx1loss") &&
	     setsockopt(txs, SOL_PACKET, PACKET_LOSS, &one, sizeof(one))))
		prog_die("PACKET_VERSION");
	if (!strcmp(mode, "tx2")) {
		if (setsockopt(txs, SOL_PACKET, PACKET_RX_RING, &req, sizeof(struct tpacket_req)))
			prog_die("PACKET_RX_RING");
		rx_len = BSZ * BNR;
	}
	if (setsockopt(txs, SOL_PACKET, PACKET_TX_RING, &req,
		       version == TPACKET_V3 ? sizeof(req) : sizeof(struct tpacket_req)))
		prog_die("PACKET_TX_RING");
	map = mmap(NULL, rx_len + BSZ * BNR, PROT_READ | PROT_WRITE, MAP_SHARED, txs, 0);
	if (map == MAP_FAILED)
		prog_die("mmap");
	txm = map + rx_len;
	lo = (struct sockaddr_ll){.sll_family = AF_PACKET,
				  .sll_protocol = 0,
				  .sll_ifindex = (int)if_nametoindex("lo")};
	if (bind(txs, (struct sockaddr *)&lo, sizeof(lo)))
		prog_die("bind");
	lo.sll_protocol = htons(PROTO);
	if (bind(rxs, (struct sockaddr *)&lo, sizeof(lo)))
		prog_die("bind");
	for (; seq < 21; seq++, i = (i + 1) % nf) {
		tx_queue(txm, i, seq);
		if (send(txs, NULL, 0, 0) < 0 || rx_next(rxs) != seq)
			prog_die("frame %u", seq);
	}
	tx_queue(txm, i, seq++);
	tx_queue(txm, (i + 1) % nf, seq++);
	i = (i + 2) % nf;
	prog_ready();
	prog_wait_go();

	if (send(txs, NULL, 0, 0) < 0)
		prog_die("send");
	CHECK(rx_next(rxs) == 21 && rx_next(rxs) == 22,
	      "the two frames queued before the dump go out first, numbered 21 and 22");
	if (prog_sabotage())
		seq++;
	for (int k = 0; k < 20; k++, i = (i + 1) % nf) {
		tx_queue(txm, i, 23 + k);
		ok += send(txs, NULL, 0, 0) > 0 && rx_next(rxs) == seq++;
	}
	CHECK(ok == 20, "20 new frames through the ring arrive in order (%d)", ok);
	CHECK(*tx_word(txm, (i + nf - 1) % nf, 0) == TP_STATUS_AVAILABLE,
	      "the last frame sent is free again");
	CHECK(recv(rxs, (char[64]){0}, 64, MSG_DONTWAIT) < 0, "no other frame arrived");
	return prog_done();
}

int main(int argc, char **argv)
{
	int n = prog_init(argc, argv);
	const char *mode = n < argc ? argv[n] : "v2";

	if (!strncmp(mode, "tx", 2)) {
		version = mode[2] == '1' ? TPACKET_V1 : mode[2] == '2' ? TPACKET_V2 : TPACKET_V3;
		return txring(mode);
	}

	version = mode[1] == '1' ? TPACKET_V1 : mode[1] == '2' ? TPACKET_V2 : TPACKET_V3;
	return version == TPACKET_V3 ? blocks(mode) : frames(!strcmp(mode, "v2part"));
}
