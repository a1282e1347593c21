// SPDX-License-Identifier: MIT
/*
 * signals: blocked mask, actions (handler, flags, mask, restorer), sigaltstack, and
 * pending signals with their siginfo, on both the process (shared) queue and the
 * thread queue.
 *
 * Before "ready": SIGUSR1 (blocked) is queued with sigqueue() value 1234, SIGRTMIN+3 twice
 * (values 1 and 2, order matters), SIGRTMIN+4 with rt_tgsigqueueinfo() to the thread
 * (value 77), SIGINT with tgkill() to the thread.  After restore each must be received by
 * sigtimedwait() with the same si_code/si_value/si_pid, in the same queue.  Handlers must
 * still run: SIGUSR2 (SA_ONSTACK|SA_SIGINFO|SA_RESTART) on the alternate stack, and
 * SIGALRM with SA_RESETHAND resets itself to SIG_DFL.
 */
#include <signal.h>

#include "prog.h"

/* The kernel's struct sigaction, as rt_sigaction() reads and writes it. */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

#define NSIG_K 64
static struct ksigaction before[NSIG_K + 1];
static char altstack[64 * 1024];
static volatile sig_atomic_t usr2_hits, usr2_on_altstack, usr2_code, alrm_hits;

static void usr2_handler(int sig, siginfo_t *si, void *uc)
{
	char here;

	usr2_hits++;
	usr2_code = si->si_code;
	usr2_on_altstack = &here >= altstack && &here < altstack + sizeof(altstack);
}

static void alrm_handler(int sig)
{
	alrm_hits++;
}

static void term_handler(int sig)
{
}

static void ksigaction_get(int sig, struct ksigaction *ka)
{
	memset(ka, 0, sizeof(*ka));
	syscall(SYS_rt_sigaction, sig, NULL, ka, 8);
}

static uint64_t hexfield(const char *key)
{
	return strtoull(prog_status_field(key), NULL, 16);
}

static uint64_t bit(int sig)
{
	return 1ULL << (sig - 1);
}

