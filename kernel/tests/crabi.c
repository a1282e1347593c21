// SPDX-License-Identifier: GPL-2.0
/*
 * crabi.c - in-guest conformance test for the checkpoint/restore ABI of the
 * kernel series in kernel/patches/ (children file, kcmp, /proc/PID/stat C/R
 * fields, PR_SET_MM_{ARG,ENV}_{START,END} and PR_SET_MM_AUXV).
 *
 * Built static, copied into the initramfs and run inside QEMU, never on the
 * host.  Prints one line per check:
 *     KQ-RESULT <mode>.<name> PASS|FAIL <detail>
 * and a final "KQ-SUMMARY <mode> N passed, N failed".
 *
 * usage: crabi --expect=present|absent|LIST [--user=UID]
 *   present: the features must be there and behave as the seeds describe
 *   absent:  the features must be reported missing (ENOENT/ENOSYS/EINVAL/0)
 *   LIST:    only these are there (comma-separated: children,kcmp,stat,prctl),
 *            the others missing: a kernel with some of the options on
 *   --user:  drop to UID (from root), re-exec, and run the unprivileged checks
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <linux/prctl.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#ifndef PR_SET_MM_ARG_START
#define PR_SET_MM_ARG_START 8
#define PR_SET_MM_ARG_END   9
#define PR_SET_MM_ENV_START 10
#define PR_SET_MM_ENV_END   11
#define PR_SET_MM_AUXV	    12
#endif
#define IOPRIO_WHO_PROCESS_ 1
#define IOPRIO_VALUE_BE4    ((2 << 13) | 4)

static const char *mode = "root";
/* which features the kernel must have (--expect) */
static int has_children = 1, has_kcmp = 1, has_stat = 1, has_prctl = 1;
static int has_ipc = 1; /* SYSVIPC and EPOLL built ("noipc" in --expect: not) */
/* the series' io_uring patches (0007, 0008): every tiny kernel ("upstream" in --expect: not) */
static int has_series = 1;
#define KCMP_IOURING_FILE_ 8 /* the series' uapi; the host's headers may lack it */
struct kcmp_iouring_slot_ {
	unsigned int ring_fd, index;
};
static char expect_arg[64] = "present";
static int order_only; /* --order-only: kcmp's order signature alone (rig.sh, more boots) */
static int npass, nfail;
static char **g_argv, **g_envp;
static int g_argc;
static int kcmp_bad_ret; /* kcmp returned something other than 0/1/2/-1 */

static void result(const char *name, int ok, const char *fmt, ...)
{
	char d[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d, sizeof(d), fmt, ap);
	va_end(ap);
	printf("KQ-RESULT %s.%s %s %s\n", mode, name, ok ? "PASS" : "FAIL", d);
	fflush(stdout);
	if (ok)
		npass++;
	else
		nfail++;
}

static long kcmp(pid_t a, pid_t b, int type, unsigned long i1, unsigned long i2)
{
	long r = syscall(SYS_kcmp, a, b, type, i1, i2);

	if (r != -1 && (r < 0 || r > 2))
		kcmp_bad_ret++;
	return r;
}

static int is_ne(long r)
{
	return r == 1 || r == 2;
}

static pid_t sleeper(void)
{
	pid_t p;

	fflush(stdout);
	p = fork();
	if (p == 0) {
		for (;;)
			pause();
	}
	return p;
}

static void kill_reap(pid_t p)
{
	if (p > 0) {
		kill(p, SIGKILL);
		waitpid(p, NULL, __WALL);
	}
}

static ssize_t read_file(const char *path, char *buf, size_t sz)
{
	int fd = open(path, O_RDONLY);
	ssize_t n, t = 0;

	if (fd < 0)
		return -errno;
	while (t < (ssize_t)sz - 1 && (n = read(fd, buf + t, sz - 1 - t)) > 0)
		t += n;
	close(fd);
	buf[t] = 0;
	return t;
}

/* ---------- children ---------- */

static int read_children(pid_t pid, pid_t tid, pid_t *out, int max, int *err)
{
	char path[64], buf[4096], *s, *e;
	ssize_t n;
	int k = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, tid);
	n = read_file(path, buf, sizeof(buf));
	*err = n < 0 ? (int)-n : 0;
	if (n < 0)
		return -1;
	for (s = buf; *s && k < max; s = e) {
		long v = strtol(s, &e, 10);

		if (e == s)
			break;
		out[k++] = v;
	}
	return k;
}

/* same set? (order-insensitive, no duplicates) */
static int same_set(const pid_t *a, int na, const pid_t *b, int nb)
{
	int i, j, c;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++) {
		for (c = 0, j = 0; j < nb; j++)
			c += a[i] == b[j];
		if (c != 1)
			return 0;
	}
	return 1;
}

static void fmt_set(char *o, size_t sz, const pid_t *a, int n)
{
	size_t l = 0;
	int i;

	o[0] = 0;
	for (i = 0; i < n && l < sz; i++)
		l += snprintf(o + l, sz - l, "%s%d", i ? "," : "", a[i]);
}

struct thr {
	int up[2], down[2];
	pid_t tid, child;
};

