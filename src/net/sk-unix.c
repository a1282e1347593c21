// SPDX-License-Identifier: MIT
/*
 * Unix sockets: stream, dgram and seqpacket; socketpairs and named sockets
 * (paths and abstract names) between processes of the tree, listening
 * sockets, and the data queued on each.
 *
 * Dump: type, state, name, peer and backlog come from NETLINK_SOCK_DIAG
 * (unix_diag); queued data is peeked on amber's dup (peek_queue), with each
 * datagram's sender address and the descriptors a message carries
 * (SCM_RIGHTS: the peek gives amber new fds on them, which files.c
 * describes as files in flight).  A connected stream or seqpacket socket
 * whose peer is neither open in the tree nor in flight is refused (external
 * socket); a listener's connections not accept()ed yet are kept as the list
 * of their clients, which must be in the tree and have sent nothing (the
 * data would be in a socket only accept() reaches); a datagram socket may be
 * connected to a named socket outside the tree (it is connected to that
 * name again on restore).
 *
 * Restore: every unix socket of the image is built at once, before any
 * other description: connected pairs (socketpair; with a name, through a
 * temporary listener bound to it so that the accepted end carries the
 * listener's name), then the other sockets (bind, listen).  Once every
 * description is open (post_open), the clients of pending connections
 * connect to their listeners in the dumped order, then the queued data, sent by each socket's
 * peer, by the socket bound to the datagram's sender address (or a
 * temporary one bound to it) or by a temporary socket sending to its name,
 * with the descriptors it carried, so that it lands in the right receive
 * queue; then datagram connects, buffer sizes and shutdowns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns/ns.h"
#include "owner.h"
#include "sk.h"
#include "sys.h"

#ifndef SO_PEEK_OFF
#define SO_PEEK_OFF 42
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif
#define PEEK_BUF   (4 << 20)
#define TMP_SNDBUF (8 << 20)

/* sk_shutdown bits as unix_diag reports them */
#define SK_RCV_SHUTDOWN	 1
#define SK_SEND_SHUTDOWN 2

bool sk_open_in_tree(struct tree *t, uint64_t ino)
{
	char want[64], path[64], fdpath[320], link[64];

	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%d/fd", t->dprocs[p]->pid);
		d = sys_opendir(path);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			ssize_t n;

			snprintf(fdpath, sizeof(fdpath), "%s/%s", path, de->d_name);
			n = sys_readlink_raw(fdpath, link, sizeof(link) - 1);
			if (n <= 0)
				continue;
			link[n] = 0;
			if (!strcmp(link, want)) {
				closedir(d);
				return true;
			}
		}
		closedir(d);
	}
	return false;
}

#define MAX_QUEUED (1 << 20) /* entries per socket: image.c's LIM_QUEUED */

static int add_queued(SkQueued ***q, size_t *n, const void *data, size_t len)
{
	SkQueued *e;

	if (*n >= MAX_QUEUED)
		return -E2BIG;
	/* doubling: a long queue of small messages costs n log n, not n^2 */
	if (!(*n & (*n - 1)) || !*n) {
		SkQueued **nq = realloc(*q, (*n ? 2 * *n : 1) * sizeof(*nq));

		if (!nq)
			return -ENOMEM;
		*q = nq;
	}
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	sk_queued__init(e);
	e->data.len = len;
	e->data.data = malloc(len ? len : 1);
	if (!e->data.data) {
		free(e);
		return -ENOMEM;
	}
	memcpy(e->data.data, data, len);
	(*q)[(*n)++] = e;
	return 0;
}

/* The descriptors a peek of an SCM_RIGHTS message gave us (nfds of them). */
static int *passed_fds(struct msghdr *mh, size_t *nfds)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			*nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			return (int *)CMSG_DATA(c);
		}
	*nfds = 0;
	return NULL;
}

/*
 * The credentials a peeked message carries (false: none: the kernel says
 * pid 0 for a message sent with neither end passing them); a pidfd the peek
 * gave (SO_PASSPIDFD) is closed.
 */
static bool peeked_creds(struct msghdr *mh, struct ucred *cr)
{
	bool has = false;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(*cr))) {
			memcpy(cr, CMSG_DATA(c), sizeof(*cr));
			has = cr->pid != 0;
		} else if (c->cmsg_type == SCM_PIDFD && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int pfd;

			memcpy(&pfd, CMSG_DATA(c), sizeof(pfd));
			close(pfd);
		}
	}
	return has;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

struct peek {
	int fd;
	char *buf;
	char cbuf[CMSG_SPACE(sizeof(int) * 253) + CMSG_SPACE(sizeof(struct ucred)) +
		  CMSG_SPACE(sizeof(int))];
	struct sockaddr_un from;
	struct msghdr mh;
	struct iovec iov;
};

