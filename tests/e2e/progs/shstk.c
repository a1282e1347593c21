// SPDX-License-Identifier: MIT
/*
 * A thread with an x86 user shadow stack (CPUs with user_shstk only), which
 * amber must refuse at dump.  The stack is enabled with a raw arch_prctl in
 * main, which then never returns: only calls made after it have entries on
 * the shadow stack.  On go it checks that it still runs with it on.
 */
#include "prog.h"

#define ARCH_SHSTK_ENABLE 0x5001
#define ARCH_SHSTK_STATUS 0x5005
#define ARCH_SHSTK_SHSTK  (1ULL << 0)

static long raw_arch_prctl(long op, long arg)
{
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_arch_prctl), "D"(op), "S"(arg)
			 : "rcx", "r11", "memory");
	return r;
}

int main(int argc, char **argv)
{
	unsigned long long features = 0;
	long r;

	prog_init(argc, argv);
	/* inline, not a call: returning from the enabling call would fault */
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_arch_prctl), "D"((long)ARCH_SHSTK_ENABLE),
			   "S"((long)ARCH_SHSTK_SHSTK)
			 : "rcx", "r11", "memory");
	if (r)
		prog_die("ARCH_SHSTK_ENABLE: %ld", r);
	prog_ready();
	prog_wait_go();
	r = raw_arch_prctl(ARCH_SHSTK_STATUS, (long)&features);
	if (prog_sabotage())
		features = 0;
	CHECK(r == 0 && (features & ARCH_SHSTK_SHSTK), "shadow stack still on (%ld, %#llx)", r,
	      features);
	_exit(prog_done());
}