/* sigtimedwait() for exactly SIG, without waiting. */
static int take(int sig, siginfo_t *si)
{
	struct timespec zero = {0, 0};
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, sig);
	memset(si, 0, sizeof(*si));
	return sigtimedwait(&s, si, &zero);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)}, ss_after;
	sigset_t block, mask_after, pend;
	siginfo_t si;
	union sigval v;
	uint64_t shd_want, thr_want;
	int s, bad, rt3 = SIGRTMIN + 3, rt4 = SIGRTMIN + 4;
	pid_t pid;
	int tkill_code;

	prog_init(argc, argv);
	pid = getpid();

	/* actions */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = usr2_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigaddset(&sa.sa_mask, SIGQUIT);
	sigaddset(&sa.sa_mask, SIGRTMIN + 7);
	sigaction(SIGUSR2, &sa, NULL);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = alrm_handler;
	sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	sigaction(SIGALRM, &sa, NULL);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = term_handler;
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGHUP);
	sigaction(SIGTERM, &sa, NULL);

	signal(SIGINT, SIG_DFL); /* a background job inherits SIG_IGN */
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sa.sa_flags = SA_NOCLDSTOP | SA_NOCLDWAIT;
	sigaction(SIGCHLD, &sa, NULL);

	if (sigaltstack(&ss, NULL))
		prog_die("sigaltstack");

	/* blocked mask */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGWINCH);
	sigaddset(&block, rt3);
	sigaddset(&block, rt4);
	sigaddset(&block, SIGRTMAX);
	sigprocmask(SIG_SETMASK, &block, NULL);

	/* pending, process queue */
	v.sival_int = 1234;
	sigqueue(pid, SIGUSR1, v);
	v.sival_int = 1;
	sigqueue(pid, rt3, v);
	v.sival_int = 2;
	sigqueue(pid, rt3, v);
	/* pending, thread queue */
	memset(&si, 0, sizeof(si));
	si.si_signo = rt4;
	si.si_code = SI_QUEUE;
	si.si_pid = pid;
	si.si_uid = getuid();
	si.si_value.sival_int = 77;
	if (syscall(SYS_rt_tgsigqueueinfo, pid, gettid(), rt4, &si))
		prog_die("rt_tgsigqueueinfo");
	/* the si_code tgkill() gives a blocked signal varies by kernel: measure it once */
	if (syscall(SYS_tgkill, pid, gettid(), SIGINT) || take(SIGINT, &si) != SIGINT)
		prog_die("tgkill calibration");
	tkill_code = si.si_code;
	if (syscall(SYS_tgkill, pid, gettid(), SIGINT))
		prog_die("tgkill");

	for (s = 1; s <= NSIG_K; s++)
		ksigaction_get(s, &before[s]);
	shd_want = bit(SIGUSR1) | bit(rt3);
	thr_want = bit(rt4) | bit(SIGINT);
	if (hexfield("ShdPnd") != shd_want || hexfield("SigPnd") != thr_want)
		prog_die("unexpected pending sets before the dump: ShdPnd %s",
			 prog_status_field("ShdPnd"));

	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		signal(SIGPIPE, SIG_DFL);

	/* actions: compare the raw kernel view of every signal */
	for (bad = 0, s = 1; s <= NSIG_K; s++) {
		struct ksigaction ka;

		if (s == SIGKILL || s == SIGSTOP)
			continue;
		ksigaction_get(s, &ka);
		if (memcmp(&ka, &before[s], sizeof(ka))) {
			bad++;
			fprintf(stderr,
				"  signal %d: handler %p flags %#lx restorer %p mask %#llx, "
				"expected "
				"%p %#lx %p %#llx\n",
				s, ka.handler, ka.flags, ka.restorer, (unsigned long long)ka.mask,
				before[s].handler, before[s].flags, before[s].restorer,
				(unsigned long long)before[s].mask);
		}
	}
	CHECK(bad == 0, "sigactions of all 62 catchable signals unchanged (%d differ)", bad);

	/* blocked mask */
	sigprocmask(SIG_SETMASK, NULL, &mask_after);
	for (bad = 0, s = 1; s < NSIG; s++)
		bad += sigismember(&mask_after, s) != sigismember(&block, s);
	CHECK(bad == 0, "blocked mask (SigBlk %s)", prog_status_field("SigBlk"));

	/* sigaltstack */
	sigaltstack(NULL, &ss_after);
	CHECK(ss_after.ss_sp == altstack && ss_after.ss_size == sizeof(altstack) &&
		      ss_after.ss_flags == 0,
	      "sigaltstack sp %p size %zu flags %d", ss_after.ss_sp, ss_after.ss_size,
	      ss_after.ss_flags);

	/* pending: which queue */
	CHECK(hexfield("ShdPnd") == shd_want, "process queue ShdPnd %s (expected %016llx)",
	      prog_status_field("ShdPnd"), (unsigned long long)shd_want);
	CHECK(hexfield("SigPnd") == thr_want, "thread queue SigPnd %s (expected %016llx)",
	      prog_status_field("SigPnd"), (unsigned long long)thr_want);

	/* pending: siginfo */
	s = take(SIGUSR1, &si);
	CHECK(s == SIGUSR1 && si.si_code == SI_QUEUE && si.si_value.sival_int == 1234 &&
		      si.si_pid == pid && si.si_uid == getuid(),
	      "SIGUSR1: got %d code %d value %d pid %d uid %d", s, si.si_code,
	      si.si_value.sival_int, si.si_pid, si.si_uid);
	s = take(rt3, &si);
	CHECK(s == rt3 && si.si_code == SI_QUEUE && si.si_value.sival_int == 1,
	      "SIGRTMIN+3 first: got %d code %d value %d", s, si.si_code, si.si_value.sival_int);
	s = take(rt3, &si);
	CHECK(s == rt3 && si.si_code == SI_QUEUE && si.si_value.sival_int == 2,
	      "SIGRTMIN+3 second: got %d code %d value %d", s, si.si_code, si.si_value.sival_int);
	s = take(rt4, &si);
	CHECK(s == rt4 && si.si_code == SI_QUEUE && si.si_value.sival_int == 77 && si.si_pid == pid,
	      "SIGRTMIN+4 (thread): got %d code %d value %d pid %d", s, si.si_code,
	      si.si_value.sival_int, si.si_pid);
	s = take(SIGINT, &si);
	CHECK(s == SIGINT && si.si_code == tkill_code && si.si_pid == pid,
	      "SIGINT (tgkill): got %d code %d (expected %d) pid %d", s, si.si_code, tkill_code,
	      si.si_pid);
	sigpending(&pend);
	for (bad = 0, s = 1; s < NSIG; s++)
		bad += sigismember(&pend, s);
	CHECK(bad == 0, "nothing else pending (%d signals)", bad);

	/* handlers still run, on the alternate stack, and return through the restorer */
	raise(SIGUSR2);
	CHECK(usr2_hits == 1 && usr2_on_altstack && usr2_code == SI_TKILL,
	      "SIGUSR2 handler ran %d time(s), on the altstack: %d, si_code %d", usr2_hits,
	      usr2_on_altstack, usr2_code);
	raise(SIGALRM);
	ksigaction_get(SIGALRM, &before[0]);
	CHECK(alrm_hits == 1 && before[0].handler == SIG_DFL,
	      "SIGALRM handler ran %d time(s), SA_RESETHAND reset it to SIG_DFL", alrm_hits);
	return prog_done();
}
