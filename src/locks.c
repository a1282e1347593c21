// SPDX-License-Identifier: MIT
/*
 * File locks (flock, POSIX, OFD, leases) and the owner of O_ASYNC signals
 * (F_SETOWN_EX, F_SETSIG).
 *
 * Dump: /proc/PID/fdinfo/N lists, as "lock:" lines, the locks taken through
 * that open file description (flock, OFD, leases: the description's own) and
 * the POSIX locks the process took through it.  Only fds on an inode that
 * /proc/locks names are read again.  Without --file-locks a lock is refused.
 * The owner of signals is asked by injected fcntl for fds with O_ASYNC, for
 * leases (the lease breaker signals the owner) and TCP sockets (SIGURG).  A
 * flock or lease the fdinfo of no fd showed (a description kept by a mapping
 * only) is refused, found in /proc/locks by its taker's pid.
 *
 * Restore: OFD locks belong to the description, which amber opens: amber
 * takes them on its own fd before any process exists.  POSIX locks belong
 * to the process (its fd table) and die with any close of the file by it:
 * they are taken by the restored process itself, by injected fcntl, once its
 * mappings are made and after amber's own fds on that file are closed in it.
 * flocks (so that /proc/locks shows their taker) and leases (their break
 * signal names the fd they were set through; the kernel checks the
 * process's right to them) are taken by a process of the tree too, then the
 * owner and signal of O_ASYNC are set, all after the credentials, so that
 * the kernel's checks are the restored process's own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amber.h"
#include "files.h"
#include "log.h"
#include "ns/ns.h"
#include "sys.h"

#define MAX_LOCKS 65536 /* per description: image.c's LIM_LOCKS */

/* ---- dump ---- */

/* What /proc/locks shows, read once per dump (the tree is frozen). */
static struct sys_lock {
	uint64_t ino;
	int pid;
	char kind[8];
} * sys_locks;
static size_t nr_sys_locks;
static bool locks_read;

/* The descriptions seen through an fd (the others are behind mappings only). */
static RegFile **via_fd;
static size_t nr_via_fd, cap_via_fd;

/* The fds whose owner of signals is asked in the process's own dump. */
static struct fown_query {
	pid_t pid;
	int fd;
	RegFile *f;
} * queries;
static size_t nr_queries;

/*
 * /proc/locks costs a grace period of RCU at its first read in a while (the
 * kernel takes its lock list's per-CPU rwsem for writing): some 10 ms, most
 * of a small process's dump.  So it is read in a thread from the start of
 * the dump (the tree frozen) and awaited only at its end; an fd's own locks
 * come from its fdinfo, which files.c reads anyway.  The fd is opened here,
 * in amber's thread, in the order fault injection counts.
 */
static pthread_t reader;
static bool reading;
static char *reader_buf;
static int reader_fd = -1, reader_ret;

static void *read_locks_thread(void *arg)
{
	(void)arg;
	reader_ret = sys_read_fd(reader_fd, &reader_buf, NULL);
	return NULL;
}

static void reset_dump(void)
{
	if (reading)
		pthread_join(reader, NULL);
	reading = false;
	if (reader_fd >= 0)
		close(reader_fd);
	reader_fd = -1;
	free(reader_buf);
	reader_buf = NULL;
	reader_ret = 0;
	free(sys_locks);
	sys_locks = NULL;
	nr_sys_locks = 0;
	locks_read = false;
	free(via_fd);
	via_fd = NULL;
	nr_via_fd = cap_via_fd = 0;
}

/* Once per dump, every process frozen (files.c, first): the read of /proc/locks begins. */
int locks_dump_start(void)
{
	int ret;

	reset_dump(); /* an earlier dump's, in an RPC worker */
	reader_fd = sys_open("/proc/locks", O_RDONLY | O_CLOEXEC, 0);
	if (reader_fd == -ENOENT) {
		reader_fd = -1;
		locks_read = true; /* CONFIG_FILE_LOCKING off: there are none */
		return 0;
	}
	if (reader_fd < 0) {
		ret = reader_fd;
		reader_fd = -1;
		pr_err("cannot open /proc/locks: %s", strerror(-ret));
		return ret;
	}
	ret = sys_thread_start_own_fds(&reader, read_locks_thread, NULL);
	if (ret) {
		pr_err("cannot start a thread to read /proc/locks: %s", strerror(-ret));
		return ret;
	}
	reading = true;
	return 0;
}

