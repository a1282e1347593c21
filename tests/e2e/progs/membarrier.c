// SPDX-License-Identifier: MIT
/*
 * membarrier registrations, per mm: the parent (two threads) registers the
 * GLOBAL_EXPEDITED, PRIVATE_EXPEDITED and PRIVATE_EXPEDITED_RSEQ commands, a
 * child forked before (a fork inherits them) only SYNC_CORE.  After the
 * restore each checks MEMBARRIER_CMD_GET_REGISTRATIONS and that the barriers
 * it registered for work while the others still fail with EPERM.
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/wait.h>

#include "prog.h"

#define GET_REGISTRATIONS (1 << 9)

static long mb(int cmd)
{
	long r = syscall(SYS_membarrier, cmd, 0, 0);

	return r < 0 ? -errno : r;
}

static void *idle(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static void reg(int cmd)
{
	long r = mb(cmd);

	if (r)
		prog_die("membarrier register %#x: %ld", cmd, r);
}

/* who's registrations are want, the barriers of works work, the rest EPERM */
static void verify(const char *who, long want, long works)
{
	static const struct {
		int reg, cmd;
		const char *name;
	} b[] = {
		{MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, MEMBARRIER_CMD_PRIVATE_EXPEDITED,
		 "PRIVATE_EXPEDITED"},
		{MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE,
		 MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, "PRIVATE_EXPEDITED_SYNC_CORE"},
		{MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ,
		 MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, "PRIVATE_EXPEDITED_RSEQ"},
	};
	long got = mb(GET_REGISTRATIONS);

	CHECK(got == want, "%s: registrations %#lx (want %#lx)", who, got, want);
	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		long r = mb(b[i].cmd);

		CHECK(r == (works & b[i].reg ? 0 : -EPERM), "%s: membarrier %s: %ld", who,
		      b[i].name, r);
	}
}

int main(int argc, char **argv)
{
	long want_parent = MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED |
			   MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED |
			   MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ;
	/* SYNC_CORE sets the private state too, which GET_REGISTRATIONS reports,
	 * but not its readiness: the PRIVATE_EXPEDITED barrier still fails */
	long want_child = MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE |
			  MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
	pthread_t th;
	int status = -1;
	pid_t child;

	prog_init(argc, argv);
	if (pthread_create(&th, NULL, idle, NULL))
		prog_die("pthread_create");
	child = fork(); /* before the parent registers: a fork inherits them */
	if (child < 0)
		prog_die("fork");
	if (child == 0) {
		reg(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE);
		prog_wait_go();
		verify("child", want_child, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE);
		_exit(prog_failures ? 1 : 0);
	}
	reg(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
	reg(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
	reg(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ);
	if (mb(GET_REGISTRATIONS) != want_parent)
		prog_die("registrations before the dump: %#lx", mb(GET_REGISTRATIONS));
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		reg(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE);
	verify("parent", want_parent, want_parent);
	if (waitpid(child, &status, 0) != child)
		prog_die("waitpid %d", child);
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "child's checks passed (status %#x)",
	      status);
	return prog_done();
}
