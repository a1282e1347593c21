// SPDX-License-Identifier: MIT
/*
 * memflags: every VMA keeps its madvise flags, locks and guard pages.  One
 * region per flag (DONTFORK, WIPEONFORK, HUGEPAGE, NOHUGEPAGE, MERGEABLE,
 * DONTDUMP, SEQUENTIAL, RANDOM, mlock, mlock2 MLOCK_ONFAULT, MAP_LOCKED,
 * PROT_NONE, MADV_GUARD_INSTALL pages), then mlockall(MCL_FUTURE |
 * MCL_ONFAULT).  After restore each region's VmFlags line in /proc/self/smaps
 * must be what it was, its bytes too, VmLck the same, guard and PROT_NONE
 * pages must still fault, a new mapping must come locked on fault, and a
 * forked child must see WIPEONFORK memory zeroed and DONTFORK memory absent.
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "prog.h"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

#define NPAGES	16
#define REGION	(NPAGES * 4096UL)
#define SPACING (2UL << 20)

enum {
	R_DONTFORK,
	R_WIPEONFORK,
	R_HUGEPAGE,
	R_NOHUGEPAGE,
	R_MERGEABLE,
	R_DONTDUMP,
	R_SEQUENTIAL,
	R_RANDOM,
	R_MLOCK,
	R_ONFAULT,
	R_MAPLOCKED,
	R_PROTNONE,
	R_GUARD,
	NR_REGIONS
};

static const char *const names[NR_REGIONS] = {
	"DONTFORK",   "WIPEONFORK", "HUGEPAGE",	   "NOHUGEPAGE", "MERGEABLE",
	"DONTDUMP",   "SEQUENTIAL", "RANDOM",	   "mlock",	 "mlock2 ONFAULT",
	"MAP_LOCKED", "PROT_NONE",  "guard pages",
};

static unsigned char *reg[NR_REGIONS];
static char flags_before[NR_REGIONS][256];
static sigjmp_buf jb;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

/* 1 if reading *p faults */
static int faults(volatile unsigned char *p)
{
	if (sigsetjmp(jb, 1))
		return 1;
	(void)*p;
	return 0;
}

static int is_guard(unsigned long page)
{
	return page == 4 || page == 5 || page == 10;
}

/* The VmFlags line of the mapping that starts at addr, or "" */
static void vmflags_of(void *addr, char *out, size_t size)
{
	static char buf[1 << 20];
	char key[64], *p;

	out[0] = 0;
	if (prog_read_file("/proc/self/smaps", buf, sizeof(buf)) < 0)
		prog_die("read smaps");
	snprintf(key, sizeof(key), "%lx-", (unsigned long)addr);
	for (p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, strlen(key)))
			break;
	if (!p || !*p)
		return;
	p = strstr(p, "VmFlags:");
	if (!p)
		return;
	snprintf(out, size, "%.*s", (int)strcspn(p, "\n"), p);
}

static long vmlck(void)
{
	return atol(prog_status_field("VmLck"));
}

static int has_flag(const char *line, const char *f)
{
	char pat[8];

	snprintf(pat, sizeof(pat), " %s", f);
	return strstr(line, pat) != NULL;
}

