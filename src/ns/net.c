// SPDX-License-Identifier: MIT
/*
 * Network namespaces of the tree (netns.img): each one a process of the
 * tree is in that is not amber's is one netns_entry (its id in
 * pstree_entry.net_ns, and in reg_file.net_ns of the sockets made in it).
 *
 * Dump (as root): amber's calling thread setns()es into the namespace (only
 * that thread changes namespace; /proc/net and /proc/sys/net follow it, it
 * being the leader) and reads its configuration through rtnetlink (libnl):
 * links (lo, and veth: its peer in the tree's namespaces, or outside), addresses and
 * routes the kernel did not make itself; the sysctls under /proc/sys/net
 * whose value differs from a new namespace's (read once in one made for
 * that); the nftables ruleset (libnftables, "list ruleset").  A socket is
 * dumped from inside its own namespace (SIOCGSKNS tells which), so that
 * sock_diag, /proc/net and TCP repair see it there.
 *
 * Restore: every namespace is made before any socket (netns_ops comes before
 * files_ops): unshare() in amber's thread, a TCP lock (restore_lock()),
 * sysctls; once all exist, in each: links (a pair of the tree's made
 * together; one whose peer was outside needs --external veth[NAME]:HOST, the
 * host side made in amber's namespace and kept down until the processes
 * run, so that no peer's packet meets a socket not made yet), addresses,
 * routes, the ruleset (nft -f through
 * libnftables, after a check that it is only tables: no include or define,
 * which could read files), an fd kept on it above the restored fds, back
 * into amber's own.  Sockets of a namespace are made from inside it
 * (files.c), and every restored process setns()es into its own first thing.
 */
#include <net/if.h> /* before libnl's linux/if.h, which then defers to it */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_arp.h>
#include <linux/if_addr.h>
#include <linux/net_namespace.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "net/nft.h"
#include "ns.h"
#include "sys.h"

#define SYSCTL_VAL_MAX 256
#define NFT_MAX	       (4 << 20)
/* IFA_F_* an address may be asked for with (the others are the kernel's state) */
#define ADDR_FLAGS                                                                                 \
	(IFA_F_NODAD | IFA_F_OPTIMISTIC | IFA_F_HOMEADDRESS | IFA_F_MANAGETEMPADDR |               \
	 IFA_F_NOPREFIXROUTE | IFA_F_MCAUTOJOIN)

struct netns {
	NetnsEntry *e;
	int fd;	     /* dump: on /proc/PID/ns/net of a process in it; restore: the one made */
	bool locked; /* restore: its packets dropped until every process exists */
};

static struct netns *nets;
static size_t nr_nets;
static int own_fd = -1; /* amber's own network namespace */
static uint32_t inside; /* the namespace amber's thread is in now (0: its own) */
static NetnsEntry **loaded;
static size_t nr_loaded;

/* --external veth[NAME]:HOST[@BRIDGE] (restore) */
struct veth_ext {
	char name[IFNAMSIZ], host[IFNAMSIZ], bridge[IFNAMSIZ];
	int host_idx; /* made: the host side's ifindex in amber's namespace */
};
static struct veth_ext *exts;
static size_t nr_exts;

static struct netns *find(uint32_t id)
{
	for (size_t i = 0; i < nr_nets; i++)
		if (nets[i].e->id == id)
			return &nets[i];
	return NULL;
}

bool netns_known(uint32_t id)
{
	return !id || find(id);
}

uint32_t netns_next(uint32_t after)
{
	uint32_t next = 0;

	for (size_t i = 0; i < nr_nets; i++)
		if (nets[i].e->id > after && (!next || nets[i].e->id < next))
			next = nets[i].e->id;
	return next;
}

static bool no_netns;

static int own_ns(int base)
{
	int fd;

	if (own_fd >= 0 || no_netns)
		return 0;
	fd = sys_open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC, 0);
	if (fd == -ENOENT) {
		no_netns = true; /* a kernel without network namespaces: one for all */
		return 0;
	}
	if (fd < 0) {
		pr_err("cannot open amber's own network namespace: %s", strerror(-fd));
		return fd;
	}
	own_fd = fcntl(fd, F_DUPFD_CLOEXEC, base);
	close(fd);
	if (own_fd < 0) {
		pr_err("cannot keep an fd on amber's own network namespace: %m");
		return -errno;
	}
	return 0;
}

int netns_enter(uint32_t id)
{
	struct netns *n = id ? find(id) : NULL;

	if (!id)
		return 0;
	if (!n) {
		pr_err("no network namespace %u in this image", id);
		return -ENOENT;
	}
	if (setns(n->fd, CLONE_NEWNET)) {
		pr_err("cannot enter network namespace %u (inode %llu at dump): %m", id,
		       (unsigned long long)n->e->ino);
		return -errno;
	}
	inside = id;
	return 0;
}

void netns_leave(uint32_t id)
{
	if (!id)
		return;
	/* amber's own sockets and files would be made in the tree's: nothing may follow */
	if (setns(own_fd, CLONE_NEWNET)) {
		pr_err("cannot return to amber's own network namespace from namespace %u: %m", id);
		abort();
	}
	inside = 0;
}

uint32_t netns_inside(void)
{
	return inside;
}

/* ---- small helpers ---- */

static int nl_open(struct nl_sock **sk, uint32_t id)
{
	int err;

	*sk = nl_socket_alloc();
	if (!*sk)
		return -ENOMEM;
	err = nl_connect(*sk, NETLINK_ROUTE);
	if (err < 0) {
		pr_err("network namespace %u: cannot open an rtnetlink socket: %s", id,
		       nl_geterror(err));
		nl_socket_free(*sk);
		*sk = NULL;
		return -EIO;
	}
	return 0;
}

static int put_bytes(ProtobufCBinaryData *b, struct nl_addr *a)
{
	b->len = nl_addr_get_len(a);
	b->data = malloc(b->len ? b->len : 1);
	if (!b->data)
		return -ENOMEM;
	memcpy(b->data, nl_addr_get_binary_addr(a), b->len);
	return 0;
}

static const char *show_ip(uint32_t family, const ProtobufCBinaryData *b)
{
	static char buf[4][INET6_ADDRSTRLEN];
	static int k;
	char *out = buf[k++ % 4];

	if ((family == AF_INET && b->len == 4) || (family == AF_INET6 && b->len == 16))
		inet_ntop((int)family, b->data, out, INET6_ADDRSTRLEN);
	else
		snprintf(out, INET6_ADDRSTRLEN, "(%zu bytes)", b->len);
	return out;
}

/* ---- sysctls ---- */

struct kvs {
	NsSysctl **v;
	size_t n;
};

static const char *const sysctl_dirs[] = {"core", "unix", "ipv4", "ipv6"};

static int kv_add(struct kvs *s, const char *name, const char *value)
{
	NsSysctl **nv = realloc(s->v, (s->n + 1) * sizeof(*nv));
	NsSysctl *e;

	if (!nv)
		return -ENOMEM;
	s->v = nv;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	ns_sysctl__init(e);
	e->name = strdup(name);
	e->value = strdup(value);
	s->v[s->n++] = e;
	return e->name && e->value ? 0 : -ENOMEM;
}

static const char *kv_get(const struct kvs *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i]->name, name))
			return s->v[i]->value;
	return NULL;
}

static void kv_free(struct kvs *s)
{
	for (size_t i = 0; i < s->n; i++)
		ns_sysctl__free_unpacked(s->v[i], NULL);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

/* Every writable file of /proc/sys/net/DIR that reads (write-only ones and unset keys do not). */
static int list_dir(struct kvs *s, const char *dir)
{
	char path[640], name[600], val[SYSCTL_VAL_MAX + 2];
	struct dirent *de;
	int ret = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/sys/net/%s", dir);
	d = sys_opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (!ret && (de = readdir(d))) {
		struct stat st;
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(name, sizeof(name), "%s/%s", dir, de->d_name);
		snprintf(path, sizeof(path), "/proc/sys/net/%s", name);
		if (sys_stat(path, &st) || !S_ISREG(st.st_mode) || !(st.st_mode & S_IWUSR) ||
		    !(st.st_mode & S_IRUSR))
			continue;
		fd = sys_open_raw(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, val, sizeof(val) - 1);
		close(fd);
		if (n < 0 || n > SYSCTL_VAL_MAX)
			continue;
		val[n] = 0;
		val[strcspn(val, "\n")] = 0;
		ret = kv_add(s, name, val);
	}
	closedir(d);
	return ret;
}

static int list_sysctls(struct kvs *s)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < sizeof(sysctl_dirs) / sizeof(sysctl_dirs[0]); i++) {
		char conf[64];
		struct dirent *de;
		DIR *d;

		ret = list_dir(s, sysctl_dirs[i]);
		snprintf(conf, sizeof(conf), "/proc/sys/net/%s/conf", sysctl_dirs[i]);
		d = ret ? NULL : sys_opendir(conf);
		while (d && !ret && (de = readdir(d))) {
			char sub[300];

			if (de->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/conf/%s", sysctl_dirs[i], de->d_name);
			ret = list_dir(s, sub);
		}
		if (d)
			closedir(d);
	}
	return ret;
}

