// SPDX-License-Identifier: MIT
/*
 * sigtrap: a SIGTRAP handler survives being checkpointed.  amber's injected
 * syscalls stop the task with forced SIGTRAPs; were SIGTRAP blocked then, the
 * kernel would reset this handler to SIG_DFL.  Checked after a restore and,
 * with -R, in the very process that was dumped.
 */
#include <signal.h>

#include "prog.h"

static volatile int hits;

static void on_trap(int sig)
{
	hits++;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_trap}, cur;

	prog_init(argc, argv);
	sigaction(SIGTRAP, &sa, NULL);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		signal(SIGTRAP, SIG_DFL);
	sigaction(SIGTRAP, NULL, &cur);
	CHECK(cur.sa_handler == on_trap, "SIGTRAP handler still installed (%p)",
	      (void *)cur.sa_handler);
	raise(SIGTRAP);
	CHECK(hits == 1, "SIGTRAP handled (%d)", hits);
	return prog_done();
}
