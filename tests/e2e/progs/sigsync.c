// SPDX-License-Identifier: MIT
/*
 * Pending synchronous signals with the kernel's own siginfo layouts (which a
 * task may only queue to itself): a thread has SIGTRAP TRAP_BRKPT with
 * si_addr, the main thread SIGBUS BUS_MCEERR_AO with si_addr_lsb, and the
 * process SIGSEGV SEGV_MAPERR with si_addr, all blocked.  After the restore
 * each is taken with sigtimedwait() and its fields compared.
 */
#include <pthread.h>
#include <signal.h>

#include "prog.h"

#define TRAP_ADDR ((void *)0x12345000)
#define SEGV_ADDR ((void *)0xdead0000)
#define BUS_ADDR  ((void *)0xbeef1000)

static volatile int go, queued;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void queue(int sig, int code, void *addr, int lsb, int shared)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = sig;
	si.si_code = code;
	si.si_addr = addr;
	if (lsb)
		si.si_addr_lsb = (short)lsb;
	if (shared ? syscall(SYS_rt_sigqueueinfo, getpid(), sig, &si)
		   : syscall(SYS_rt_tgsigqueueinfo, getpid(), syscall(SYS_gettid), sig, &si))
		prog_die("queue signal %d", sig);
}

static void take(int sig, int code, void *addr, int lsb)
{
	struct timespec zero = {0, 0};
	siginfo_t si;
	sigset_t set;
	int got;

	sigemptyset(&set);
	sigaddset(&set, sig);
	memset(&si, 0, sizeof(si));
	got = sigtimedwait(&set, &si, &zero);
	pthread_mutex_lock(&lock);
	CHECK(got == sig && si.si_code == code && si.si_addr == addr &&
		      (!lsb || si.si_addr_lsb == lsb),
	      "signal %d pending: got %d code %d addr %p lsb %d", sig, got, si.si_code, si.si_addr,
	      (int)si.si_addr_lsb);
	pthread_mutex_unlock(&lock);
}

static void *thread(void *arg)
{
	struct timespec ts = {0, 10 * 1000 * 1000};

	queue(SIGTRAP, TRAP_BRKPT, TRAP_ADDR, 0, 0);
	queued = 1;
	while (!go)
		nanosleep(&ts, NULL);
	take(SIGTRAP, TRAP_BRKPT, TRAP_ADDR, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	struct timespec zero = {0, 0};
	sigset_t set;
	pthread_t th;

	prog_init(argc, argv);
	sigemptyset(&set);
	sigaddset(&set, SIGTRAP);
	sigaddset(&set, SIGSEGV);
	sigaddset(&set, SIGBUS);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		prog_die("sigprocmask");
	if (pthread_create(&th, NULL, thread, NULL))
		prog_die("pthread_create");
	queue(SIGSEGV, SEGV_MAPERR, SEGV_ADDR, 0, 1);
	queue(SIGBUS, BUS_MCEERR_AO, BUS_ADDR, 12, 0);
	while (!queued)
		nanosleep(&ts, NULL);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage()) {
		sigemptyset(&set);
		sigaddset(&set, SIGBUS);
		sigtimedwait(&set, NULL, &zero);
	}
	take(SIGBUS, BUS_MCEERR_AO, BUS_ADDR, 12);
	take(SIGSEGV, SEGV_MAPERR, SEGV_ADDR, 0);
	go = 1;
	pthread_join(th, NULL);
	return prog_done();
}