/* One peek of up to len bytes at the socket's peek offset. */
static ssize_t peek_one(struct peek *p, size_t len)
{
	ssize_t r;

	do {
		p->iov = (struct iovec){p->buf, len};
		p->mh = (struct msghdr){.msg_name = &p->from,
					.msg_namelen = sizeof(p->from),
					.msg_iov = &p->iov,
					.msg_iovlen = 1,
					.msg_control = p->cbuf,
					.msg_controllen = sizeof(p->cbuf)};
		r = recvmsg(p->fd, &p->mh, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	} while (r < 0 && errno == EINTR);
	return r;
}

/* ctx NULL: descriptors in the queue are refused (sockets other than unix) */
static int peek_queue(struct dump_ctx *ctx, int fd, bool stream, const char *what, SkQueued ***q,
		      size_t *n)
{
	struct peek *p = calloc(1, sizeof(*p));
	int old = -1, zero = 0, one = 1, passcred = 1, ret = 0;
	socklen_t len = sizeof(old);

	if (!p)
		return -ENOMEM;
	p->fd = fd;
	if (getsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, &len) ||
	    setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &zero, sizeof(zero))) {
		pr_err("%s: cannot use SO_PEEK_OFF to read its queue without consuming it: %m "
		       "(kernel too old?)",
		       what);
		free(p);
		return -errno;
	}
	/*
	 * A peek shows a message's credentials only with SO_PASSCRED, which the
	 * dump sets on the process's own socket for the peek (it is frozen)
	 * and puts back after; it also keeps a stream's peeks from gluing two
	 * writers' data.
	 */
	len = sizeof(passcred);
	if (ctx && (getsockopt(fd, SOL_SOCKET, SO_PASSCRED, &passcred, &len) ||
		    (!passcred && setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one))))) {
		ret = -errno;
		pr_err("%s: cannot turn SO_PASSCRED on to read its messages' credentials: %m",
		       what);
		goto put_peek_off;
	}
	p->buf = malloc(PEEK_BUF);
	if (!p->buf) {
		ret = -ENOMEM;
		goto put_passcred;
	}
	for (;;) {
		/*
		 * A stream's peek runs up to the next write carrying descriptors,
		 * which come with its first byte (the kernel peeks them with the
		 * data before, which a read would not: see README, Limits).
		 */
		ssize_t r = peek_one(p, PEEK_BUF);
		size_t nfds;
		int *fds;
		SkQueued *e;

		if (r < 0 && errno == EAGAIN)
			break;
		if (r < 0) {
			ret = -errno;
			pr_err("%s: cannot peek at its queued data: %m", what);
			break;
		}
		fds = passed_fds(&p->mh, &nfds);
		if (nfds && !ctx) {
			close_fds(fds, nfds);
			pr_err("%s: a queued message carries file descriptors (SCM_RIGHTS), which "
			       "amber cannot dump on this socket; let the receiver read it first",
			       what);
			ret = -EOPNOTSUPP;
			break;
		}
		if (stream && r == 0)
			break; /* end of stream (shut down) */
		if (p->mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
			close_fds(fds, nfds);
			pr_err("%s: a queued %s is larger than %d bytes", what,
			       p->mh.msg_flags & MSG_TRUNC ? "datagram" : "set of descriptors",
			       PEEK_BUF);
			ret = -EMSGSIZE;
			break;
		}
		ret = add_queued(q, n, p->buf, r);
		if (ret) {
			close_fds(fds, nfds);
			if (ret == -E2BIG)
				pr_err("%s: more than %d messages queued", what, MAX_QUEUED);
			break;
		}
		e = (*q)[*n - 1];
		if (ctx) {
			struct ucred cr;

			if (peeked_creds(&p->mh, &cr) && ctx->tree->own_pidns) {
				close_fds(fds, nfds);
				pr_err("%s: a queued message carries credentials (SCM_CREDENTIALS, "
				       "pid %d), which amber cannot queue again in a tree that is "
				       "its own pid namespace; let the receiver read it first",
				       what, cr.pid);
				ret = -EOPNOTSUPP;
				break;
			}
			if (peeked_creds(&p->mh, &cr)) {
				e->has_cred_pid = e->has_cred_uid = e->has_cred_gid = 1;
				e->cred_pid = (uint32_t)cr.pid;
				e->cred_uid = cr.uid;
				e->cred_gid = cr.gid;
			}
		}
		if (!stream && p->mh.msg_namelen > offsetof(struct sockaddr_un, sun_path)) {
			e->has_addr = 1;
			e->addr.len = p->mh.msg_namelen - offsetof(struct sockaddr_un, sun_path);
			e->addr.data = malloc(e->addr.len);
			if (!e->addr.data) {
				close_fds(fds, nfds);
				ret = -ENOMEM;
				break;
			}
			memcpy(e->addr.data, p->from.sun_path, e->addr.len);
		}
		if (nfds) {
			e->fds = calloc(nfds, sizeof(*e->fds));
			if (!e->fds) {
				close_fds(fds, nfds);
				ret = -ENOMEM;
				break;
			}
			/* files.c takes each fd over, even when it fails */
			for (size_t i = 0; i < nfds; i++) {
				int id = -1;

				if (!ret)
					ret = files_dump_inflight(ctx, fds[i], &id);
				else
					close(fds[i]);
				e->fds[e->n_fds++] = (uint32_t)id;
			}
			if (ret) {
				pr_err("%s: cannot dump a file in flight in its queue", what);
				break;
			}
		}
	}
	free(p->buf);
put_passcred:
	if (!passcred && setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &passcred, sizeof(passcred)) &&
	    !ret) {
		pr_err("%s: cannot turn SO_PASSCRED off again: %m", what);
		ret = -errno;
	}
put_peek_off:
	if (setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &old, sizeof(old)) && !ret) {
		pr_err("%s: cannot put SO_PEEK_OFF back to %d: %m", what, old);
		ret = -errno;
	}
	free(p);
	return ret;
}

int sk_peek_queue(int fd, bool stream, const char *what, SkQueued ***q, size_t *n)
{
	return peek_queue(NULL, fd, stream, what, q, n);
}

int sk_set_flags(int fd, const RegFile *f)
{
	if ((f->flags & O_NONBLOCK) && fcntl(fd, F_SETFL, O_NONBLOCK)) {
		pr_err("socket %s: cannot make it non-blocking: %m", f->path);
		return -errno;
	}
	return 0;
}

/* ---- sock_diag ---- */

struct unix_info {
	uint32_t type, state, shutdown;
	uint64_t ino, peer;
	bool has_peer;
	char name[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	size_t name_len;
	uint32_t rqueue, wqueue;
	uint64_t vfs_ino, vfs_dev;
	bool has_vfs;
	uint32_t *icons; /* a listener's: the clients of its pending connections (malloc'd) */
	size_t nr_icons;
};

/* Fill ui from one sock_diag answer; with want_icons, a listener's icons too. */
static int parse_unix_msg(const struct nlmsghdr *h, struct unix_info *ui, bool want_icons)
{
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	const struct rtattr *a;
	int alen;

	memset(ui, 0, sizeof(*ui));
	ui->type = m->udiag_type;
	ui->state = m->udiag_state;
	ui->ino = m->udiag_ino;
	alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
	for (a = (const struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
		size_t len = RTA_PAYLOAD(a);

		switch (a->rta_type) {
		case UNIX_DIAG_NAME:
			if (len >= sizeof(ui->name))
				len = sizeof(ui->name) - 1;
			memcpy(ui->name, RTA_DATA(a), len);
			ui->name_len = len;
			break;
		case UNIX_DIAG_PEER:
			ui->has_peer = true;
			ui->peer = *(uint32_t *)RTA_DATA(a);
			break;
		case UNIX_DIAG_ICONS:
			if (!want_icons || ui->icons)
				break;
			ui->nr_icons = len / sizeof(uint32_t);
			ui->icons = malloc(len ? len : 1);
			if (!ui->icons)
				return -ENOMEM;
			memcpy(ui->icons, RTA_DATA(a), ui->nr_icons * sizeof(uint32_t));
			break;
		case UNIX_DIAG_RQLEN: {
			struct unix_diag_rqlen *rq = RTA_DATA(a);

			ui->rqueue = rq->udiag_rqueue;
			ui->wqueue = rq->udiag_wqueue;
			break;
		}
		case UNIX_DIAG_VFS: {
			struct unix_diag_vfs *v = RTA_DATA(a);

			ui->has_vfs = true;
			ui->vfs_ino = v->udiag_vfs_ino;
			ui->vfs_dev = v->udiag_vfs_dev;
			break;
		}
		case UNIX_DIAG_SHUTDOWN:
			ui->shutdown = *(uint8_t *)RTA_DATA(a);
			break;
		}
	}
	return 0;
}

/*
 * One socket by inode, in amber's network namespace (-ENOENT: not a unix
 * socket there); with icons, a listener's pending connections too (ui->icons
 * is then the caller's to free).
 */
static int unix_diag_icons(uint64_t ino, struct unix_info *ui, bool icons)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req r;
	} req = {
		.nlh = {.nlmsg_len = sizeof(req),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST},
		.r = {.sdiag_family = AF_UNIX,
		      .udiag_states = ~0U,
		      .udiag_ino = (uint32_t)ino,
		      .udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN |
				    UDIAG_SHOW_VFS | (icons ? UDIAG_SHOW_ICONS : 0),
		      .udiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}},
	};
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
	static char buf[1 << 17]; /* room for a listener's icons (4 bytes each) */
	struct nlmsghdr *h;
	struct unix_diag_msg *m;
	int s, ret = -ENOENT;
	ssize_t n;

	s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0)
		return -errno;
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
		ret = -errno;
		goto close_sock;
	}
	n = recv(s, buf, sizeof(buf), 0);
	if (n < 0) {
		ret = -errno;
		goto close_sock;
	}
	h = (struct nlmsghdr *)buf;
	if (!NLMSG_OK(h, (size_t)n))
		goto close_sock;
	if (h->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr *e = NLMSG_DATA(h);

		ret = e->error ? e->error : -ENOENT;
		goto close_sock;
	}
	if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
		goto close_sock;
	m = NLMSG_DATA(h);
	if (m->udiag_family != AF_UNIX || m->udiag_ino != (uint32_t)ino)
		goto close_sock;
	ret = parse_unix_msg(h, ui, icons);
