// SPDX-License-Identifier: MIT
/*
 * POSIX message queues held as fds (mq_open): regular files of the IPC
 * namespace's mqueue filesystem, whose /proc link reads "/NAME" (with
 * " (deleted)" once mq_unlink'ed).  The queue (name, owner, mode, maxmsg,
 * msgsize, the queued messages with their priorities) goes into ipc.img once,
 * however many descriptions and processes have it; each description is a
 * reg_file of kind FILE_MQUEUE with its own flags (O_NONBLOCK is mq_flags).
 *
 * The kernel has no way to read a message and leave it queued: with every
 * process of the tree frozen, amber receives them all on a description of
 * its own, in the queue's order (priority, then age), and sends them back in
 * that order with their priorities, which rebuilds the same queue; if one
 * cannot be put back the dump fails naming the queue and what was lost.  A
 * queue with an mq_notify registration is refused (the registration names a
 * process and a sigevent nobody can read back).
 *
 * A queue of an IPC namespace of the tree that is not amber's is tagged with
 * the namespace (ipc_entry ns, reg_file mqueue_ns), known by the mqueue
 * filesystem of each namespace (ns.c has amber's thread make a queue in each
 * at dump, mqueue_probe_ns).  Its state is read through the fds as any.
 *
 * Restore: the first description makes the queue (O_EXCL: a queue of that
 * name must not exist), fills it and gives it its owner and mode; each
 * description is then a reopen of it with its own flags, with the owner's
 * rights.  A queue that was unlinked is unlinked again once every
 * description exists.  The dump unlinks the tree's named queues once it
 * killed the tree, as it removes its System V objects (sysv.c).  A queue of
 * a namespace is made, opened and unlinked by amber's thread inside the new
 * namespace (ns_enter): mq_open() and mq_unlink() are system calls on the
 * calling thread's IPC namespace's own mqueue filesystem, whatever is or is
 * not mounted on /dev/mqueue; its name is free there (the namespace is new),
 * and a failed restore takes the namespace, and the queue, with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "files.h"
#include "ipc.h"
#include "log.h"
#include "ns/ns.h"
#include "sys.h"

#define MQ_PRIO_LIMIT 32768 /* MQ_PRIO_MAX */

/* The mqueue filesystem's device, from a queue of amber's own (once). */
static dev_t mq_dev;
static int mq_probed; /* 0: not yet, 1: found, -1: no mqueue */

static void probe(void)
{
	char name[64];
	struct stat st;
	int fd;

	snprintf(name, sizeof(name), "/.amber-probe-%d", (int)getpid());
	fd = mq_open(name, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600, NULL);
	mq_probed = -1;
	if (fd < 0)
		return;
	mq_unlink(name);
	if (!fstat(fd, &st)) {
		mq_dev = st.st_dev;
		mq_probed = 1;
	}
	close(fd);
}

/* The mqueue filesystems of the tree's other IPC namespaces (ns.c, in each), and their ids. */
static dev_t ns_mq_dev[64];
static uint32_t ns_mq_id[64];
static size_t nr_ns_mq_dev;

int mqueue_probe_ns(uint32_t ns)
{
	char name[64];
	struct stat st;
	int fd;

	if (nr_ns_mq_dev == sizeof(ns_mq_dev) / sizeof(ns_mq_dev[0]))
		return 0;
	snprintf(name, sizeof(name), "/.amber-probe-%d", (int)getpid());
	fd = mq_open(name, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600, NULL);
	if (fd < 0)
		return 0; /* no queue can be open there either */
	mq_unlink(name);
	if (!fstat(fd, &st)) {
		ns_mq_id[nr_ns_mq_dev] = ns;
		ns_mq_dev[nr_ns_mq_dev++] = st.st_dev;
	}
	close(fd);
	return 0;
}

