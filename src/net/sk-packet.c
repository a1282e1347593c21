// SPDX-License-Identifier: MIT
/*
 * Packet sockets (AF_PACKET, SOCK_RAW and SOCK_DGRAM): the protocol and the
 * interface bound, the PACKET_* options (sk-opts.c's table: version,
 * auxdata, origdev, reserve, timestamp, loss, vnet header...), the
 * memberships of PACKET_ADD_MEMBERSHIP (with their counts), the fanout
 * group and the copy threshold.  getsockname tells the binding, getsockopt
 * the options and the fanout; the memberships, rings and queued bytes come
 * from sock_diag (sk-diag.c).
 *
 * A receive ring (PACKET_RX_RING) is packet-ring.c's, a transmit ring
 * (PACKET_TX_RING) packet-tx.c's.
 *
 * Refused at dump: packets queued for reading (they came from the
 * network; nothing can deliver them to this socket alone again), fanout
 * groups that run a BPF program (PACKET_FANOUT_CBPF/EBPF: the program cannot
 * be read back).
 *
 * Restore: a new socket of protocol 0 (receiving nothing yet), the early
 * options, the rings, the late options (a filter last: the ring's refill
 * passes none), then bind to the protocol and interface (checked to have the
 * name it had), the memberships, the fanout group.  A packet socket needs
 * CAP_NET_RAW: an image not root's holding one is refused before anything is
 * made.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/packet_diag.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "owner.h"
#include "sk.h"
#include "sys.h"

#define MAX_MCLIST     1024 /* memberships of one socket an image may ask for */
#define MAX_MC_COUNT   1024 /* times one was added */
#define FANOUT_CBPF    6
#define FANOUT_EBPF    7
#define FANOUT_MAXMODE 7
#define FANOUT_UNIQUE  0x20 /* PACKET_FANOUT_FLAG_UNIQUEID >> 8 */

/* /proc/net/packet lists every packet socket of the namespace, bound or not. */
static bool packet_match(const char *link, const struct stat *st)
{
	char line[256];
	bool is = false;
	FILE *fp;

	(void)link;
	if (!S_ISSOCK(st->st_mode))
		return false;
	fp = sys_fopen_read("/proc/net/packet");
	if (!fp)
		return false;
	while (!is && fgets(line, sizeof(line), fp)) {
		unsigned long long ino;

		/* sk RefCnt Type Proto Iface R Rmem User Inode */
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %llu", &ino) == 1)
			is = ino == st->st_ino;
	}
	fclose(fp);
	return is;
}

static int add_mc(PacketSkEntry *e, const struct packet_diag_mclist *m)
{
	PacketMclist **n = realloc(e->mclist, (e->n_mclist + 1) * sizeof(*n));
	PacketMclist *c;

	if (!n)
		return -ENOMEM;
	e->mclist = n;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	packet_mclist__init(c);
	c->ifindex = m->pdmc_index;
	c->type = m->pdmc_type;
	c->count = m->pdmc_count;
	c->has_addr = 1;
	c->addr.len = m->pdmc_alen;
	c->addr.data = malloc(m->pdmc_alen ? m->pdmc_alen : 1);
	if (!c->addr.data) {
		free(c);
		return -ENOMEM;
	}
	memcpy(c->addr.data, m->pdmc_addr, m->pdmc_alen);
	e->mclist[e->n_mclist++] = c;
	return 0;
}

static int ring_shape(PacketRing **to, const struct packet_diag_ring *d)
{
	PacketRing *r = malloc(sizeof(*r));

	if (!r)
		return -ENOMEM;
	packet_ring__init(r);
	r->block_size = d->pdr_block_size;
	r->block_nr = d->pdr_block_nr;
	r->frame_size = d->pdr_frame_size;
	r->frame_nr = d->pdr_frame_nr;
	r->has_retire_tmo = r->has_sizeof_priv = r->has_features = 1;
	r->retire_tmo = d->pdr_retire_tmo;
	r->sizeof_priv = d->pdr_sizeof_priv;
	r->features = d->pdr_features;
	*to = r;
	return 0;
}

/* The ring version e's options set (TPACKET_V1 if none: the default is not saved). */
static int image_version(const PacketSkEntry *e)
{
	for (size_t i = 0; i < e->n_opts; i++)
		if (!strcmp(e->opts[i]->name, "PACKET_VERSION") && e->opts[i]->has_val)
			return (int)e->opts[i]->val;
	return TPACKET_V1;
}