close_sock:
	close(s);
	return ret;
}

static int unix_diag(uint64_t ino, struct unix_info *ui)
{
	return unix_diag_icons(ino, ui, false);
}

/*
 * The listener in whose queue client's connection waits (its inode; 0:
 * none).  A pending client's peer is the listener's embryo socket, which has
 * no inode (sock_diag says 0, as for a peer that closed): only the
 * listeners' icons tell the two apart.
 */
static int pending_listener(uint64_t client, uint64_t *listener)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req r;
	} req = {
		.nlh = {.nlmsg_len = sizeof(req),
			.nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
		.r = {.sdiag_family = AF_UNIX,
		      .udiag_states = 1U << TCP_LISTEN,
		      .udiag_show = UDIAG_SHOW_ICONS,
		      .udiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}},
	};
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
	static char buf[1 << 17];
	int s, ret = 0;
	bool done = false;

	*listener = 0;
	s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0)
		return -errno;
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
		ret = -errno;
		goto close_sock;
	}
	while (!done) {
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		struct nlmsghdr *h;

		if (n < 0) {
			ret = -errno;
			break;
		}
		if (!n)
			break;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			struct unix_info ui;

			if (h->nlmsg_type == NLMSG_DONE) {
				done = true;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				ret = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
				done = true;
				break;
			}
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
				continue;
			ret = parse_unix_msg(h, &ui, true);
			if (ret) {
				done = true;
				break;
			}
			for (size_t i = 0; i < ui.nr_icons && !*listener; i++)
				if (ui.icons[i] == (uint32_t)client)
					*listener = ui.ino;
			free(ui.icons);
		}
	}
close_sock:
	close(s);
	if (ret)
		pr_err("socket:[%llu]: cannot list the unix listeners' pending connections "
		       "(sock_diag): %s",
		       (unsigned long long)client, strerror(-ret));
	return ret;
}

static bool unix_match(const char *link, const struct stat *st)
{
	struct unix_info ui;

	return S_ISSOCK(st->st_mode) && unix_diag(st->st_ino, &ui) == 0;
}

/* "@abstract" or the path, for messages. */
static const char *show_name(const uint8_t *name, size_t len)
{
	static char buf[2][sizeof(((struct sockaddr_un *)0)->sun_path) + 2];
	static int k;
	char *b = buf[k++ % 2];

	if (!len)
		return "unnamed";
	if (name[0])
		snprintf(b, sizeof(buf[0]), "%.*s", (int)len, (const char *)name);
	else
		snprintf(b, sizeof(buf[0]), "@%.*s", (int)len - 1, (const char *)name + 1);
	return b;
}

static const char *type_name(uint32_t type)
{
	return type == SOCK_STREAM ? "stream" : type == SOCK_DGRAM ? "dgram" : "seqpacket";
}

/* A relative name was bound in some directory: find it through the process's cwd. */
static int find_bind_dir(struct dump_ctx *ctx, int fd, const struct unix_info *ui, UnixSkEntry *e)
{
	char cwd[PATH_MAX], path[PATH_MAX + sizeof(ui->name) + 2], link[64];
	struct stat st;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/cwd", ctx->pid);
	n = sys_readlink_raw(link, cwd, sizeof(cwd) - 1);
	if (n > 0) {
		cwd[n] = 0;
		snprintf(path, sizeof(path), "%s/%s", cwd, ui->name);
		if (ui->has_vfs && !stat(path, &st) && S_ISSOCK(st.st_mode) &&
		    st.st_ino == ui->vfs_ino) {
			e->bind_dir = strdup(cwd);
			return e->bind_dir ? 0 : -ENOMEM;
		}
	}
	pr_err("pid %d: fd %d is a unix socket bound to the relative name '%s' outside its "
	       "current directory; amber cannot tell where to bind it again (bind it to an "
	       "absolute path)",
	       ctx->pid, fd, ui->name);
	return -EOPNOTSUPP;
}

/*
 * Sockets noted during the dump, checked once every socket is in the image:
 * those whose peer is not open in the tree (the peer must be in flight),
 * and listeners with connections not accept()ed yet and their clients.
 */
struct noted_list {
	struct noted {
		UnixSkEntry *e;
		char *what;
	} * v;
	size_t n;
};
static struct noted_list outside, pendings;

