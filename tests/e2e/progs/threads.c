// SPDX-License-Identifier: MIT
/*
 * threads: a multi-threaded process with threads blocked in a futex
 * (pthread_cond_wait), in nanosleep and in read() on a pipe, each with its own
 * TID, name, TLS value, signal mask and a thread-directed pending signal.
 * After go: each thread must find its TID, name, TLS and mask unchanged, the
 * sleeper keeps counting, the waiter wakes on the condition, the reader gets
 * the bytes written after go, the pending SIGUSR1 is still pending on its
 * thread only, and every thread can be joined (clear_child_tid restored).
 */
#include <pthread.h>
#include <signal.h>

#include "prog.h"

#define NT 3

static __thread long tls_value;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag, pipefd[2];
static volatile long sleeps;
static volatile int stop_sleeper;

struct tinfo {
	pthread_t th;
	pid_t tid_before, tid_after;
	long tls_after;
	char name_after[16];
	int mask_ok, pending_ok, work_ok;
	sigset_t mask;
};

static struct tinfo ti[NT];
static pthread_barrier_t ready;

static void after(struct tinfo *t, long tls)
{
	sigset_t cur, pend;
	int blocked_usr1 = sigismember(&t->mask, SIGUSR1);

	t->tid_after = gettid();
	t->tls_after = tls_value == tls;
	pthread_getname_np(pthread_self(), t->name_after, sizeof(t->name_after));
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	t->mask_ok = sigismember(&cur, SIGUSR1) == blocked_usr1 &&
		     sigismember(&cur, SIGUSR2) == sigismember(&t->mask, SIGUSR2);
	sigpending(&pend);
	/* only thread 1 has SIGUSR1 queued (tgkill before the dump) */
	t->pending_ok = sigismember(&pend, SIGUSR1) == (t == &ti[1]);
}

static void setup(struct tinfo *t, int i)
{
	char name[16];

	t->tid_before = gettid();
	tls_value = 1000 + i;
	snprintf(name, sizeof(name), "amber-t%d", i);
	pthread_setname_np(pthread_self(), name);
	sigemptyset(&t->mask);
	sigaddset(&t->mask, i == 1 ? SIGUSR1 : SIGUSR2);
	pthread_sigmask(SIG_SETMASK, &t->mask, NULL);
	pthread_barrier_wait(&ready);
}

static void *waiter(void *arg)
{
	struct tinfo *t = arg;

	setup(t, 0);
	pthread_mutex_lock(&mu);
	while (!flag)
		pthread_cond_wait(&cv, &mu);
	t->work_ok = flag == 42;
	pthread_mutex_unlock(&mu);
	after(t, 1000);
	return NULL;
}

static void *sleeper(void *arg)
{
	struct tinfo *t = arg;
	struct timespec ts = {0, 5 * 1000 * 1000};

	setup(t, 1);
	while (!stop_sleeper) {
		nanosleep(&ts, NULL);
		sleeps++;
	}
	t->work_ok = 1;
	after(t, 1001);
	return NULL;
}

static void *reader(void *arg)
{
	struct tinfo *t = arg;
	char buf[16] = "";

	setup(t, 2);
	t->work_ok = read(pipefd[0], buf, 5) == 5 && !memcmp(buf, "hello", 5);
	after(t, 1002);
	return NULL;
}

int main(int argc, char **argv)
{
	void *(*fn[NT])(void *) = {waiter, sleeper, reader};
	long before;

	prog_init(argc, argv);
	if (pipe(pipefd))
		prog_die("pipe");
	pthread_barrier_init(&ready, NULL, NT + 1);
	for (int i = 0; i < NT; i++)
		if (pthread_create(&ti[i].th, NULL, fn[i], &ti[i]))
			prog_die("pthread_create");
	pthread_barrier_wait(&ready);
	if (syscall(SYS_tgkill, getpid(), ti[1].tid_before, SIGUSR1))
		prog_die("tgkill");
	usleep(50 * 1000);
	prog_ready();
	prog_wait_go();
	before = sleeps;
	usleep(100 * 1000);
	CHECK(sleeps > before, "the sleeping thread keeps running (%ld -> %ld)", before, sleeps);
	pthread_mutex_lock(&mu);
	flag = prog_sabotage() ? 41 : 42;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	if (write(pipefd[1], "hello", 5) != 5)
		prog_die("write");
	stop_sleeper = 1;
	for (int i = 0; i < NT; i++) {
		struct tinfo *t = &ti[i];
		char want[16];

		CHECK(!pthread_join(t->th, NULL), "thread %d joined", i);
		snprintf(want, sizeof(want), "amber-t%d", i);
		CHECK(t->tid_after == t->tid_before, "thread %d tid %d (before %d)", i,
		      t->tid_after, t->tid_before);
		CHECK(t->tls_after, "thread %d TLS value", i);
		CHECK(!strcmp(t->name_after, want), "thread %d name '%s'", i, t->name_after);
		CHECK(t->mask_ok, "thread %d signal mask", i);
		CHECK(t->pending_ok, "thread %d pending signals", i);
		CHECK(t->work_ok, "thread %d finished its blocking call correctly", i);
	}
	return prog_done();
}