int main(int argc, char **argv)
{
	static const int advice[] = {
		[R_DONTFORK] = MADV_DONTFORK,	  [R_WIPEONFORK] = MADV_WIPEONFORK,
		[R_HUGEPAGE] = MADV_HUGEPAGE,	  [R_NOHUGEPAGE] = MADV_NOHUGEPAGE,
		[R_MERGEABLE] = MADV_MERGEABLE,	  [R_DONTDUMP] = MADV_DONTDUMP,
		[R_SEQUENTIAL] = MADV_SEQUENTIAL, [R_RANDOM] = MADV_RANDOM,
	};
	struct sigaction sa = {.sa_handler = on_segv, .sa_flags = SA_NODEFER};
	unsigned char *base, *fresh;
	char now[256];
	long lck_before;
	int ksm = access("/sys/kernel/mm/ksm/run", F_OK) == 0;

	prog_init(argc, argv);
	sigaction(SIGSEGV, &sa, NULL);
	/* find room, then map each region alone (unmapped gaps: no merging) */
	base = mmap(NULL, (NR_REGIONS + 1) * SPACING, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		    0);
	if (base == MAP_FAILED)
		prog_die("mmap reservation");
	munmap(base, (NR_REGIONS + 1) * SPACING);
	base = (unsigned char *)(((unsigned long)base + SPACING - 1) & ~(SPACING - 1));
	for (int i = 0; i < NR_REGIONS; i++) {
		int extra = i == R_MAPLOCKED ? MAP_LOCKED : 0;

		reg[i] = mmap(base + i * SPACING, REGION, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | extra, -1, 0);
		if (reg[i] == MAP_FAILED)
			prog_die("mmap region %s", names[i]);
		for (unsigned long k = 0; k < REGION; k++)
			reg[i][k] = (unsigned char)(i * 16 + k / 4096 + 1);
		if (i <= R_RANDOM && (i != R_MERGEABLE || ksm) &&
		    madvise(reg[i], REGION, advice[i]))
			prog_die("madvise %s", names[i]);
	}
	if (mlock(reg[R_MLOCK], REGION))
		prog_die("mlock");
	/* half the pages touched since the lock: the rest stay unpopulated */
	if (syscall(SYS_mlock2, reg[R_ONFAULT], REGION, 1 /* MLOCK_ONFAULT */))
		prog_die("mlock2");
	if (mprotect(reg[R_PROTNONE], REGION, PROT_NONE))
		prog_die("mprotect");
	if (madvise(reg[R_GUARD] + 4 * 4096, 2 * 4096, MADV_GUARD_INSTALL) ||
	    madvise(reg[R_GUARD] + 10 * 4096, 4096, MADV_GUARD_INSTALL))
		prog_die("MADV_GUARD_INSTALL");
	if (mlockall(MCL_FUTURE | MCL_ONFAULT))
		prog_die("mlockall");
	for (int i = 0; i < NR_REGIONS; i++) {
		vmflags_of(reg[i], flags_before[i], sizeof(flags_before[i]));
		if (!flags_before[i][0])
			prog_die("no smaps entry for region %s", names[i]);
	}
	if (!has_flag(flags_before[R_MLOCK], "lo") || !has_flag(flags_before[R_ONFAULT], "lf") ||
	    !has_flag(flags_before[R_WIPEONFORK], "wf") ||
	    !has_flag(flags_before[R_DONTFORK], "dc"))
		prog_die("the kernel did not set the flags: %s / %s", flags_before[R_MLOCK],
			 flags_before[R_ONFAULT]);
	/* stdout's buffer (the heap, locked since mlockall) exists before VmLck is read */
	printf("regions from %p, VmFlags of the mlock one: %s\n", (void *)base,
	       flags_before[R_MLOCK]);
	lck_before = vmlck();
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		munlock(reg[R_MLOCK], REGION);

	for (int i = 0; i < NR_REGIONS; i++) {
		unsigned long bad = 0;

		vmflags_of(reg[i], now, sizeof(now));
		CHECK(!strcmp(now, flags_before[i]), "%s region: %s (before: %s)", names[i], now,
		      flags_before[i]);
		if (i == R_PROTNONE)
			continue;
		for (unsigned long k = 0; k < REGION; k++)
			if (!(i == R_GUARD && is_guard(k / 4096)))
				bad += reg[i][k] != (unsigned char)(i * 16 + k / 4096 + 1);
		CHECK(!bad, "%s region: its 16 pages hold what was written (%lu bad bytes)",
		      names[i], bad);
	}
	CHECK(vmlck() == lck_before, "VmLck %ld kB (before: %ld kB)", vmlck(), lck_before);
	for (unsigned long k = 0; k < NPAGES; k++)
		CHECK(faults(reg[R_GUARD] + k * 4096) == is_guard(k), "guard region page %lu %s", k,
		      is_guard(k) ? "faults (guard page)" : "reads");
	CHECK(faults(reg[R_PROTNONE]), "the PROT_NONE region faults");

	fresh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fresh == MAP_FAILED)
		prog_die("mmap fresh");
	vmflags_of(fresh, now, sizeof(now));
	CHECK(has_flag(now, "lo") && has_flag(now, "lf"),
	      "a new mapping is locked on fault (mlockall MCL_FUTURE|MCL_ONFAULT): %s", now);
	munmap(fresh, 4096);

	pid_t c = fork();
	if (c == 0) {
		int rc = 0;

		for (unsigned long k = 0; k < REGION; k++)
			rc |= reg[R_WIPEONFORK][k] != 0;
		rc |= !faults(reg[R_DONTFORK]) << 1;
		_exit(rc);
	}
	int st = 0;
	waitpid(c, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "a forked child sees WIPEONFORK zeroed and no DONTFORK memory (status %#x)", st);
	return prog_done();
}