static int note_sk(struct noted_list *l, UnixSkEntry *e, const char *what)
{
	struct noted *nv = realloc(l->v, (l->n + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	l->v = nv;
	l->v[l->n].e = e;
	l->v[l->n].what = strdup(what);
	if (!l->v[l->n].what)
		return -ENOMEM;
	l->n++;
	return 0;
}

/* Each noted socket through check (until one fails), then the list emptied. */
static int check_noted(struct tree *t, struct noted_list *l,
		       int (*check)(struct tree *t, const struct noted *n))
{
	int ret = 0;

	for (size_t i = 0; i < l->n; i++) {
		if (!ret)
			ret = check(t, &l->v[i]);
		free(l->v[i].what);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
	return ret;
}

static UnixSkEntry *image_sk(struct tree *t, uint64_t ino)
{
	for (size_t i = 0; i < t->files.n; i++)
		if (t->files.f[i]->unix_sk && t->files.f[i]->unix_sk->ino == ino)
			return t->files.f[i]->unix_sk;
	return NULL;
}

static bool in_image(struct tree *t, uint64_t ino)
{
	return image_sk(t, ino) != NULL;
}

/* Both ends of a connection not accept()ed yet must be in the image. */
static int check_pending(struct tree *t, const struct noted *p)
{
	const UnixSkEntry *e = p->e;
	const UnixSkEntry *l;

	for (size_t i = 0; i < e->n_pending; i++)
		if (!in_image(t, e->pending[i])) {
			pr_err("%s: the listening socket %s has a connection not accept()ed yet "
			       "from socket:[%llu], which is not open in the dumped tree nor in "
			       "flight (a process outside it); dump the tree that holds both "
			       "ends, or once the connection is accepted",
			       p->what, show_name(e->name.data, e->name.len),
			       (unsigned long long)e->pending[i]);
			return -EOPNOTSUPP;
		}
	if (!e->has_pending_on)
		return 0;
	l = image_sk(t, e->pending_on);
	if (!l) {
		pr_err("%s: its connection to socket:[%llu] waits to be accept()ed by that "
		       "listener, which is not open in the dumped tree (a process outside it); "
		       "dump the tree that holds both ends, or once the connection is accepted",
		       p->what, (unsigned long long)e->pending_on);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int check_outside(struct tree *t, const struct noted *o)
{
	const UnixSkEntry *e = o->e;
	bool inside = in_image(t, e->peer_ino);

	if (!inside && e->type != SOCK_DGRAM) {
		pr_err("%s: external unix socket: its %s peer socket:[%llu] (%s) is not open in "
		       "the dumped tree nor in flight in a queue (a process outside it, or a "
		       "connection not accept()ed yet); dump the tree that holds both ends",
		       o->what, type_name(e->type), (unsigned long long)e->peer_ino,
		       show_name(e->peer_name.data, e->peer_name.len));
		return -EOPNOTSUPP;
	}
	if (!inside && (!e->has_peer_name || e->peer_name.data[0] != '/')) {
		pr_err("%s: external unix socket: it is connected to socket:[%llu] (%s) outside "
		       "the dumped tree, which has no path to connect to again",
		       o->what, (unsigned long long)e->peer_ino,
		       show_name(e->peer_name.data, e->peer_name.len));
		return -EOPNOTSUPP;
	}
	return 0;
}

static int unix_dump_done(struct tree *t)
{
	int ret = check_noted(t, &outside, check_outside);
	int ret2 = check_noted(t, &pendings, check_pending);

	return ret ? ret : ret2;
}

/*
 * A listener's connections not accept()ed yet: their clients, in accept
 * order, to be connected again at restore.  What a client sent is in its
 * embryo socket, which no interface can read without accepting it.
 */
static int dump_pending(UnixSkEntry *e, const struct unix_info *ui, const char *what)
{
	if (!ui->nr_icons)
		return 0;
	e->pending = calloc(ui->nr_icons, sizeof(*e->pending));
	if (!e->pending)
		return -ENOMEM;
	for (size_t i = 0; i < ui->nr_icons; i++) {
		if (!ui->icons[i]) {
			pr_err("%s: the listening socket %s has a connection not accept()ed yet "
			       "whose client has closed, and what it sent cannot be read "
			       "without accepting it; dump once it is accepted",
			       what, show_name(e->name.data, e->name.len));
			return -EOPNOTSUPP;
		}
		e->pending[e->n_pending++] = ui->icons[i];
	}
	return note_sk(&pendings, e, what);
}

/* A connected socket whose peer has no inode: closed, or an embryo in a listener's queue. */
static int dump_pending_client(UnixSkEntry *e, const struct unix_info *ui, const char *what)
{
	uint64_t l;
	int ret = pending_listener(ui->ino, &l);

	if (ret || !l)
		return ret;
	if (ui->wqueue) {
		struct unix_info li;

		pr_err("%s: its connection to %s is not accept()ed yet and holds data it sent "
		       "(%u bytes of buffers), which cannot be read without accepting it; dump "
		       "once the listener accepted it",
		       what,
		       unix_diag(l, &li) ? "a listener"
					 : show_name((uint8_t *)li.name, li.name_len),
		       ui->wqueue);
		return -EOPNOTSUPP;
	}
	e->has_pending_on = 1;
	e->pending_on = l;
	return note_sk(&pendings, e, what);
}

static int unix_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	UnixSkEntry *e = malloc(sizeof(*e));
	struct unix_info ui, pi;
	char what[96];
	int ret, val;
	socklen_t len = sizeof(val);

	if (!e)
		return -ENOMEM;
	unix_sk_entry__init(e);
	f->unix_sk = e;
	snprintf(what, sizeof(what), "pid %d: fd %d (unix socket:[%llu])", ctx->pid, fd,
		 (unsigned long long)f->ino);
	ret = unix_diag_icons(f->ino, &ui, true);
	if (ret) {
		pr_err("%s: sock_diag cannot describe it: %s (is the process in another network "
		       "namespace than amber?)",
		       what, strerror(-ret));
		return ret;
	}
	if (ui.type != SOCK_STREAM && ui.type != SOCK_DGRAM && ui.type != SOCK_SEQPACKET) {
		pr_err("%s: unix socket type %u is not supported", what, ui.type);
		return -EOPNOTSUPP;
	}
	e->type = ui.type;
	e->state = ui.state;
	e->ino = ui.ino;
	e->has_shutdown = 1;
	e->shutdown = ui.shutdown;
	if (ui.name_len) {
		e->has_name = 1;
		e->name.len = ui.name_len;
		e->name.data = malloc(ui.name_len + 1);
		if (!e->name.data)
			return -ENOMEM;
		memcpy(e->name.data, ui.name, ui.name_len);
		e->name.data[ui.name_len] = 0;
		if (ui.name[0] && ui.name[0] != '/') {
			ret = find_bind_dir(ctx, fd, &ui, e);
			if (ret)
				return ret;
		}
	}
	if (ui.state == TCP_LISTEN) {
		e->has_backlog = 1;
		e->backlog = ui.wqueue;
		ret = dump_pending(e, &ui, what);
		free(ui.icons);
		if (ret)
			return ret;
	} else {
		free(ui.icons);
	}
	if (ui.type != SOCK_DGRAM && ui.state == TCP_ESTABLISHED && ui.has_peer && !ui.peer) {
		ret = dump_pending_client(e, &ui, what);
		if (ret)
			return ret;
	}
	if (ui.has_peer && ui.peer) {
		e->has_peer_ino = 1;
		e->peer_ino = ui.peer;
		if (!unix_diag(ui.peer, &pi) && pi.name_len) {
			e->has_peer_name = 1;
			e->peer_name.len = pi.name_len;
			e->peer_name.data = malloc(pi.name_len);
			if (!e->peer_name.data)
				return -ENOMEM;
			memcpy(e->peer_name.data, pi.name, pi.name_len);
		}
		/* the peer may be in flight in a queue not peeked yet: checked at the end */
		if (!sk_open_in_tree(ctx->tree, ui.peer)) {
			ret = note_sk(&outside, e, what);
			if (ret)
				return ret;
		}
	}
	if (!getsockopt(dup, SOL_SOCKET, SO_SNDBUF, &val, &len)) {
		e->has_sndbuf = 1;
		e->sndbuf = val;
	}
	len = sizeof(val);
	if (!getsockopt(dup, SOL_SOCKET, SO_RCVBUF, &val, &len)) {
		e->has_rcvbuf = 1;
		e->rcvbuf = val;
	}
	ret = sk_opts_dump(dup, AF_UNIX, (int)ui.type, false, what, &e->opts, &e->n_opts);
	if (ret)
		return ret;
	/* Only datagram sockets and connected ones have a queue to read. */
	if (ui.type != SOCK_DGRAM && ui.state != TCP_ESTABLISHED)
		return 0;
	return peek_queue(ctx, dup, ui.type == SOCK_STREAM, what, &e->rqueue, &e->n_rqueue);
}

/* ---- restore ---- */

struct usk {
	RegFile *f;
	UnixSkEntry *e;
	int fd;
	int spare;	  /* the other end of a pair whose peer had closed */
	struct usk *peer; /* mutual peer (both ends in the image) */
	char who[128];	  /* pid, fd: for messages about its options */
};

static struct usk *usks;
static size_t nr_usks;

static struct usk *usk_by_ino(uint64_t ino)
{
	for (size_t i = 0; i < nr_usks; i++)
		if (usks[i].e->ino == ino)
			return &usks[i];
	return NULL;
}

static socklen_t make_addr(struct sockaddr_un *sa, const ProtobufCBinaryData *name)
{
	size_t len = name->len;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (len > sizeof(sa->sun_path))
		len = sizeof(sa->sun_path);
	memcpy(sa->sun_path, name->data, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

static bool same_name(const UnixSkEntry *a, const UnixSkEntry *b)
{
	return a->has_name && b->has_name && a->name.len == b->name.len &&
	       !memcmp(a->name.data, b->name.data, a->name.len);
}

static int enter_bind_dir(const UnixSkEntry *e, int *cwd)
{
	*cwd = -1;
	if (!e->bind_dir)
		return 0;
	*cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*cwd < 0 || chdir(e->bind_dir)) {
		int err = errno;

		pr_err("cannot enter %s to bind the unix socket %s there: %m", e->bind_dir,
		       show_name(e->name.data, e->name.len));
		if (*cwd >= 0)
			close(*cwd);
		*cwd = -1;
		return -err;
	}
	return 0;
}

static void leave_bind_dir(int cwd)
{
	if (cwd < 0)
		return;
	if (fchdir(cwd))
		pr_warn("cannot return to amber's directory: %m");
	close(cwd);
}

/* Bind fd to e's name; a socket file left by the dumped socket is removed first. */
static int bind_name(int fd, const UnixSkEntry *e)
{
	struct sockaddr_un sa;
	socklen_t len = make_addr(&sa, &e->name);
	const char *shown = show_name(e->name.data, e->name.len);
	struct stat st;
	int cwd, ret;

	ret = enter_bind_dir(e, &cwd);
	if (ret)
		return ret;
	if (sa.sun_path[0] && !lstat(sa.sun_path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			pr_err("cannot bind the unix socket %s: the path exists and is not a "
			       "socket; "
			       "move it away",
			       shown);
			ret = -EEXIST;
			goto leave_dir;
		}
		if (unlink(sa.sun_path)) {
			ret = -errno;
			pr_err("cannot remove the stale socket file %s: %m", shown);
			goto leave_dir;
		}
	}
	if (bind(fd, (struct sockaddr *)&sa, len)) {
		ret = -errno;
		pr_err("cannot bind a unix socket to %s: %m%s", shown,
		       errno == EADDRINUSE ? " (another socket holds the name; stop it)" : "");
	}
leave_dir:
	leave_bind_dir(cwd);
	return ret;
}

/* Another socket of the image binds this name as its own (listener, dgram). */
static bool name_claimed(const struct usk *u)
{
	for (size_t i = 0; i < nr_usks; i++)
		if (&usks[i] != u && !usks[i].peer && same_name(usks[i].e, u->e))
			return true;
	return false;
}

/*
 * A unix socket made in network namespace net (netns.img's id, 0: amber's),
 * where the one it stands for was: an abstract name is bound and looked up
 * in the socket's own namespace.
 */
static int new_sock(uint32_t type, uint32_t net)
{
	int fd, ret = netns_enter(net);

	if (ret)
		return ret;
	fd = socket(AF_UNIX, (int)type | SOCK_CLOEXEC, 0);
	ret = fd < 0 ? -errno : fd;
	netns_leave(net);
	if (fd < 0)
		pr_err("cannot create a unix %s socket: %s", type_name(type), strerror(-ret));
	return ret;
}

/*
 * A connected stream/seqpacket pair with a name: the end carrying it
 * (acc) is accept()ed from a temporary listener bound to the name, so it
 * gets that name like a real accepted socket; the other end binds its own.
 */
static int named_pair(struct usk *acc, struct usk *cli)
{
	int lfd, ret;

	lfd = new_sock(acc->e->type, acc->f->net_ns);
	if (lfd < 0)
		return lfd;
	ret = bind_name(lfd, acc->e);
	if (ret)
		goto close_listener;
	if (listen(lfd, 1)) {
		ret = -errno;
		pr_err("cannot listen on %s: %m", show_name(acc->e->name.data, acc->e->name.len));
		goto close_listener;
	}
	cli->fd = new_sock(cli->e->type, cli->f->net_ns);
	if (cli->fd < 0) {
		ret = cli->fd;
		goto close_listener;
	}
	if (cli->e->has_name) {
		ret = bind_name(cli->fd, cli->e);
		if (ret)
			goto close_listener;
	}
	{
		struct sockaddr_un sa;
		socklen_t len = make_addr(&sa, &acc->e->name);
		int cwd;

		ret = enter_bind_dir(acc->e, &cwd);
		if (ret)
			goto close_listener;
		if (connect(cli->fd, (struct sockaddr *)&sa, len))
			ret = -errno;
		leave_bind_dir(cwd);
		if (ret) {
			pr_err("cannot connect the unix socket pair through %s: %s",
			       show_name(acc->e->name.data, acc->e->name.len), strerror(-ret));
			goto close_listener;
		}
	}
	acc->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (acc->fd < 0) {
		ret = -errno;
		pr_err("cannot accept the unix socket pair on %s: %m",
		       show_name(acc->e->name.data, acc->e->name.len));
		goto close_listener;
	}
	/* The name's owner (a listener of the image) binds it next. */
	if (acc->e->name.data[0] && name_claimed(acc)) {
		int cwd;

		ret = enter_bind_dir(acc->e, &cwd);
		if (!ret && unlink((char *)acc->e->name.data))
			pr_warn("cannot remove %s: %m", (char *)acc->e->name.data);
		leave_bind_dir(cwd);
	}
close_listener:
	close(lfd);
	return ret;
}

static int make_pair(struct usk *a, struct usk *b)
{
	int sv[2], ret;

	if (b && a->e->type != SOCK_DGRAM && (a->e->has_name || b->e->has_name)) {
		bool a_acc = a->e->has_name && (!b->e->has_name || name_claimed(a));

		return a_acc ? named_pair(a, b) : named_pair(b, a);
	}
	/* both ends in a's namespace, as socketpair() made them */
	ret = netns_enter(a->f->net_ns);
	if (ret)
		return ret;
	ret = socketpair(AF_UNIX, (int)a->e->type | SOCK_CLOEXEC, 0, sv) ? -errno : 0;
	netns_leave(a->f->net_ns);
	if (ret) {
		pr_err("cannot create a unix %s socketpair: %s", type_name(a->e->type),
		       strerror(-ret));
		return ret;
	}
	a->fd = sv[0];
	if (b) {
		b->fd = sv[1];
	} else {
		/* the peer had closed: the spare end takes the queue, then closes */
		a->spare = sv[1];
		return a->e->has_name && !name_claimed(a) ? bind_name(a->fd, a->e) : 0;
	}
	/* Named datagram pairs: bind the names onto the pair. */
	if (a->e->has_name) {
		ret = bind_name(a->fd, a->e);
		if (ret)
			return ret;
	}
	return b->e->has_name ? bind_name(b->fd, b->e) : 0;
}

static struct tree *rtree; /* the restore's, for the files in flight */

/*
 * One sendmsg with q's credentials: as root (CAP_SYS_ADMIN and CAP_SETUID
 * let it name any pid and ids; unix_check() bounded the ids by the owner's
 * rights), to a socket already connected (a name would be looked up with
 * root's rights).
 */
static ssize_t send_creds(int fd, struct msghdr *mh, bool named)
{
	ssize_t r;

	if (named && rtree->owner.switches) {
		errno = EPERM;
		return -1;
	}
	owner_leave(rtree);
	r = sendmsg(fd, mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (owner_enter(rtree) && r >= 0) {
		errno = EPERM;
		return -1;
	}
	return r;
}

/* q to fd's peer (to: to that address); its descriptors go with the first byte. */
static int send_all(int fd, const SkQueued *q, bool stream, const struct sockaddr_un *to,
		    socklen_t tolen)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 253) + CMSG_SPACE(sizeof(struct ucred))];
	size_t off = 0, nfds = q->n_fds;

	if (nfds > 253) {
		pr_err("a queued message carries %zu descriptors, more than SCM_MAX_FD; the image "
		       "is corrupt",
		       nfds);
		return -EBADMSG;
	}
	do {
		struct iovec iov = {q->data.data + off, q->data.len - off};
		struct msghdr mh = {.msg_name = (void *)to,
				    .msg_namelen = to ? tolen : 0,
				    .msg_iov = &iov,
				    .msg_iovlen = 1};
		struct cmsghdr *c;
		ssize_t r;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = (nfds ? CMSG_SPACE(sizeof(int) * nfds) : 0) +
				    (q->has_cred_pid ? CMSG_SPACE(sizeof(struct ucred)) : 0);
		if (!mh.msg_controllen)
			mh.msg_control = NULL;
		c = CMSG_FIRSTHDR(&mh);
		/* every chunk of a stream carries them: else the reader sees a new writer */
		if (q->has_cred_pid) {
			struct ucred cr = {
				.pid = (pid_t)q->cred_pid, .uid = q->cred_uid, .gid = q->cred_gid};

			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_CREDENTIALS;
			c->cmsg_len = CMSG_LEN(sizeof(cr));
			memcpy(CMSG_DATA(c), &cr, sizeof(cr));
			c = CMSG_NXTHDR(&mh, c);
		}
		if (nfds) {
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			for (size_t i = 0; i < nfds; i++) {
				if (q->fds[i] >= rtree->nr_rfiles) {
					pr_err("a queued message carries file id %u, which "
					       "files.img "
					       "does not have; the image is corrupt",
					       q->fds[i]);
					return -EBADMSG;
				}
				((int *)CMSG_DATA(c))[i] = rtree->desc_fd[q->fds[i]];
			}
		}
		if (q->has_cred_pid)
			r = send_creds(fd, &mh, to != NULL);
		else
			r = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && q->has_cred_pid) {
			pr_err("cannot queue a message with the credentials of pid %u (uid %u, gid "
			       "%u) again: %m",
			       q->cred_pid, q->cred_uid, q->cred_gid);
			return -errno;
		}
		if (r < 0)
			return -errno;
		nfds = 0;
		off += r;
	} while (stream && off < q->data.len);
	return 0;
}

/*
 * SO_*BUFFORCE needs CAP_NET_ADMIN, which the restore of another user's
 * image does not use (owner.h): then the plain option, which the kernel
 * caps at net.core.[rw]mem_max, and a final size it capped is refused.
 */
static int set_buf(int fd, int force, int plain, int val, bool final)
{
	int got;
	socklen_t len = sizeof(got);

	if (!setsockopt(fd, SOL_SOCKET, force, &val, sizeof(val)))
		return 0;
	if (errno != EPERM || setsockopt(fd, SOL_SOCKET, plain, &val, sizeof(val)))
		return -errno;
	if (final && (getsockopt(fd, SOL_SOCKET, plain, &got, &len) || got / 2 != val)) {
		errno = EPERM;
		pr_err("a unix socket's buffer of %d bytes is above net.core.%s_max, and only "
		       "CAP_NET_ADMIN could set it",
		       2 * val, plain == SO_SNDBUF ? "wmem" : "rmem");
		return -EPERM;
	}
	return 0;
}

/*
 * A datagram from a named sender, sent again from that name: the image's
 * socket bound to it, else (the sender is gone) a temporary socket bound
 * to it for this send.
 */
static int send_from(struct usk *u, const SkQueued *q)
{
	ProtobufCBinaryData from = q->addr;
	UnixSkEntry tmp_e = UNIX_SK_ENTRY__INIT;
	struct sockaddr_un to;
	socklen_t tolen = make_addr(&to, &u->e->name);
	struct usk *s = NULL;
	int fd, cwd, ret;

	for (size_t i = 0; i < nr_usks && !s; i++)
		if (usks[i].e->type == SOCK_DGRAM && usks[i].e->has_name &&
		    usks[i].e->name.len == from.len &&
		    !memcmp(usks[i].e->name.data, from.data, from.len))
			s = &usks[i];
	if (s) {
		fd = s->fd;
	} else {
		fd = new_sock(SOCK_DGRAM, u->f->net_ns);
		if (fd < 0)
			return fd;
		set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, TMP_SNDBUF, false);
		/* a relative name is bound where the receiver was (the best guess we have) */
		tmp_e.has_name = 1;
		tmp_e.name = from;
		tmp_e.bind_dir = u->e->bind_dir;
		ret = enter_bind_dir(&tmp_e, &cwd);
		if (!ret) {
			struct sockaddr_un sa;
			socklen_t len = make_addr(&sa, &from);

			/* a file there (another socket's) is left alone: bind fails */
			if (bind(fd, (struct sockaddr *)&sa, len))
				ret = -errno;
			leave_bind_dir(cwd);
		}
		if (ret) {
			pr_err("cannot send a datagram queued on unix socket:[%llu] from its "
			       "sender's "
			       "address %s again",
			       (unsigned long long)u->e->ino, show_name(from.data, from.len));
			close(fd);
			return ret;
		}
	}
	ret = enter_bind_dir(u->e, &cwd);
	if (!ret) {
		ret = send_all(fd, q, false, &to, tolen);
		leave_bind_dir(cwd);
	}
	if (!s) {
		close(fd);
		if (from.data[0] && !enter_bind_dir(&tmp_e, &cwd)) {
			struct sockaddr_un sa;

			make_addr(&sa, &from);
			sa.sun_path[sizeof(sa.sun_path) - 1] = 0;
			if (unlink(sa.sun_path))
				pr_warn("cannot remove the temporary socket file %s: %m",
					show_name(from.data, from.len));
			leave_bind_dir(cwd);
		}
	}
	if (ret)
		pr_err("cannot send a datagram from %s to unix socket %s again: %s",
		       show_name(from.data, from.len), show_name(u->e->name.data, u->e->name.len),
		       strerror(-ret));
	return ret;
}

/* Put u's queued data into its receive queue: sent by its peer, or to its name. */
static int refill(struct usk *u)
{
	int sender = u->peer ? u->peer->fd : u->spare, ret = 0;
	const char *shown = show_name(u->e->name.data, u->e->name.len);
	bool tmp = false;

	if (!u->e->n_rqueue)
		return 0;
	if (sender < 0 && u->e->type == SOCK_DGRAM && u->e->has_name) {
		struct sockaddr_un sa;
		socklen_t len = make_addr(&sa, &u->e->name);
		int big = TMP_SNDBUF, cwd;

		sender = new_sock(SOCK_DGRAM, u->f->net_ns);
		if (sender < 0)
			return sender;
		tmp = true;
		set_buf(sender, SO_SNDBUFFORCE, SO_SNDBUF, big, false);
		ret = enter_bind_dir(u->e, &cwd);
		if (!ret && connect(sender, (struct sockaddr *)&sa, len))
			ret = -errno;
		leave_bind_dir(cwd);
		if (ret) {
			pr_err("cannot connect to the restored unix socket %s to refill its queue: "
			       "%s",
			       shown, strerror(-ret));
			goto close_tmp;
		}
	}
	if (sender < 0) {
		pr_err("unix %s socket:[%llu] (%s) had %zu queued message(s) but nothing to send "
		       "them from (no peer in the image, no name)",
		       type_name(u->e->type), (unsigned long long)u->e->ino, shown, u->e->n_rqueue);
		return -EOPNOTSUPP;
	}
	for (size_t i = 0; i < u->e->n_rqueue && !ret; i++) {
		const SkQueued *q = u->e->rqueue[i];

		if (u->e->type == SOCK_DGRAM && q->has_addr && u->e->has_name)
			ret = send_from(u, q);
		else
			ret = send_all(sender, q, u->e->type == SOCK_STREAM, NULL, 0);
	}
	if (ret)
		pr_err("cannot refill the receive queue of unix socket:[%llu] (%s): %s%s",
		       (unsigned long long)u->e->ino, shown, strerror(-ret),
		       ret == -EAGAIN ? " (queue full: net.unix.max_dgram_qlen lower than at "
					"the dump?)"
				      : "");
close_tmp:
	if (tmp)
		close(sender);
	return ret;
}

/* Before the refill a generous send buffer (the refill sends from these); then the dumped sizes. */
static int set_bufs(struct usk *u, bool final)
{
	int snd = TMP_SNDBUF, rcv;

	if (u->e->has_sndbuf && (final || (int)u->e->sndbuf / 2 > snd))
		snd = (int)u->e->sndbuf / 2;
	if ((u->e->has_sndbuf || !final) && set_buf(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, snd, final))
		goto fail;
	rcv = (int)u->e->rcvbuf / 2;
	if (final && u->e->has_rcvbuf && set_buf(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, rcv, final))
		goto fail;
	return 0;
fail:
	pr_err("cannot set the buffer sizes of unix socket:[%llu]: %m",
	       (unsigned long long)u->e->ino);
	return -errno;
}

static int connect_dgram(struct usk *u)
{
	struct sockaddr_un sa;
	struct usk *p;
	socklen_t len;
	int cwd, ret;

	if (!u->e->has_peer_name) {
		pr_err("unix dgram socket:[%llu] was connected to socket:[%llu], which has no name "
		       "to connect to again",
		       (unsigned long long)u->e->ino, (unsigned long long)u->e->peer_ino);
		return -EOPNOTSUPP;
	}
	len = make_addr(&sa, &u->e->peer_name);
	p = usk_by_ino(u->e->peer_ino);
	/* a relative name is the receiver's (absolute outside the tree, see unix_dump) */
	cwd = -1;
	ret = p ? enter_bind_dir(p->e, &cwd) : 0;
	if (ret)
		return ret;
	if (connect(u->fd, (struct sockaddr *)&sa, len))
		ret = -errno;
	leave_bind_dir(cwd);
	if (ret) {
		errno = -ret;
		pr_err("cannot connect unix dgram socket:[%llu] to %s again: %m%s",
		       (unsigned long long)u->e->ino,
		       show_name(u->e->peer_name.data, u->e->peer_name.len),
		       p ? "" : " (the socket outside the tree is gone?)");
		return ret;
	}
	return 0;
}

static int shut(struct usk *u)
{
	static const int how[] = {-1, SHUT_RD, SHUT_WR, SHUT_RDWR};
	uint32_t bits = u->e->shutdown & (SK_RCV_SHUTDOWN | SK_SEND_SHUTDOWN);

	if (!bits || u->spare >= 0 || u->e->type == SOCK_DGRAM)
		return 0;
	if (shutdown(u->fd, how[bits]) && errno != ENOTCONN) {
		pr_err("cannot shut down unix socket:[%llu]: %m", (unsigned long long)u->e->ino);
		return -errno;
	}
	return 0;
}

static int fill_queues(struct tree *t);

static int collect(struct tree *t, RegFile **files, size_t n)
{
	int ret;

	usks = calloc(n, sizeof(*usks));
	if (!usks)
		return -ENOMEM;
	for (nr_usks = 0; nr_usks < n; nr_usks++) {
		RegFile *f = files[nr_usks];

		if (!f->unix_sk) {
			pr_err("%s: files.img has no unix socket state for it (corrupt image?)",
			       f->path);
			return -EBADMSG;
		}
		usks[nr_usks] = (struct usk){.f = f, .e = f->unix_sk, .fd = -1, .spare = -1};
		snprintf(usks[nr_usks].who, sizeof(usks[nr_usks].who), "%s", sk_who(t, f, "unix"));
		ret = sk_opts_check(t, f->unix_sk->opts, f->unix_sk->n_opts, AF_UNIX,
				    (int)f->unix_sk->type, false, usks[nr_usks].who);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < nr_usks; i++) {
		struct usk *u = &usks[i], *p;

		if (!u->e->has_peer_ino)
			continue;
		p = usk_by_ino(u->e->peer_ino);
		if (p && p->e->has_peer_ino && p->e->peer_ino == u->e->ino && p != u)
			u->peer = p;
	}
	return 0;
}

static bool connected_orphan(const struct usk *u)
{
	return u->e->type != SOCK_DGRAM && !u->e->has_peer_ino && !u->e->has_pending_on &&
	       u->e->state == TCP_ESTABLISHED;
}

/*
 * A listener's connections not accept()ed yet: each client connects to it
 * again, in the dumped order, so accept() returns them in that order.
 * Non-blocking: a queue fuller than the listener's backlog (a lower
 * net.core.somaxconn here) fails instead of waiting.
 */
static int connect_pending(struct usk *l)
{
	struct sockaddr_un sa;
	socklen_t len = make_addr(&sa, &l->e->name);
	int cwd, ret = enter_bind_dir(l->e, &cwd);

	for (size_t i = 0; i < l->e->n_pending && !ret; i++) {
		struct usk *c = usk_by_ino(l->e->pending[i]);
		int fl = fcntl(c->fd, F_GETFL);

		if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) ||
		    connect(c->fd, (struct sockaddr *)&sa, len) || fcntl(c->fd, F_SETFL, fl)) {
			ret = -errno;
			pr_err("cannot connect unix socket:[%llu] to the listener %s again (its "
			       "connection %zu of %zu not accept()ed yet): %m%s",
			       (unsigned long long)c->e->ino,
			       show_name(l->e->name.data, l->e->name.len), i + 1, l->e->n_pending,
			       errno == EAGAIN ? " (net.core.somaxconn is lower than the "
						 "listener's backlog?)"
					       : "");
		}
	}
	leave_bind_dir(cwd);
	return ret;
}

