// SPDX-License-Identifier: MIT
/*
 * vdso: the vDSO keeps working after restore.  Run with AMBER_T_EXPECT_PROXY=1
 * when the restore is told to take the other-kernel path (AMBER_VDSO_PROXY=1):
 * then the [vdso] mapping must have moved, the old address must still hold
 * code, and the old entry points (which glibc resolved at start-up and still
 * calls) must give the same answers as the real syscalls.
 */
#include <sched.h>
#include <sys/auxv.h>
#include <sys/time.h>

#include "prog.h"

static unsigned long vdso_start(void)
{
	char line[512];
	unsigned long start = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[vdso]"))
			sscanf(line, "%lx", &start);
	if (f)
		fclose(f);
	return start;
}

int main(int argc, char **argv)
{
	const char *proxy = getenv("AMBER_T_EXPECT_PROXY");
	unsigned long before, after, ehdr = getauxval(AT_SYSINFO_EHDR);
	struct timespec v, s;
	struct timeval tv;
	unsigned cpu = ~0u, node;
	long diff;

	prog_init(argc, argv);
	before = vdso_start();
	prog_ready();
	prog_wait_go();
	after = vdso_start();
	if (proxy && !strcmp(proxy, "1")) {
		CHECK(after && after != before, "the vDSO moved (%lx -> %lx)", before, after);
		CHECK(*(volatile unsigned char *)ehdr == 0x7f,
		      "the old vDSO address still holds code");
	} else {
		CHECK(after == before, "the vDSO is where it was (%lx -> %lx)", before, after);
	}
	/* glibc calls the vDSO functions it found at start-up: the old addresses */
	clock_gettime(CLOCK_REALTIME, &v);
	syscall(SYS_clock_gettime, CLOCK_REALTIME, &s);
	diff = (s.tv_sec - v.tv_sec) * 1000000000L + (s.tv_nsec - v.tv_nsec);
	if (prog_sabotage())
		diff += 5000000000L;
	CHECK(diff >= 0 && diff < 1000000000L,
	      "vDSO clock_gettime agrees with the syscall (%ld ns)", diff);
	clock_gettime(CLOCK_MONOTONIC, &v);
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &s);
	diff = (s.tv_sec - v.tv_sec) * 1000000000L + (s.tv_nsec - v.tv_nsec);
	CHECK(diff >= 0 && diff < 1000000000L, "vDSO CLOCK_MONOTONIC agrees (%ld ns)", diff);
	gettimeofday(&tv, NULL);
	CHECK(labs(tv.tv_sec - s.tv_sec) <= 1 || labs(tv.tv_sec - time(NULL)) <= 1,
	      "gettimeofday/time agree (%ld)", (long)tv.tv_sec);
	CHECK(getcpu(&cpu, &node) == 0 && cpu < 4096, "getcpu gives cpu %u", cpu);
	return prog_done();
}