/* A new namespace's values, once per dump: in one made for that and left at once. */
static struct kvs fresh;
static bool fresh_read;

static int read_fresh(void)
{
	int ret;

	if (fresh_read)
		return 0;
	if (unshare(CLONE_NEWNET)) {
		pr_err("cannot make a network namespace to read its default sysctls: %m");
		return -errno;
	}
	ret = list_sysctls(&fresh);
	if (setns(own_fd, CLONE_NEWNET)) {
		pr_err("cannot return to amber's own network namespace: %m");
		abort();
	}
	fresh_read = !ret;
	if (ret)
		pr_err("cannot read a new network namespace's sysctls: %s", strerror(-ret));
	return ret;
}

/* "ipv4/conf/IF/x": IF, when it is a link's own (not all, default or lo) */
static bool link_conf(const char *name, char *dflt, size_t len)
{
	const char *p = strchr(name, '/'), *q;

	if (!p || strncmp(p, "/conf/", 6))
		return false;
	p += 6;
	q = strchr(p, '/');
	if (!q || (q - p == 3 && !strncmp(p, "all", 3)) ||
	    (q - p == 7 && !strncmp(p, "default", 7)) || (q - p == 2 && !strncmp(p, "lo", 2)))
		return false;
	snprintf(dflt, len, "%.*sdefault%s", (int)(p - name), name, q);
	return true;
}

static int read_sysctls(NetnsEntry *e)
{
	struct kvs now = {0}, diff = {0};
	int ret = list_sysctls(&now);

	for (size_t i = 0; !ret && i < now.n; i++) {
		const char *name = now.v[i]->name, *base;
		char dflt[256];

		/* a link gets its namespace's conf/default when it is made */
		base = link_conf(name, dflt, sizeof(dflt)) ? kv_get(&now, dflt)
							   : kv_get(&fresh, name);
		if (!base || !strcmp(base, now.v[i]->value))
			continue;
		ret = kv_add(&diff, name, now.v[i]->value);
	}
	kv_free(&now);
	if (ret) {
		pr_err("network namespace %u: cannot read its sysctls: %s", e->id, strerror(-ret));
		kv_free(&diff);
		return ret;
	}
	e->sysctls = diff.v;
	e->n_sysctls = diff.n;
	return 0;
}

/* ---- links, addresses, routes (dump) ---- */

/*
 * A veth's peer: in the same namespace (no netnsid), or in the one its
 * netnsid names, which is the tree's when an nsid query from this namespace
 * gives that id for one of the tree's (peers_resolve(), once all are known).
 */
struct peer_note {
	NetLink *k;
	uint32_t ns;
	int32_t nsid;
};

static struct peer_note *peers;
static size_t nr_peers;

static int note_peer(NetnsEntry *e, NetLink *k, struct rtnl_link *l)
{
	int32_t nsid;
	struct peer_note *np;

	k->has_peer_ifindex = 1;
	k->peer_ifindex = (uint32_t)rtnl_link_get_link(l);
	if (rtnl_link_get_link_netnsid(l, &nsid) < 0) {
		k->has_peer_ns = 1;
		k->peer_ns = e->id;
		return 0;
	}
	np = realloc(peers, (nr_peers + 1) * sizeof(*np));
	if (!np)
		return -ENOMEM;
	peers = np;
	peers[nr_peers++] = (struct peer_note){k, e->id, nsid};
	return 0;
}

/* In a namespace: the nsid it gives the namespace of fd (-1: none yet), or -errno. */
static int nsid_of(struct nl_sock *sk, int fd, int32_t *nsid)
{
	struct rtgenmsg g = {.rtgen_family = AF_UNSPEC};
	struct nlattr *tb[NETNSA_MAX + 1];
	struct nl_msg *m = nlmsg_alloc_simple(RTM_GETNSID, NLM_F_REQUEST);
	struct sockaddr_nl from;
	unsigned char *buf = NULL;
	struct nlmsghdr *h;
	int n, ret = -EIO;

	if (!m)
		return -ENOMEM;
	if (nlmsg_append(m, &g, sizeof(g), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(m, NETNSA_FD, (uint32_t)fd) < 0 || nl_send_auto(sk, m) < 0) {
		nlmsg_free(m);
		return -EIO;
	}
	nlmsg_free(m);
	n = nl_recv(sk, &from, &buf, NULL);
	h = (struct nlmsghdr *)buf;
	if (n > 0 && nlmsg_ok(h, n) && h->nlmsg_type == RTM_NEWNSID &&
	    nlmsg_parse(h, sizeof(g), tb, NETNSA_MAX, NULL) >= 0 && tb[NETNSA_NSID]) {
		*nsid = nla_get_s32(tb[NETNSA_NSID]);
		ret = 0;
	}
	free(buf);
	return ret;
}

/* Each veth whose peer is in another of the tree's namespaces gets its peer_ns. */
static int peers_resolve(void)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < nr_peers; i++) {
		struct peer_note *p = &peers[i];
		struct nl_sock *sk;

		ret = netns_enter(p->ns);
		if (ret)
			break;
		ret = nl_open(&sk, p->ns);
		for (size_t j = 0; !ret && j < nr_nets && !p->k->has_peer_ns; j++) {
			int32_t nsid;

			if (nets[j].e->id == p->ns)
				continue;
			ret = nsid_of(sk, nets[j].fd, &nsid);
			if (ret)
				pr_err("network namespace %u: cannot ask the nsid of namespace %u",
				       p->ns, nets[j].e->id);
			else if (nsid >= 0 && nsid == p->nsid) {
				p->k->has_peer_ns = 1;
				p->k->peer_ns = nets[j].e->id;
			}
		}
		if (sk)
			nl_socket_free(sk);
		netns_leave(p->ns);
		if (!p->k->has_peer_ns)
			p->k->has_peer_ifindex = 0; /* outside: --external veth[] at restore */
	}
	free(peers);
	peers = NULL;
	nr_peers = 0;
	return ret;
}

static int read_links(struct nl_sock *sk, NetnsEntry *e, pid_t pid)
{
	struct nl_cache *cache;
	struct nl_object *o;
	int err = rtnl_link_alloc_cache(sk, AF_UNSPEC, &cache), ret = 0;

	if (err < 0) {
		pr_err("network namespace %u: cannot list its links: %s", e->id, nl_geterror(err));
		return -EIO;
	}
	e->links = calloc((size_t)nl_cache_nitems(cache) + 1, sizeof(*e->links));
	if (!e->links)
		ret = -ENOMEM;
	for (o = nl_cache_get_first(cache); o && !ret; o = nl_cache_get_next(o)) {
		struct rtnl_link *l = (struct rtnl_link *)o;
		const char *type = rtnl_link_get_type(l), *name = rtnl_link_get_name(l);
		bool lo = rtnl_link_get_arptype(l) == ARPHRD_LOOPBACK;
		NetLink *k;

		if (!lo && (!type || strcmp(type, "veth"))) {
			pr_err("pid %d: network namespace %u (inode %llu) has link %s of kind %s, "
			       "which amber cannot make again (lo and veth only)",
			       pid, e->id, (unsigned long long)e->ino, name,
			       type ? type : "(none)");
			ret = -EOPNOTSUPP;
			break;
		}
		k = malloc(sizeof(*k));
		if (!k) {
			ret = -ENOMEM;
			break;
		}
		net_link__init(k);
		e->links[e->n_links++] = k;
		k->ifindex = (uint32_t)rtnl_link_get_ifindex(l);
		k->name = strdup(name);
		k->kind = strdup(lo ? "loopback" : "veth");
		k->mtu = rtnl_link_get_mtu(l);
		k->up = !!(rtnl_link_get_flags(l) & IFF_UP);
		if (!k->name || !k->kind)
			ret = -ENOMEM;
		if (!ret && !lo && rtnl_link_get_addr(l)) {
			k->has_mac = 1;
			ret = put_bytes(&k->mac, rtnl_link_get_addr(l));
		}
		if (!ret && !lo)
			ret = note_peer(e, k, l);
	}
	nl_cache_free(cache);
	return ret;
}