/* Every unix socket of the image at once: pairs need both ends. */
static int unix_prepare(struct tree *t, RegFile **files, size_t n, int *fds)
{
	int ret = collect(t, files, n);

	/* 1: pairs, and connected sockets whose peer had closed (a pair, one end shut). */
	for (size_t i = 0; i < nr_usks && !ret; i++) {
		struct usk *u = &usks[i];

		if (u->fd >= 0)
			continue;
		if (u->peer)
			ret = make_pair(u, u->peer);
		else if (connected_orphan(u))
			ret = make_pair(u, NULL);
	}
	/* 2: the others; names, listeners */
	for (size_t i = 0; i < nr_usks && !ret; i++) {
		struct usk *u = &usks[i];

		if (u->fd >= 0)
			continue;
		u->fd = new_sock(u->e->type, u->f->net_ns);
		if (u->fd < 0) {
			ret = u->fd;
			break;
		}
		if (u->e->has_name)
			ret = bind_name(u->fd, u->e);
		if (!ret && u->e->state == TCP_LISTEN && listen(u->fd, (int)u->e->backlog)) {
			ret = -errno;
			pr_err("cannot listen on unix socket %s: %m",
			       show_name(u->e->name.data, u->e->name.len));
		}
	}
	for (size_t i = 0; i < nr_usks && !ret; i++)
		fds[i] = usks[i].fd;
	rtree = t;
	return ret;
}

