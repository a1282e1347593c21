// SPDX-License-Identifier: MIT
/*
 * Netlink sockets (AF_NETLINK): the protocol, the port id bound (the
 * kernel's choice or the process's, kept either way), the multicast groups
 * joined, the peer of connect() and the options (NETLINK_PKTINFO,
 * NETLINK_NO_ENOBUFS, NETLINK_LISTEN_ALL_NSID, NETLINK_CAP_ACK,
 * NETLINK_EXT_ACK, ... in sk-opts.c's table).  sock_diag (sk-diag.c) tells
 * the port, groups, flags and queued bytes.
 *
 * Refused at dump: messages queued for reading (answers and notifications
 * that the kernel sent: amber cannot make the kernel send them again, nor
 * inject them as the kernel), and a dump the kernel is still running for
 * the socket (NLM_F_DUMP in progress: its state is the kernel's).
 *
 * Restore, with the image owner's rights: a new socket of the protocol, the
 * options, bind to the port id, each group joined (the kernel checks the
 * owner may), connect, the late options.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/netlink_diag.h>
#include <linux/sock_diag.h>
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

#define MAX_LINKS	32   /* netlink protocols */
#define MAX_GROUP_WORDS 1024 /* 32768 groups: more than any family has */

/* /proc/net/netlink lists every netlink socket of the namespace, bound or not. */
static bool netlink_match(const char *link, const struct stat *st)
{
	char line[256];
	bool is = false;
	FILE *fp;

	(void)link;
	if (!S_ISSOCK(st->st_mode))
		return false;
	fp = sys_fopen_read("/proc/net/netlink");
	if (!fp)
		return false;
	while (!is && fgets(line, sizeof(line), fp)) {
		unsigned long long ino;

		/* sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode */
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &ino) == 1)
			is = ino == st->st_ino;
	}
	fclose(fp);
	return is;
}

