// SPDX-License-Identifier: MIT
/*
 * Per-thread scheduling: each thread sets its own policy (SCHED_BATCH, IDLE,
 * FIFO with SCHED_RESET_ON_FORK, RR, OTHER), nice, CPU affinity and I/O
 * priority; after the restore each checks its own with sched_getattr,
 * getpriority, sched_getaffinity and ioprio_get.  The process also takes
 * loginuid 4242 (an audit login), which must come back.
 */
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include "prog.h"

#define RESET_ON_FORK 0x01
#define IOPRIO(c, l)  (((c) << 13) | (l))

struct kattr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t prio;
	uint64_t runtime, deadline, period;
};

struct want {
	const char *name;
	uint32_t policy, prio;
	uint64_t flags;
	int nice; /* also hidden under an RT policy: set before it */
	int cpu;  /* -1: every CPU */
	int ioprio;
};

static struct want wants[] = {
	{"main", 3 /* BATCH */, 0, 0, 3, 0, IOPRIO(2, 6)},
	{"idle", 5 /* IDLE */, 0, 0, 7, 1, IOPRIO(3, 0)},
	{"fifo", SCHED_FIFO, 7, RESET_ON_FORK, 5, 0, IOPRIO(1, 2)},
	{"rr", SCHED_RR, 3, 0, 1, -1, -1},
	{"other", SCHED_OTHER, 0, 0, 10, 1, IOPRIO(2, 0)},
};
#define NW (sizeof(wants) / sizeof(wants[0]))

static int ncpu;
static volatile int go, set_up;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int setattr(uint32_t policy, uint64_t flags, int nice, uint32_t prio)
{
	struct kattr a = {48, policy, flags, nice, prio, 0, 0, 0};

	return (int)syscall(SYS_sched_setattr, 0, &a, 0);
}

static void setup(struct want *w)
{
	cpu_set_t set;

	if (setattr(SCHED_OTHER, 0, w->nice, 0) ||
	    setattr(w->policy, w->flags,
		    w->policy == SCHED_FIFO || w->policy == SCHED_RR ? 0 : w->nice, w->prio))
		prog_die("%s: sched_setattr", w->name);
	CPU_ZERO(&set);
	for (int c = 0; c < ncpu; c++)
		if (w->cpu < 0 || c == w->cpu % ncpu)
			CPU_SET(c, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		prog_die("%s: sched_setaffinity", w->name);
	if (w->ioprio >= 0 && syscall(SYS_ioprio_set, 1, 0, w->ioprio))
		prog_die("%s: ioprio_set", w->name);
}

static void verify(struct want *w, int sabotage)
{
	struct kattr a = {0};
	cpu_set_t set;
	int nice, io, ok_cpus = 1;

	if (sabotage)
		setattr(SCHED_OTHER, 0, 0, 0);
	syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0);
	errno = 0;
	nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	io = (int)syscall(SYS_ioprio_get, 1, 0);
	sched_getaffinity(0, sizeof(set), &set);
	for (int c = 0; c < ncpu; c++)
		if (!!CPU_ISSET(c, &set) != (w->cpu < 0 || c == w->cpu % ncpu))
			ok_cpus = 0;
	pthread_mutex_lock(&lock);
	CHECK(a.policy == w->policy && a.prio == w->prio, "%s: policy %u priority %u (want %u %u)",
	      w->name, a.policy, a.prio, w->policy, w->prio);
	CHECK((a.flags & RESET_ON_FORK) == w->flags, "%s: reset-on-fork %d", w->name,
	      (int)(a.flags & RESET_ON_FORK));
	CHECK(nice == w->nice, "%s: nice %d (want %d)", w->name, nice, w->nice);
	CHECK(ok_cpus, "%s: affinity %s", w->name, w->cpu < 0 ? "every CPU" : "one CPU");
	if (w->ioprio >= 0)
		CHECK(io == w->ioprio, "%s: ioprio 0x%x (want 0x%x)", w->name, io, w->ioprio);
	pthread_mutex_unlock(&lock);
}

static void *thread(void *arg)
{
	struct want *w = arg;
	struct timespec ts = {0, 10 * 1000 * 1000};

	setup(w);
	__atomic_add_fetch(&set_up, 1, __ATOMIC_SEQ_CST);
	while (!go)
		nanosleep(&ts, NULL);
	verify(w, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[NW];
	struct timespec ts = {0, 10 * 1000 * 1000};
	char buf[64];
	int fd;

	prog_init(argc, argv);
	ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu > CPU_SETSIZE)
		ncpu = CPU_SETSIZE;
	for (size_t i = 1; i < NW; i++)
		if (pthread_create(&th[i], NULL, thread, &wants[i]))
			prog_die("pthread_create");
	while (set_up < (int)NW - 1)
		nanosleep(&ts, NULL);
	/* the main thread last: the others would inherit its settings */
	setup(&wants[0]);
	if (prog_read_file("/proc/self/loginuid", buf, sizeof(buf)) < 0)
		prog_die("no /proc/self/loginuid (CONFIG_AUDIT)");
	fd = open("/proc/self/loginuid", O_WRONLY);
	if (fd < 0 || write(fd, "4242", 4) != 4)
		prog_die("cannot set loginuid");
	close(fd);
	prog_ready();
	prog_wait_go();
	go = 1;
	verify(&wants[0], prog_sabotage());
	prog_read_file("/proc/self/loginuid", buf, sizeof(buf));
	CHECK(atoi(buf) == 4242, "loginuid %s (want 4242)", buf);
	for (size_t i = 1; i < NW; i++)
		pthread_join(th[i], NULL);
	return prog_done();
}