/*
 * Once every description is open (queued messages carry some of them,
 * SCM_RIGHTS), on the first call: the queues, then what limits who may
 * send (datagram connects, shutdowns), with the owner's rights.
 */
/*
 * A queued message names its sender's pid, which must exist when it is sent
 * again: a pid no process has (the sender has exited, or is a process of the
 * tree not made yet) is held by a child of amber made with that pid, until
 * the queues are full.  The reader sees the same number either way.
 */
static pid_t *holders;
static size_t nr_holders;

static void release_holders(void)
{
	for (size_t i = 0; i < nr_holders; i++) {
		kill(holders[i], SIGKILL);
		waitpid(holders[i], NULL, 0);
	}
	free(holders);
	holders = NULL;
	nr_holders = 0;
}

static int hold_pid(pid_t pid)
{
	pid_t *nh;
	long r;

	if (!kill(pid, 0) || errno != ESRCH)
		return 0;
	nh = realloc(holders, (nr_holders + 1) * sizeof(*nh));
	if (!nh)
		return -ENOMEM;
	holders = nh;
	r = sys_clone3_set_tid(pid, SIGCHLD, 0);
	if (r == 0) {
		for (;;)
			pause();
	}
	if (r < 0) {
		pr_err("cannot make a process of pid %d to queue its messages' credentials "
		       "(SCM_CREDENTIALS) again: %s",
		       pid, strerror((int)-r));
		return (int)r;
	}
	holders[nr_holders++] = (pid_t)r;
	return 0;
}