/* What only sock_diag tells: memberships, rings, the copy threshold, queued bytes. */
static int dump_diag(PacketSkEntry *e, uint64_t ino, const char *what)
{
	struct packet_diag_req req = {
		.sdiag_family = AF_PACKET,
		.pdiag_ino = (uint32_t)ino,
		.pdiag_show = PACKET_SHOW_INFO | PACKET_SHOW_MCLIST | PACKET_SHOW_RING_CFG |
			      PACKET_SHOW_MEMINFO,
	};
	struct nlmsghdr *msg;
	int ret = sk_diag_find(&req, sizeof(req), offsetof(struct packet_diag_msg, pdiag_ino), ino,
			       (void **)&msg);

	if (ret) {
		pr_err("%s: sock_diag cannot describe the packet socket: %s", what, strerror(-ret));
		return ret;
	}
	sk_diag_for_each_attr(a, msg, sizeof(struct packet_diag_msg))
	{
		void *d = a + 1;
		size_t len = a->nla_len - sizeof(*a);

		switch (a->nla_type) {
		case PACKET_DIAG_INFO:
			if (len >= sizeof(struct packet_diag_info) &&
			    ((struct packet_diag_info *)d)->pdi_copy_thresh) {
				e->has_copy_thresh = 1;
				e->copy_thresh = ((struct packet_diag_info *)d)->pdi_copy_thresh;
			}
			break;
		case PACKET_DIAG_MCLIST:
			for (size_t off = 0; !ret && off + sizeof(struct packet_diag_mclist) <= len;
			     off += sizeof(struct packet_diag_mclist)) {
				struct packet_diag_mclist m;

				memcpy(&m, (char *)d + off, sizeof(m));
				if (m.pdmc_alen > 8) {
					pr_err("%s: a membership with an address of %u bytes, "
					       "more than PACKET_ADD_MEMBERSHIP takes",
					       what, m.pdmc_alen);
					ret = -EOPNOTSUPP;
				} else {
					ret = add_mc(e, &m);
				}
			}
			break;
		case PACKET_DIAG_RX_RING:
			if (len >= sizeof(struct packet_diag_ring))
				ret = ring_shape(&e->rx_ring, d);
			break;
		case PACKET_DIAG_TX_RING:
			if (len >= sizeof(struct packet_diag_ring))
				ret = ring_shape(&e->tx_ring, d);
			break;
		case PACKET_DIAG_MEMINFO:
			if (len >= sizeof(uint32_t) * (SK_MEMINFO_RMEM_ALLOC + 1) &&
			    ((uint32_t *)d)[SK_MEMINFO_RMEM_ALLOC]) {
				pr_err("%s: the packet socket has packets queued for reading (%u "
				       "bytes), which amber cannot deliver to it again; let the "
				       "process read them before the dump",
				       what, ((uint32_t *)d)[SK_MEMINFO_RMEM_ALLOC]);
				ret = -EOPNOTSUPP;
			}
			break;
		}
		if (ret)
			break;
	}
	free(msg);
	return ret;
}