/* The IPC namespace (ns.img id) of a queue's filesystem; 0 if not a namespace's of the tree. */
static uint32_t other_ns_queue(dev_t dev)
{
	for (size_t i = 0; i < nr_ns_mq_dev; i++)
		if (ns_mq_dev[i] == dev)
			return ns_mq_id[i];
	return 0;
}

static bool mqueue_match(const char *link, const struct stat *st)
{
	/* regular files of a filesystem without a block device: worth a look */
	if (!S_ISREG(st->st_mode) || major(st->st_dev) != 0)
		return false;
	if (!mq_probed)
		probe();
	return (mq_probed > 0 && st->st_dev == mq_dev) || other_ns_queue(st->st_dev) != 0;
}

/* "QSIZE:... NOTIFY:... SIGNO:... NOTIFY_PID:..." as reading the queue gives it. */
static int notify_pid(struct dump_ctx *ctx, int fd, const char *procpath, int *pid)
{
	char buf[256], *p;
	int rd = sys_open(procpath, O_RDONLY | O_CLOEXEC, 0);
	ssize_t n;

	if (rd < 0) {
		pr_err("pid %d: fd %d: cannot open its message queue to read its state: %s",
		       ctx->pid, fd, strerror(-rd));
		return rd;
	}
	n = pread(rd, buf, sizeof(buf) - 1, 0);
	close(rd);
	if (n < 0) {
		pr_err("pid %d: fd %d: cannot read its message queue's state: %m", ctx->pid, fd);
		return -errno;
	}
	buf[n] = 0;
	p = strstr(buf, "NOTIFY_PID:");
	if (!p) {
		pr_err("pid %d: fd %d: its message queue's state has no NOTIFY_PID (%s)", ctx->pid,
		       fd, buf);
		return -EOPNOTSUPP;
	}
	*pid = atoi(p + strlen("NOTIFY_PID:"));
	return 0;
}

static void free_msgs(IpcMqMsg **m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(m[i]->data.data);
		free(m[i]);
	}
	free(m);
}

/*
 * Every message out, in order, then back in: nothing of the tree runs
 * meanwhile, and what was received is sent back whatever happened.
 */
static int drain_and_refill(struct dump_ctx *ctx, int fd, int q, const struct mq_attr *a,
			    IpcMqueue *mq)
{
	size_t n = 0, cap = (size_t)a->mq_curmsgs;
	IpcMqMsg **m = calloc(cap + 1, sizeof(*m));
	int ret = 0;

	if (!m)
		return -ENOMEM;
	while (n < cap) {
		IpcMqMsg *msg = malloc(sizeof(*msg));
		unsigned prio;
		ssize_t len;

		if (!msg) {
			ret = -ENOMEM;
			break;
		}
		ipc_mq_msg__init(msg);
		msg->data.data = malloc((size_t)a->mq_msgsize + 1);
		if (!msg->data.data) {
			free(msg);
			ret = -ENOMEM;
			break;
		}
		len = mq_receive(q, (char *)msg->data.data, (size_t)a->mq_msgsize, &prio);
		if (len < 0) {
			if (errno != EAGAIN) {
				ret = -errno;
				pr_err("pid %d: fd %d: cannot read message %zu of %s: %m", ctx->pid,
				       fd, n + 1, mq->name);
			}
			free(msg->data.data);
			free(msg);
			break;
		}
		msg->prio = prio;
		msg->data.len = (size_t)len;
		m[n++] = msg;
	}
	for (size_t i = 0; i < n; i++) {
		if (!mq_send(q, (char *)m[i]->data.data, m[i]->data.len, m[i]->prio))
			continue;
		pr_err("pid %d: fd %d: message queue %s: cannot put message %zu of %zu back "
		       "(%m); messages %zu to %zu (priority %u first) are LOST",
		       ctx->pid, fd, mq->name, i + 1, n, i + 1, n, m[i]->prio);
		ret = -EIO;
		break;
	}
	if (!ret && n != cap) {
		pr_err("pid %d: fd %d: message queue %s held %zu messages, amber read %zu: "
		       "someone outside the tree uses it",
		       ctx->pid, fd, mq->name, cap, n);
		ret = -EBUSY;
	}
	if (ret) {
		free_msgs(m, n);
		return ret;
	}
	mq->msgs = m;
	mq->n_msgs = n;
	return 0;
}