static int dump_diag(int fd, NetlinkSkEntry *e, uint64_t ino, const char *what)
{
	struct netlink_diag_req req = {
		.sdiag_family = AF_NETLINK,
		.sdiag_protocol = NDIAG_PROTO_ALL,
		.ndiag_ino = (uint32_t)ino,
		.ndiag_show = NDIAG_SHOW_MEMINFO | NDIAG_SHOW_GROUPS | NDIAG_SHOW_FLAGS,
	};
	struct nlmsghdr *msg;
	struct netlink_diag_msg *m;
	int ret = sk_diag_find(&req, sizeof(req), offsetof(struct netlink_diag_msg, ndiag_ino), ino,
			       (void **)&msg);

	/* sock_diag lists bound sockets: one never bound has no port, group nor queue */
	if (ret == -ENOENT) {
		struct sockaddr_nl nl;
		socklen_t len = sizeof(nl);

		if (!getsockname(fd, (struct sockaddr *)&nl, &len) && !nl.nl_pid && !nl.nl_groups)
			return 0;
	}
	if (ret) {
		pr_err("%s: sock_diag cannot describe the netlink socket: %s", what,
		       strerror(-ret));
		return ret;
	}
	m = NLMSG_DATA(msg);
	if (m->ndiag_portid) {
		e->has_portid = 1;
		e->portid = m->ndiag_portid;
	}
	if (m->ndiag_dst_portid || m->ndiag_dst_group) {
		e->has_dst_portid = e->has_dst_group = 1;
		e->dst_portid = m->ndiag_dst_portid;
		e->dst_group = m->ndiag_dst_group;
	}
	sk_diag_for_each_attr(a, msg, sizeof(*m))
	{
		void *d = a + 1;
		size_t len = a->nla_len - sizeof(*a);

		switch (a->nla_type) {
		case NETLINK_DIAG_GROUPS: {
			/* a bitmap of longs: on a little-endian machine, of u32 words too */
			size_t n = len / sizeof(uint32_t);

			while (n && !((uint32_t *)d)[n - 1])
				n--;
			if (!n)
				break;
			e->groups = malloc(n * sizeof(uint32_t));
			if (!e->groups) {
				ret = -ENOMEM;
				break;
			}
			memcpy(e->groups, d, n * sizeof(uint32_t));
			e->n_groups = n;
			break;
		}
		case NETLINK_DIAG_FLAGS:
			if (len >= sizeof(uint32_t) && (*(uint32_t *)d & NDIAG_FLAG_CB_RUNNING)) {
				pr_err("%s: the kernel is still answering a dump request "
				       "(NLM_F_DUMP) on the netlink socket, which amber cannot "
				       "take along; let the process read the whole answer first",
				       what);
				ret = -EOPNOTSUPP;
			}
			break;
		case NETLINK_DIAG_MEMINFO:
			if (len >= sizeof(uint32_t) * (SK_MEMINFO_RMEM_ALLOC + 1) &&
			    ((uint32_t *)d)[SK_MEMINFO_RMEM_ALLOC]) {
				pr_err("%s: the netlink socket has messages queued for reading "
				       "(%u bytes), which amber cannot have the kernel send again; "
				       "let the process read them before the dump",
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

static int netlink_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	NetlinkSkEntry *e = malloc(sizeof(*e));
	char what[96];
	int val, ret;
	socklen_t len = sizeof(val);

	if (!e)
		return -ENOMEM;
	netlink_sk_entry__init(e);
	f->netlink_sk = e;
	snprintf(what, sizeof(what), "pid %d: fd %d (netlink socket:[%llu])", ctx->pid, fd,
		 (unsigned long long)f->ino);
	if (getsockopt(dup, SOL_SOCKET, SO_TYPE, &val, &len)) {
		pr_err("%s: cannot read the socket's type: %m", what);
		return -errno;
	}
	e->type = (uint32_t)val;
	len = sizeof(val);
	if (getsockopt(dup, SOL_SOCKET, SO_PROTOCOL, &val, &len)) {
		pr_err("%s: cannot read the socket's protocol: %m", what);
		return -errno;
	}
	e->protocol = (uint32_t)val;
	ret = dump_diag(dup, e, f->ino, what);
	if (!ret)
		ret = sk_opts_dump(dup, AF_NETLINK, (int)e->type, false, what, &e->opts,
				   &e->n_opts);
	return ret;
}

/* ---- restore ---- */

static int check_one(struct tree *t, const NetlinkSkEntry *e, const char *who)
{
	if ((e->type != SOCK_RAW && e->type != SOCK_DGRAM) || e->protocol >= MAX_LINKS ||
	    e->n_groups > MAX_GROUP_WORDS || e->dst_group > 32) {
		pr_err("%s: the image holds a netlink socket of type %u, protocol %u or with "
		       "groups out of range; the image is corrupt",
		       who, e->type, e->protocol);
		return -EBADMSG;
	}
	return sk_opts_check_proto(t, e->opts, e->n_opts, AF_NETLINK, (int)e->type,
				   (int)e->protocol, false, who);
}

static int open_one(struct tree *t, RegFile *f, const char *who)
{
	const NetlinkSkEntry *e = f->netlink_sk;
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
	int fd, ret;

	fd = socket(AF_NETLINK, (int)e->type | SOCK_CLOEXEC, (int)e->protocol);
	if (fd < 0) {
		pr_err("%s: cannot create a netlink socket of protocol %u: %m", who, e->protocol);
		return -errno;
	}
	/* all of them before bind: nothing is queued to refill, and a filter comes first */
	ret = sk_opts_restore(t, fd, e->opts, e->n_opts, false, who);
	if (!ret)
		ret = sk_opts_restore(t, fd, e->opts, e->n_opts, true, who);
	if (!ret && e->has_portid) {
		nl.nl_pid = e->portid;
		if (bind(fd, (struct sockaddr *)&nl, sizeof(nl))) {
			ret = -errno;
			pr_err("%s: cannot bind the netlink socket (protocol %u) to port id %u: "
			       "%m%s",
			       who, e->protocol, e->portid,
			       errno == EADDRINUSE ? " (another socket holds it)" : "");
		}
	}
	for (size_t w = 0; w < e->n_groups && !ret; w++)
		for (unsigned b = 0; b < 32 && !ret; b++) {
			unsigned g = (unsigned)w * 32 + b + 1;

			if (!(e->groups[w] & (1u << b)))
				continue;
			if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &g, sizeof(g))) {
				ret = -errno;
				pr_err("%s: cannot join group %u of netlink protocol %u: %m%s", who,
				       g, e->protocol,
				       errno == EPERM ? " (the image's owner may not)" : "");
			}
		}
	if (!ret && e->has_dst_portid) {
		nl.nl_pid = e->dst_portid;
		nl.nl_groups = e->dst_group && e->dst_group <= 32 ? 1u << (e->dst_group - 1) : 0;
		if (connect(fd, (struct sockaddr *)&nl, sizeof(nl))) {
			ret = -errno;
			pr_err("%s: cannot connect the netlink socket to port id %u: %m", who,
			       e->dst_portid);
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
static int netlink_prepare(struct tree *t, RegFile **files, size_t n, int *fds)
{
	char who[128];
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		if (!files[i]->netlink_sk) {
			pr_err("files.img: netlink socket entry %u has no socket state; the image "
			       "is corrupt",
			       files[i]->id);
			return -EBADMSG;
		}
		snprintf(who, sizeof(who), "%s", sk_who(t, files[i], "netlink"));
		ret = check_one(t, files[i]->netlink_sk, who);
	}
	for (size_t i = 0; i < n && !ret; i++) {
		snprintf(who, sizeof(who), "%s", sk_who(t, files[i], "netlink"));
		fds[i] = open_one(t, files[i], who);
		if (fds[i] < 0) {
			ret = fds[i];
			fds[i] = -1;
		}
	}
	return ret;
}

const struct fd_type netlink_sk_type = {
	.name = "netlink socket",
	.kind = FILE_KIND__FILE_NETLINK_SK,
	.match = netlink_match,
	.dump = netlink_dump,
	.prepare = netlink_prepare,
};
