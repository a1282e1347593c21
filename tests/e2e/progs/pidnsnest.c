// SPDX-License-Identifier: MIT
/*
 * A pid namespace nested in the tree's (src/ns/pidns.c).  The program
 * unshares a pid namespace and forks its init I (pid 1 there), the root the
 * test dumps.  I forks U, which unshares a further pid namespace (its
 * pid_for_children) and forks P, that namespace's init, as
 * `unshare --fork --pid` does, then Q, which goes there too (its parent U
 * outside: getppid() 0).  P has a zombie Z (exit status 3) and forks B,
 * which makes a session of its own
 * and a thread, and B's children B1, which makes a process group of its own,
 * and B2, which joins B1's group.  Each records its getpid()/getppid()/
 * getsid()/getpgid() (the thread its tid) before the dump and checks them
 * after it, as its namespace shows them; P also that it is pid 1 with
 * getppid() 0, U that its next child goes to P's namespace again.  Each
 * reaps its children (status 0: their checks passed).  I also makes V, the
 * init of a second nested namespace, with clone(CLONE_NEWPID), and V its
 * child V1, whose pid there is B's in P's.  Short-lived children
 * leave gaps between the pids, which a restore without them would close.
 * With PIDNSNEST_DEEP set, B1 unshares one more and forks D (two levels
 * down), which exits at DIR/d.go: the dump refuses it, and B1's
 * pid_for_children once D is gone.  With PIDNSNEST_ZOMBIE set, P's child
 * L makes a session, forks M and exits: a zombie leading the session of M,
 * P's child then, which the dump refuses; M exits at DIR/z.go.  With
 * PIDNSNEST_FOWN set, B2 owns the signals of a pipe, which the dump refuses.
 * DIR/ready holds I's host pid (/proc/self is the host's here).
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <sys/wait.h>

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

/* A child's end: 0 when it exited 0 (its checks passed). */
static int reap(pid_t pid)
{
	int st = 0;

	while (waitpid(pid, &st, 0) != pid)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : st | 1 << 16;
}

/* n pids of the namespace used and freed: the next ones are not the first free */
static void burn(int n)
{
	for (int i = 0; i < n; i++) {
		pid_t c = fork();

		if (c < 0)
			prog_die("fork");
		if (!c)
			_exit(0);
		reap(c);
	}
}

static void ready(const char *name)
{
	prog_write_atomic(name, "1");
}

static bool all_ready(void)
{
	static const char *const names[] = {"ready.u",	"ready.q",  "ready.b",
					    "ready.b1", "ready.b2", "ready.v1"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (access(prog_path(names[i]), F_OK))
			return false;
	return !getenv("PIDNSNEST_ZOMBIE") || !access(prog_path("ready.l"), F_OK);
}

static pid_t thread_tid;
static timer_t timer; /* B's: its signal goes to B's thread (SIGEV_THREAD_ID) */

/* B's thread: its queued SIGUSR2 and the timer's signal come to it after the restore */
static void *thread_main(void *arg)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);
	struct timespec zero = {0, 0}, wait = {10, 0};
	struct itimerspec soon = {{0, 0}, {0, 1000000}};
	sigset_t set;
	int got;

	(void)arg;
	__atomic_store_n(&thread_tid, tid, __ATOMIC_SEQ_CST);
	prog_wait_go();
	CHECK(syscall(SYS_gettid) == tid, "B's thread: tid %ld (was %d)", syscall(SYS_gettid), tid);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	got = sigtimedwait(&set, NULL, &zero);
	CHECK(got == SIGUSR2, "B's thread: its own SIGUSR2 is pending (got %d)", got);
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN);
	got = timer_settime(timer, 0, &soon, NULL) ? -1 : sigtimedwait(&set, NULL, &wait);
	CHECK(got == SIGRTMIN, "B's thread: the timer's signal comes to it (got %d)", got);
	return NULL;
}

