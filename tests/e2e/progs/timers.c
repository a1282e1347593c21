// SPDX-License-Identifier: MIT
/*
 * timers: interval timers and POSIX timers keep their ids, settings and remaining time.
 *
 *   ITIMER_REAL 100 s / 200 s, ITIMER_VIRTUAL 150 s / 7 s, ITIMER_PROF 120 s / 60 s
 *   timer A: CLOCK_MONOTONIC, SIGEV_SIGNAL SIGRTMIN+1 value 42, 100 s / 30 s
 *   timer B: created and deleted (a hole in the ids)
 *   timer C: CLOCK_REALTIME, SIGEV_NONE, 300 s
 *   timer D: CLOCK_BOOTTIME, SIGEV_THREAD_ID SIGRTMIN+2 value 43, 110 s, created after
 *            70000 timers were created and deleted: its id is above 65536 (a
 *            restore once refused such ids as corrupt); only on kernels that
 *            let a restore ask for an id (PR_TIMER_CREATE_RESTORE_IDS, 6.17):
 *            older ones reach an id by making every one below it
 *
 * After restore: remaining <= before and > before - SLOP seconds, intervals exact, the
 * same ids work (B's id does not); A and D, re-armed to 10 ms, deliver their signal with
 * their sigev_value and SI_TIMER.
 */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/time.h>

#include "prog.h"

#define SLOP 15.0 /* seconds a dump + restore may take */

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static double tv(struct timeval t)
{
	return t.tv_sec + t.tv_usec / 1e6;
}

static double ts(struct timespec t)
{
	return t.tv_sec + t.tv_nsec / 1e9;
}

static timer_t mk(clockid_t clk, int notify, int sig, int val)
{
	struct sigevent sev;
	timer_t t;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = notify;
	sev.sigev_signo = sig;
	sev.sigev_value.sival_int = val;
	if (notify == SIGEV_THREAD_ID)
		sev.sigev_notify_thread_id = gettid();
	if (timer_create(clk, &sev, &t))
		prog_die("timer_create");
	return t;
}

static void arm(timer_t t, time_t value, time_t interval, long ns)
{
	struct itimerspec its = {{interval, 0}, {value, ns}};

	if (timer_settime(t, 0, &its, NULL))
		prog_die("timer_settime");
}

static int fires(timer_t t, int sig, int val)
{
	struct timespec two = {2, 0};
	siginfo_t si;
	sigset_t s;
	int got;

	arm(t, 0, 0, 10 * 1000 * 1000);
	sigemptyset(&s);
	sigaddset(&s, sig);
	memset(&si, 0, sizeof(si));
	got = sigtimedwait(&s, &si, &two);
	if (got != sig || si.si_code != SI_TIMER || si.si_value.sival_int != val)
		fprintf(stderr, "  timer %ld: got signal %d code %d value %d\n", (long)t, got,
			si.si_code, si.si_value.sival_int);
	return got == sig && si.si_code == SI_TIMER && si.si_value.sival_int == val;
}

int main(int argc, char **argv)
{
	static const int which[3] = {ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF};
	static const char *const wname[3] = {"REAL", "VIRTUAL", "PROF"};
	static const struct itimerval set[3] = {
		{{200, 0}, {100, 0}}, {{7, 0}, {150, 0}}, {{60, 0}, {120, 0}}};
	struct itimerval it_before[3], it;
	struct itimerspec ps_before[4], ps;
	timer_t t[4];
	sigset_t block;
	int i;

	prog_init(argc, argv);
	sigemptyset(&block);
	sigaddset(&block, SIGRTMIN + 1);
	sigaddset(&block, SIGRTMIN + 2);
	sigaddset(&block, SIGALRM);
	sigaddset(&block, SIGVTALRM);
	sigaddset(&block, SIGPROF);
	sigprocmask(SIG_BLOCK, &block, NULL);

	for (i = 0; i < 3; i++)
		if (setitimer(which[i], &set[i], NULL))
			prog_die("setitimer");
	t[0] = mk(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGRTMIN + 1, 42);
	t[1] = mk(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGRTMIN + 1, 0);
	t[2] = mk(CLOCK_REALTIME, SIGEV_NONE, 0, 0);
	/* ids only grow: a long-running process has high ones (77, 2: the
	 * PR_TIMER_CREATE_RESTORE_IDS state, EINVAL before 6.17) */
	for (i = 0; prctl(77, 2, 0, 0, 0) >= 0 && i < 70000; i++)
		timer_delete(mk(CLOCK_MONOTONIC, SIGEV_NONE, 0, 0));
	t[3] = mk(CLOCK_BOOTTIME, SIGEV_THREAD_ID, SIGRTMIN + 2, 43);
	timer_delete(t[1]);
	arm(t[0], 100, 30, 0);
	arm(t[2], 300, 0, 0);
	arm(t[3], 110, 0, 0);

	for (i = 0; i < 3; i++)
		getitimer(which[i], &it_before[i]);
	for (i = 0; i < 4; i++)
		if (i != 1)
			timer_gettime(t[i], &ps_before[i]);
	printf("timer ids %ld %ld %ld (deleted %ld)\n", (long)t[0], (long)t[2], (long)t[3],
	       (long)t[1]);

	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		arm(t[2], 500, 0, 0);

	for (i = 0; i < 3; i++) {
		double b = tv(it_before[i].it_value), a;

		getitimer(which[i], &it);
		a = tv(it.it_value);
		CHECK(a <= b && a > b - SLOP, "ITIMER_%s remaining %.3f s (before %.3f s)",
		      wname[i], a, b);
		CHECK(tv(it.it_interval) == tv(set[i].it_interval),
		      "ITIMER_%s interval %.3f s (expected %.3f s)", wname[i], tv(it.it_interval),
		      tv(set[i].it_interval));
	}
	for (i = 0; i < 4; i++) {
		double b, a;

		if (i == 1) {
			int r = timer_gettime(t[1], &ps), e = errno;

			CHECK(r == -1 && e == EINVAL,
			      "deleted timer id %ld does not exist (errno %d)", (long)t[1], e);
			continue;
		}
		if (timer_gettime(t[i], &ps)) {
			CHECK(0, "timer id %ld exists (errno %d)", (long)t[i], errno);
			continue;
		}
		b = ts(ps_before[i].it_value);
		a = ts(ps.it_value);
		CHECK(a <= b && a > b - SLOP, "timer %ld remaining %.3f s (before %.3f s)",
		      (long)t[i], a, b);
		CHECK(ts(ps.it_interval) == ts(ps_before[i].it_interval),
		      "timer %ld interval %.3f s (expected %.3f s)", (long)t[i], ts(ps.it_interval),
		      ts(ps_before[i].it_interval));
	}
	CHECK(fires(t[0], SIGRTMIN + 1, 42), "timer %ld delivers SIGRTMIN+1 value 42 SI_TIMER",
	      (long)t[0]);
	CHECK(fires(t[3], SIGRTMIN + 2, 43), "timer %ld delivers SIGRTMIN+2 value 43 to the thread",
	      (long)t[3]);
	return prog_done();
}