static void *thr_fn(void *arg)
{
	struct thr *t = arg;
	char c;

	t->tid = gettid();
	t->child = sleeper();
	if (write(t->up[1], "x", 1) != 1)
		return NULL;
	if (read(t->down[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

static void test_children(void)
{
	pid_t me = getpid(), kids[3], got[64], exp[8], gc = 0, parent_of_gc;
	int n, err, p[2], i;
	char a[256], b[256];
	struct thr t;
	pthread_t th;

	if (!has_children) {
		n = read_children(me, me, got, 64, &err);
		result("children.absent", n < 0 && err == ENOENT,
		       "open(/proc/%d/task/%d/children): %s", me, me,
		       n < 0 ? strerror(err) : "exists");
		return;
	}
	for (i = 0; i < 3; i++)
		kids[i] = sleeper();
	/* a child with a grandchild: the grandchild must not be listed */
	if (pipe(p) == 0) {
		fflush(stdout);
		parent_of_gc = fork();
		if (parent_of_gc == 0) {
			pid_t g = sleeper();

			if (write(p[1], &g, sizeof(g)) != sizeof(g))
				_exit(1);
			for (;;)
				pause();
		}
		if (read(p[0], &gc, sizeof(gc)) != sizeof(gc))
			gc = 0;
		close(p[0]);
		close(p[1]);
	} else {
		parent_of_gc = sleeper();
	}
	memcpy(exp, kids, sizeof(kids));
	exp[3] = parent_of_gc;
	n = read_children(me, me, got, 64, &err);
	fmt_set(a, sizeof(a), got, n);
	fmt_set(b, sizeof(b), exp, 4);
	result("children.exact", n >= 0 && same_set(got, n, exp, 4),
	       "got [%s] want [%s] (grandchild %d not listed)", n < 0 ? strerror(err) : a, b, gc);

	/* read a few bytes at a time, then again after lseek(0): the same list */
	{
		char path[64], whole[512] = "", part[512] = "", again[512] = "";
		int fd, k, lk = 0;
		ssize_t r, t = 0;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", me, me);
		read_file(path, whole, sizeof(whole));
		fd = open(path, O_RDONLY);
		for (k = 1; fd >= 0 && t < (ssize_t)sizeof(part) - 4; k = k % 3 + 1) {
			r = read(fd, part + t, k);
			if (r <= 0)
				break;
			t += r;
		}
		if (fd >= 0 && lseek(fd, 0, SEEK_SET) == 0) {
			lk = 1;
			r = read(fd, again, sizeof(again) - 1);
			again[r > 0 ? r : 0] = 0;
		}
		if (fd >= 0)
			close(fd);
		result("children.small-reads",
		       *whole && !strcmp(whole, part) && lk && !strcmp(whole, again),
		       "whole '%s', in 1-3 byte reads '%s', after lseek '%s'", whole, part, again);
	}

	/* grandchild is listed under its own parent */
	n = read_children(parent_of_gc, parent_of_gc, got, 64, &err);
	result("children.grandchild", n == 1 && got[0] == gc,
	       "children of %d: n=%d first=%d want %d", parent_of_gc, n, n > 0 ? got[0] : -1, gc);

	/* a reaped child disappears */
	kill_reap(kids[1]);
	exp[1] = exp[3];
	n = read_children(me, me, got, 64, &err);
	fmt_set(a, sizeof(a), got, n);
	fmt_set(b, sizeof(b), exp, 3);
	result("children.after-exit", n >= 0 && same_set(got, n, exp, 3),
	       "got [%s] want [%s] after reaping %d", a, b, kids[1]);

	/* per thread: a child forked by a thread is listed under that thread only */
	memset(&t, 0, sizeof(t));
	if (pipe(t.up) || pipe(t.down) || pthread_create(&th, NULL, thr_fn, &t)) {
		result("children.per-thread", 0, "cannot create thread: %s", strerror(errno));
	} else {
		char c;
		pid_t g2[64];
		int n2, err2;

		if (read(t.up[0], &c, 1) != 1)
			c = 0;
		n = read_children(me, me, got, 64, &err);
		n2 = read_children(me, t.tid, g2, 64, &err2);
		result("children.per-thread",
		       n >= 0 && same_set(got, n, exp, 3) && n2 == 1 && g2[0] == t.child,
		       "main tid %d: %d kids (want 3); thread tid %d: n=%d first=%d want %d", me, n,
		       t.tid, n2, n2 > 0 ? g2[0] : -1, t.child);
		if (write(t.down[1], "x", 1) != 1)
			c = 0;
		pthread_join(th, NULL);
		kill_reap(t.child);
	}
	kill_reap(kids[0]);
	kill_reap(kids[2]);
	if (gc > 0)
		kill(gc, SIGKILL);
	kill_reap(parent_of_gc);
	n = read_children(me, me, got, 64, &err);
	result("children.empty", n == 0, "after reaping all: %d entries", n);
}

/* ---------- kcmp ---------- */

struct peer {
	int down[2];
	pid_t tid;
};

static void *peer_fn(void *arg)
{
	struct peer *p = arg;
	char c;

	p->tid = gettid();
	if (read(p->down[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

static pid_t fork_clone_io(void)
{
	pid_t p;

	fflush(stdout);
	p = syscall(SYS_clone, CLONE_IO | SIGCHLD, 0, 0, 0, 0);
	if (p == 0) {
		for (;;)
			pause();
	}
	return p;
}

static void test_kcmp_absent(void)
{
	long r = kcmp(getpid(), getpid(), KCMP_VM, 0, 0);

	result("kcmp.absent", r == -1 && errno == ENOSYS, "kcmp() = %ld errno %s", r,
	       r == -1 ? strerror(errno) : "-");
}

/* A kernel without SYSVIPC and EPOLL: their kcmp types are EOPNOTSUPP. */
static void test_kcmp_noipc(void)
{
	struct kcmp_epoll_slot slot = {0};
	long r1, r2;
	int e1, e2;

	r1 = kcmp(getpid(), getpid(), KCMP_SYSVSEM, 0, 0);
	e1 = errno;
	r2 = kcmp(getpid(), getpid(), KCMP_EPOLL_TFD, 0, (unsigned long)&slot);
	e2 = errno;
	result("kcmp.EOPNOTSUPP", r1 == -1 && e1 == EOPNOTSUPP && r2 == -1 && e2 == EOPNOTSUPP,
	       "without SYSVIPC: SYSVSEM %ld %s; without EPOLL: EPOLL_TFD %ld %s", r1,
	       r1 == -1 ? strerror(e1) : "", r2, r2 == -1 ? strerror(e2) : "");
}

static void test_kcmp_types(void)
{
	static const struct {
		int type;
		const char *name;
	} t[] = {
		{KCMP_VM, "VM"},	   {KCMP_FILES, "FILES"},     {KCMP_FS, "FS"},
		{KCMP_SIGHAND, "SIGHAND"}, {KCMP_SYSVSEM, "SYSVSEM"},
	};
	pid_t me = getpid(), child, ioc;
	struct sembuf sb = {0, 1, SEM_UNDO};
	struct kcmp_epoll_slot slot;
	struct peer peer = {0};
	pthread_t th;
	int semid, fd, fd2, dfd, efd, p1[2], p2[2];
	long r1, r2, r3, r4;
	long io;
	char c;
	unsigned int i;

	semid = has_ipc ? semget(IPC_PRIVATE, 1, 0600) : -1;
	if (has_ipc && (semid < 0 || semop(semid, &sb, 1)))
		result("kcmp.setup-sysvsem", 0, "semget/semop: %s", strerror(errno));
	io = syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS_, 0, IOPRIO_VALUE_BE4);
	fd = open("/", O_RDONLY | O_DIRECTORY);
	fd2 = open("/", O_RDONLY | O_DIRECTORY);
	dfd = dup(fd);
	efd = has_ipc ? epoll_create1(0) : open("/", O_RDONLY);
	if (pipe(p1) || pipe(p2) || efd < 0) {
		result("kcmp.setup", 0, "pipe/epoll: %s", strerror(errno));
		return;
	}
	{
		struct epoll_event ev = {.events = EPOLLIN};

		epoll_ctl(efd, EPOLL_CTL_ADD, p1[0], &ev);
	}
	if (pipe(peer.down) || pthread_create(&th, NULL, peer_fn, &peer)) {
		result("kcmp.setup", 0, "thread: %s", strerror(errno));
		return;
	}
	while (!__atomic_load_n(&peer.tid, __ATOMIC_SEQ_CST))
		usleep(1000);
	child = sleeper();     /* shares nothing (copies) */
	ioc = fork_clone_io(); /* shares the io_context */

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char nm[64];

		if (t[i].type == KCMP_SYSVSEM && !has_ipc)
			continue; /* test_kcmp_noipc */
		r1 = kcmp(me, peer.tid, t[i].type, 0, 0);
		r2 = kcmp(me, child, t[i].type, 0, 0);
		r3 = kcmp(child, me, t[i].type, 0, 0);
		r4 = kcmp(me, me, t[i].type, 0, 0);
		snprintf(nm, sizeof(nm), "kcmp.%s", t[i].name);
		result(nm, r1 == 0 && r4 == 0 && is_ne(r2) && r3 == 3 - r2,
		       "self=%ld thread(shared)=%ld fork(distinct)=%ld reverse=%ld", r4, r1, r2,
		       r3);
	}
	r1 = kcmp(me, ioc, KCMP_IO, 0, 0);
	r2 = kcmp(me, child, KCMP_IO, 0, 0);
	r3 = kcmp(child, me, KCMP_IO, 0, 0);
	result("kcmp.IO", io == 0 && r1 == 0 && is_ne(r2) && r3 == 3 - r2,
	       "ioprio_set=%ld CLONE_IO(shared)=%ld fork(distinct)=%ld reverse=%ld", io, r1, r2,
	       r3);

	r1 = kcmp(me, me, KCMP_FILE, fd, dfd);
	r2 = kcmp(me, me, KCMP_FILE, fd, fd2);
	r3 = kcmp(me, child, KCMP_FILE, fd, fd);
	r4 = kcmp(me, child, KCMP_FILE, fd2, fd);
	result("kcmp.FILE", r1 == 0 && is_ne(r2) && r3 == 0 && is_ne(r4),
	       "dup=%ld other-open=%ld inherited=%ld cross-distinct=%ld", r1, r2, r3, r4);

	if (!has_ipc)
		goto out;
	slot.efd = efd;
	slot.tfd = p1[0];
	slot.toff = 0;
	r1 = kcmp(me, me, KCMP_EPOLL_TFD, p1[0], (unsigned long)&slot);
	r2 = kcmp(me, me, KCMP_EPOLL_TFD, p2[0], (unsigned long)&slot);
	r3 = kcmp(me, child, KCMP_EPOLL_TFD, p1[0], (unsigned long)&slot);
	slot.tfd = p2[0]; /* not registered */
	r4 = kcmp(me, me, KCMP_EPOLL_TFD, p1[0], (unsigned long)&slot);
	{
		int e4 = errno;

		result("kcmp.EPOLL_TFD",
		       r1 == 0 && is_ne(r2) && r3 == 0 && r4 == -1 && e4 == ENOENT,
		       "same=%ld other=%ld child-epoll=%ld unregistered=%ld(%s, want "
		       "ENOENT)",
		       r1, r2, r3, r4, r4 == -1 ? strerror(e4) : "-");
	}
	/*
	 * Upstream's selftest case: the target was registered under a dup2'd
	 * number that is closed since; the item is still found by that number
	 * and compared with the file through another fd.
	 */
	{
		struct epoll_event ev = {.events = EPOLLIN};
		int d = dup2(p2[0], 200), e;

		r1 = d == 200 ? epoll_ctl(efd, EPOLL_CTL_ADD, 200, &ev) : -1;
		close(200);
		slot.tfd = 200;
		r2 = kcmp(me, me, KCMP_EPOLL_TFD, p2[0], (unsigned long)&slot);
		r3 = kcmp(me, me, KCMP_EPOLL_TFD, p1[0], (unsigned long)&slot);
		slot.tfd = 201; /* never registered */
		r4 = kcmp(me, me, KCMP_EPOLL_TFD, p2[0], (unsigned long)&slot);
		e = errno;
		result("kcmp.EPOLL_TFD-closed-dup",
		       r1 == 0 && r2 == 0 && is_ne(r3) && r4 == -1 && e == ENOENT,
		       "registered as fd 200 (closed since): via p2=%ld, other file=%ld, "
		       "fd 201=%ld(%s)",
		       r2, r3, r4, r4 == -1 ? strerror(e) : "-");
	}

out:
	if (write(peer.down[1], &c, 1) != 1)
		c = 0;
	pthread_join(th, NULL);
	kill_reap(child);
	kill_reap(ioc);
	if (semid >= 0)
		semctl(semid, 0, IPC_RMID);
	close(fd);
	close(fd2);
	close(dfd);
	close(efd);
	close(p1[0]);
	close(p1[1]);
	close(p2[0]);
	close(p2[1]);
}

/* r[i][j]: kcmp result; check reflexive/antisymmetric/transitive total order */
#define NORD 16
static int check_order(long r[NORD][NORD], int n, const int *same, char *why, size_t wsz)
{
	int i, j, k;

	for (i = 0; i < n; i++) {
		for (j = 0; j < n; j++) {
			if (r[i][j] < 0 || r[i][j] > 2) {
				snprintf(why, wsz, "r[%d][%d]=%ld", i, j, r[i][j]);
				return 0;
			}
			if ((r[i][j] == 0) != (same[i] == same[j])) {
				snprintf(why, wsz, "equality wrong at %d,%d: %ld", i, j, r[i][j]);
				return 0;
			}
			if ((r[i][j] == 0 && r[j][i] != 0) || (r[i][j] == 1 && r[j][i] != 2) ||
			    (r[i][j] == 2 && r[j][i] != 1)) {
				snprintf(why, wsz, "not antisymmetric at %d,%d", i, j);
				return 0;
			}
		}
	}
	/* kcmp returns 1 if idx1 < idx2 ... "less" */
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			for (k = 0; k < n; k++)
				if (r[i][j] == 1 && r[j][k] == 1 && r[i][k] != 1) {
					snprintf(why, wsz, "not transitive %d<%d<%d", i, j, k);
					return 0;
				}
	snprintf(why, wsz, "%d objects, %d comparisons consistent", n, n * n);
	return 1;
}

static void test_kcmp_order(void)
{
	static long r[NORD][NORD];
	int fds[NORD], same[NORD], i, j, ok, stable = 1;
	pid_t pids[8], me = getpid();
	char why[128];

	/* 12 distinct files + 4 dups */
	for (i = 0; i < 12; i++) {
		fds[i] = open("/", O_RDONLY | O_DIRECTORY);
		same[i] = i;
	}
	for (i = 12; i < NORD; i++) {
		fds[i] = dup(fds[i - 12]);
		same[i] = i - 12;
	}
	for (i = 0; i < NORD; i++)
		for (j = 0; j < NORD; j++)
			r[i][j] = kcmp(me, me, KCMP_FILE, fds[i], fds[j]);
	for (i = 0; i < NORD; i++)
		for (j = 0; j < NORD; j++)
			if (kcmp(me, me, KCMP_FILE, fds[i], fds[j]) != r[i][j])
				stable = 0;
	ok = check_order(r, NORD, same, why, sizeof(why));
	result("kcmp.order-FILE", ok && stable, "%s, stable=%d", why, stable);
	/*
	 * The order of 12 files opened alike, as ranks: the rig compares it
	 * across boots of one kernel.  A plain pointer order repeats itself
	 * on a kernel that boots the same way; the random per-boot cookies
	 * of kcmp's obfuscation make it differ.
	 */
	{
		char sig[64];
		int k = 0;

		for (i = 0; i < 12; i++) {
			int rank = 0;

			for (j = 0; j < 12; j++)
				rank += r[i][j] == 2;
			k += snprintf(sig + k, sizeof(sig) - k, "%c", 'a' + rank);
		}
		printf("KQ-INFO %s kcmp-order-sig %s\n", mode, sig);
	}
	for (i = 0; i < NORD; i++)
		close(fds[i]);

	/* address spaces of 7 processes (self + 6 children) */
	pids[0] = me;
	for (i = 1; i < 7; i++)
		pids[i] = sleeper();
	for (i = 0; i < 7; i++) {
		same[i] = i;
		for (j = 0; j < 7; j++)
			r[i][j] = kcmp(pids[i], pids[j], KCMP_VM, 0, 0);
	}
	ok = check_order(r, 7, same, why, sizeof(why));
	result("kcmp.order-VM", ok, "%s", why);
	for (i = 1; i < 7; i++)
		kill_reap(pids[i]);
}

static void test_kcmp_errors(void)
{
	pid_t me = getpid(), dead, c;
	int fd = open("/", O_RDONLY), cfd, st = 0;
	long r;

	cfd = open("/", O_RDONLY);
	close(cfd);
	r = kcmp(me, me, KCMP_FILE, cfd, fd);
	result("kcmp.EBADF", r == -1 && errno == EBADF, "closed fd %d as idx1: %ld %s", cfd, r,
	       r == -1 ? strerror(errno) : "");
	r = kcmp(me, me, KCMP_FILE, fd, cfd);
	result("kcmp.EBADF-idx2", r == -1 && errno == EBADF, "closed fd %d as idx2: %ld %s", cfd, r,
	       r == -1 ? strerror(errno) : "");
	close(fd);

	fflush(stdout);
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	r = kcmp(me, dead, KCMP_VM, 0, 0);
	result("kcmp.ESRCH", r == -1 && errno == ESRCH, "dead pid %d: %ld %s", dead, r,
	       r == -1 ? strerror(errno) : "");

	/* the first type this kernel does not have: 9 with the series' KCMP_IOURING_FILE */
	r = kcmp(me, me, KCMP_IOURING_FILE_ + has_series, 0, 0);
	result("kcmp.EINVAL-type", r == -1 && errno == EINVAL, "type %d: %ld %s",
	       KCMP_IOURING_FILE_ + has_series, r,
	       r == -1 ? strerror(errno) : "");

	if (getuid() == 0) {
		/* a child that becomes another user must not compare against root */
		fflush(stdout);
		c = fork();
		if (c == 0) {
			if (setgroups(0, NULL) || setgid(1001) || setuid(1001))
				_exit(10);
			/* the other user's task as pid2, then as pid1 */
			r = kcmp(getpid(), getppid(), KCMP_VM, 0, 0);
			if (r != -1 || errno != EPERM)
				_exit(r == -1 ? 20 + errno % 100 : 3);
			r = kcmp(getppid(), getpid(), KCMP_VM, 0, 0);
			_exit(r == -1 && errno == EPERM ? 0 : r == -1 ? 40 + errno % 100 : 4);
		}
		waitpid(c, &st, 0);
		result("kcmp.EPERM", WIFEXITED(st) && WEXITSTATUS(st) == 0,
		       "uid 1001 vs root parent as pid2 and as pid1: child exit %d (0=EPERM both)",
		       WEXITSTATUS(st));
	} else {
		long r2;
		int e1, e2;

		r = kcmp(me, 1, KCMP_VM, 0, 0);
		e1 = errno;
		r2 = kcmp(1, me, KCMP_VM, 0, 0);
		e2 = errno;
		result("kcmp.EPERM", r == -1 && e1 == EPERM && r2 == -1 && e2 == EPERM,
		       "uid %d vs root pid 1 as pid2: %ld %s, as pid1: %ld %s", getuid(), r,
		       r == -1 ? strerror(e1) : "", r2, r2 == -1 ? strerror(e2) : "");
	}
}

/*
 * Across pid namespaces: kcmp() looks pids up in the caller's namespace,
 * the children file prints them in the namespace of the procfs mount.
 * H unshares a pid namespace; its child I is pid 1 there and forks J
 * (pid 2 there).  I compares itself with J by inner pids, cannot see
 * H, and reads J as "2" in a procfs of its own; the test reads J by its
 * outer pid in the outer /proc.
 */
static void test_pidns(void)
{
	/* up: H sends I's outer pid; jp: I sends J's pid (two pipes: no race) */
	int up[2], jp[2], st = 0, n, err;
	pid_t h, got[8], inner[2] = {0, 0};

	if (pipe(up) || pipe(jp)) {
		result("pidns.setup", 0, "pipe: %s", strerror(errno));
		return;
	}
	fflush(stdout);
	h = fork();
	if (h == 0) {
		pid_t i, hp = getpid();

		close(up[0]);
		close(jp[0]);
		if (unshare(CLONE_NEWPID))
			_exit(10);
		i = fork();
		if (i == 0) {
			char buf[64] = "";
			pid_t j = sleeper();
			long same, other;
			int ok = 1, fd;

			if (getpid() != 1 || j != 2)
				_exit(11);
			if (has_kcmp) {
				same = kcmp(1, 1, KCMP_VM, 0, 0);
				other = kcmp(1, 2, KCMP_VM, 0, 0);
				ok = same == 0 && is_ne(other) &&
				     kcmp(1, hp, KCMP_VM, 0, 0) == -1 && errno == ESRCH;
			}
			if (has_children) {
				ok = ok && !unshare(CLONE_NEWNS) &&
				     !mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) &&
				     !mkdir("/pidns-proc", 0700) &&
				     !mount("proc", "/pidns-proc", "proc", 0, NULL);
				fd = ok ? open("/pidns-proc/1/task/1/children", O_RDONLY) : -1;
				ok = fd >= 0 && read(fd, buf, sizeof(buf) - 1) > 0 &&
				     !strcmp(buf, "2 ");
			}
			/* only if all held: tell the outside J's pid, then wait to be killed */
			if (!ok || write(jp[1], &j, sizeof(j)) != sizeof(j))
				_exit(12);
			for (;;)
				pause();
		}
		close(jp[1]); /* the outside reads EOF if I exits without writing */
		if (i < 0 || write(up[1], &i, sizeof(i)) != sizeof(i))
			_exit(13);
		waitpid(i, &st, 0);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 14);
	}
	close(up[1]);
	close(jp[1]);
	if (read(up[0], &inner[0], sizeof(pid_t)) != sizeof(pid_t) ||
	    read(jp[0], &inner[1], sizeof(pid_t)) != sizeof(pid_t)) {
		if (inner[0] > 0)
			kill(inner[0], SIGKILL);
		waitpid(h, &st, 0);
		close(up[0]);
		close(jp[0]);
		result("pidns", 0,
		       "the namespace's init failed its own checks (exit %d: 10 unshare, "
		       "11 pids, 12 kcmp/children inside)",
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return;
	}
	close(up[0]);
	close(jp[0]);
	/* inner[0]: I's outer pid; inner[1]: J's pid as I saw it (2) */
	if (has_children) {
		char path[64], status[2048] = "", want[64], *ns = NULL;

		n = read_children(inner[0], inner[0], got, 8, &err);
		/* that pid must be J: its NSpid line is "<outer pid> 2" */
		if (n == 1) {
			snprintf(path, sizeof(path), "/proc/%d/status", got[0]);
			read_file(path, status, sizeof(status));
			ns = strstr(status, "NSpid:");
		}
		snprintf(want, sizeof(want), "NSpid:\t%d\t%d\n", n == 1 ? got[0] : -1, inner[1]);
		result("pidns.children",
		       n == 1 && got[0] != 2 && ns && !strncmp(ns, want, strlen(want)),
		       "outer /proc lists I's child as %d, whose NSpid is '%.*s' (want '%.*s'; "
		       "\"2\" in its own procfs)",
		       n == 1 ? got[0] : -1, ns ? (int)strcspn(ns, "\n") : 1, ns ? ns : "-",
		       (int)strlen(want) - 1, want);
	}
	if (has_kcmp)
		result("pidns.kcmp", kcmp(getpid(), inner[0], KCMP_VM, 0, 0) > 0,
		       "inside: kcmp by inner pids, ESRCH for a pid outside; outside: by outer pid "
		       "%d",
		       inner[0]);
	kill(inner[0], SIGKILL);
	waitpid(h, &st, 0);
}

/* ---------- /proc/PID/stat ---------- */

static int read_stat_at(const char *path, unsigned long long *f, char s[][32], int max);

/* fields[1..52]; returns number of fields */
static int read_stat(pid_t pid, unsigned long long *f, char s[][32], int max)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	return read_stat_at(path, f, s, max);
}

/* /proc/WHAT/stat, WHAT being "PID" or "PID/task/TID" */
static int read_stat_path(const char *what, unsigned long long *f, int max)
{
	char path[96];

	snprintf(path, sizeof(path), "/proc/%s/stat", what);
	return read_stat_at(path, f, NULL, max);
}

static int read_stat_at(const char *path, unsigned long long *f, char s[][32], int max)
{
	char buf[4096], *p, *tok, *save;
	int n = 2;

	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	p = strrchr(buf, ')');
	if (!p)
		return -1;
	for (tok = strtok_r(p + 1, " \n", &save); tok && n < max;
	     tok = strtok_r(NULL, " \n", &save)) {
		n++;
		f[n] = strtoull(tok, NULL, 10);
		if (s)
			snprintf(s[n], 32, "%s", tok);
	}
	return n;
}

static int wait_zombie(pid_t p)
{
	siginfo_t si;

	return waitid(P_PID, p, &si, WEXITED | WNOWAIT);
}

static void test_stat(void)
{
	unsigned long long f[64] = {0};
	static char s[64][32];
	unsigned long as, ae, es, ee;
	int n, i, ok, last_env = 0;
	pid_t z, rd, me = getpid();

	n = read_stat(me, f, s, 64);
	result("stat.fields", n == 52, "%d fields", n);

	as = (unsigned long)g_argv[0];
	ae = (unsigned long)g_argv[g_argc - 1] + strlen(g_argv[g_argc - 1]) + 1;
	while (g_envp[last_env])
		last_env++;
	es = last_env ? (unsigned long)g_envp[0] : 0;
	ee = last_env ? (unsigned long)g_envp[last_env - 1] + strlen(g_envp[last_env - 1]) + 1 : 0;
	if (has_stat)
		result("stat.arg-env", f[48] == as && f[49] == ae && f[50] == es && f[51] == ee,
		       "arg %#llx-%#llx (argv %#lx-%#lx) env %#llx-%#llx (envp %#lx-%#lx)", f[48],
		       f[49], as, ae, f[50], f[51], es, ee);
	else
		result("stat.arg-env-absent", f[48] == 0 && f[49] == 0 && f[50] == 0 && f[51] == 0,
		       "arg %#llx-%#llx env %#llx-%#llx (want 0)", f[48], f[49], f[50], f[51]);

	/* no raw kernel pointer in any field */
	for (ok = 1, i = 3; i <= n; i++)
		if (s[i][0] != '-' && f[i] >= 0xffff800000000000ULL && f[i] != ~0ULL)
			ok = 0; /* ~0 is RLIM_INFINITY in rsslim (field 25) */
	result("stat.no-kernel-pointer", ok,
	       "all %d fields below the kernel half (RLIM_INFINITY aside)", n);

	/* exit_code of a zombie killed by SIGKILL: 9 if permitted and present */
	z = sleeper();
	kill(z, SIGKILL);
	wait_zombie(z);
	memset(f, 0, sizeof(f));
	n = read_stat(z, f, NULL, 64);
	result("stat.exit_code", n == 52 && f[52] == (has_stat ? 9 : 0),
	       "zombie %d killed by SIGKILL: exit_code=%llu want %d", z, f[52], has_stat ? 9 : 0);

	/* exit_code of _exit(3): the wait status 3 << 8, also in task/TID/stat */
	{
		unsigned long long g[64] = {0};
		char path[64];
		pid_t x;
		int m, ok2;

		fflush(stdout);
		x = fork();
		if (x == 0)
			_exit(3);
		wait_zombie(x);
		n = read_stat(x, f, NULL, 64);
		snprintf(path, sizeof(path), "%d/task/%d", x, x);
		m = read_stat_path(path, g, 64);
		ok2 = n == 52 && m == 52 && f[52] == (has_stat ? 768 : 0) && g[52] == f[52];
		result("stat.exit_code-_exit3", ok2,
		       "zombie %d after _exit(3): stat %llu, task/%d/stat %llu (want %d)", x, f[52],
		       x, g[52], has_stat ? 768 : 0);
		kill_reap(x);
	}

	/* unprivileged reader sees zeros */
	if (getuid() == 0) {
		int st = 0;

		fflush(stdout);
		rd = fork();
		if (rd == 0) {
			unsigned long long g[64] = {0}, h[64] = {0};
			int a, b;

			if (setgroups(0, NULL) || setgid(1001) || setuid(1001))
				_exit(10);
			a = read_stat(z, g, NULL, 64);
			b = read_stat(1, h, NULL, 64);
			if (a != 52 || b != 52)
				_exit(11);
			for (i = 48; i <= 52; i++)
				if (g[i] || h[i])
					_exit(12);
			_exit(0);
		}
		waitpid(rd, &st, 0);
		result("stat.unprivileged-reader", WIFEXITED(st) && WEXITSTATUS(st) == 0,
		       "uid 1001 reads root zombie %d and pid 1: exit %d (0=all C/R fields 0)", z,
		       WEXITSTATUS(st));
	} else {
		memset(f, 0, sizeof(f));
		n = read_stat(1, f, NULL, 64);
		result("stat.unprivileged-reader",
		       n == 52 && !f[48] && !f[49] && !f[50] && !f[51] && !f[52],
		       "uid %d reads root pid 1: %llu %llu %llu %llu exit_code=%llu", getuid(),
		       f[48], f[49], f[50], f[51], f[52]);
	}
	kill_reap(z);
}

/* ---------- PR_SET_MM ---------- */

static const struct {
	int opt;
	const char *name;
} mmopt[] = {
	{PR_SET_MM_ARG_START, "ARG_START"}, {PR_SET_MM_ARG_END, "ARG_END"},
	{PR_SET_MM_ENV_START, "ENV_START"}, {PR_SET_MM_ENV_END, "ENV_END"},
	{PR_SET_MM_AUXV, "AUXV"},
};

static int set_mm(int opt, unsigned long addr, unsigned long len)
{
	return prctl(PR_SET_MM, opt, addr, len, 0) ? errno : 0;
}

static unsigned long last_vma_end(void)
{
	char buf[16384], *l;
	unsigned long s, e, best = 0;

	if (read_file("/proc/self/maps", buf, sizeof(buf)) <= 0)
		return 0;
	for (l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (sscanf(l, "%lx-%lx", &s, &e) == 2 && e < 0x800000000000UL && e > best)
			best = e;
	return best;
}

static int cmd_in_ps(const char *want)
{
	char line[512], pid[16];
	FILE *p;
	int found = 0;

	snprintf(pid, sizeof(pid), "%d", getpid());
	fflush(stdout);
	p = popen("ps -o pid,args 2>/dev/null || ps", "r");
	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p)) {
		char *s = line;

		while (*s == ' ')
			s++;
		if (!strncmp(s, pid, strlen(pid)) && s[strlen(pid)] == ' ' && strstr(s, want))
			found = 1;
	}
	pclose(p);
	return found;
}

static void __attribute__((noinline)) test_prctl_root(void)
{
	/* on this function's stack: inside the stack VMA, as the seed requires */
	char args[64], env[64];
	unsigned long auxv[512], orig[512], back[512];
	static const char newargs[] = "amber-rewritten\0--cmdline\0";
	static const char newenv[] = "AMBER_ENV=rewritten\0";
	unsigned long long f[64] = {0};
	char buf[1024];
	ssize_t n, on;
	int e1, e2, e3, e4, fd, max = 0, len;
	unsigned long hi;
	char *heap;

	memcpy(args, newargs, sizeof(newargs));
	memcpy(env, newenv, sizeof(newenv));

	e1 = set_mm(PR_SET_MM_ARG_START, (unsigned long)args, 0);
	e2 = set_mm(PR_SET_MM_ARG_END, (unsigned long)args + sizeof(newargs) - 1, 0);
	n = read_file("/proc/self/cmdline", buf, sizeof(buf));
	result("prctl.ARG_START+END",
	       !e1 && !e2 && n == sizeof(newargs) - 1 && !memcmp(buf, newargs, n),
	       "rc %s/%s, /proc/self/cmdline %zd bytes '%s'", strerror(e1), strerror(e2), n, buf);
	read_stat(getpid(), f, NULL, 64);
	if (has_stat) /* else the fields read 0: test_stat checks that */
		result("prctl.stat-follows",
		       f[48] == (unsigned long)args &&
			       f[49] == (unsigned long)args + sizeof(newargs) - 1,
		       "stat arg_start=%#llx arg_end=%#llx buf=%p", f[48], f[49], (void *)args);
	result("prctl.ps-shows-cmdline", cmd_in_ps("amber-rewritten --cmdline"),
	       "ps -o pid,args lists pid %d as 'amber-rewritten --cmdline'", getpid());

	e1 = set_mm(PR_SET_MM_ENV_START, (unsigned long)env, 0);
	e2 = set_mm(PR_SET_MM_ENV_END, (unsigned long)env + sizeof(newenv) - 1, 0);
	n = read_file("/proc/self/environ", buf, sizeof(buf));
	result("prctl.ENV_START+END",
	       !e1 && !e2 && n == sizeof(newenv) - 1 && !memcmp(buf, newenv, n),
	       "rc %s/%s, /proc/self/environ %zd bytes '%s'", strerror(e1), strerror(e2), n, buf);

	/*
	 * The 2012 seed wanted the arguments and the environment on a rw stack
	 * mapping; 6.12 accepts any mapping (programs that rename themselves
	 * point argv at a fresh anonymous one), and so must the series.
	 */
	heap = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (heap != MAP_FAILED) {
		memcpy(heap, newargs, sizeof(newargs));
		e1 = set_mm(PR_SET_MM_ARG_START, (unsigned long)heap, 0);
		e2 = set_mm(PR_SET_MM_ENV_START, (unsigned long)heap, 0);
		read_stat(getpid(), f, NULL, 64);
		/* without the stat fields: /proc/self/cmdline starts at the mapping */
		n = read_file("/proc/self/cmdline", buf, sizeof(buf));
		result("prctl.non-stack-VMA-accepted",
		       !e1 && !e2 &&
			       (has_stat ? f[48] == (unsigned long)heap &&
						   f[50] == (unsigned long)heap
					 : n > 0 && !memcmp(buf, newargs, strlen(newargs))),
		       "anonymous rw mapping %p: ARG_START %s, ENV_START %s, stat arg_start %#llx, "
		       "cmdline '%s'",
		       heap, strerror(e1), strerror(e2), f[48], n > 0 ? buf : "");
		set_mm(PR_SET_MM_ARG_START, (unsigned long)args, 0);
		set_mm(PR_SET_MM_ENV_START, (unsigned long)env, 0);
		munmap(heap, 4096);
	} else {
		result("prctl.non-stack-VMA", 0, "mmap: %s", strerror(errno));
	}

	/* AUXV: save, find the kernel's size (AT_VECTOR_SIZE words), check AT_NULL */
	fd = open("/proc/self/auxv", O_RDONLY);
	on = fd >= 0 ? read(fd, orig, sizeof(orig)) : -1;
	if (fd >= 0)
		close(fd);
	for (len = 8; len <= (int)sizeof(auxv); len += 8) {
		memset(auxv, 0, sizeof(auxv));
		if (set_mm(PR_SET_MM_AUXV, (unsigned long)auxv, len) == 0)
			max = len;
		else
			break;
	}
	e3 = set_mm(PR_SET_MM_AUXV, (unsigned long)auxv, max + 8);
	result("prctl.AUXV-too-long", max > 0 && e3 == EINVAL,
	       "largest accepted %d bytes, %d bytes -> %s", max, max + 8, strerror(e3));
	/* the checks below read the last AT_NULL pair: at least 2 pairs (16 words) */
	if (max < 16 * 8) {
		result("prctl.AUXV-AT_NULL", 0, "the kernel accepts only %d bytes of auxv", max);
		return;
	}
	for (len = 0; len < max / 8; len++)
		auxv[len] = len % 2 ? 0x1000 + len : 100 + len; /* no AT_NULL anywhere */
	e1 = set_mm(PR_SET_MM_AUXV, (unsigned long)auxv, max);
	fd = open("/proc/self/auxv", O_RDONLY);
	n = fd >= 0 ? read(fd, back, sizeof(back)) : -1;
	if (fd >= 0)
		close(fd);
	result("prctl.AUXV-AT_NULL",
	       !e1 && n == max && !back[max / 8 - 1] && !back[max / 8 - 2] &&
		       !memcmp(back, auxv, max - 16),
	       "rc %s, /proc/self/auxv %zd bytes, last pair %lu,%lu (want AT_NULL)", strerror(e1),
	       n, n > 16 ? back[n / 8 - 2] : 99, n > 16 ? back[n / 8 - 1] : 99);
	memset(auxv, 0, sizeof(auxv));
	auxv[0] = 6; /* AT_PAGESZ */
	auxv[1] = 4096;
	e1 = set_mm(PR_SET_MM_AUXV, (unsigned long)auxv, 32);
	fd = open("/proc/self/auxv", O_RDONLY);
	n = fd >= 0 ? read(fd, back, sizeof(back)) : -1;
	if (fd >= 0)
		close(fd);
	result("prctl.AUXV", !e1 && n == 32 && back[0] == 6 && back[1] == 4096 && !back[2],
	       "rc %s, /proc/self/auxv %zd bytes", strerror(e1), n);
	if (on > 0)
		set_mm(PR_SET_MM_AUXV, (unsigned long)orig, on);

	/* error paths */
	e1 = set_mm(PR_SET_MM_AUXV, 16, 16);
	result("prctl.AUXV-EFAULT", e1 == EFAULT, "auxv at 0x10: %s", strerror(e1));
	hi = last_vma_end() + 0x10000;
	e2 = set_mm(PR_SET_MM_ARG_END, hi, 0);
	result("prctl.ARG_END-EFAULT", e2 == EFAULT, "address %#lx above every VMA: %s", hi,
	       strerror(e2));
	/*
	 * The TASK_SIZE bound exactly: at it EINVAL, one byte below it the
	 * range check passes and, no VMA being there, EFAULT.  An off-by-one
	 * in either direction fails.  TASK_SIZE is 2^47 - 4096, or 2^56 - 4096
	 * with 5-level paging on (Debian's kernel on a CPU with LA57).
	 */
	{
		const unsigned long ts4 = (1UL << 47) - 4096, ts5 = (1UL << 56) - 4096;
		int a4 = set_mm(PR_SET_MM_ARG_END, ts4, 0),
		    b4 = set_mm(PR_SET_MM_ARG_END, ts4 - 1, 0);
		int a5 = set_mm(PR_SET_MM_ARG_END, ts5, 0),
		    b5 = set_mm(PR_SET_MM_ARG_END, ts5 - 1, 0);
		int l4 = a4 == EINVAL && b4 == EFAULT,
		    l5 = a4 == EFAULT && a5 == EINVAL && b5 == EFAULT;

		result("prctl.TASK_SIZE-bound", l4 || l5,
		       "ARG_END at 2^47-4096: %s, -1: %s; at 2^56-4096: %s, -1: %s (want EINVAL at "
		       "TASK_SIZE, EFAULT one below)",
		       strerror(a4), strerror(b4), strerror(a5), strerror(b5));
		set_mm(PR_SET_MM_ARG_END, (unsigned long)args + sizeof(newargs) - 1, 0);
	}
	e1 = set_mm(PR_SET_MM_ARG_START, 0x100, 0);
	e2 = set_mm(PR_SET_MM_ENV_START, 1UL << 56, 0); /* at or above TASK_SIZE either way */
	e3 = set_mm(PR_SET_MM_ENV_END, ~0UL - 4095, 0);
	e4 = set_mm(PR_SET_MM_ARG_START, (unsigned long)args, 1);
	result("prctl.EINVAL", e1 == EINVAL && e2 == EINVAL && e3 == EINVAL && e4 == EINVAL,
	       "below mmap_min_addr: %s, 2^56: %s, kernel address: %s, arg4!=0: %s", strerror(e1),
	       strerror(e2), strerror(e3), strerror(e4));
}

/*
 * CAP_SYS_RESOURCE is checked with capable(): in a user namespace of its
 * own the caller has every capability, but only there, and must get EPERM.
 */
static void test_prctl_userns(void)
{
	int st = 0;
	pid_t c;

	fflush(stdout);
	c = fork();
	if (c == 0) {
		char buf[16] = "x";

		if (unshare(CLONE_NEWUSER))
			_exit(10);
		if (set_mm(PR_SET_MM_ARG_START, (unsigned long)buf, 0) != EPERM)
			_exit(11);
		_exit(set_mm(PR_SET_MM_AUXV, (unsigned long)buf, 16) == EPERM ? 0 : 12);
	}
	waitpid(c, &st, 0);
	result("prctl.userns-EPERM", WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "root in a new user namespace (all caps there only): exit %d (0 = EPERM; 10 no "
	       "user namespace, 11/12 accepted)",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void test_prctl(void)
{
	char buf[64] = "x";
	unsigned long aux[4] = {6, 4096, 0, 0};
	unsigned int i;
	int e;

	for (i = 0; i < sizeof(mmopt) / sizeof(mmopt[0]); i++) {
		/* off: as an unknown option, EPERM before EINVAL for the unprivileged */
		int want = getuid() ? EPERM : has_prctl ? -1 : EINVAL;
		char nm[64];

		if (want == -1)
			continue;
		e = set_mm(mmopt[i].opt,
			   mmopt[i].opt == PR_SET_MM_AUXV ? (unsigned long)aux : (unsigned long)buf,
			   mmopt[i].opt == PR_SET_MM_AUXV ? sizeof(aux) : 0);
		snprintf(nm, sizeof(nm), "prctl.%s-%s", mmopt[i].name,
			 !has_prctl ? "absent" : "EPERM");
		result(nm, e == want, "rc %s want %s", e ? strerror(e) : "0", strerror(want));
	}
	if (getuid() == 0)
		test_prctl_userns();
	if (has_prctl && getuid() == 0)
		test_prctl_root();
}

/*
 * KCMP_IOURING_FILE and fdinfo's SetupFlags (0007, 0008): a ring set up with
 * SUBMIT_ALL | CLAMP, a pipe's read end in slot 1 of its files, slot 0
 * empty.  On a kernel without the series (Debian's): type 8 is unknown
 * (EINVAL) and fdinfo has no SetupFlags.
 */
static void test_kcmp_iouring(void)
{
	struct kcmp_iouring_slot_ slot;
	struct io_uring_params p;
	int pp[2], ring, files[2];
	long r, flags = -1;
	char path[64], line[256];
	FILE *f;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_CLAMP;
	ring = (int)syscall(__NR_io_uring_setup, 2, &p);
	if (ring < 0 || pipe(pp)) {
		result("kcmp.iouring-setup", 0, "io_uring_setup or pipe: %s", strerror(errno));
		return;
	}
	files[0] = -1;
	files[1] = pp[0];
	if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES, files, 2)) {
		result("kcmp.iouring-setup", 0, "registering the pipe: %s", strerror(errno));
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ring);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "SetupFlags:", 11))
			flags = strtol(line + 11, NULL, 16);
	if (f)
		fclose(f);
	slot.ring_fd = ring;
	slot.index = 1;
	r = kcmp(getpid(), getpid(), KCMP_IOURING_FILE_, pp[0], (unsigned long)&slot);
	if (!has_series) {
		result("kcmp.iouring-absent", r == -1 && errno == EINVAL && flags == -1,
		       "type 8: %ld %s; fdinfo SetupFlags %s", r, r == -1 ? strerror(errno) : "",
		       flags == -1 ? "absent" : "shown");
		goto out;
	}
	result("fdinfo.iouring-setup-flags", flags == (long)p.flags, "SetupFlags %#lx, set up %#x",
	       flags, p.flags);
	result("kcmp.iouring-same", r == 0, "the pipe's read end against slot 1: %ld %s", r,
	       r == -1 ? strerror(errno) : "");
	r = kcmp(getpid(), getpid(), KCMP_IOURING_FILE_, pp[1], (unsigned long)&slot);
	result("kcmp.iouring-other", r == 1 || r == 2, "the write end against slot 1: %ld %s", r,
	       r == -1 ? strerror(errno) : "");
	slot.index = 0;
	r = kcmp(getpid(), getpid(), KCMP_IOURING_FILE_, pp[0], (unsigned long)&slot);
	result("kcmp.iouring-ENOENT-empty", r == -1 && errno == ENOENT, "empty slot 0: %ld %s", r,
	       r == -1 ? strerror(errno) : "");
	slot.index = 2;
	r = kcmp(getpid(), getpid(), KCMP_IOURING_FILE_, pp[0], (unsigned long)&slot);
	result("kcmp.iouring-ENOENT-past", r == -1 && errno == ENOENT, "slot 2 of 2: %ld %s", r,
	       r == -1 ? strerror(errno) : "");
	slot.ring_fd = pp[1];
	slot.index = 1;
	r = kcmp(getpid(), getpid(), KCMP_IOURING_FILE_, pp[0], (unsigned long)&slot);
	result("kcmp.iouring-EINVAL-no-ring", r == -1 && errno == EINVAL, "a pipe as ring: %ld %s",
	       r, r == -1 ? strerror(errno) : "");
out:
	close(ring);
	close(pp[0]);
	close(pp[1]);
}

/* --expect=present|absent|children,kcmp,stat,prctl[,noipc][,upstream] */
static void set_expect(const char *arg)
{
	int all = !strncmp(arg, "present", 7) && !strstr(arg, "noipc");

	snprintf(expect_arg, sizeof(expect_arg), "%s", arg);
	has_children = all || strstr(arg, "children");
	has_kcmp = all || strstr(arg, "kcmp");
	has_stat = all || strstr(arg, "stat");
	has_prctl = all || strstr(arg, "prctl");
	if (strstr(arg, "noipc")) { /* "present,noipc": all four, without SYSVIPC and EPOLL */
		has_children = has_kcmp = has_stat = has_prctl = 1;
		has_ipc = 0;
	}
	has_series = !strstr(arg, "upstream");
}

int main(int argc, char **argv, char **envp)
{
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--expect=", 9))
			set_expect(argv[i] + 9);
		else if (!strcmp(argv[i], "--order-only"))
			order_only = 1;
		else if (!strcmp(argv[i], "--mode=user"))
			mode = "user";
		else if (!strncmp(argv[i], "--user=", 7) && getuid() == 0) {
			uid_t u = atoi(argv[i] + 7);
			char ex[80], *nargv[] = {argv[0], ex, "--mode=user", NULL};

			snprintf(ex, sizeof(ex), "--expect=%s", expect_arg);

			if (setgroups(0, NULL) || setgid(u) || setuid(u)) {
				printf("KQ-RESULT user.drop FAIL cannot become uid %u: %s\n", u,
				       strerror(errno));
				return 1;
			}
			/* re-exec: fresh argv/env and a dumpable mm for the new uid */
			execve("/proc/self/exe", nargv, envp);
			printf("KQ-RESULT user.exec FAIL %s\n", strerror(errno));
			return 1;
		}
	}
	g_argc = argc;
	g_argv = argv;
	g_envp = envp;
	printf("KQ-INFO %s: uid=%d expect=%s (children %d kcmp %d stat %d prctl %d)\n", mode,
	       getuid(), expect_arg, has_children, has_kcmp, has_stat, has_prctl);

	if (order_only) {
		test_kcmp_order();
		printf("KQ-SUMMARY %s %d passed, %d failed\n", mode, npass, nfail);
		return nfail ? 1 : 0;
	}
	test_children();
	if (has_kcmp) {
		if (!has_ipc)
			test_kcmp_noipc();
		test_kcmp_types();
		test_kcmp_order();
		test_kcmp_errors();
		test_kcmp_iouring();
		result("kcmp.no-kernel-pointer", kcmp_bad_ret == 0,
		       "%d kcmp results outside {0,1,2,-1}", kcmp_bad_ret);
	} else {
		test_kcmp_absent();
	}
	test_stat();
	test_prctl();
	if (getuid() == 0 && (has_children || has_kcmp))
		test_pidns();
	printf("KQ-SUMMARY %s %d passed, %d failed\n", mode, npass, nfail);
	return nfail ? 1 : 0;
}