/* What the kernel makes itself: lo's 127.0.0.1/8 and ::1, IPv6 link-local addresses. */
static bool kernel_addr(struct rtnl_addr *a)
{
	static const uint8_t lo6[16] = {[15] = 1}, lo4[4] = {127, 0, 0, 1};
	struct nl_addr *l = rtnl_addr_get_local(a);
	const uint8_t *b = nl_addr_get_binary_addr(l);
	int family = rtnl_addr_get_family(a);

	if (family == AF_INET6 && b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return true;
	if (rtnl_addr_get_ifindex(a) != 1)
		return false;
	return (family == AF_INET && !memcmp(b, lo4, 4) && rtnl_addr_get_prefixlen(a) == 8) ||
	       (family == AF_INET6 && !memcmp(b, lo6, 16));
}

static int read_addrs(struct nl_sock *sk, NetnsEntry *e)
{
	struct nl_cache *cache;
	struct nl_object *o;
	int err = rtnl_addr_alloc_cache(sk, &cache), ret = 0;

	if (err < 0) {
		pr_err("network namespace %u: cannot list its addresses: %s", e->id,
		       nl_geterror(err));
		return -EIO;
	}
	e->addrs = calloc((size_t)nl_cache_nitems(cache) + 1, sizeof(*e->addrs));
	if (!e->addrs)
		ret = -ENOMEM;
	for (o = nl_cache_get_first(cache); o && !ret; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		int family = rtnl_addr_get_family(a);
		NetAddr *k;

		if ((family != AF_INET && family != AF_INET6) || !rtnl_addr_get_local(a) ||
		    kernel_addr(a))
			continue;
		k = malloc(sizeof(*k));
		if (!k) {
			ret = -ENOMEM;
			break;
		}
		net_addr__init(k);
		e->addrs[e->n_addrs++] = k;
		k->ifindex = (uint32_t)rtnl_addr_get_ifindex(a);
		k->family = (uint32_t)family;
		k->prefixlen = (uint32_t)rtnl_addr_get_prefixlen(a);
		k->scope = (uint32_t)rtnl_addr_get_scope(a);
		k->flags = rtnl_addr_get_flags(a) & ADDR_FLAGS;
		k->has_flags = k->flags != 0;
		ret = put_bytes(&k->local, rtnl_addr_get_local(a));
		if (!ret && rtnl_addr_get_peer(a)) {
			k->has_peer = 1;
			ret = put_bytes(&k->peer, rtnl_addr_get_peer(a));
		}
		if (!ret && family == AF_INET && rtnl_addr_get_broadcast(a)) {
			k->has_broadcast = 1;
			ret = put_bytes(&k->broadcast, rtnl_addr_get_broadcast(a));
		}
	}
	nl_cache_free(cache);
	return ret;
}

static int read_routes(struct nl_sock *sk, NetnsEntry *e, pid_t pid)
{
	struct nl_cache *cache;
	struct nl_object *o;
	int err = rtnl_route_alloc_cache(sk, AF_UNSPEC, 0, &cache), ret = 0;

	if (err < 0) {
		pr_err("network namespace %u: cannot list its routes: %s", e->id, nl_geterror(err));
		return -EIO;
	}
	e->routes = calloc((size_t)nl_cache_nitems(cache) + 1, sizeof(*e->routes));
	if (!e->routes)
		ret = -ENOMEM;
	for (o = nl_cache_get_first(cache); o && !ret; o = nl_cache_get_next(o)) {
		struct rtnl_route *r = (struct rtnl_route *)o;
		int family = rtnl_route_get_family(r);
		struct nl_addr *dst = rtnl_route_get_dst(r);
		struct rtnl_nexthop *nh;
		NetRoute *k;

		/* the kernel's own (local, prefix, link-local, multicast) come back with the
		 * addresses and links */
		if ((family != AF_INET && family != AF_INET6) ||
		    rtnl_route_get_protocol(r) == RTPROT_KERNEL)
			continue;
		if (rtnl_route_get_nnexthops(r) > 1) {
			char buf[128];

			pr_err("pid %d: network namespace %u: route %s has several next hops "
			       "(multipath), which amber does not make again",
			       pid, e->id, dst ? nl_addr2str(dst, buf, sizeof(buf)) : "default");
			ret = -EOPNOTSUPP;
			break;
		}
		k = malloc(sizeof(*k));
		if (!k) {
			ret = -ENOMEM;
			break;
		}
		net_route__init(k);
		e->routes[e->n_routes++] = k;
		k->family = (uint32_t)family;
		k->table = rtnl_route_get_table(r);
		k->type = rtnl_route_get_type(r);
		k->scope = rtnl_route_get_scope(r);
		k->protocol = rtnl_route_get_protocol(r);
		k->has_priority = 1;
		k->priority = rtnl_route_get_priority(r);
		k->dst_len = dst ? nl_addr_get_prefixlen(dst) : 0;
		if (dst && k->dst_len) {
			k->has_dst = 1;
			ret = put_bytes(&k->dst, dst);
		}
		if (!ret && rtnl_route_get_pref_src(r)) {
			k->has_prefsrc = 1;
			ret = put_bytes(&k->prefsrc, rtnl_route_get_pref_src(r));
		}
		nh = rtnl_route_get_nnexthops(r) ? rtnl_route_nexthop_n(r, 0) : NULL;
		if (!ret && nh && rtnl_route_nh_get_ifindex(nh) > 0) {
			k->has_oif = 1;
			k->oif = (uint32_t)rtnl_route_nh_get_ifindex(nh);
		}
		if (!ret && nh && rtnl_route_nh_get_gateway(nh)) {
			k->has_gateway = 1;
			ret = put_bytes(&k->gateway, rtnl_route_nh_get_gateway(nh));
		}
	}
	nl_cache_free(cache);
	return ret;
}

static int read_nft(NetnsEntry *e)
{
	struct nft_ctx *nft = nft_open();
	const char *out, *err;
	int ret;

	if (!nft)
		return -ENOMEM;
	ret = nft_run(nft, "list ruleset", &out, &err);
	if (ret)
		pr_err("network namespace %u: nft list ruleset failed: %s", e->id, err);
	else if (out && *out) {
		e->nft = strdup(out);
		ret = e->nft ? 0 : -ENOMEM;
	}
	nft_close(nft);
	return ret;
}

/* Inside the namespace: everything it is made of. */
static int read_netns(NetnsEntry *e, pid_t pid)
{
	struct nl_sock *sk;
	int ret = nl_open(&sk, e->id);

	if (ret)
		return ret;
	ret = read_links(sk, e, pid);
	if (!ret)
		ret = read_addrs(sk, e);
	if (!ret)
		ret = read_routes(sk, e, pid);
	nl_socket_free(sk);
	if (!ret)
		ret = read_sysctls(e);
	if (!ret)
		ret = read_nft(e);
	if (!ret)
		pr_debug("pid %d: network namespace %u (inode %llu): %zu links, %zu addresses, "
			 "%zu routes, %zu sysctls, %zu bytes of nft ruleset",
			 pid, e->id, (unsigned long long)e->ino, e->n_links, e->n_addrs,
			 e->n_routes, e->n_sysctls, e->nft ? strlen(e->nft) : 0);
	return ret;
}

/*
 * Who owns n: the tree's user namespace (made inside it at restore), or
 * amber's; another one the restore could not make it in.
 */
static int netns_owner(pid_t pid, struct netns *n)
{
	struct stat owner, tree, own;
	int fd = ioctl(n->fd, NS_GET_USERNS), ufd = ns_user_fd(), ret = 0;

	if (fd < 0 || fstat(fd, &owner) || sys_stat("/proc/self/ns/user", &own) ||
	    (ufd >= 0 && fstat(ufd, &tree))) {
		pr_err("pid %d: cannot tell who owns its network namespace %u: %m", pid, n->e->id);
		ret = -errno;
	} else if (ufd >= 0 && owner.st_ino == tree.st_ino && owner.st_dev == tree.st_dev) {
		n->e->has_in_userns = n->e->in_userns = 1;
	} else if (owner.st_ino != own.st_ino || owner.st_dev != own.st_dev) {
		pr_err("pid %d: its network namespace %u is owned by user namespace %llu, neither "
		       "amber's nor the tree's; the restore could not make it there",
		       pid, n->e->id, (unsigned long long)owner.st_ino);
		ret = -EOPNOTSUPP;
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Inside the namespace: lo alone (an empty namespace's). */
static int read_lo(NetnsEntry *e)
{
	struct rtnl_link *l = NULL;
	struct nl_sock *sk;
	NetLink *k;
	int err, ret = nl_open(&sk, e->id);

	if (ret)
		return ret;
	err = rtnl_link_get_kernel(sk, 1, NULL, &l);
	nl_socket_free(sk);
	if (err < 0)
		return 0; /* no lo (a kernel without it): nothing to keep */
	e->links = calloc(1, sizeof(*e->links));
	k = malloc(sizeof(*k));
	if (!e->links || !k) {
		free(k);
		rtnl_link_put(l);
		return -ENOMEM;
	}
	net_link__init(k);
	e->links[e->n_links++] = k;
	k->ifindex = 1;
	k->name = strdup("lo");
	k->kind = strdup("loopback");
	k->mtu = rtnl_link_get_mtu(l);
	k->up = !!(rtnl_link_get_flags(l) & IFF_UP);
	rtnl_link_put(l);
	return k->name && k->kind ? 0 : -ENOMEM;
}

static int add_netns(pid_t pid, uint64_t ino, uint32_t *id, bool empty)
{
	struct netns *nn = realloc(nets, (nr_nets + 1) * sizeof(*nn));
	char path[64];
	NetnsEntry *e;
	int ret;

	if (!nn)
		return -ENOMEM;
	nets = nn;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	netns_entry__init(e);
	e->id = (uint32_t)nr_nets + 1;
	e->has_ino = 1;
	e->ino = ino;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	nets[nr_nets] = (struct netns){e, sys_open(path, O_RDONLY | O_CLOEXEC, 0)};
	if (nets[nr_nets].fd < 0) {
		ret = nets[nr_nets].fd;
		pr_err("pid %d: cannot open its network namespace (%s, inode %llu): %s", pid, path,
		       (unsigned long long)ino, strerror(-ret));
		free(e);
		return ret;
	}
	nr_nets++;
	*id = e->id;
	ret = netns_owner(pid, &nets[nr_nets - 1]);
	if (ret)
		return ret;
	/*
	 * The runtime sets it up again itself (runc, podman): only its existence
	 * is kept, and lo's state, which every namespace has and no runtime
	 * makes again (runc 1.1 does not): its sockets on 127.0.0.1 need it up.
	 */
	if (empty) {
		e->has_empty = e->empty = true;
		ret = netns_enter(e->id);
		if (!ret)
			ret = read_lo(e);
		netns_leave(e->id);
		pr_info("pid %d: network namespace %u (inode %llu) left empty (empty_ns)%s", pid,
			e->id, (unsigned long long)ino,
			e->n_links && e->links[0]->up ? " but for lo, up" : "");
		return ret;
	}
	ret = read_fresh();
	if (!ret)
		ret = netns_enter(e->id);
	if (ret)
		return ret;
	ret = read_netns(e, pid);
	netns_leave(e->id);
	return ret;
}

static int net_id(pid_t pid, uint32_t *id, bool empty)
{
	struct stat own, st;
	char path[64];

	*id = 0;
	if (no_netns)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	if (sys_stat(path, &st)) {
		pr_err("pid %d: cannot stat %s: %m", pid, path);
		return -errno;
	}
	if (fstat(own_fd, &own)) {
		pr_err("cannot stat amber's own network namespace: %m");
		return -errno;
	}
	*id = 0;
	if (st.st_ino == own.st_ino && st.st_dev == own.st_dev)
		return 0;
	for (size_t i = 0; i < nr_nets; i++)
		if (nets[i].e->ino == st.st_ino) {
			*id = nets[i].e->id;
			return 0;
		}
	return add_netns(pid, st.st_ino, id, empty);
}

static int write_netns_img(struct tree *t)
{
	struct img *img = NULL;
	int ret = img_create(&t->imgs, IMG_NETNS, &img, "netns.img");

	for (size_t i = 0; !ret && i < nr_nets; i++)
		ret = img_put(img, &nets[i].e->base);
	if (ret) {
		if (img)
			img_abort(img);
		return ret;
	}
	return img_finish(img);
}

static int netns_dump_tree(struct tree *t)
{
	int ret = own_ns(0);

	free(peers); /* a failed dump's notes (an RPC worker dumps again) */
	peers = NULL;
	nr_peers = 0;

	for (size_t p = 0; !ret && p < t->nr_procs; p++) {
		pid_t pid = t->dprocs[p]->pid;
		PstreeEntry *e = tree_entry(t, (uint32_t)pid);

		ret = net_id(pid, &e->net_ns, t->o->empty_netns);
		e->has_net_ns = e->net_ns != 0;
	}
	if (!ret)
		ret = peers_resolve();
	if (!ret && nr_nets)
		ret = write_netns_img(t);
	return ret;
}

int netns_sock_enter(struct dump_ctx *ctx, int fd, int dup, RegFile *f, uint32_t *id)
{
	struct stat own, st;
	int nsfd;

	*id = 0;
	if (no_netns)
		return 0;
	nsfd = ioctl(dup, SIOCGSKNS);
	if (nsfd < 0) {
		pr_err("pid %d: fd %d: cannot tell the socket's network namespace (SIOCGSKNS): %m",
		       ctx->pid, fd);
		return -errno;
	}
	if (fstat(nsfd, &st) || fstat(own_fd, &own)) {
		pr_err("pid %d: fd %d: cannot stat the socket's network namespace: %m", ctx->pid,
		       fd);
		close(nsfd);
		return -errno;
	}
	close(nsfd);
	if (st.st_ino == own.st_ino && st.st_dev == own.st_dev)
		return 0;
	for (size_t i = 0; i < nr_nets; i++)
		if (nets[i].e->ino == st.st_ino) {
			*id = nets[i].e->id;
			f->has_net_ns = 1;
			f->net_ns = *id;
			return netns_enter(*id);
		}
	pr_err("pid %d: fd %d is a socket of network namespace inode %llu, which no process of "
	       "the tree is in; amber makes only the namespaces of the tree's processes",
	       ctx->pid, fd, (unsigned long long)st.st_ino);
	return -EOPNOTSUPP;
}

int netns_sock_dumped(struct dump_ctx *ctx, int fd, const RegFile *f, uint32_t id)
{
	netns_leave(id);
	return 0;
}

/* ---- restore: checks ---- */

static int corrupt(uint32_t id, const char *fmt, const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), fmt, what);
	pr_err("netns.img: network namespace %u: %s; the image is corrupt", id, msg);
	return -EBADMSG;
}

static const NetLink *link_of(const NetnsEntry *e, uint32_t ifindex)
{
	for (size_t i = 0; i < e->n_links; i++)
		if (e->links[i]->ifindex == ifindex)
			return e->links[i];
	return NULL;
}

static bool good_ifname(const char *s)
{
	size_t len = strlen(s);

	if (!len || len >= IFNAMSIZ || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (*s == '/' || *s == ':' || isspace((unsigned char)*s) ||
		    !isprint((unsigned char)*s))
			return false;
	return true;
}

static struct veth_ext *ext_of(const char *name)
{
	for (size_t i = 0; i < nr_exts; i++)
		if (!strcmp(exts[i].name, name))
			return &exts[i];
	return NULL;
}

static int check_links(const NetnsEntry *e)
{
	bool lo = false;

	for (size_t i = 0; i < e->n_links; i++) {
		const NetLink *l = e->links[i];

		if (!good_ifname(l->name))
			return corrupt(e->id, "a link name that is not one (%s)", l->name);
		if (!l->ifindex || l->ifindex > INT32_MAX)
			return corrupt(e->id, "link %s has no valid ifindex", l->name);
		for (size_t k = 0; k < i; k++)
			if (e->links[k]->ifindex == l->ifindex ||
			    !strcmp(e->links[k]->name, l->name))
				return corrupt(e->id, "link %s listed twice", l->name);
		if (l->mtu < 68 || l->mtu > 65536)
			return corrupt(e->id, "link %s: MTU out of range", l->name);
		if (!strcmp(l->kind, "loopback")) {
			if (strcmp(l->name, "lo") || l->ifindex != 1 || l->has_mac || lo)
				return corrupt(e->id, "a loopback link that is not lo (%s)",
					       l->name);
			lo = true;
		} else if (!strcmp(l->kind, "veth")) {
			if (l->has_mac && l->mac.len != 6)
				return corrupt(e->id, "veth %s: a MAC address not of 6 bytes",
					       l->name);
			if (l->has_peer_ns != l->has_peer_ifindex ||
			    (l->has_peer_ns && (!l->peer_ifindex || l->peer_ifindex > INT32_MAX)))
				return corrupt(e->id, "veth %s: a peer without its ifindex",
					       l->name);
		} else {
			return corrupt(e->id, "a link of a kind amber does not make (%s)", l->kind);
		}
	}
	return lo ? 0 : corrupt(e->id, "%s", "no lo");
}

static int check_ip(const NetnsEntry *e, uint32_t family, const ProtobufCBinaryData *b,
		    uint32_t plen, const char *what)
{
	size_t want = family == AF_INET ? 4 : 16;

	if (family != AF_INET && family != AF_INET6)
		return corrupt(e->id, "%s of an unknown family", what);
	if (b && b->len != want)
		return corrupt(e->id, "%s of the wrong length", what);
	if (plen > want * 8)
		return corrupt(e->id, "%s with a prefix length out of range", what);
	return 0;
}

static int check_addrs(const NetnsEntry *e)
{
	for (size_t i = 0; i < e->n_addrs; i++) {
		const NetAddr *a = e->addrs[i];
		int ret = check_ip(e, a->family, &a->local, a->prefixlen, "an address");

		if (!ret && a->has_peer)
			ret = check_ip(e, a->family, &a->peer, 0, "a peer address");
		if (!ret && a->has_broadcast)
			ret = a->family == AF_INET
				      ? check_ip(e, a->family, &a->broadcast, 0, "a broadcast")
				      : corrupt(e->id, "%s", "an IPv6 address with a broadcast");
		if (ret)
			return ret;
		if (!link_of(e, a->ifindex))
			return corrupt(e->id, "address %s on a link it does not have",
				       show_ip(a->family, &a->local));
		if (a->scope > 255 || (a->flags & ~ADDR_FLAGS))
			return corrupt(e->id, "address %s: a scope or flags out of range",
				       show_ip(a->family, &a->local));
	}
	return 0;
}

static int check_routes(const NetnsEntry *e)
{
	for (size_t i = 0; i < e->n_routes; i++) {
		const NetRoute *r = e->routes[i];
		int ret =
			check_ip(e, r->family, r->has_dst ? &r->dst : NULL, r->dst_len, "a route");

		if (!ret && r->has_gateway)
			ret = check_ip(e, r->family, &r->gateway, 0, "a route's gateway");
		if (!ret && r->has_prefsrc)
			ret = check_ip(e, r->family, &r->prefsrc, 0, "a route's source");
		if (ret)
			return ret;
		if (!r->has_dst && r->dst_len)
			return corrupt(e->id, "%s",
				       "a route with a prefix length and no destination");
		if (r->has_oif && !link_of(e, r->oif))
			return corrupt(e->id, "route to %s via a link it does not have",
				       r->has_dst ? show_ip(r->family, &r->dst) : "default");
		if (!r->table || r->table == RT_TABLE_UNSPEC || r->type == RTN_UNSPEC ||
		    r->type > RTN_MAX || r->scope > 255 || r->protocol > 255 ||
		    r->protocol == RTPROT_KERNEL)
			return corrupt(e->id,
				       "route to %s: a table, type, scope or protocol out of range",
				       r->has_dst ? show_ip(r->family, &r->dst) : "default");
	}
	return 0;
}

/* "ipv4/x", "ipv4/conf/IF/x" (IF all, default or a link of it), under core, unix, ipv4, ipv6 */
static bool good_sysctl(const NetnsEntry *e, const char *name)
{
	char buf[256], *part[4], *save = NULL;
	int n = 0;
	bool dir = false;

	if (strlen(name) >= sizeof(buf))
		return false;
	snprintf(buf, sizeof(buf), "%s", name);
	for (char *p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		if (n == 4 ||
		    strspn(p,
			   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
			    strlen(p) ||
		    p[0] == '.')
			return false;
		part[n++] = p;
	}
	for (size_t i = 0; n && i < sizeof(sysctl_dirs) / sizeof(sysctl_dirs[0]); i++)
		dir |= !strcmp(part[0], sysctl_dirs[i]);
	if (!dir || strstr(name, "//") || name[0] == '/' || name[strlen(name) - 1] == '/')
		return false;
	if (n == 2)
		return strcmp(part[1], "conf") != 0;
	if (n != 4 || strcmp(part[1], "conf"))
		return false;
	if (!strcmp(part[2], "all") || !strcmp(part[2], "default"))
		return true;
	for (size_t i = 0; i < e->n_links; i++)
		if (!strcmp(e->links[i]->name, part[2]))
			return true;
	return false;
}

static int check_sysctls(const NetnsEntry *e)
{
	for (size_t i = 0; i < e->n_sysctls; i++) {
		const NsSysctl *s = e->sysctls[i];
		size_t len = strlen(s->value);

		if (!good_sysctl(e, s->name))
			return corrupt(e->id,
				       "a sysctl that is not one of a network namespace (%s)",
				       s->name);
		if (len > SYSCTL_VAL_MAX)
			return corrupt(e->id, "sysctl %s: a value too long", s->name);
		for (size_t k = 0; k < len; k++)
			if (!isprint((unsigned char)s->value[k]) && s->value[k] != '\t')
				return corrupt(e->id, "sysctl %s: a value that is not text",
					       s->name);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(e->sysctls[k]->name, s->name))
				return corrupt(e->id, "sysctl %s set twice", s->name);
	}
	return 0;
}

/*
 * What `nft list ruleset` prints: tables, their chains, sets and rules.  An
 * include (or a define, which list never prints) could make nft, run as
 * root, read a file of the host: refused, as any top-level statement but a
 * table.
 */
static int check_nft(const NetnsEntry *e)
{
	const char *p = e->nft;
	bool first = true; /* at the first word of a top-level statement */
	int depth = 0;

	if (strlen(p) > NFT_MAX)
		return corrupt(e->id, "%s", "an nft ruleset larger than 4 MiB");
	while (*p) {
		if (*p == '"') {
			const char *q = strchr(p + 1, '"');

			if (!q)
				return corrupt(e->id, "%s", "an nft ruleset with an open quote");
			p = q + 1;
		} else if (*p == '#') {
			p += strcspn(p, "\n");
		} else if (*p == '{' || *p == '}') {
			depth += *p == '{' ? 1 : -1;
			if (depth < 0)
				return corrupt(e->id, "%s", "an nft ruleset with an unbalanced }");
			first = !depth;
			p++;
		} else if (*p == '\n' || *p == ';') {
			first = first || !depth;
			p++;
		} else if (isalpha((unsigned char)*p) || *p == '_') {
			size_t n = strspn(
				p,
				"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-");
			char word[16];

			snprintf(word, sizeof(word), "%.*s", (int)(n < 15 ? n : 15), p);
			if (!strcmp(word, "include") || !strcmp(word, "define") ||
			    !strcmp(word, "redefine"))
				return corrupt(e->id,
					       "an nft ruleset with '%s' (it could read files of "
					       "the host; nft list never prints one)",
					       word);
			if (first && !depth && strcmp(word, "table"))
				return corrupt(
					e->id,
					"an nft ruleset with a top-level '%s' statement (nft "
					"list prints only tables)",
					word);
			first = false;
			p += n;
		} else if (*p == '$') {
			return corrupt(
				e->id, "%s",
				"an nft ruleset with a variable (nft list never prints one)");
		} else {
			p++;
		}
	}
	return depth ? corrupt(e->id, "%s", "an nft ruleset with an unbalanced {") : 0;
}

static int check_entry(const NetnsEntry *e, size_t idx)
{
	int ret;

	if (!e->id || e->id > nr_loaded)
		return corrupt(e->id, "%s", "id out of range");
	for (size_t k = 0; k < idx; k++)
		if (loaded[k]->id == e->id)
			return corrupt(e->id, "%s", "listed twice");
	if (e->empty) /* lo alone */
		return e->n_links > 1 || (e->n_links && strcmp(e->links[0]->kind, "loopback")) ||
				       e->n_addrs || e->n_routes || e->n_sysctls || e->nft
			       ? corrupt(e->id, "%s", "contents for a namespace left empty")
		       : e->n_links ? check_links(e)
				    : 0;
	ret = check_links(e);
	if (!ret)
		ret = check_addrs(e);
	if (!ret)
		ret = check_routes(e);
	if (!ret)
		ret = check_sysctls(e);
	if (!ret && e->nft)
		ret = check_nft(e);
	return ret;
}

static int check_pstree(const struct tree *t)
{
	for (size_t i = 0; i < t->nr_pstree; i++) {
		const PstreeEntry *p = t->pstree[i];

		if (p->net_ns && !find(p->net_ns)) {
			pr_err("pstree.img: pid %u is in network namespace %u, which netns.img "
			       "does "
			       "not have; the image is corrupt",
			       p->pid, p->net_ns);
			return -EBADMSG;
		}
	}
	for (size_t n = 0; n < nr_nets; n++) {
		bool used = false;

		for (size_t i = 0; !used && i < t->nr_pstree; i++)
			used = t->pstree[i]->net_ns == nets[n].e->id;
		if (!used)
			return corrupt(nets[n].e->id, "%s", "no process of pstree.img is in it");
	}
	return 0;
}

/* A veth's peer of the tree, which names it back; NULL if there is none. */
static const NetLink *peer_of(const NetnsEntry *e, const NetLink *k)
{
	const struct netns *pn = find(k->peer_ns);
	const NetLink *p = pn ? link_of(pn->e, k->peer_ifindex) : NULL;

	if (!p || strcmp(p->kind, "veth") || !p->has_peer_ns || p->peer_ns != e->id ||
	    p->peer_ifindex != k->ifindex || p == k)
		return NULL;
	return p;
}

/*
 * Each veth comes back with its peer when that is the tree's, else with its
 * host side named by --external, which must be free.
 */
static int check_veths(const struct tree *t)
{
	for (size_t n = 0; n < nr_nets; n++) {
		const NetnsEntry *e = nets[n].e;

		for (size_t i = 0; i < e->n_links; i++) {
			const char *name = e->links[i]->name;
			struct veth_ext *x;

			if (strcmp(e->links[i]->kind, "veth"))
				continue;
			if (e->links[i]->has_peer_ns) {
				if (!peer_of(e, e->links[i]))
					return corrupt(e->id,
						       "veth %s: its peer is not a veth of the "
						       "image that names it back",
						       name);
				continue;
			}
			x = ext_of(name);
			if (!x) {
				pr_err("network namespace %u has veth %s, whose peer was outside "
				       "the "
				       "tree; restore with --external veth[%s]:HOSTNAME[@BRIDGE] "
				       "to "
				       "make its host side",
				       e->id, name, name);
				return -EINVAL;
			}
			if (if_nametoindex(x->host)) {
				pr_err("--external veth[%s]:%s: amber's namespace has a link %s "
				       "already; name a free one",
				       name, x->host, x->host);
				return -EEXIST;
			}
			if (x->bridge[0] && !if_nametoindex(x->bridge)) {
				pr_err("--external veth[%s]:%s@%s: no bridge %s in amber's "
				       "namespace",
				       name, x->host, x->bridge, x->bridge);
				return -ENOENT;
			}
		}
	}
	return 0;
}

int netns_restore_read(struct tree *t)
{
	bool listed = false;
	int ret = 0;

	for (size_t i = 0; i < t->inv->n_files; i++)
		listed |= !strcmp(t->inv->files[i]->name, "netns.img");
	if (listed)
		ret = img_read_all(t->img, IMG_NETNS, &netns_entry__descriptor, &loaded, &nr_loaded,
				   "netns.img");
	if (!ret && listed && !nr_loaded) {
		pr_err("netns.img is empty; the image is corrupt");
		ret = -EBADMSG;
	}
	for (size_t i = 0; !ret && i < nr_loaded; i++)
		ret = check_entry(loaded[i], i);
	if (ret)
		return ret;
	nets = calloc(nr_loaded + 1, sizeof(*nets));
	if (!nets)
		return -ENOMEM;
	for (size_t i = 0; i < nr_loaded; i++)
		nets[nr_nets++] = (struct netns){loaded[i], -1};
	ret = check_pstree(t);
	for (size_t i = 0; !ret && i < nr_nets; i++)
		if (nets[i].e->in_userns && !ns_has_user())
			ret = corrupt(
				nets[i].e->id, "%s",
				"owned by the tree's user namespace, which ns.img does not have");
	if (!ret && nr_nets && !t->owner.unbounded) {
		pr_err("the image has network namespace %u (made new at restore, which needs "
		       "CAP_SYS_ADMIN); uid %u's image may not make namespaces: refusing",
		       nets[0].e->id, t->owner.uid);
		ret = -EPERM;
	}
	if (!ret)
		ret = check_veths(t);
	return ret;
}

int netns_external(const char *arg)
{
	const char *p = arg + strlen("veth["), *q = strchr(p, ']'), *host, *br;
	struct veth_ext x = {0}, *nx;

	if (strncmp(arg, "veth[", 5) || !q || q[1] != ':') {
		pr_err("--external %s: amber knows only veth[IFNAME]:HOSTSIDE[@BRIDGE]", arg);
		return -EINVAL;
	}
	host = q + 2;
	br = strchr(host, '@');
	snprintf(x.name, sizeof(x.name), "%.*s", (int)(q - p), p);
	snprintf(x.host, sizeof(x.host), "%.*s", (int)(br ? br - host : (long)strlen(host)), host);
	if (br)
		snprintf(x.bridge, sizeof(x.bridge), "%s", br + 1);
	if ((size_t)(q - p) >= IFNAMSIZ || !good_ifname(x.name) || !good_ifname(x.host) ||
	    (size_t)(br ? br - host : (long)strlen(host)) >= IFNAMSIZ ||
	    (br && (strlen(br + 1) >= IFNAMSIZ || !good_ifname(x.bridge)))) {
		pr_err("--external %s: not link names (at most %d bytes each)", arg, IFNAMSIZ - 1);
		return -EINVAL;
	}
	nx = realloc(exts, (nr_exts + 1) * sizeof(*nx));
	if (!nx)
		return -ENOMEM;
	exts = nx;
	exts[nr_exts++] = x;
	return 0;
}

/* ---- restore: making them ---- */

static int nl_fail(const NetnsEntry *e, const char *what, const char *name, int err)
{
	pr_err("network namespace %u: cannot %s %s: %s", e->id, what, name, nl_geterror(err));
	return -EIO;
}

static int write_sysctl(const NetnsEntry *e, const NsSysctl *s)
{
	char path[320];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/sys/net/%s", s->name);
	fd = sys_open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd < 0) {
		pr_err("network namespace %u: cannot open %s to set it to %s: %s", e->id, path,
		       s->value, strerror(-fd));
		return fd;
	}
	if (sys_write_full(fd, s->value, strlen(s->value)) != (ssize_t)strlen(s->value)) {
		ret = errno ? -errno : -EIO;
		pr_err("network namespace %u: cannot set %s to %s: %s", e->id, path, s->value,
		       strerror(-ret));
	}
	close(fd);
	return ret;
}

/* links: false for the namespace's own sysctls, true for those of the links made */
static int set_sysctls(const NetnsEntry *e, bool links)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < e->n_sysctls; i++) {
		char dflt[256];

		if (link_conf(e->sysctls[i]->name, dflt, sizeof(dflt)) == links)
			ret = write_sysctl(e, e->sysctls[i]);
	}
	return ret;
}