static int hold_sender_pids(void)
{
	int ret = 0;

	for (size_t i = 0; i < nr_usks && !ret; i++)
		for (size_t j = 0; j < usks[i].e->n_rqueue && !ret; j++)
			if (usks[i].e->rqueue[j]->has_cred_pid)
				ret = hold_pid((pid_t)usks[i].e->rqueue[j]->cred_pid);
	return ret;
}

static int unix_post_open(struct tree *t, RegFile *f, int fd)
{
	static bool done;
	int ret;

	if (done)
		return 0;
	done = true;
	/* files.c moved the fds prepare gave it */
	for (size_t i = 0; i < nr_usks; i++)
		usks[i].fd = t->desc_fd[usks[i].f->id];
	ret = hold_sender_pids();
	if (!ret)
		ret = owner_enter(t);
	if (ret) {
		release_holders();
		return ret;
	}
	for (size_t i = 0; i < nr_usks && !ret; i++)
		if (usks[i].e->n_pending)
			ret = connect_pending(&usks[i]);
	if (!ret)
		ret = fill_queues(t);
	owner_leave(t);
	release_holders();
	return ret;
}

static int fill_queues(struct tree *t)
{
	int ret = 0;

	/* 3: queued data, before datagram sockets connect (which limits who may send) */
	for (size_t i = 0; i < nr_usks && !ret; i++)
		ret = set_bufs(&usks[i], false);
	for (size_t i = 0; i < nr_usks && !ret; i++)
		ret = refill(&usks[i]);
	/* 4: datagram connects, buffers, shutdowns, flags */
	for (size_t i = 0; i < nr_usks && !ret; i++) {
		struct usk *u = &usks[i];

		if (u->e->type == SOCK_DGRAM && u->e->has_peer_ino && !u->peer)
			ret = connect_dgram(u);
		if (!ret)
			ret = set_bufs(u, true);
		if (!ret)
			ret = shut(u);
		/* after the refill: a filter would judge the refilled messages */
		if (!ret)
			ret = sk_opts_restore(t, u->fd, u->e->opts, u->e->n_opts, false, u->who);
		if (!ret)
			ret = sk_opts_restore(t, u->fd, u->e->opts, u->e->n_opts, true, u->who);
		if (!ret)
			ret = sk_set_flags(u->fd, u->f);
		if (u->spare >= 0) {
			close(u->spare);
			u->spare = -1;
		}
	}
	return ret;
}

