// SPDX-License-Identifier: MIT
/*
 * seccomp: a tree whose threads have different filter chains, and a child in
 * strict mode.  After the restore each thread checks that its own filters
 * still answer its syscalls as they did, and the children what only shared
 * filters and strict mode do.
 *
 *   strict child   forked first: SECCOMP_MODE_STRICT, blocked in read();
 *                  on go it echoes a byte, then getpid() must kill it
 *   F1             getppid -> ERRNO 101 (SECCOMP_FILTER_FLAG_LOG), for all
 *   shared child   forked after F1, two threads sharing it: on go one
 *                  installs F5 (sysinfo -> ERRNO 105) with TSYNC, which
 *                  works only while the other's filters are its own
 *                  ancestors, and the other then sees F5
 *   thread A       F1 + F2 (getpgrp -> ERRNO 102)
 *   thread B       F1
 *   main thread    F1 + F3 (getsid -> ERRNO 103), after the threads exist
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>

#include "prog.h"

static pthread_barrier_t set_up;
static volatile int go;

/* A filter making syscall nr fail with err; the others pass. */
static void deny(long nr, int err, unsigned flags)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);

	if (r)
		prog_die("seccomp filter for syscall %ld (flags %#x) returned %ld", nr, flags, r);
}

/* -errno of a raw syscall without arguments, or its result. */
static long sc(long nr)
{
	long r = syscall(nr, 0, 0, 0);

	return r < 0 ? -errno : r;
}

static void expect(const char *who, long got_ppid, long got_pgrp, long got_sid, int ppid_err,
		   int pgrp_err, int sid_err)
{
	CHECK(ppid_err ? got_ppid == -ppid_err : got_ppid > 0, "%s: getppid %ld (want %s%d)", who,
	      got_ppid, ppid_err ? "-" : "> ", ppid_err);
	CHECK(pgrp_err ? got_pgrp == -pgrp_err : got_pgrp > 0, "%s: getpgrp %ld (want %s%d)", who,
	      got_pgrp, pgrp_err ? "-" : "> ", pgrp_err);
	CHECK(sid_err ? got_sid == -sid_err : got_sid > 0, "%s: getsid %ld (want %s%d)", who,
	      got_sid, sid_err ? "-" : "> ", sid_err);
}

static void *thread_a(void *arg)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	long p, g, s;

	(void)arg;
	deny(SYS_getpgrp, 102, 0);
	pthread_barrier_wait(&set_up);
	while (!go)
		nanosleep(&ts, NULL);
	p = sc(SYS_getppid);
	g = sc(SYS_getpgrp);
	s = sc(SYS_getsid);
	expect("thread A (F1, F2)", p, g, s, 101, 102, 0);
	return NULL;
}

static void *thread_b(void *arg)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	long p, g, s;

	(void)arg;
	pthread_barrier_wait(&set_up);
	while (!go)
		nanosleep(&ts, NULL);
	p = sc(SYS_getppid);
	g = sc(SYS_getpgrp);
	s = sc(SYS_getsid);
	expect("thread B (F1)", p, g, s, 101, 0, 0);
	return NULL;
}

/* The strict child: only read, write, exit and sigreturn from here on. */
static void __attribute__((noreturn)) strict_child(int in, int out)
{
	char c;

	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT))
		syscall(SYS_exit, 2);
	if (syscall(SYS_read, in, &c, 1) != 1)
		syscall(SYS_exit, 3);
	syscall(SYS_write, out, "k", 1);
	syscall(SYS_getpid); /* strict mode kills it here */
	syscall(SYS_write, out, "x", 1);
	syscall(SYS_exit, 4);
	__builtin_unreachable();
}

static volatile int shared_go, shared_seen = -1;

static void *shared_thread(void *arg)
{
	struct timespec ts = {0, 1000 * 1000};
	struct sysinfo si;

	(void)arg;
	while (!shared_go)
		nanosleep(&ts, NULL);
	shared_seen = sysinfo(&si) < 0 ? errno : 0;
	return NULL;
}

/* The shared child: reports 'y' on out when TSYNC worked and reached its thread. */
static void __attribute__((noreturn)) shared_child(int out)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sysinfo, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 105),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	pthread_t th;
	long r, p;

	if (pthread_create(&th, NULL, shared_thread, NULL))
		_exit(2);
	while (!prog_go_exists())
		nanosleep(&ts, NULL);
	p = sc(SYS_getppid);
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
	if (r)
		fprintf(stderr,
			"FAIL: shared child: TSYNC returned %ld (errno %d): its threads' "
			"filters are not shared any more\n",
			r, errno);
	shared_go = 1; /* the thread may look now */
	pthread_join(th, NULL);
	if (p != -101)
		fprintf(stderr, "FAIL: shared child: getppid %ld (want -101)\n", p);
	if (!r && shared_seen != 105)
		fprintf(stderr, "FAIL: shared child: its thread's sysinfo got errno %d, want 105\n",
			shared_seen);
	r = write(out, !r && p == -101 && shared_seen == 105 ? "y" : "n", 1);
	_exit(0);
}

int main(int argc, char **argv)
{
	int to_strict[2], from_strict[2], from_shared[2], st = 0, ok;
	pthread_t a, b;
	pid_t strict, shared;
	char c = 0, c2 = 0;
	long p, g, s;

	prog_init(argc, argv);
	if (pipe(to_strict) || pipe(from_strict) || pipe(from_shared))
		prog_die("pipe");
	strict = fork();
	if (strict < 0)
		prog_die("fork");
	if (!strict)
		strict_child(to_strict[0], from_strict[1]);
	close(from_strict[1]);
	close(to_strict[0]);

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		prog_die("no_new_privs");
	deny(SYS_getppid, 101, SECCOMP_FILTER_FLAG_LOG);
	shared = fork();
	if (shared < 0)
		prog_die("fork");
	if (!shared)
		shared_child(from_shared[1]);
	close(from_shared[1]);

	pthread_barrier_init(&set_up, NULL, 3);
	if (pthread_create(&a, NULL, thread_a, NULL) || pthread_create(&b, NULL, thread_b, NULL))
		prog_die("pthread_create");
	pthread_barrier_wait(&set_up);
	deny(SYS_getsid, 103, 0);
	prog_ready();
	prog_wait_go();
	go = 1;

	p = sc(SYS_getppid);
	g = sc(SYS_getpgrp);
	s = sc(SYS_getsid);
	if (prog_sabotage())
		s = 1;
	expect("main thread (F1, F3)", p, g, s, 101, 0, 103);
	pthread_join(a, NULL);
	pthread_join(b, NULL);

	ok = write(to_strict[1], "g", 1) == 1;
	CHECK(ok, "woke the strict child");
	ok = read(from_strict[0], &c, 1) == 1 && c == 'k';
	CHECK(ok, "the strict child echoed (%c)", c);
	ok = read(from_strict[0], &c2, 1) == 0;
	CHECK(ok, "the strict child wrote nothing more (%c)", c2);
	ok = waitpid(strict, &st, 0) == strict && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
	CHECK(ok, "strict mode killed the child at getpid (status %#x)", st);

	c = 0;
	ok = read(from_shared[0], &c, 1) == 1 && c == 'y';
	CHECK(ok, "the shared child's TSYNC filter reached its other thread (%c)", c);
	ok = waitpid(shared, &st, 0) == shared && WIFEXITED(st) && !WEXITSTATUS(st);
	CHECK(ok, "the shared child exited (status %#x)", st);
	return prog_done();
}
