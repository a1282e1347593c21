// SPDX-License-Identifier: MIT
/*
 * Inet sockets beyond TCP and UDP (sk.h): UDP-Lite (IPPROTO_UDPLITE), ICMP
 * "ping" sockets (SOCK_DGRAM with IPPROTO_ICMP or IPPROTO_ICMPV6) and raw
 * sockets (SOCK_RAW with a protocol), over IPv4 and IPv6.  They are kinds of
 * inet socket (FILE_INET_SK, inet_sk_entry): sk-inet.c dumps and restores
 * them through these hooks, so that its TCP code stays its own.
 *
 * What is kept: the address bound (a ping socket's port is its ICMP id, a
 * raw socket's is its protocol), the peer of connect(), SO_REUSEADDR,
 * IPV6_V6ONLY and the options of sk-opts.c's table (UDPLITE_*_CSCOV,
 * IP_HDRINCL, ICMP_FILTER, ...).  A UDP-Lite socket's queued datagrams are
 * sent again from a UDP-Lite socket of amber's, as a UDP socket's are.  What
 * a raw or ping socket has queued came from the network and cannot be
 * delivered to it alone again (every raw socket of the protocol would get
 * it): such a queue is refused at dump.
 *
 * A raw socket needs CAP_NET_RAW: an image not root's holding one is refused
 * before anything is made; sockets are made and bound with the owner's
 * rights, so a ping socket obeys net.ipv4.ping_group_range for the owner.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "owner.h"
#include "sk.h"

#ifndef IPPROTO_UDPLITE
#define IPPROTO_UDPLITE 136
#endif
#define MAX_DGRAM 65535

bool inet_extra(const InetSkEntry *e)
{
	if (e->family != AF_INET && e->family != AF_INET6)
		return false;
	if (e->type == SOCK_RAW)
		return true;
	return e->type == SOCK_DGRAM &&
	       (e->proto == IPPROTO_UDPLITE ||
		e->proto == (e->family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6));
}

static const char *kind_name(const InetSkEntry *e)
{
	if (e->type == SOCK_RAW)
		return "raw";
	return e->proto == IPPROTO_UDPLITE ? "UDP-Lite" : "ICMP (ping)";
}

static bool wildcard(const ProtobufCBinaryData *b)
{
	for (size_t i = 0; i < b->len; i++)
		if (b->data[i])
			return false;
	return true;
}

int inet_extra_dump(struct dump_ctx *ctx, int dup, InetSkEntry *e, const char *what)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char byte;
	int val, ret;

	(void)ctx;
	if (getsockname(dup, (struct sockaddr *)&ss, &len))
		goto sockopt_fail;
	ret = inet_put_addr(e, &ss, false);
	if (ret)
		return ret;
	len = sizeof(ss);
	if (!getpeername(dup, (struct sockaddr *)&ss, &len)) {
		ret = inet_put_addr(e, &ss, true);
		if (ret)
			return ret;
	}
	e->state = e->has_dst_addr ? TCP_ESTABLISHED : TCP_CLOSE; /* as UDP's */
	len = sizeof(val);
	if (getsockopt(dup, SOL_SOCKET, SO_REUSEADDR, &val, &len))
		goto sockopt_fail;
	e->has_reuseaddr = 1;
	e->reuseaddr = val;
	if (e->family == AF_INET6) {
		len = sizeof(val);
		if (getsockopt(dup, IPPROTO_IPV6, IPV6_V6ONLY, &val, &len))
			goto sockopt_fail;
		e->has_v6only = 1;
		e->v6only = val;
	}
	ret = sk_opts_dump(dup, (int)e->family, (int)e->type, false, what, &e->opts, &e->n_opts);
	if (ret)
		return ret;
	if (e->proto == IPPROTO_UDPLITE)
		return sk_peek_queue(dup, false, what, &e->dgrams, &e->n_dgrams);
	/* no zero-length datagram here: an IP header, or an ICMP one, at least */
	if (recv(dup, &byte, 1, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC) >= 0) {
		pr_err("%s: %s socket %s has packets queued for reading, which amber cannot "
		       "deliver to it alone again; let the process read them before the dump",
		       what, kind_name(e), inet_show_addr(e, false));
		return -EOPNOTSUPP;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK) {
		pr_err("%s: cannot tell whether %s socket %s has packets queued: %m", what,
		       kind_name(e), inet_show_addr(e, false));
		return -errno;
	}
	return 0;
sockopt_fail:
	pr_err("%s: cannot read the socket's address or options: %m", what);
	return -errno;
}

int inet_extra_check(struct tree *t, const InetSkEntry *e, const char *who)
{
	size_t alen = e->family == AF_INET ? 4 : 16;

	if (e->src_addr.len != alen || (e->has_dst_addr && e->dst_addr.len != alen) ||
	    e->src_port > 65535 || e->dst_port > 65535 || e->proto > 255 ||
	    (e->type == SOCK_RAW && !e->proto)) {
		pr_err("%s: the image holds a %s socket of protocol %u with addresses or ports "
		       "out of range; the image is corrupt",
		       who, kind_name(e), e->proto);
		return -EBADMSG;
	}
	if (e->n_dgrams && e->proto != IPPROTO_UDPLITE) {
		pr_err("%s: the image holds queued datagrams for a %s socket; the image is corrupt",
		       who, kind_name(e));
		return -EBADMSG;
	}
	for (size_t i = 0; i < e->n_dgrams; i++)
		if (e->dgrams[i]->data.len > MAX_DGRAM || e->dgrams[i]->n_fds) {
			pr_err("%s: the image holds a queued UDP-Lite datagram of %zu bytes or "
			       "with descriptors; the image is corrupt",
			       who, e->dgrams[i]->data.len);
			return -EBADMSG;
		}
	if (e->type == SOCK_RAW && t->owner.switches) {
		pr_err("%s: the image holds a raw socket (protocol %u), which needs CAP_NET_RAW, "
		       "and belongs to uid %u: only root's own images restore raw sockets",
		       who, e->proto, t->owner.uid);
		return -EPERM;
	}
	return sk_opts_check_proto(t, e->opts, e->n_opts, (int)e->family, (int)e->type,
				   (int)e->proto, false, who);
}