static struct nl_addr *build(uint32_t family, const ProtobufCBinaryData *b, uint32_t plen)
{
	struct nl_addr *a = nl_addr_build((int)family, b->data, b->len);

	if (a)
		nl_addr_set_prefixlen(a, (int)plen);
	return a;
}

/* One end of a veth as the image has it. */
static void veth_side(struct rtnl_link *l, const NetLink *k)
{
	struct nl_addr *mac;

	rtnl_link_set_name(l, k->name);
	rtnl_link_set_ifindex(l, (int)k->ifindex);
	rtnl_link_set_mtu(l, k->mtu);
	if (k->has_mac) {
		mac = nl_addr_build(AF_LLC, k->mac.data, k->mac.len);
		if (mac) {
			rtnl_link_set_addr(l, mac);
			nl_addr_put(mac);
		}
	}
}

/*
 * lo is there already; a veth's host side goes to amber's namespace, down; a
 * pair of the tree's goes to its two namespaces (all made by now).
 */
static int make_link(struct nl_sock *sk, const NetnsEntry *e, const NetLink *k)
{
	struct rtnl_link *l, *peer;
	struct veth_ext *x;
	int err;

	if (!strcmp(k->kind, "loopback"))
		return 0;
	/* a pair of the tree's is made once, from the first namespace or lower ifindex */
	if (k->has_peer_ns &&
	    (k->peer_ns < e->id || (k->peer_ns == e->id && k->peer_ifindex < k->ifindex)))
		return 0;
	x = k->has_peer_ns ? NULL : ext_of(k->name);
	l = rtnl_link_veth_alloc();
	if (!l)
		return -ENOMEM;
	peer = rtnl_link_veth_get_peer(l);
	veth_side(l, k);
	if (x) {
		rtnl_link_set_name(peer, x->host);
		rtnl_link_set_mtu(peer, k->mtu);
		rtnl_link_set_ns_fd(peer, own_fd);
	} else {
		veth_side(peer, peer_of(e, k));
		if (k->peer_ns != e->id)
			rtnl_link_set_ns_fd(peer, find(k->peer_ns)->fd);
	}
	err = rtnl_link_add(sk, l, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_link_put(peer);
	rtnl_link_veth_release(l);
	if (err < 0)
		return nl_fail(e, "make veth", k->name, err);
	if (x)
		x->host_idx = -1; /* made: found by name once amber is back in its namespace */
	return 0;
}

static int set_up(struct nl_sock *sk, const NetnsEntry *e, const NetLink *k)
{
	struct rtnl_link *orig = NULL, *chg;
	int err = rtnl_link_get_kernel(sk, (int)k->ifindex, NULL, &orig);

	if (err < 0)
		return nl_fail(e, "find link", k->name, err);
	chg = rtnl_link_alloc();
	if (!chg) {
		rtnl_link_put(orig);
		return -ENOMEM;
	}
	if (k->up)
		rtnl_link_set_flags(chg, IFF_UP);
	else
		rtnl_link_unset_flags(chg, IFF_UP);
	if (rtnl_link_get_mtu(orig) != k->mtu)
		rtnl_link_set_mtu(chg, k->mtu);
	err = rtnl_link_change(sk, orig, chg, 0);
	rtnl_link_put(chg);
	rtnl_link_put(orig);
	return err < 0 ? nl_fail(e, "set up link", k->name, err) : 0;
}

static int make_addr(struct nl_sock *sk, const NetnsEntry *e, const NetAddr *k)
{
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = build(k->family, &k->local, k->prefixlen), *p = NULL, *b = NULL;
	char name[64];
	int err = -NLE_NOMEM;

	if (!a || !local)
		goto put;
	rtnl_addr_set_ifindex(a, (int)k->ifindex);
	rtnl_addr_set_family(a, (int)k->family);
	rtnl_addr_set_local(a, local);
	if (k->has_peer && (p = build(k->family, &k->peer, k->prefixlen)))
		rtnl_addr_set_peer(a, p);
	if (k->has_broadcast && (b = build(k->family, &k->broadcast, 0)))
		rtnl_addr_set_broadcast(a, b);
	rtnl_addr_set_prefixlen(a, (int)k->prefixlen);
	rtnl_addr_set_scope(a, (int)k->scope);
	rtnl_addr_set_flags(a, k->flags);
	err = rtnl_addr_add(sk, a, 0);
put:
	snprintf(name, sizeof(name), "%s/%u", show_ip(k->family, &k->local), k->prefixlen);
	nl_addr_put(local);
	nl_addr_put(p);
	nl_addr_put(b);
	rtnl_addr_put(a);
	return err < 0 ? nl_fail(e, "add address", name, err) : 0;
}

static int make_route(struct nl_sock *sk, const NetnsEntry *e, const NetRoute *k)
{
	static const uint8_t zero[16];
	ProtobufCBinaryData none = {k->family == AF_INET ? 4 : 16, (uint8_t *)zero};
	struct rtnl_route *r = rtnl_route_alloc();
	struct nl_addr *dst = build(k->family, k->has_dst ? &k->dst : &none, k->dst_len);
	struct nl_addr *gw = NULL, *src = NULL;
	struct rtnl_nexthop *nh = NULL;
	char name[64];
	int err = -NLE_NOMEM;

	if (!r || !dst)
		goto put;
	rtnl_route_set_family(r, (uint8_t)k->family);
	rtnl_route_set_table(r, k->table);
	rtnl_route_set_dst(r, dst);
	rtnl_route_set_type(r, (uint8_t)k->type);
	rtnl_route_set_scope(r, (uint8_t)k->scope);
	rtnl_route_set_protocol(r, (uint8_t)k->protocol);
	if (k->has_priority)
		rtnl_route_set_priority(r, k->priority);
	if (k->has_prefsrc && (src = build(k->family, &k->prefsrc, 0)))
		rtnl_route_set_pref_src(r, src);
	if (k->has_oif || k->has_gateway) {
		nh = rtnl_route_nh_alloc();
		if (!nh)
			goto put;
		if (k->has_oif)
			rtnl_route_nh_set_ifindex(nh, (int)k->oif);
		if (k->has_gateway && (gw = build(k->family, &k->gateway, 0)))
			rtnl_route_nh_set_gateway(nh, gw);
		rtnl_route_add_nexthop(r, nh); /* the route owns it now */
	}
	err = rtnl_route_add(sk, r, NLM_F_EXCL);
put:
	snprintf(name, sizeof(name), "%s/%u", k->has_dst ? show_ip(k->family, &k->dst) : "default",
		 k->dst_len);
	nl_addr_put(dst);
	nl_addr_put(gw);
	nl_addr_put(src);
	if (r)
		rtnl_route_put(r);
	return err < 0 ? nl_fail(e, "add route to", name, err) : 0;
}

/* One nft command (libnftables) in the namespace amber's thread is in; hint ends the error. */
static int nft_cmd(const NetnsEntry *e, const char *cmd, const char *what, const char *hint)
{
	struct nft_ctx *nft = nft_open();
	const char *err;
	int ret;

	if (!nft)
		return -ENOMEM;
	ret = nft_run(nft, cmd, NULL, &err);
	if (ret)
		pr_err("network namespace %u: nft could not %s: %s%s", e->id, what, err, hint);
	nft_close(nft);
	return ret;
}

static int load_nft(const NetnsEntry *e)
{
	return e->nft && *e->nft ? nft_cmd(e, e->nft, "load the ruleset", "") : 0;
}

/* In amber's thread, now in the new namespace: what it was made of, in an order that works. */
static int configure(const NetnsEntry *e)
{
	struct nl_sock *sk;
	int ret = nl_open(&sk, e->id);

	for (size_t i = 0; !ret && i < e->n_links; i++)
		ret = make_link(sk, e, e->links[i]);
	if (!ret)
		ret = set_sysctls(e, true);
	for (size_t i = 0; !ret && i < e->n_links; i++)
		ret = set_up(sk, e, e->links[i]);
	for (size_t i = 0; !ret && i < e->n_addrs; i++)
		ret = make_addr(sk, e, e->addrs[i]);
	for (size_t i = 0; !ret && i < e->n_routes; i++)
		ret = make_route(sk, e, e->routes[i]);
	if (sk)
		nl_socket_free(sk);
	return ret ? ret : load_nft(e);
}

/*
 * Until every process exists with its sockets, a namespace made here drops
 * every TCP segment but on lo: its sockets are made one namespace at a
 * time, and a segment from a connection already out of repair mode that
 * found its peer's namespace without the peer yet would be answered with a
 * reset.  TCP sends again what was dropped.  Within one namespace (lo) all
 * exist together, and connections waiting on a listener are made again by
 * a real handshake.  Not with --network-lock skip.
 */
#define RESTORE_LOCK  "amber_restore_lock"
#define NFT_LOCK_HINT " (nf_tables is needed; --network-lock skip restores without it)"

static int restore_lock(const struct tree *t, const NetnsEntry *e)
{
	if (t->o->network_lock_skip)
		return 0;
	return nft_cmd(e,
		       "table inet " RESTORE_LOCK " {\n"
		       " chain in { type filter hook input priority -400;\n"
		       "  iifname != \"lo\" meta l4proto tcp drop; }\n"
		       " chain out { type filter hook output priority -400;\n"
		       "  oifname != \"lo\" meta l4proto tcp drop; }\n"
		       "}\n",
		       "lock it while the restore makes its sockets", NFT_LOCK_HINT);
}

/* Once per restore: every process and socket exists, none runs yet. */
static int netns_restore_late(struct restore_ctx *ctx)
{
	int ret = 0;

	if (ctx->tree->o->network_lock_skip)
		return 0;
	for (size_t i = 0; !ret && i < nr_nets; i++) {
		if (!nets[i].locked)
			continue;
		ret = netns_enter(nets[i].e->id);
		if (!ret)
			ret = nft_cmd(nets[i].e, "delete table inet " RESTORE_LOCK,
				      "remove the restore's lock", NFT_LOCK_HINT);
		netns_leave(nets[i].e->id);
		nets[i].locked = false;
	}
	return ret;
}

/* In the maker of a network namespace owned by the tree's user namespace. */
static int unshare_in_userns(void *arg)
{
	const NetnsEntry *e = arg;

	if (setns(ns_user_fd(), CLONE_NEWUSER)) {
		pr_err("network namespace %u: cannot enter the tree's user namespace: %m", e->id);
		return -errno;
	}
	if (unshare(CLONE_NEWNET)) {
		pr_err("cannot make network namespace %u in the tree's user namespace: %m", e->id);
		return -errno;
	}
	return 0;
}

static int make_netns(struct tree *t, struct netns *n)
{
	int fd, ret;

	if (n->e->in_userns) {
		/* made by a child (amber could not come back from the user namespace) */
		ret = ns_make_by_child("network", n->e->id, "net", unshare_in_userns, NULL, n->e,
				       tree_fd_floor(t), &n->fd);
		if (!ret)
			ret = netns_enter(n->e->id);
		if (ret)
			return ret;
		fd = -1;
		goto made;
	}
	if (unshare(CLONE_NEWNET)) {
		pr_err("cannot make network namespace %u: %m", n->e->id);
		return -errno;
	}
	inside = n->e->id;
	fd = sys_open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("cannot open the new network namespace %u: %s", n->e->id, strerror(-fd));
		ret = fd;
	} else {
		/* above the restored fds, inherited by every process; kept first, so that a
		 * failure below still finds the namespace's veths to remove */
		n->fd = fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
		ret = n->fd < 0 ? -errno : 0;
		if (ret)
			pr_err("cannot keep an fd on network namespace %u: %m", n->e->id);
		close(fd);
	}
made:
	if (!ret)
		ret = restore_lock(t, n->e);
	n->locked = !ret && !t->o->network_lock_skip;
	/* before any link: a link takes its namespace's conf/default when made */
	if (!ret)
		ret = set_sysctls(n->e, false);
	netns_leave(n->e->id);
	return ret;
}