/* /proc/locks: "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have " -> ". */
static int read_proc_locks(void)
{
	char *buf, *line, *save;

	if (locks_read)
		return 0;
	if (reading)
		pthread_join(reader, NULL);
	reading = false;
	locks_read = true;
	buf = reader_buf;
	reader_buf = NULL;
	if (reader_ret || !buf) {
		pr_err("cannot read /proc/locks: %s", strerror(reader_ret ? -reader_ret : ENOMEM));
		free(buf);
		return reader_ret ? reader_ret : -ENOMEM;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct sys_lock l = {0}, *n;
		unsigned long long ino;
		char *p = strchr(line, ':');
		int waiter = 0;

		if (!p)
			continue;
		p++;
		while (*p == ' ')
			p++;
		if (!strncmp(p, "->", 2))
			waiter = 1, p += 2;
		if (sscanf(p, "%7s %*s %*s %d %*[0-9a-f]:%*[0-9a-f]:%llu", l.kind, &l.pid, &ino) !=
		    3)
			continue;
		if (waiter) /* blocked in F_SETLKW or flock: it holds nothing yet */
			l.kind[0] = '-';
		l.ino = ino;
		n = realloc(sys_locks, (nr_sys_locks + 1) * sizeof(*n));
		if (!n) {
			free(buf);
			return -ENOMEM;
		}
		sys_locks = n;
		sys_locks[nr_sys_locks++] = l;
	}
	free(buf);
	return 0;
}

static bool same_lock(const LockEntry *a, const LockEntry *b)
{
	return a->kind == b->kind && a->type == b->type && a->start == b->start &&
	       a->end == b->end && a->has_pid == b->has_pid && a->pid == b->pid;
}

static const char *kind_name(LockKind k)
{
	switch (k) {
	case LOCK_KIND__LOCK_FLOCK:
		return "flock";
	case LOCK_KIND__LOCK_POSIX:
		return "POSIX lock";
	case LOCK_KIND__LOCK_OFD:
		return "OFD lock";
	case LOCK_KIND__LOCK_LEASE:
		return "lease";
	default:
		return "lock";
	}
}

/*
 * One "lock:" line of fdinfo, after "lock:\t": "1: POSIX  ADVISORY  WRITE
 * 1234 00:1f:5678 0 EOF"; "FLOCK  ADVISORY  READ ..."; "LEASE  ACTIVE    READ".
 */