static int mqueue_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	char procpath[64];
	struct mq_attr a;
	struct stat st;
	IpcMqueue *mq;
	uint32_t ns = other_ns_queue(f->dev);
	IpcEntry *e;
	int q, npid = 0, ret;

	f->has_mqueue_ns = ns != 0;
	f->mqueue_ns = ns;
	if (ipc_find_mqueue(f->ino, ns))
		return 0; /* another description of it saved the queue */
	snprintf(procpath, sizeof(procpath), "/proc/%d/fd/%d", ctx->pid, fd);
	if (fstat(dup, &st) || mq_getattr(dup, &a)) {
		pr_err("pid %d: fd %d: cannot read the attributes of message queue %s: %m",
		       ctx->pid, fd, f->path);
		return -errno;
	}
	ret = notify_pid(ctx, fd, procpath, &npid);
	if (ret)
		return ret;
	if (npid) {
		pr_err("pid %d: fd %d: message queue %s has a notification (mq_notify) "
		       "registered by pid %d, which amber cannot restore; refusing",
		       ctx->pid, fd, f->path, npid);
		return -EOPNOTSUPP;
	}
	if (a.mq_curmsgs > MAX_IPC_ITEMS || a.mq_msgsize <= 0 || a.mq_msgsize > INT32_MAX) {
		pr_err("pid %d: fd %d: message queue %s: %ld messages of up to %ld bytes, more "
		       "than amber dumps",
		       ctx->pid, fd, f->path, a.mq_curmsgs, a.mq_msgsize);
		return -EOPNOTSUPP;
	}
	e = malloc(sizeof(*e));
	mq = malloc(sizeof(*mq));
	if (!e || !mq) {
		free(e);
		free(mq);
		return -ENOMEM;
	}
	ipc_entry__init(e);
	ipc_mqueue__init(mq);
	e->mqueue = mq;
	e->has_ns = ns != 0;
	e->ns = ns;
	mq->ino = f->ino;
	mq->name = strdup(f->path);
	mq->unlinked = st.st_nlink == 0;
	mq->uid = st.st_uid;
	mq->gid = st.st_gid;
	mq->mode = st.st_mode & 0777;
	mq->maxmsg = a.mq_maxmsg;
	mq->msgsize = a.mq_msgsize;
	if (!mq->name) {
		ret = -ENOMEM;
		goto free_entry;
	}
	q = sys_open(procpath, O_RDWR | O_NONBLOCK | O_CLOEXEC, 0);
	if (q < 0) {
		ret = q;
		pr_err("pid %d: fd %d: cannot open message queue %s to read its messages: %s",
		       ctx->pid, fd, f->path, strerror(-q));
		goto free_entry;
	}
	ret = a.mq_curmsgs ? drain_and_refill(ctx, fd, q, &a, mq) : 0;
	close(q);
	if (ret)
		goto free_entry;
	pr_debug("pid %d: fd %d: message queue %s%s (IPC namespace %u): %zu messages, maxmsg %ld, "
		 "msgsize %ld",
		 ctx->pid, fd, mq->name, mq->unlinked ? " (unlinked)" : "", ns, mq->n_msgs,
		 a.mq_maxmsg, a.mq_msgsize);
	return ipc_add(e);
free_entry:
	ipc_entry__free_unpacked(e, NULL);
	return ret;
}

/* ---- restore ---- */