/* An empty namespace's lo, up with its MTU as at dump (the only link an empty one keeps). */
static int lo_only(const NetnsEntry *e)
{
	struct nl_sock *sk;
	int ret = 0;

	for (size_t i = 0; !ret && i < e->n_links; i++) {
		if (strcmp(e->links[i]->kind, "loopback"))
			continue;
		ret = nl_open(&sk, e->id);
		if (!ret) {
			ret = set_up(sk, e, e->links[i]);
			nl_socket_free(sk);
		}
	}
	return ret;
}

/* Once every namespace exists (a veth pair may join two): links, addresses, routes, rules. */
static int fill_netns(struct tree *t, struct netns *n)
{
	int ret = netns_enter(n->e->id);

	/* left empty for the runtime: the image's (empty_ns at dump) or the client's word;
	 * but lo as it was */
	if (!ret && !n->e->empty && !t->o->empty_netns) {
		ret = configure(n->e);
	} else if (!ret) {
		bool lo_up = n->e->n_links && n->e->links[0]->up;

		pr_info("network namespace %u made empty (empty_ns)%s: the runtime sets it up",
			n->e->id, lo_up ? " but for lo, up as it was" : "");
		ret = lo_only(n->e);
	}
	netns_leave(n->e->id);
	if (!ret)
		pr_info("made network namespace %u: %zu links, %zu addresses, %zu routes, %zu "
			"sysctls%s",
			n->e->id, n->e->n_links, n->e->n_addrs, n->e->n_routes, n->e->n_sysctls,
			n->e->nft ? ", an nft ruleset" : "");
	return ret;
}