static int packet_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	PacketSkEntry *e = malloc(sizeof(*e));
	struct sockaddr_ll sll;
	socklen_t len = sizeof(sll);
	char what[96], dev[IF_NAMESIZE];
	int val, ret;

	if (!e)
		return -ENOMEM;
	packet_sk_entry__init(e);
	f->packet_sk = e;
	snprintf(what, sizeof(what), "pid %d: fd %d (packet socket:[%llu])", ctx->pid, fd,
		 (unsigned long long)f->ino);
	if (getsockname(dup, (struct sockaddr *)&sll, &len) ||
	    getsockopt(dup, SOL_SOCKET, SO_TYPE, &val, &(socklen_t){sizeof(val)})) {
		pr_err("%s: cannot read the socket's address or type: %m", what);
		return -errno;
	}
	e->type = (uint32_t)val;
	if (e->type != SOCK_RAW && e->type != SOCK_DGRAM) {
		pr_err("%s: a packet socket of type %u (SOCK_PACKET), which amber cannot dump "
		       "(only SOCK_RAW and SOCK_DGRAM)",
		       what, e->type);
		return -EOPNOTSUPP;
	}
	e->protocol = ntohs(sll.sll_protocol);
	e->ifindex = sll.sll_ifindex;
	if (e->ifindex > 0) {
		if (!if_indextoname((unsigned)e->ifindex, dev)) {
			pr_err("%s: bound to interface %d, which has no name: %m", what,
			       e->ifindex);
			return -errno;
		}
		e->ifname = strdup(dev);
		if (!e->ifname)
			return -ENOMEM;
	}
	len = sizeof(val);
	if (getsockopt(dup, SOL_PACKET, PACKET_FANOUT, &val, &len)) {
		pr_err("%s: cannot read PACKET_FANOUT: %m", what);
		return -errno;
	}
	if (val) {
		unsigned mode = ((unsigned)val >> 16) & 0xff;

		if (mode == FANOUT_CBPF || mode == FANOUT_EBPF) {
			pr_err("%s: the packet socket is in fanout group %u of mode %s, whose "
			       "program amber cannot read back",
			       what, (unsigned)val & 0xffff, mode == FANOUT_CBPF ? "CBPF" : "EBPF");
			return -EOPNOTSUPP;
		}
		e->has_fanout = 1;
		e->fanout = (uint32_t)val;
	}
	ret = dump_diag(e, f->ino, what);
	if (!ret)
		ret = sk_opts_dump(dup, AF_PACKET, (int)e->type, false, what, &e->opts, &e->n_opts);
	/* the options just read hold the version (unless it is the default) */
	if (!ret && e->rx_ring)
		ret = packet_ring_dump(dup, image_version(e), e->rx_ring,
				       packet_ring_len(e->rx_ring) +
					       (e->tx_ring ? packet_ring_len(e->tx_ring) : 0),
				       what);
	if (!ret && e->tx_ring)
		ret = packet_tx_dump(dup, image_version(e), (int)e->type, e->ifindex > 0, e->tx_ring,
				     e->rx_ring ? packet_ring_len(e->rx_ring) : 0, what);
	return ret;
}

/* ---- restore ---- */

static int check_one(struct tree *t, const PacketSkEntry *e, const char *who)
{
	int version = image_version(e);

	if (e->type != SOCK_RAW && e->type != SOCK_DGRAM) {
		pr_err("%s: the image holds a packet socket of type %u; the image is corrupt", who,
		       e->type);
		return -EBADMSG;
	}
	if (e->protocol > 0xffff || e->ifindex < 0 || (e->ifindex > 0 && !e->ifname) ||
	    (e->ifname && strlen(e->ifname) >= IF_NAMESIZE) || e->n_mclist > MAX_MCLIST ||
	    (e->has_fanout && (((e->fanout >> 16) & 0xff) > FANOUT_MAXMODE ||
			       ((e->fanout >> 16) & 0xff) == FANOUT_CBPF ||
			       ((e->fanout >> 16) & 0xff) == FANOUT_EBPF))) {
		pr_err("%s: the image holds a packet socket with a protocol, an interface or a "
		       "fanout out of range; the image is corrupt",
		       who);
		return -EBADMSG;
	}
	for (size_t i = 0; i < e->n_mclist; i++) {
		const PacketMclist *m = e->mclist[i];

		if (!m->ifindex || m->ifindex > INT32_MAX || m->type > PACKET_MR_UNICAST ||
		    m->addr.len > 8 || !m->count || m->count > MAX_MC_COUNT) {
			pr_err("%s: the image holds a packet membership out of range; the image "
			       "is corrupt",
			       who);
			return -EBADMSG;
		}
	}
	if (e->rx_ring && (version < TPACKET_V1 || version > TPACKET_V3 ||
			   !packet_ring_sane(e->rx_ring, version) ||
			   (packet_ring_replays(e->rx_ring) && !e->protocol))) {
		pr_err("%s: the image holds a packet ring the socket could not have; the image is "
		       "corrupt",
		       who);
		return -EBADMSG;
	}
	if (e->tx_ring && packet_tx_check(e->tx_ring, version, who))
		return -EBADMSG;
	if (t->owner.switches) {
		pr_err("%s: the image holds a packet socket, which needs CAP_NET_RAW, and belongs "
		       "to uid %u: only root's own images restore packet sockets",
		       who, t->owner.uid);
		return -EPERM;
	}
	return sk_opts_check(t, e->opts, e->n_opts, AF_PACKET, (int)e->type, false, who);
}