static void __attribute__((noreturn)) member_main(const char *who, pid_t group)
{
	struct ids was;
	pid_t d = 0;
	int st;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (setpgid(0, group))
		prog_die("setpgid");
	/* the refusal test's: D, in a namespace nested in the nested one, until DIR/d.go */
	if (!group && getenv("PIDNSNEST_DEEP")) {
		if (unshare(CLONE_NEWPID))
			prog_die("B1: unshare(CLONE_NEWPID)");
		d = fork();
		if (d < 0)
			prog_die("fork D");
		if (!d) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			while (access(prog_path("d.go"), F_OK))
				usleep(10000);
			_exit(0);
		}
	}
	/* the refusal test's: SIGIO of a pipe for B2 (F_SETOWN, as B2 names itself) */
	if (group && getenv("PIDNSNEST_FOWN")) {
		int pfd[2];

		if (pipe(pfd) || fcntl(pfd[0], F_SETOWN, getpid()) ||
		    fcntl(pfd[0], F_SETFL, O_ASYNC | O_NONBLOCK))
			prog_die("B2: F_SETOWN");
	}
	was = now();
	ready(group ? "ready.b2" : "ready.b1");
	st = d ? reap(d) : 0;
	prog_wait_go();
	check_ids(who, &was);
	CHECK(!st, "%s: reaps D %d (status %#x)", who, d, st);
	exit(prog_failures ? 1 : 0);
}

static void __attribute__((noreturn)) b_main(void)
{
	struct itimerspec hour = {{0, 0}, {3600, 0}};
	struct sigevent sev = {0};
	siginfo_t si = {0};
	struct ids was;
	sigset_t set;
	pthread_t th;
	int got;
	pid_t b1, b2;
	int st;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (setsid() < 0)
		prog_die("B: setsid");
	b1 = fork();
	if (b1 < 0)
		prog_die("fork B1");
	if (!b1)
		member_main("B1", 0);
	/* B1's group exists before B2 joins it */
	while (getpgid(b1) != b1)
		usleep(1000);
	burn(2);
	b2 = fork();
	if (b2 < 0)
		prog_die("fork B2");
	if (!b2)
		member_main("B2", b1);
	burn(3);
	/* pending for the process and for the thread, and the thread's timer: the
	 * restore names them by the pids of the nested namespace */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGRTMIN);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&th, NULL, thread_main, NULL))
		prog_die("pthread_create");
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		usleep(1000);
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGRTMIN;
	sev._sigev_un._tid = thread_tid;
	if (sigqueue(getpid(), SIGUSR1, (union sigval){.sival_int = 42}) ||
	    syscall(SYS_tgkill, getpid(), thread_tid, SIGUSR2) ||
	    timer_create(CLOCK_MONOTONIC, &sev, &timer) || timer_settime(timer, 0, &hour, NULL))
		prog_die("B: signals and timer");
	was = now();
	ready("ready.b");
	prog_wait_go();
	if (prog_sabotage())
		was.pgid++;
	check_ids("B", &was);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	got = sigtimedwait(&set, &si, &(struct timespec){0, 0});
	CHECK(got == SIGUSR1 && si.si_value.sival_int == 42 && si.si_pid == was.pid,
	      "B: its queued SIGUSR1 is pending, value 42 from itself (got %d, %d from %d)", got,
	      si.si_value.sival_int, si.si_pid);
	sigpending(&set);
	CHECK(!sigismember(&set, SIGUSR2), "B: its thread's SIGUSR2 is not pending for it");
	pthread_join(th, NULL);
	st = reap(b1);
	CHECK(!st, "B: reaps B1 %d (its checks passed, status %#x)", b1, st);
	st = reap(b2);
	CHECK(!st, "B: reaps B2 %d (its checks passed, status %#x)", b2, st);
	exit(prog_failures ? 1 : 0);
}

static void __attribute__((noreturn)) p_main(void)
{
	struct ids was;
	pid_t b, z, l, m;
	int st;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	burn(5);
	/* Z, a zombie of the nested namespace until P reaps it after the restore */
	z = fork();
	if (z < 0)
		prog_die("fork Z");
	if (!z)
		_exit(3);
	while (waitid(P_PID, z, &(siginfo_t){0}, WEXITED | WNOWAIT))
		if (errno != EINTR)
			prog_die("waitid Z");
	/* the refusal test's: L, a zombie leading the session of M, now P's child */
	if (getenv("PIDNSNEST_ZOMBIE")) {
		l = fork();
		if (l < 0)
			prog_die("fork L");
		if (!l) {
			if (setsid() < 0 || (m = fork()) < 0)
				prog_die("L: setsid, fork M");
			if (!m) {
				while (getppid() != 1 || access(prog_path("z.go"), F_OK))
					usleep(10000);
				_exit(0);
			}
			_exit(4);
		}
		while (waitid(P_PID, l, &(siginfo_t){0}, WEXITED | WNOWAIT))
			if (errno != EINTR)
				prog_die("waitid L");
		prog_write_atomic("ready.l", "1");
	}
	b = fork();
	if (b < 0)
		prog_die("fork B");
	if (!b)
		b_main();
	was = now();
	prog_wait_go();
	check_ids("P", &was);
	st = reap(z);
	CHECK(st == (3 << 8 | 1 << 16), "P: reaps the zombie Z %d (status %#x, want exit 3)", z,
	      st);
	while (access(prog_path("q.reaped"), F_OK))
		usleep(10000);
	CHECK(getpid() == 1 && getppid() == 0, "P: pid %d, parent %d (the nested init: 1, 0)",
	      getpid(), getppid());
	st = reap(b);
	CHECK(!st, "P: reaps B %d (its checks passed, status %#x)", b, st);
	/* L and M, when there */
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	exit(prog_failures ? 1 : 0);
}