static int parse_lock(struct dump_ctx *ctx, int fd, RegFile *f, char *line)
{
	char kind[16], state[16], type[16], dev[32], end[32];
	long long start;
	LockEntry *l;
	int pid;

	if (sscanf(line, "%*d: %15s %15s %15s %d %31s %lld %31s", kind, state, type, &pid, dev,
		   &start, end) != 7) {
		pr_err("pid %d: fd %d (%s): cannot parse the lock '%s' of its fdinfo", ctx->pid, fd,
		       f->path, line);
		return -EINVAL;
	}
	l = malloc(sizeof(*l));
	if (!l)
		return -ENOMEM;
	lock_entry__init(l);
	if (!strcmp(kind, "POSIX") && tree_shares_files(ctx->tree, (uint32_t)ctx->pid)) {
		/* their owner is the table: one process's closes would drop the other's */
		pr_err("pid %d: fd %d (%s) holds a POSIX lock, and pid %d shares its fd table "
		       "with another process (CLONE_FILES): amber cannot take such locks again",
		       ctx->pid, fd, f->path, ctx->pid);
		free(l);
		return -EOPNOTSUPP;
	} else if (!strcmp(kind, "POSIX")) {
		l->kind = LOCK_KIND__LOCK_POSIX;
		l->has_pid = 1;
		l->pid = dump_vpid(ctx->tree, ctx->pid);
	} else if (!strcmp(kind, "OFDLCK")) {
		l->kind = LOCK_KIND__LOCK_OFD;
	} else if (!strcmp(kind, "FLOCK")) {
		l->kind = LOCK_KIND__LOCK_FLOCK;
		/* the taker, which /proc/locks shows: it takes it again if in the tree */
		l->pid = pid > 0 ? dump_vpid(ctx->tree, pid) : 0;
		l->has_pid = l->pid > 0;
	} else if (!strcmp(kind, "LEASE") && !strcmp(state, "ACTIVE")) {
		l->kind = LOCK_KIND__LOCK_LEASE;
	} else {
		pr_err("pid %d: fd %d (%s) holds a %s %s lock, which amber cannot restore (a lease "
		       "being broken, a delegation or an access lock); dump again once it is "
		       "settled",
		       ctx->pid, fd, f->path, kind, state);
		free(l);
		return -EOPNOTSUPP;
	}
	if (!strcmp(type, "WRITE"))
		l->type = F_WRLCK;
	else if (!strcmp(type, "READ"))
		l->type = F_RDLCK;
	else {
		pr_err("pid %d: fd %d (%s): a%s %s of type %s, which amber cannot restore",
		       ctx->pid, fd, f->path, l->kind == LOCK_KIND__LOCK_OFD ? "n" : "",
		       kind_name(l->kind), type);
		free(l);
		return -EOPNOTSUPP;
	}
	l->start = start;
	l->end = strcmp(end, "EOF") ? strtoll(end, NULL, 10) : -1;
	if (l->kind == LOCK_KIND__LOCK_FLOCK || l->kind == LOCK_KIND__LOCK_LEASE)
		l->start = 0, l->end = -1;
	if (!ctx->o->file_locks) {
		pr_err("pid %d: fd %d (%s) holds a%s %s (%s); dump with --file-locks (-l) to save "
		       "it and take it again at restore",
		       ctx->pid, fd, f->path, l->kind == LOCK_KIND__LOCK_OFD ? "n" : "",
		       kind_name(l->kind), type);
		free(l);
		return -EOPNOTSUPP;
	}
	/* seen through another fd or process on the same description */
	for (size_t i = 0; i < f->n_locks; i++)
		if (same_lock(f->locks[i], l)) {
			free(l);
			return 0;
		}
	if (f->n_locks >= MAX_LOCKS) {
		pr_err("pid %d: fd %d (%s) holds more than %d locks, more than amber saves",
		       ctx->pid, fd, f->path, MAX_LOCKS);
		free(l);
		return -E2BIG;
	}
	if (!(f->n_locks & (f->n_locks + 1))) { /* grow at 0, 1, 3, 7, ... */
		LockEntry **n = realloc(f->locks, (2 * f->n_locks + 2) * sizeof(*n));

		if (!n) {
			free(l);
			return -ENOMEM;
		}
		f->locks = n;
	}
	f->locks[f->n_locks++] = l;
	return 0;
}