static const UnixSkEntry *rimage_sk(struct tree *t, uint64_t ino)
{
	for (size_t i = 0; i < t->nr_rfiles; i++)
		if (t->rfiles[i]->unix_sk && t->rfiles[i]->unix_sk->ino == ino)
			return t->rfiles[i]->unix_sk;
	return NULL;
}

/*
 * Before anything is made: a listener's connections not accept()ed yet name
 * clients of the image that name it back, once each; a restore would
 * otherwise connect sockets the dump never connected.
 */
static int unix_check(struct tree *t, const RegFile *f)
{
	const UnixSkEntry *e = f->unix_sk, *o;

	if (!e)
		return 0;
	if (e->n_pending &&
	    (e->state != TCP_LISTEN || e->type == SOCK_DGRAM || !e->has_name || !e->name.len ||
	     !e->has_backlog || e->n_pending > (size_t)e->backlog + 1))
		goto corrupt;
	for (size_t i = 0; i < e->n_pending; i++) {
		o = rimage_sk(t, e->pending[i]);
		if (!o || !o->has_pending_on || o->pending_on != e->ino || o->type != e->type)
			goto corrupt;
		for (size_t j = 0; j < i; j++)
			if (e->pending[j] == e->pending[i])
				goto corrupt;
	}
	for (size_t i = 0; i < e->n_rqueue; i++) {
		const SkQueued *q = e->rqueue[i];

		if (!q->has_cred_pid && (q->has_cred_uid || q->has_cred_gid))
			goto corrupt_creds;
		if (!q->has_cred_pid)
			continue;
		if (!q->has_cred_uid || !q->has_cred_gid || !q->cred_pid ||
		    q->cred_pid > (uint32_t)INT_MAX)
			goto corrupt_creds;
		if (t->owner.unbounded)
			continue;
		if (q->cred_uid != t->owner.uid || !owner_in_group(t, q->cred_gid)) {
			pr_err("%s: unix socket:[%llu]: a queued message carries the credentials "
			       "of uid %u, gid %u (SCM_CREDENTIALS); uid %u's image may not "
			       "claim them",
			       f->path, (unsigned long long)e->ino, q->cred_uid, q->cred_gid,
			       t->owner.uid);
			return -EPERM;
		}
		if (q->has_addr && e->has_name && t->owner.switches) {
			pr_err("%s: unix socket:[%llu]: a datagram from a named sender carries "
			       "credentials (SCM_CREDENTIALS), which only root's images restore",
			       f->path, (unsigned long long)e->ino);
			return -EPERM;
		}
	}
	if (e->has_pending_on) {
		bool listed = false;

		o = rimage_sk(t, e->pending_on);
		if (!o || e->state != TCP_ESTABLISHED || e->has_peer_ino || e->n_rqueue)
			goto corrupt;
		for (size_t i = 0; i < o->n_pending; i++)
			listed |= o->pending[i] == e->ino;
		if (!listed)
			goto corrupt;
	}
	return 0;
corrupt:
	pr_err("%s: unix socket:[%llu]: its connections not accept()ed yet (pending, "
	       "pending_on) are not what a dump writes; the image is corrupt",
	       f->path, (unsigned long long)e->ino);
	return -EBADMSG;
corrupt_creds:
	pr_err("%s: unix socket:[%llu]: a queued message's credentials are not what a dump "
	       "writes (pid 0 or out of range, or no uid or gid); the image is corrupt",
	       f->path, (unsigned long long)e->ino);
	return -EBADMSG;
}

const struct fd_type unix_sk_type = {
	.name = "unix socket",
	.kind = FILE_KIND__FILE_UNIX_SK,
	.match = unix_match,
	.check = unix_check,
	.dump = unix_dump,
	.dump_done = unix_dump_done,
	.prepare = unix_prepare,
	.post_open = unix_post_open,
};
