// SPDX-License-Identifier: MIT
/*
 * Does an x86 hardware breakpoint set through ptrace fire here?  CRIU stops
 * its parasite with one (DR0 at the sigreturn address); in a guest where debug
 * registers do not trap, CRIU waits forever.  Exit 0: it fires; 1: it does not.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int spins;

static void __attribute__((noinline)) target(void)
{
	spins++;
}

int main(void)
{
	int status, fired;
	pid_t pid = fork();

	if (pid < 0)
		return 2;
	if (!pid) {
		alarm(3); /* the tracee ends itself if the breakpoint never fires */
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		for (;;)
			target();
	}
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
		return 2;
	if (ptrace(PTRACE_POKEUSER, pid, offsetof(struct user, u_debugreg[0]), (void *)target) ||
	    ptrace(PTRACE_POKEUSER, pid, offsetof(struct user, u_debugreg[7]), (void *)1L) ||
	    ptrace(PTRACE_CONT, pid, NULL, NULL))
		return 2;
	if (waitpid(pid, &status, 0) != pid)
		return 2;
	fired = WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return fired ? 0 : 1;
}