static struct made_q {
	const IpcMqueue *q;
	uint32_t ns;   /* its IPC namespace (0: amber's) */
	int fd;	       /* amber's, O_RDWR: what the descriptions are reopened from */
	bool unlinked; /* its name is gone (again) */
} * queues;
static size_t nr_queues;

static bool name_ok(const char *name)
{
	size_t len = strlen(name);

	return name[0] == '/' && len > 1 && len <= NAME_MAX + 1 && !strchr(name + 1, '/');
}

int mqueue_check(struct tree *t, const IpcMqueue *q, uint32_t ns)
{
	int fd;

	if (!name_ok(q->name) || q->maxmsg < 1 || q->msgsize < 1 || q->msgsize > INT32_MAX ||
	    q->mode & ~0777u || q->n_msgs > (uint64_t)q->maxmsg) {
		pr_err("ipc.img: bad message queue %.64s; the image is corrupt", q->name);
		return -EBADMSG;
	}
	for (size_t i = 0; i < q->n_msgs; i++)
		if (q->msgs[i]->prio >= MQ_PRIO_LIMIT ||
		    q->msgs[i]->data.len > (uint64_t)q->msgsize) {
			pr_err("ipc.img: bad message in queue %s; the image is corrupt", q->name);
			return -EBADMSG;
		}
	if (!t->owner.unbounded && (q->uid != t->owner.uid || !owner_in_group(t, q->gid))) {
		pr_err("ipc.img: message queue %s belongs to uid %u/gid %u; uid %u's image may "
		       "hold only its own queues, in its groups; refusing",
		       q->name, q->uid, q->gid, t->owner.uid);
		return -EPERM;
	}
	if (ns)
		return 0; /* made in a new namespace, where no queue exists yet */
	fd = mq_open(q->name, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || errno == EACCES) {
		if (fd >= 0)
			close(fd);
		pr_err("a message queue %s exists already; amber restores the image's queue "
		       "under its name: remove it (rm /dev/mqueue%s, or mq_unlink) and restore "
		       "again",
		       q->name, q->name);
		return -EEXIST;
	}
	return 0;
}

static const IpcMqueue *find_queue(struct tree *t, const RegFile *f)
{
	IpcEntry **e;
	size_t n;

	if (ipc_load(t, &e, &n) || !f->has_ino)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (e[i]->mqueue && e[i]->mqueue->ino == f->ino && e[i]->ns == f->mqueue_ns)
			return e[i]->mqueue;
	return NULL;
}

/*
 * Made, filled, given its owner and mode (with the owner's rights: files.c's
 * open), by amber's thread in the queue's namespace.
 */
static int make_queue(const IpcMqueue *q, uint32_t ns)
{
	struct mq_attr a = {.mq_maxmsg = q->maxmsg, .mq_msgsize = q->msgsize};
	struct made_q *n = realloc(queues, (nr_queues + 1) * sizeof(*n));
	int fd;

	if (!n)
		return -ENOMEM;
	queues = n;
	fd = mq_open(q->name, O_RDWR | O_NONBLOCK | O_CREAT | O_EXCL | O_CLOEXEC, 0600, &a);
	if (fd < 0) {
		fd = -errno;
		pr_err("cannot create message queue %s (maxmsg %lld, msgsize %lld): %s%s", q->name,
		       (long long)q->maxmsg, (long long)q->msgsize, strerror(-fd),
		       fd == -EINVAL || fd == -EPERM
			       ? " (above fs.mqueue.msg_max/msgsize_max, which only "
				 "CAP_SYS_RESOURCE exceeds?)"
		       : fd == -EMFILE ? " (RLIMIT_MSGQUEUE of its owner?)"
				       : "");
		return fd;
	}
	queues[nr_queues++] = (struct made_q){q, ns, fd, false};
	for (size_t i = 0; i < q->n_msgs; i++)
		if (mq_send(fd, (char *)q->msgs[i]->data.data, q->msgs[i]->data.len,
			    q->msgs[i]->prio)) {
			pr_err("message queue %s: cannot queue message %zu of %zu: %m", q->name,
			       i + 1, q->n_msgs);
			return -errno;
		}
	if (fchown(fd, q->uid, q->gid) || fchmod(fd, q->mode)) {
		pr_err("message queue %s: cannot give it owner uid %u/gid %u and mode %03o: %m",
		       q->name, q->uid, q->gid, q->mode);
		return -errno;
	}
	return fd;
}