/* A veth's host side, in amber's namespace: up (or down) and on its bridge. */
static int host_side(struct nl_sock *sk, struct veth_ext *x, bool up)
{
	struct rtnl_link *orig = NULL, *chg;
	int err = rtnl_link_get_kernel(sk, 0, x->host, &orig);

	if (err < 0) {
		pr_err("veth host side %s: cannot find it: %s", x->host, nl_geterror(err));
		return -EIO;
	}
	chg = rtnl_link_alloc();
	if (!chg) {
		rtnl_link_put(orig);
		return -ENOMEM;
	}
	if (up)
		rtnl_link_set_flags(chg, IFF_UP);
	if (up && x->bridge[0])
		rtnl_link_set_master(chg, (int)if_nametoindex(x->bridge));
	err = rtnl_link_change(sk, orig, chg, 0);
	x->host_idx = rtnl_link_get_ifindex(orig);
	rtnl_link_put(chg);
	rtnl_link_put(orig);
	if (err < 0) {
		pr_err("veth host side %s: cannot bring it up%s%s: %s", x->host,
		       x->bridge[0] ? " on bridge " : "", x->bridge, nl_geterror(err));
		return -EIO;
	}
	return 0;
}

static int netns_restore_tree(struct tree *t)
{
	int ret;

	if (!nr_nets)
		return 0;
	ret = own_ns(tree_fd_floor(t));
	for (size_t i = 0; !ret && i < nr_nets; i++)
		ret = make_netns(t, &nets[i]);
	for (size_t i = 0; !ret && i < nr_nets; i++)
		ret = fill_netns(t, &nets[i]);
	return ret;
}