/* UDP-Lite: the queued datagrams again, sent to it from a socket of amber's. */
static int refill(int fd, const InetSkEntry *e, const char *who)
{
	struct sockaddr_storage to;
	socklen_t len = sizeof(to);
	int tmp, ret = 0;

	if (getsockname(fd, (struct sockaddr *)&to, &len)) {
		pr_err("%s: cannot read back its address: %m", who);
		return -errno;
	}
	inet_any_to_loopback(&to);
	tmp = socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDPLITE);
	if (tmp < 0) {
		pr_err("%s: cannot create a UDP-Lite socket to refill its queue: %m", who);
		return -errno;
	}
	for (size_t i = 0; i < e->n_dgrams && !ret; i++)
		if (sendto(tmp, e->dgrams[i]->data.data, e->dgrams[i]->data.len, 0,
			   (struct sockaddr *)&to, len) != (ssize_t)e->dgrams[i]->data.len)
			ret = -errno;
	close(tmp);
	if (ret) {
		pr_err("%s: cannot refill its queue: %s", who, strerror(-ret));
		return ret;
	}
	/* loopback delivery is asynchronous: wait until every datagram is queued */
	for (int i = 0; i < 200; i++) {
		SkQueued **q = NULL;
		size_t n = 0;

		ret = sk_peek_queue(fd, false, who, &q, &n);
		for (size_t k = 0; k < n; k++) {
			free(q[k]->data.data);
			free(q[k]);
		}
		free(q);
		if (ret)
			return ret;
		if (n >= e->n_dgrams)
			return 0;
		usleep(10 * 1000);
	}
	pr_err("%s: the refilled datagrams did not arrive", who);
	return -ETIMEDOUT;
}

static int bind_connect(struct tree *t, int fd, const InetSkEntry *e, const char *who)
{
	struct sockaddr_storage ss;
	socklen_t len;
	bool bind_it;
	int ret;

	/* a raw socket's port is its protocol, not something bound */
	if (e->type == SOCK_RAW)
		bind_it = !wildcard(&e->src_addr);
	else
		bind_it = e->src_port || !wildcard(&e->src_addr) || e->n_dgrams;
	ret = owner_enter(t);
	if (ret)
		return ret;
	len = inet_get_addr(e, false, &ss);
	if (e->type == SOCK_RAW)
		((struct sockaddr_in *)&ss)->sin_port = 0; /* sin6_port at the same offset */
	if (bind_it && bind(fd, (struct sockaddr *)&ss, len)) {
		ret = -errno;
		pr_err("%s: cannot bind the %s socket to %s: %m%s", who, kind_name(e),
		       inet_show_addr(e, false),
		       errno == EADDRINUSE ? " (another socket holds it; stop it)"
		       : errno == EACCES   ? " (the image's owner may not bind it)"
					   : "");
	}
	if (!ret && e->n_dgrams)
		ret = refill(fd, e, who);
	if (!ret && e->has_dst_addr) {
		len = inet_get_addr(e, true, &ss);
		if (connect(fd, (struct sockaddr *)&ss, len)) {
			ret = -errno;
			pr_err("%s: cannot connect the %s socket to %s: %m", who, kind_name(e),
			       inet_show_addr(e, true));
		}
	}
	owner_leave(t);
	return ret;
}

int inet_extra_open(struct tree *t, const InetSkEntry *e, const char *who, int *fdp)
{
	int fd, ret, v;

	ret = owner_enter(t);
	if (ret)
		return ret;
	fd = socket((int)e->family, (int)e->type | SOCK_CLOEXEC, (int)e->proto);
	if (fd < 0) {
		ret = -errno;
		pr_err("%s: cannot create the %s socket (protocol %u): %m%s", who, kind_name(e),
		       e->proto,
		       e->type == SOCK_RAW && (errno == EPERM || errno == EACCES)
			       ? " (needs CAP_NET_RAW)"
		       : e->type == SOCK_DGRAM && errno == EACCES
			       ? " (the sysctl net.ipv4.ping_group_range does not include the "
				 "group of the image's owner)"
			       : "");
	}
	owner_leave(t);
	if (ret)
		return ret;
	/* a raw socket cannot change it (it has its "port" already): set only what differs */
	if (e->family == AF_INET6 && e->has_v6only &&
	    (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, &(socklen_t){sizeof(v)}) ||
	     !v != !e->v6only)) {
		v = e->v6only;
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof(v))) {
			ret = -errno;
			pr_err("%s: cannot set IPV6_V6ONLY: %m", who);
			goto close_fd;
		}
	}
	v = e->has_reuseaddr && e->reuseaddr;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v))) {
		ret = -errno;
		pr_err("%s: cannot set SO_REUSEADDR: %m", who);
		goto close_fd;
	}
	ret = sk_opts_restore(t, fd, e->opts, e->n_opts, false, who);
	if (!ret)
		ret = bind_connect(t, fd, e, who);
	if (ret)
		goto close_fd;
	*fdp = fd;
	return 0;
close_fd:
	close(fd);
	return ret;
}