static int open_in_ns(const IpcMqueue *q, RegFile *f)
{
	int src = -1, fd;

	for (size_t i = 0; i < nr_queues && src < 0; i++)
		if (queues[i].q == q)
			src = queues[i].fd;
	if (src < 0)
		src = make_queue(q, f->mqueue_ns);
	if (src < 0)
		return src;
	/*
	 * its own description, with its access mode and O_NONBLOCK (mq_flags);
	 * by name (an unlinked queue is unlinked again only later): open() of
	 * /proc/self/fd would add O_LARGEFILE
	 */
	fd = mq_open(q->name, (int)(f->flags & (O_ACCMODE | O_NONBLOCK)) | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		pr_err("cannot open message queue %s (%s): %s", q->name,
		       (f->flags & O_ACCMODE) == O_RDONLY   ? "O_RDONLY"
		       : (f->flags & O_ACCMODE) == O_WRONLY ? "O_WRONLY"
							    : "O_RDWR",
		       strerror(-fd));
	}
	return fd;
}

static int mqueue_open(struct tree *t, RegFile *f)
{
	const IpcMqueue *q = find_queue(t, f);
	int fd;

	if (!q) {
		pr_err("files.img: message queue %s (entry %u, IPC namespace %u) is not in "
		       "ipc.img; the image is corrupt",
		       f->path, f->id, f->mqueue_ns);
		return -EBADMSG;
	}
	fd = ns_enter(NS_KIND__NS_IPC, f->mqueue_ns);
	if (fd)
		return fd;
	fd = open_in_ns(q, f);
	ns_leave(NS_KIND__NS_IPC, f->mqueue_ns);
	return fd;
}

int mqueue_restore_finish(struct tree *t)
{
	int ret = 0;

	for (size_t i = 0; i < nr_queues; i++) {
		if (queues[i].q->unlinked && !queues[i].unlinked) {
			ret = ns_enter(NS_KIND__NS_IPC, queues[i].ns);
			if (ret)
				return ret;
			ret = owner_enter(t);
			if (ret) {
				ns_leave(NS_KIND__NS_IPC, queues[i].ns);
				return ret;
			}
			if (mq_unlink(queues[i].q->name)) {
				ret = -errno;
				pr_err("cannot unlink message queue %s (IPC namespace %u) again: "
				       "%m",
				       queues[i].q->name, queues[i].ns);
			}
			owner_leave(t);
			ns_leave(NS_KIND__NS_IPC, queues[i].ns);
			if (ret)
				return ret;
			queues[i].unlinked = true;
		}
		/* the processes get their descriptions from files.c, not this one */
		if (queues[i].fd >= 0)
			close(queues[i].fd);
		queues[i].fd = -1;
	}
	return 0;
}

void mqueue_restore_undo(void)
{
	for (size_t i = 0; i < nr_queues; i++) {
		/* (a namespace's go with it) */
		if (!queues[i].unlinked && !queues[i].ns && mq_unlink(queues[i].q->name) &&
		    errno != ENOENT)
			pr_warn("cannot remove message queue %s made by the failed restore: %m",
				queues[i].q->name);
		if (queues[i].fd >= 0)
			close(queues[i].fd);
	}
	nr_queues = 0;
}

const struct fd_type mqueue_type = {
	.name = "mqueue",
	.kind = FILE_KIND__FILE_MQUEUE,
	.match = mqueue_match,
	.dump = mqueue_dump,
	.open = mqueue_open,
};