int netns_restore_process(const struct tree *t, uint32_t pid)
{
	const PstreeEntry *e = tree_entry(t, pid);
	uint32_t id = e ? e->net_ns : 0;

	if (!nr_nets)
		return 0;
	if (setns(id ? find(id)->fd : own_fd, CLONE_NEWNET)) {
		pr_err("pid %u: cannot enter network namespace %u: %m", pid, id);
		return -errno;
	}
	return 0;
}

static void close_all(void)
{
	for (size_t i = 0; i < nr_nets; i++)
		if (nets[i].fd >= 0) {
			close(nets[i].fd);
			nets[i].fd = -1;
		}
}

/* The processes run: the veths' host sides come up, packets reach their sockets. */
static void netns_restore_done(struct tree *t)
{
	struct nl_sock *sk = NULL;

	for (size_t i = 0; i < nr_exts; i++) {
		if (!exts[i].host_idx)
			continue;
		if (!sk && nl_open(&sk, 0))
			break;
		if (host_side(sk, &exts[i], true))
			pr_warn("the processes run, but veth %s's host side %s is down",
				exts[i].name, exts[i].host);
	}
	if (sk)
		nl_socket_free(sk);
	close_all();
}

/* A failed restore: the namespaces go with their last fd, and their veths with them. */
static void netns_restore_undo(struct tree *t)
{
	close_all();
}

const struct resource_ops netns_ops = {
	.name = "network namespaces",
	.dump_tree = netns_dump_tree,
	.restore_tree = netns_restore_tree,
	.restore_late = netns_restore_late,
	.restore_done = netns_restore_done,
	.restore_undo = netns_restore_undo,
};