static int note_query(struct dump_ctx *ctx, int fd, RegFile *f)
{
	struct fown_query *n;

	for (size_t i = 0; i < nr_queries; i++)
		if (queries[i].f == f)
			return 0; /* the owner is the description's: asked once */
	n = realloc(queries, (nr_queries + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	queries = n;
	queries[nr_queries++] = (struct fown_query){ctx->pid, fd, f};
	return 0;
}

int locks_dump_fd(struct dump_ctx *ctx, int fd, unsigned flags, bool locked, RegFile *f)
{
	char path[64], *buf, *p;
	bool lease = false;
	int ret = 0;

	if (nr_via_fd == cap_via_fd) {
		RegFile **n = realloc(via_fd, (2 * cap_via_fd + 16) * sizeof(*n));

		if (!n)
			return -ENOMEM;
		via_fd = n;
		cap_via_fd = 2 * cap_via_fd + 16;
	}
	via_fd[nr_via_fd++] = f;
	if (locked) {
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", ctx->pid, fd);
		ret = sys_read_file(path, &buf, NULL);
		if (ret) {
			pr_err("pid %d: cannot read %s for its locks: %s", ctx->pid, path,
			       strerror(-ret));
			return ret;
		}
		for (p = strstr(buf, "\nlock:\t"); p && !ret; p = strstr(p, "\nlock:\t")) {
			char *nl;

			p += 7;
			nl = strchr(p, '\n');
			if (nl)
				*nl = 0;
			ret = parse_lock(ctx, fd, f, p);
			if (nl)
				*nl = '\n';
		}
		free(buf);
		for (size_t i = 0; i < f->n_locks; i++)
			lease |= f->locks[i]->kind == LOCK_KIND__LOCK_LEASE;
	}
	/* a TCP socket's owner gets SIGURG, O_ASYNC or not */
	if (!ret && ((flags & O_ASYNC) || lease || f->kind == FILE_KIND__FILE_INET_SK))
		ret = note_query(ctx, fd, f);
	return ret;
}

static const char *owner_kind(int type)
{
	return type == F_OWNER_TID ? "thread" : type == F_OWNER_PGRP ? "process group" : "process";
}

/* Is the owner of signals one the restore recreates: a thread, process or group of the tree? */
static bool owner_in_tree(struct tree *t, int type, pid_t pid)
{
	char path[64];

	for (size_t p = 0; p < t->nr_procs; p++) {
		pid_t q = t->dprocs[p]->pid;

		/* F_GETOWN_EX ran in the process: its pid namespace's ids (ns/pidns.c) */
		if (t->own_pidns) {
			struct dump_ctx *c = t->dprocs[p];
			uint32_t v = 0, pgid = 0;

			if (pidns_dump_ids(t, q, &v, NULL, &pgid, NULL))
				return false;
			if ((type == F_OWNER_PID && (uint32_t)pid == v) ||
			    (type == F_OWNER_PGRP && (uint32_t)pid == pgid && pgid))
				return true;
			for (size_t k = 0; type == F_OWNER_TID && k < c->nr_threads; k++)
				if (dump_vpid(t, c->threads[k].tid) == (uint32_t)pid)
					return true;
			continue;
		}
		if (type == F_OWNER_PID && pid == q)
			return true;
		if (type == F_OWNER_PGRP && getpgid(q) == pid)
			return true;
		snprintf(path, sizeof(path), "/proc/%d/task/%d", q, pid);
		if (type == F_OWNER_TID && !sys_access(path, F_OK))
			return true;
	}
	return false;
}

static int locks_dump(struct dump_ctx *ctx)
{
	for (size_t i = 0; i < nr_queries; i++) {
		struct f_owner_ex own;
		FownEntry *e;
		long sig, r;
		int ret;

		if (queries[i].pid != ctx->pid)
			continue;
		ret = infect_ask(&ctx->inf, &r, SYS_fcntl, queries[i].fd, F_GETOWN_EX,
				 (long)ctx->inf.scratch);
		if (!ret && !r)
			ret = infect_read(&ctx->inf, ctx->inf.scratch, &own, sizeof(own));
		if (!ret && r)
			ret = (int)r;
		if (!ret)
			ret = infect_ask(&ctx->inf, &sig, SYS_fcntl, queries[i].fd, F_GETSIG, 0);
		if (!ret && sig < 0)
			ret = (int)sig;
		if (ret) {
			pr_err("pid %d: cannot ask the owner of signals of fd %d (%s): %s",
			       ctx->pid, queries[i].fd, queries[i].f->path, strerror(-ret));
			return ret;
		}
		/* the owner is named as its holder sees it; the restore's may be in another pid
		 * namespace */
		if (own.pid && pidns_has_nested(ctx->tree)) {
			pr_err("pid %d: fd %d (%s) sends its signals (O_ASYNC, lease breaks) to %s "
			       "%d; owners of signals in a tree with a nested pid namespace are "
			       "not dumped yet: F_SETOWN it to 0 first",
			       ctx->pid, queries[i].fd, queries[i].f->path, owner_kind(own.type),
			       own.pid);
			return -EOPNOTSUPP;
		}
		if (own.pid && !owner_in_tree(ctx->tree, own.type, own.pid)) {
			pr_err("pid %d: fd %d (%s) sends its signals (O_ASYNC, lease breaks) to %s "
			       "%d, outside the dumped tree; dump a tree that holds it, or "
			       "F_SETOWN it to 0 first",
			       ctx->pid, queries[i].fd, queries[i].f->path, owner_kind(own.type),
			       own.pid);
			return -EOPNOTSUPP;
		}
		if (!own.pid && !sig)
			continue; /* nobody to signal: nothing to set */
		e = malloc(sizeof(*e));
		if (!e)
			return -ENOMEM;
		fown_entry__init(e);
		e->type = own.type;
		e->pid = own.pid;
		e->signum = (uint32_t)sig;
		queries[i].f->fown = e;
	}
	return 0;
}

/*
 * An OFD lock shows no pid: one on a file the tree maps through a
 * description no fd of the tree has cannot be told apart from another
 * process's, and is refused (unless an fd of the tree showed an OFD lock on
 * that file: then the tree's are known).
 */
static int check_mapped_ofd(struct tree *t, const struct sys_lock *l)
{
	bool mapped = false;

	for (size_t k = 0; k < t->files.n; k++) {
		RegFile *f = t->files.f[k];
		bool fd = false;

		if (f->ino != l->ino)
			continue;
		for (size_t j = 0; j < nr_via_fd && !fd; j++)
			fd = via_fd[j] == f;
		for (size_t j = 0; fd && j < f->n_locks; j++)
			if (f->locks[j]->kind == LOCK_KIND__LOCK_OFD)
				return 0;
		mapped |= !fd;
	}
	if (!mapped)
		return 0;
	pr_err("an OFD lock is held on inode %llu, which the tree maps through a description "
	       "that no fd of it has: amber cannot tell whether the lock is the tree's (then "
	       "held through the mapping only) and cannot restore it; keep an fd on the file "
	       "open, or drop the lock",
	       (unsigned long long)l->ino);
	return -EOPNOTSUPP;
}

/*
 * A flock or lease is the description's, and a description may live on in
 * a mapping alone (its fds closed): then no fdinfo showed it.  One whose
 * taker is of the tree and that no fd of the tree showed is refused.
 */
static int locks_dump_tree_late(struct tree *t)
{
	int ret = read_proc_locks();

	for (size_t i = 0; i < nr_sys_locks && !ret; i++) {
		struct sys_lock *l = &sys_locks[i];
		bool flock = !strcmp(l->kind, "FLOCK"), lease = !strcmp(l->kind, "LEASE");
		bool ours = false, seen = false;

		if (!strcmp(l->kind, "OFDLCK")) {
			ret = check_mapped_ofd(t, l);
			continue;
		}
		if (!flock && !lease)
			continue;
		for (size_t p = 0; p < t->nr_procs; p++)
			ours |= t->dprocs[p]->pid == l->pid;
		for (size_t k = 0; ours && !seen && k < t->files.n; k++) {
			RegFile *f = t->files.f[k];

			for (size_t j = 0; f->ino == l->ino && j < f->n_locks; j++)
				seen |= f->locks[j]->kind ==
					(flock ? LOCK_KIND__LOCK_FLOCK : LOCK_KIND__LOCK_LEASE);
		}
		if (ours && !seen) {
			pr_err("pid %d holds a %s on inode %llu that amber finds through no fd of "
			       "the "
			       "tree (held through a memory mapping only?); amber cannot restore "
			       "it: "
			       "keep an fd on the file open, or drop the lock",
			       l->pid, flock ? "flock" : "lease", (unsigned long long)l->ino);
			ret = -EOPNOTSUPP;
		}
	}
	reset_dump();
	return ret;
}

/* ---- restore ---- */

static int check_locks(struct tree *t, RegFile *f)
{
	for (size_t i = 0; i < f->n_locks; i++) {
		LockEntry *l = f->locks[i];
		bool posix = l->kind == LOCK_KIND__LOCK_POSIX;

		if ((l->type != F_RDLCK && l->type != F_WRLCK) || l->start < 0 ||
		    (l->end != -1 && (l->end < l->start || l->end == INT64_MAX)) ||
		    (posix && !l->has_pid) ||
		    (l->has_pid && !posix && l->kind != LOCK_KIND__LOCK_FLOCK) ||
		    (l->kind == LOCK_KIND__LOCK_LEASE && f->kind != FILE_KIND__FILE_REG)) {
			pr_err("files.img: %s: a bad %s entry; the image is corrupt", f->path,
			       kind_name(l->kind));
			return -EBADMSG;
		}
	}
	if (f->fown && (f->fown->type < F_OWNER_TID || f->fown->type > F_OWNER_PGRP ||
			f->fown->pid < 0 || f->fown->signum >= 65)) {
		pr_err("files.img: %s: a bad owner of signals; the image is corrupt", f->path);
		return -EBADMSG;
	}
	return 0;
}

/* The fd through which process pid has file id (its first), or -1. */
static int fd_of(struct restore_ctx *ctx, uint32_t id)
{
	for (size_t i = 0; i < ctx->nr_fds; i++)
		if (ctx->fds[i]->file_id == id)
			return (int)ctx->fds[i]->fd;
	return -1;
}

static struct restore_ctx *flock_taker(struct tree *t, RegFile *f, const LockEntry *l);

/* The images of every process are read: the locks against them all. */
static int check_tree(struct tree *t)
{
	int ret = 0;

	for (size_t i = 0; i < t->nr_rfiles && !ret; i++) {
		RegFile *f = t->rfiles[i];

		ret = check_locks(t, f);
		for (size_t k = 0; k < f->n_locks && !ret; k++) {
			struct restore_ctx *owner;

			if (f->locks[k]->kind == LOCK_KIND__LOCK_FLOCK &&
			    !flock_taker(t, f, f->locks[k])) {
				pr_err("files.img: %s: a flock on a file no process holds; the "
				       "image "
				       "is corrupt",
				       f->path);
				ret = -EBADMSG;
			}
			if (f->locks[k]->kind != LOCK_KIND__LOCK_POSIX)
				continue;
			owner = tree_rproc(t, f->locks[k]->pid);
			if (!owner || fd_of(owner, f->id) < 0 ||
			    tree_entry(t, f->locks[k]->pid)->clone_files) {
				pr_err("files.img: %s: a POSIX lock of pid %u, which has no fd on "
				       "it; the image is corrupt",
				       f->path, f->locks[k]->pid);
				ret = -EBADMSG;
			}
		}
	}
	return ret;
}

static void to_flock(const LockEntry *l, struct flock *fl)
{
	memset(fl, 0, sizeof(*fl));
	fl->l_type = (short)l->type;
	fl->l_whence = SEEK_SET;
	fl->l_start = l->start;
	fl->l_len = l->end == -1 ? 0 : l->end - l->start + 1;
}

/* OFD locks: the description's, taken on amber's fd on it (their pid shows as -1). */
static int take_desc_lock(struct tree *t, RegFile *f, int fd, const LockEntry *l)
{
	struct flock fl;
	int r;

	switch (l->kind) {
	case LOCK_KIND__LOCK_OFD:
		to_flock(l, &fl);
		r = fcntl(fd, F_OFD_SETLK, &fl);
		break;
	default: /* the others are taken by the processes (locks_restore_inject) */
		return 0;
	}
	if (r) {
		pr_err("%s: cannot take its %s (%s, bytes %lld-%lld) again: %m%s", f->path,
		       kind_name(l->kind), l->type == F_WRLCK ? "write" : "read",
		       (long long)l->start, (long long)l->end,
		       errno == EAGAIN || errno == EWOULDBLOCK ? " (held by someone else now)"
							       : "");
		return -errno;
	}
	return 0;
}

static int locks_restore_tree(struct tree *t)
{
	int ret = check_tree(t);

	if (ret)
		return ret;
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		RegFile *f = t->rfiles[i];

		for (size_t k = 0; k < f->n_locks; k++) {
			ret = take_desc_lock(t, f, t->desc_fd[i], f->locks[k]);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/*
 * Close the child's copies of amber's fds (>= fd_base) on the inode of its
 * fd: closing them later would drop the POSIX locks it takes now.
 */
static int close_internal_on(struct restore_ctx *ctx, int fd)
{
	char path[64];
	struct stat want, st;
	struct dirent *de;
	int ret = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", ctx->inf.pid, fd);
	if (sys_stat(path, &want)) {
		pr_err("pid %d: cannot stat its fd %d: %m", ctx->pid, fd);
		return -errno;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", ctx->inf.pid);
	d = sys_opendir(path);
	if (!d) {
		pr_err("cannot list %s: %m", path);
		return -errno;
	}
	while ((de = readdir(d)) && !ret) {
		int n = atoi(de->d_name);
		char p[64];
		long r;

		if (de->d_name[0] == '.' || n < ctx->tree->fd_base)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/fd/%d", ctx->inf.pid, n);
		if (sys_stat(p, &st) || st.st_dev != want.st_dev || st.st_ino != want.st_ino)
			continue;
		r = infect_call(&ctx->inf, SYS_close, n, 0, 0, 0, 0, 0);
		if (r) {
			pr_err("pid %d: cannot close amber's fd %d: %s", ctx->pid, n,
			       strerror((int)-r));
			ret = (int)r;
		}
	}
	closedir(d);
	return ret;
}

static int take_posix(struct restore_ctx *ctx, RegFile *f, const LockEntry *l)
{
	int fd = fd_of(ctx, f->id), ret;
	struct flock fl;
	long r;

	ret = close_internal_on(ctx, fd);
	if (ret)
		return ret;
	to_flock(l, &fl);
	ret = infect_write(&ctx->inf, ctx->inf.scratch, &fl, sizeof(fl));
	if (ret)
		return ret;
	r = infect_call(&ctx->inf, SYS_fcntl, fd, F_SETLK, (long)ctx->inf.scratch, 0, 0, 0);
	if (r) {
		pr_err("pid %d: cannot take its POSIX %s lock on %s (fd %d, bytes %lld-%lld) "
		       "again: %s",
		       ctx->pid, l->type == F_WRLCK ? "write" : "read", f->path, fd,
		       (long long)l->start, (long long)l->end, strerror((int)-r));
		return (int)r;
	}
	return 0;
}

/*
 * O_ASYNC is not opened with: open() sets the flag without registering the
 * file for signals, and then F_SETFL sees no change to make.  It is turned
 * on by F_SETFL in the process (which registers its fd), after the owner.
 */
static uint8_t *async; /* per file id: had O_ASYNC */

static int locks_restore_read(struct restore_ctx *ctx)
{
	struct tree *t = ctx->tree;

	if (async)
		return 0; /* files.img is the tree's, read with the first process */
	async = calloc(t->nr_rfiles + 1, 1);
	if (!async)
		return -ENOMEM;
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		async[i] = !!(t->rfiles[i]->flags & O_ASYNC);
		t->rfiles[i]->flags &= ~O_ASYNC;
	}
	return 0;
}

/* Owner, signal, then O_ASYNC itself: turning it on registers the fd for SIGIO. */
static int set_fown(struct restore_ctx *ctx, RegFile *f, int fd)
{
	struct f_owner_ex own = {0};
	long r = 0;
	int ret;

	if (f->fown) {
		own.type = f->fown->type;
		own.pid = f->fown->pid;
		ret = infect_write(&ctx->inf, ctx->inf.scratch, &own, sizeof(own));
		if (ret)
			return ret;
		r = infect_call(&ctx->inf, SYS_fcntl, fd, F_SETOWN_EX, (long)ctx->inf.scratch, 0, 0,
				0);
		if (!r)
			r = infect_call(&ctx->inf, SYS_fcntl, fd, F_SETSIG, f->fown->signum, 0, 0,
					0);
	}
	if (!r && async[f->id]) {
		long fl = infect_call(&ctx->inf, SYS_fcntl, fd, F_GETFL, 0, 0, 0, 0);

		r = fl < 0 ? fl
			   : infect_call(&ctx->inf, SYS_fcntl, fd, F_SETFL, fl | O_ASYNC, 0, 0, 0);
	}
	if (r)
		pr_err("pid %d: cannot set the owner of signals / O_ASYNC of fd %d (%s): %s",
		       ctx->pid, fd, f->path, strerror((int)-r));
	return (int)r;
}

/*
 * A lease, by its first holder: the lease break signal carries the fd it was
 * set through (si_fd), and the kernel checks the lease against the process's
 * own rights (file owner or CAP_LEASE), credentials being restored by now.
 */
static int take_lease(struct restore_ctx *ctx, RegFile *f, int fd, const LockEntry *l)
{
	long r = infect_call(&ctx->inf, SYS_fcntl, fd, F_SETLEASE, l->type, 0, 0, 0);

	if (r)
		pr_err("pid %d: cannot take its %s lease on %s (fd %d) again: %s%s", ctx->pid,
		       l->type == F_WRLCK ? "write" : "read", f->path, fd, strerror((int)-r),
		       r == -EAGAIN   ? " (the file is open elsewhere now)"
		       : r == -EACCES ? " (it needs to own the file or CAP_LEASE)"
				      : "");
	return (int)r;
}

/* Who takes a flock again: its taker if of the tree and holding the file, else its first holder. */
static struct restore_ctx *flock_taker(struct tree *t, RegFile *f, const LockEntry *l)
{
	struct restore_ctx *c = l->has_pid ? tree_rproc(t, l->pid) : NULL;

	if (c && fd_of(c, f->id) >= 0 && !tree_entry(t, l->pid)->clone_files)
		return c;
	for (size_t p = 0; p < t->nr_procs; p++) {
		c = t->rprocs[p];
		if (fd_of(c, f->id) >= 0 && !tree_entry(t, (uint32_t)c->pid)->clone_files)
			return c;
	}
	return NULL;
}

static int take_flock(struct restore_ctx *ctx, RegFile *f, const LockEntry *l)
{
	int fd = fd_of(ctx, f->id);
	long r = infect_call(&ctx->inf, SYS_flock, fd,
			     (l->type == F_WRLCK ? LOCK_EX : LOCK_SH) | LOCK_NB, 0, 0, 0, 0);

	if (r)
		pr_err("pid %d: cannot take its %s flock on %s (fd %d) again: %s", ctx->pid,
		       l->type == F_WRLCK ? "exclusive" : "shared", f->path, fd, strerror((int)-r));
	return (int)r;
}

static uint8_t *fown_done; /* per file id: lease, owner and O_ASYNC set by its first holder */

static uint32_t *locked; /* the ids of the files with locks, for each process to look through */
static size_t nr_locked;

static int locks_restore_inject(struct restore_ctx *ctx)
{
	struct tree *t = ctx->tree;
	int ret = 0;

	if (!fown_done) {
		fown_done = calloc(t->nr_rfiles + 1, 1);
		locked = calloc(t->nr_rfiles + 1, sizeof(*locked));
		if (!fown_done || !locked)
			return -ENOMEM;
		nr_locked = 0;
		for (size_t i = 0; i < t->nr_rfiles; i++)
			if (t->rfiles[i]->n_locks)
				locked[nr_locked++] = (uint32_t)i;
	}
	/* a table shared with the parent is the parent's: it placed the fds */
	if (tree_entry(t, (uint32_t)ctx->pid)->clone_files)
		return 0;
	for (size_t i = 0; i < ctx->nr_fds && !ret; i++) {
		RegFile *f = ctx->files[ctx->fds[i]->file_id];

		if (fown_done[f->id])
			continue;
		fown_done[f->id] = 1;
		/* the lease first: taking it makes this process the owner of signals */
		for (size_t k = 0; k < f->n_locks && !ret; k++)
			if (f->locks[k]->kind == LOCK_KIND__LOCK_LEASE)
				ret = take_lease(ctx, f, (int)ctx->fds[i]->fd, f->locks[k]);
		if (!ret && (f->fown || async[f->id]))
			ret = set_fown(ctx, f, (int)ctx->fds[i]->fd);
	}
	for (size_t i = 0; i < nr_locked && !ret; i++) {
		RegFile *f = t->rfiles[locked[i]];

		for (size_t k = 0; k < f->n_locks && !ret; k++) {
			LockEntry *l = f->locks[k];

			if (l->kind == LOCK_KIND__LOCK_POSIX && l->pid == (uint32_t)ctx->pid)
				ret = take_posix(ctx, f, l);
			else if (l->kind == LOCK_KIND__LOCK_FLOCK && flock_taker(t, f, l) == ctx)
				ret = take_flock(ctx, f, l);
		}
	}
	return ret;
}

static void locks_dump_undo(struct tree *t)
{
	reset_dump();
}

const struct resource_ops locks_ops = {
	.name = "locks",
	.dump = locks_dump,
	.dump_undo = locks_dump_undo,
	.dump_tree_late = locks_dump_tree_late,
	.restore_read = locks_restore_read,
	.restore_tree = locks_restore_tree,
	.restore_inject = locks_restore_inject,
};