static int bind_one(int fd, const PacketSkEntry *e, const char *who)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons((uint16_t)e->protocol),
		.sll_ifindex = e->ifindex,
	};
	char dev[IF_NAMESIZE];

	if (e->ifindex > 0 &&
	    (!if_indextoname((unsigned)e->ifindex, dev) || strcmp(dev, e->ifname))) {
		pr_err("%s: the packet socket was bound to interface %s (index %d), which is "
		       "now %s",
		       who, e->ifname, e->ifindex,
		       if_indextoname((unsigned)e->ifindex, dev) ? dev : "gone");
		return -ENODEV;
	}
	if (!e->protocol && !e->ifindex)
		return 0;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll))) {
		pr_err("%s: cannot bind the packet socket to protocol 0x%04x on %s: %m", who,
		       e->protocol, e->ifindex ? e->ifname : "every interface");
		return -errno;
	}
	return 0;
}

static int open_one(struct tree *t, RegFile *f, const char *who)
{
	const PacketSkEntry *e = f->packet_sk;
	int fd, ret;

	fd = socket(AF_PACKET, (int)e->type | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("%s: cannot create a packet socket: %m", who);
		return -errno;
	}
	/* all of them before bind, which starts the receiving: a filter comes first */
	ret = sk_opts_restore(t, fd, e->opts, e->n_opts, false, who);
	/* the transmit ring first: its refill sends while the socket receives nothing */
	if (!ret && e->tx_ring)
		ret = packet_tx_restore(fd, (int)e->type, image_version(e), e->tx_ring, who);
	if (!ret && e->rx_ring)
		ret = packet_ring_restore(fd, (int)e->type, image_version(e), e->rx_ring,
					  e->tx_ring ? packet_ring_len(e->tx_ring) : 0, who);
	if (!ret)
		ret = sk_opts_restore(t, fd, e->opts, e->n_opts, true, who);
	if (!ret)
		ret = bind_one(fd, e, who);
	for (size_t i = 0; i < e->n_mclist && !ret; i++) {
		const PacketMclist *m = e->mclist[i];
		struct packet_mreq mr = {
			.mr_ifindex = (int)m->ifindex,
			.mr_type = (unsigned short)m->type,
			.mr_alen = (unsigned short)m->addr.len,
		};

		memcpy(mr.mr_address, m->addr.data, m->addr.len);
		for (uint32_t k = 0; k < m->count && !ret; k++)
			if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr))) {
				ret = -errno;
				pr_err("%s: cannot add the packet membership of type %u on "
				       "interface %u: %m",
				       who, m->type, m->ifindex);
			}
	}
	if (!ret && e->has_copy_thresh &&
	    setsockopt(fd, SOL_PACKET, PACKET_COPY_THRESH, &e->copy_thresh,
		       sizeof(e->copy_thresh))) {
		ret = -errno;
		pr_err("%s: cannot set PACKET_COPY_THRESH: %m", who);
	}
	if (!ret && e->has_fanout) {
		/* a group the kernel numbered comes back by its number */
		uint32_t id = e->fanout & 0xffff, mode = (e->fanout >> 16) & 0xff,
			 flags = (e->fanout >> 24) & ~FANOUT_UNIQUE & 0xff;
		int v = (int)(id | ((mode | (flags << 8)) << 16));

		if (setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &v, sizeof(v))) {
			ret = -errno;
			pr_err("%s: cannot join packet fanout group %u (mode %u): %m", who, id,
			       mode);
		}
	}
	if (!ret)
		ret = sk_set_flags(fd, f);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* All at once, so that a bad entry is refused before any socket exists. */
static int packet_prepare(struct tree *t, RegFile **files, size_t n, int *fds)
{
	char who[128];
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		if (!files[i]->packet_sk) {
			pr_err("files.img: packet socket entry %u has no socket state; the image "
			       "is corrupt",
			       files[i]->id);
			return -EBADMSG;
		}
		snprintf(who, sizeof(who), "%s", sk_who(t, files[i], "packet"));
		ret = check_one(t, files[i]->packet_sk, who);
	}
	for (size_t i = 0; i < n && !ret; i++) {
		snprintf(who, sizeof(who), "%s", sk_who(t, files[i], "packet"));
		fds[i] = open_one(t, files[i], who);
		if (fds[i] < 0) {
			ret = fds[i];
			fds[i] = -1;
		}
	}
	return ret;
}

const struct fd_type packet_sk_type = {
	.name = "packet socket",
	.kind = FILE_KIND__FILE_PACKET_SK,
	.match = packet_match,
	.dump = packet_dump,
	.prepare = packet_prepare,
};