static void __attribute__((noreturn)) u_main(void)
{
	struct ids was;
	pid_t p, q;
	int st;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (unshare(CLONE_NEWPID))
		prog_die("U: unshare(CLONE_NEWPID)");
	p = fork();
	if (p < 0)
		prog_die("fork P");
	if (!p)
		p_main();
	/* its next child Q goes to P's namespace too, its parent outside */
	q = fork();
	if (q < 0)
		prog_die("fork Q");
	if (!q) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		was = now();
		ready("ready.q");
		prog_wait_go();
		check_ids("Q", &was);
		CHECK(getpid() != 1 && getppid() == 0,
		      "Q: pid %d, parent %d (in P's namespace, its parent outside: 0)", getpid(),
		      getppid());
		exit(prog_failures ? 1 : 0);
	}
	was = now();
	ready("ready.u");
	prog_wait_go();
	check_ids("U", &was);
	CHECK(p != 1 && getppid() == 1, "U: its child P is %d, its parent %d (I: 1)", p, getppid());
	/* P, the namespace's init, ends only after Q: its end would kill Q */
	st = reap(q);
	CHECK(!st, "U: reaps Q %d (its checks passed, status %#x)", q, st);
	ready("q.reaped");
	st = reap(p);
	CHECK(!st, "U: reaps P %d (its checks passed, status %#x)", p, st);
	/* its namespace for children is P's, which ended with P: no more children */
	q = fork();
	if (!q)
		_exit(0);
	CHECK(q < 0 && errno == ENOMEM,
	      "U: a fork after P's namespace ended fails with ENOMEM (got %d: %s)", q,
	      strerror(errno));
	if (q > 0)
		reap(q);
	exit(prog_failures ? 1 : 0);
}

/* V, init of a second nested namespace (clone(CLONE_NEWPID)), and V1, pid 7 there as B is in P's */
static void __attribute__((noreturn)) v_main(void)
{
	struct ids was;
	pid_t v1;
	int st;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	burn(5);
	v1 = fork();
	if (v1 < 0)
		prog_die("fork V1");
	if (!v1) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		was = now();
		ready("ready.v1");
		prog_wait_go();
		check_ids("V1", &was);
		exit(prog_failures ? 1 : 0);
	}
	was = now();
	prog_wait_go();
	check_ids("V", &was);
	CHECK(getpid() == 1 && getppid() == 0 && v1 == 7,
	      "V: pid %d, parent %d, child %d (the nested init: 1, 0, 7)", getpid(), getppid(), v1);
	st = reap(v1);
	CHECK(!st, "V: reaps V1 %d (its checks passed, status %#x)", v1, st);
	exit(prog_failures ? 1 : 0);
}

static void __attribute__((noreturn)) init_main(void)
{
	struct ids was;
	char host[32] = {0};
	pid_t u, v;
	int st;

	burn(3);
	u = fork();
	if (u < 0)
		prog_die("fork U");
	if (!u)
		u_main();
	v = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, 0);
	if (v < 0)
		prog_die("clone V");
	if (!v)
		v_main();
	while (!all_ready())
		usleep(2000);
	was = now();
	/* /proc is the host's: its self is this process's host pid */
	if (readlink("/proc/self", host, sizeof(host) - 1) <= 0)
		prog_die("readlink /proc/self");
	prog_write_atomic("ready", host);
	prog_wait_go();
	check_ids("I", &was);
	st = reap(u);
	CHECK(!st, "I: reaps U %d (its checks passed, status %#x)", u, st);
	st = reap(v);
	CHECK(!st, "I: reaps V %d (its checks passed, status %#x)", v, st);
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
