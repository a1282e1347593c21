// SPDX-License-Identifier: MIT
/*
 * A tree that is its own pid namespace (src/ns/pidns.c).  The program
 * unshares a pid namespace and forks its init I (pid 1 there), the root the
 * test dumps; it waits for I.  I forks A, which makes a session of its own
 * and a thread, and A's child A1, which makes a process group of its own in
 * A's session; and Z, which exits with status 7 and stays a zombie.  Each
 * records its getpid()/getppid()/getsid()/getpgid() (and the thread its tid)
 * before the dump and checks them after it; I also that it is pid 1 with
 * getppid() 0, and that it still reaps A (status 0: its checks passed) and Z
 * (status 7).  The test checks that the namespace is a new one (a dump that
 * is refused leaves the program running in its own).
 * DIR/ready holds I's host pid (/proc/self is the host's here).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <sys/epoll.h>

#include "prog.h"

struct ids {
	pid_t pid, ppid, sid, pgid;
};

static struct ids now(void)
{
	return (struct ids){getpid(), getppid(), getsid(0), getpgid(0)};
}

static void check_ids(const char *who, const struct ids *was)
{
	struct ids is = now();

	CHECK(is.pid == was->pid, "%s: getpid() %d (was %d)", who, is.pid, was->pid);
	CHECK(is.ppid == was->ppid, "%s: getppid() %d (was %d)", who, is.ppid, was->ppid);
	CHECK(is.sid == was->sid, "%s: getsid() %d (was %d)", who, is.sid, was->sid);
	CHECK(is.pgid == was->pgid, "%s: getpgid() %d (was %d)", who, is.pgid, was->pgid);
}

static pid_t thread_tid;

static void *thread_main(void *arg)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);

	(void)arg;
	thread_tid = tid;
	prog_wait_go();
	CHECK(syscall(SYS_gettid) == tid, "A's thread: tid %ld (was %d)", syscall(SYS_gettid), tid);
	return NULL;
}

static void __attribute__((noreturn)) a1_main(void)
{
	struct ids was;

	if (setpgid(0, 0))
		prog_die("A1: setpgid");
	was = now();
	prog_wait_go();
	check_ids("A1", &was);
	exit(prog_failures ? 1 : 0);
}

static void __attribute__((noreturn)) a_main(void)
{
	struct ids was;
	pthread_t th;
	pid_t a1;
	int st;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (setsid() < 0)
		prog_die("A: setsid");
	a1 = fork();
	if (a1 < 0)
		prog_die("fork A1");
	if (!a1)
		a1_main();
	if (pthread_create(&th, NULL, thread_main, NULL))
		prog_die("pthread_create");
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		usleep(1000);
	was = now();
	prog_wait_go();
	check_ids("A", &was);
	pthread_join(th, NULL);
	st = waitpid(a1, &st, 0) == a1 && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : st | 1 << 16;
	CHECK(!st, "A: reaps A1 %d (its checks passed, status %#x)", a1, st);
	exit(prog_failures ? 1 : 0);
}

static void __attribute__((noreturn)) init_main(void)
{
	struct ids was, want;
	char host[32];
	pid_t a, z;
	int st, ok, pfd[2], ep;

	/* no parent-death signal: its parent is amber after the restore, which exits */
	a = fork();
	if (a < 0)
		prog_die("fork A");
	if (!a)
		a_main();
	z = fork();
	if (z < 0)
		prog_die("fork Z");
	if (!z)
		_exit(7);
	while (waitid(P_PID, z, &(siginfo_t){0}, WEXITED | WNOWAIT))
		if (errno != EINTR)
			prog_die("waitid Z");
	/* an epoll watch (its image names processes by the namespace's pids) */
	if (pipe(pfd) || (ep = epoll_create1(0)) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0],
		      &(struct epoll_event){.events = EPOLLIN, .data.u64 = 0x1717}))
		prog_die("epoll");
	was = now();
	/* /proc is the host's: its self is this process's host pid */
	if (readlink("/proc/self", host, sizeof(host) - 1) <= 0)
		prog_die("readlink /proc/self");
	prog_write_atomic("ready", host);
	prog_wait_go();
	want = was;
	if (prog_sabotage())
		want.pid = 2;
	check_ids("I", &want);
	{
		struct epoll_event ev = {0};

		ok = write(pfd[1], "e", 1) == 1 && epoll_wait(ep, &ev, 1, 1000) == 1 &&
		     ev.data.u64 == 0x1717;
		CHECK(ok, "I: its epoll watch on the pipe reports the write");
	}
	CHECK(getpid() == 1 && getppid() == 0, "I: pid %d, parent %d (the init: 1, 0)", getpid(),
	      getppid());
	/* each result first: the arguments are evaluated in no given order */
	ok = waitpid(z, &st, 0) == z && WIFEXITED(st) && WEXITSTATUS(st) == 7;
	CHECK(ok, "I: reaps the zombie %d (status %#x, want exit 7)", z, st);
	ok = waitpid(a, &st, 0) == a && WIFEXITED(st) && !WEXITSTATUS(st);
	CHECK(ok, "I: reaps A %d (its checks passed, status %#x)", a, st);
	exit(prog_done());
}

int main(int argc, char **argv)
{
	pid_t init;
	int st;

	prog_init(argc, argv);
	if (unshare(CLONE_NEWPID))
		prog_die("unshare(CLONE_NEWPID)");
	init = fork();
	if (init < 0)
		prog_die("fork the init");
	if (!init)
		init_main();
	/* reaps the init promptly once the dump kills it; without amber, its verdict */
	while (waitpid(init, &st, 0) < 0)
		if (errno != EINTR)
			return 2;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}
