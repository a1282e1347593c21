// SPDX-License-Identifier: MIT
/*
 * threadcreds: credentials are per thread.  Two threads drop, by raw
 * syscalls (glibc's setresuid() would change every thread), to ids and
 * groups of their own; the leader stays root with its capabilities.
 * After go: each thread finds its own real/effective/saved/fs ids, its
 * groups and its effective capabilities as before the dump (the dump reads
 * them per thread, from each thread's /proc status at its stop), and its
 * name, which status shows escaped (a backslash, a newline, a tab in it).
 */
#include <linux/capability.h>
#include <pthread.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>

#include "prog.h"

struct who {
	uid_t r, e, s;
	gid_t gr, ge, gs;
	gid_t groups[2];
	int ngroups;
};

static const struct who want[3] = {
	{0, 0, 0, 0, 0, 0, {0}, 0},
	{1001, 1002, 1003, 2001, 2002, 2003, {3001, 3002}, 2},
	{1101, 1101, 1101, 2101, 2101, 2101, {3101}, 1},
};
static const char *const names[3] = {"threadcreds", "t\\1\nx\ty\\n", "plain-2"};
static pthread_barrier_t ready, go;
static int ok[3];

static int named(int i)
{
	char n[16];

	return !pthread_getname_np(pthread_self(), n, sizeof(n)) && !strcmp(n, names[i]);
}

static uint32_t cap_eff(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2] = {{0}};

	return syscall(SYS_capget, &h, d) ? ~0U : d[0].effective;
}

static int same(int i)
{
	const struct who *w = &want[i];
	uid_t r, e, s;
	gid_t gr, ge, gs, g[8];
	long n = syscall(SYS_getgroups, 8, g);

	if (syscall(SYS_getresuid, &r, &e, &s) || syscall(SYS_getresgid, &gr, &ge, &gs))
		return 0;
	if (n != w->ngroups)
		return 0;
	for (long k = 0; k < n; k++)
		if (g[k] != w->groups[k])
			return 0;
	/* fsuid follows the effective id; the leader keeps its capabilities */
	return r == w->r && e == w->e && s == w->s && gr == w->gr && ge == w->ge && gs == w->gs &&
	       (uid_t)syscall(SYS_setfsuid, -1) == w->e && (i ? cap_eff() == 0 : cap_eff() != 0);
}

static void *thread(void *arg)
{
	int i = (int)(long)arg;
	const struct who *w = &want[i];

	if (syscall(SYS_setgroups, w->ngroups, w->groups) ||
	    syscall(SYS_setresgid, w->gr, w->ge, w->gs) || syscall(SYS_setresuid, w->r, w->e, w->s))
		prog_die("thread %d: cannot take its ids", i);
	if (pthread_setname_np(pthread_self(), names[i]))
		prog_die("thread %d: cannot take its name", i);
	ok[i] = same(i) && named(i);
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&go);
	ok[i] = same(i) && named(i) && ok[i];
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[3];

	prog_init(argc, argv);
	pthread_barrier_init(&ready, NULL, 3);
	pthread_barrier_init(&go, NULL, 3);
	for (long i = 1; i < 3; i++)
		if (pthread_create(&th[i], NULL, thread, (void *)i))
			prog_die("pthread_create");
	pthread_barrier_wait(&ready);
	CHECK(ok[1] && ok[2] && same(0), "each thread took its own ids before the dump");
	prog_ready();
	prog_wait_go();
	pthread_barrier_wait(&go);
	for (int i = 1; i < 3; i++)
		pthread_join(th[i], NULL);
	if (prog_sabotage())
		ok[2] = 0;
	CHECK(same(0), "the leader is still root, with its capabilities");
	CHECK(ok[1], "thread 1 has its ids 1001/1002/1003, 2001/2002/2003, groups 3001 3002 and "
		     "its name with a backslash, a newline and a tab");
	CHECK(ok[2], "thread 2 has its ids 1101, 2101, group 3101, no capabilities, its name");
	return prog_done();
}
