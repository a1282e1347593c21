// SPDX-License-Identifier: MIT
/*
 * cow: private memory inherited over fork() stays shared copy-on-write.
 *
 * The parent fills A (32 MiB) and B (4 MiB), then forks two children:
 *  - child 1 rewrites A's pages 0-9 and drops pages 100-109 (MADV_DONTNEED);
 *  - child 2 unmaps B's first MiB (its B no longer has the parent's bounds).
 * Then the parent rewrites A's pages 20-29.  Before the dump the parent
 * counts, from /proc/PID/pagemap (root: PFNs), the pages of A each child
 * shares with it.  After go:
 *  - every process finds its own contents (zeros where child 1 dropped pages);
 *  - the counts are the same as before the dump, and high: the sharing came back;
 *  - still private: a write of the parent (page 500) is not seen by the
 *    children, one of child 1 (page 501) not by the parent.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "prog.h"

#define PAGE	   4096UL
#define A_PAGES	   8192
#define B_PAGES	   1024
#define PM_PFN	   ((1ULL << 55) - 1)
#define PM_PRESENT (1ULL << 63)

static unsigned char *A, *B;
static volatile int *flags; /* MAP_SHARED: [0] parent wrote 500, [1] child 1 wrote 501 */

static unsigned char fill_of(unsigned long page, int gen)
{
	return (unsigned char)(page * 7 + 1 + gen * 91);
}

static void fill(unsigned char *base, unsigned long page, int gen)
{
	memset(base + page * PAGE, fill_of(page, gen), PAGE);
}

/* 1 if the page holds generation gen's pattern (gen < 0: zeros) */
static int holds(const unsigned char *base, unsigned long page, int gen)
{
	unsigned char want = gen < 0 ? 0 : fill_of(page, gen);

	for (unsigned long i = 0; i < PAGE; i++)
		if (base[page * PAGE + i] != want)
			return 0;
	return 1;
}

/* generation of page p of A as seen by process who (0 parent, 1, 2 children) */
static int gen_of(int who, unsigned long p)
{
	if (who == 1 && p < 10)
		return 1;
	if (who == 1 && p >= 100 && p < 110)
		return -1;
	if (who == 0 && p >= 20 && p < 30)
		return 2;
	return 0;
}

static int check_contents(int who)
{
	unsigned long bad = 0, first = 0;

	for (unsigned long p = 0; p < A_PAGES; p++)
		if (!holds(A, p, gen_of(who, p)) && !bad++)
			first = p;
	CHECK(!bad, "process %d: A holds what it held at the dump (%lu bad pages, first %lu)", who,
	      bad, first);
	bad = 0;
	for (unsigned long p = who == 2 ? 256 : 0; p < B_PAGES; p++)
		bad += !holds(B, p, 0);
	CHECK(!bad, "process %d: B holds what it held (%lu bad pages)", who, bad);
	return 0;
}

static long pfn_at(int fd, unsigned long addr)
{
	uint64_t e = 0;

	if (pread(fd, &e, sizeof(e), (off_t)(addr / PAGE * sizeof(e))) != sizeof(e))
		return -1;
	return (e & PM_PRESENT) ? (long)(e & PM_PFN) : 0;
}

/* pages of A mapped to the same physical page in us and in pid */
static long shared_pages(pid_t pid)
{
	char path[64];
	long n = 0;
	int me = open("/proc/self/pagemap", O_RDONLY), it;

	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	it = open(path, O_RDONLY);
	if (me < 0 || it < 0)
		return -1;
	for (unsigned long p = 0; p < A_PAGES; p++) {
		long x = pfn_at(me, (unsigned long)A + p * PAGE);
		long y = pfn_at(it, (unsigned long)A + p * PAGE);

		n += x > 0 && x == y;
	}
	close(me);
	close(it);
	return n;
}

static void wait_flag(int i)
{
	for (int n = 0; n < 3000 && !flags[i]; n++)
		usleep(10000);
}

static void child(int who)
{
	if (who == 1) {
		for (unsigned long p = 0; p < 10; p++)
			fill(A, p, 1);
		madvise(A + 100 * PAGE, 10 * PAGE, MADV_DONTNEED);
	} else {
		munmap(B, 256 * PAGE);
	}
	while (!prog_go_exists())
		usleep(10000);
	check_contents(who);
	wait_flag(0);
	CHECK(holds(A, 500, 0), "child %d does not see the parent's new page 500", who);
	if (who == 1) {
		fill(A, 501, 3);
		flags[1] = 1;
	}
	_exit(prog_failures ? 1 : 0);
}

int main(int argc, char **argv)
{
	long before[2], after[2];
	pid_t kid[2];
	int st;

	prog_init(argc, argv);
	/* A, a PROT_NONE guard page, B: three VMAs, so that changing B leaves A alone */
	A = mmap(NULL, (A_PAGES + 1 + B_PAGES) * PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	B = A + (A_PAGES + 1) * PAGE;
	if (A != MAP_FAILED && mprotect(A + A_PAGES * PAGE, PAGE, PROT_NONE))
		prog_die("mprotect");
	flags = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (A == MAP_FAILED || B == MAP_FAILED || flags == MAP_FAILED)
		prog_die("mmap");
	for (unsigned long p = 0; p < A_PAGES; p++)
		fill(A, p, 0);
	for (unsigned long p = 0; p < B_PAGES; p++)
		fill(B, p, 0);
	for (int n = 0; n < 2; n++) {
		kid[n] = fork();
		if (kid[n] < 0)
			prog_die("fork");
		if (kid[n] == 0)
			child(n + 1);
	}
	for (unsigned long p = 20; p < 30; p++)
		fill(A, p, 2);
	usleep(200 * 1000); /* the children's own changes */
	for (int n = 0; n < 2; n++)
		before[n] = shared_pages(kid[n]);
	prog_ready();
	prog_wait_go();

	check_contents(0);
	for (int n = 0; n < 2; n++) {
		after[n] = shared_pages(kid[n]);
		if (prog_sabotage())
			after[n]--;
		CHECK(after[n] == before[n] && after[n] >= A_PAGES - 40,
		      "child %d shares %ld of A's %d pages with us, as before the dump (%ld)",
		      n + 1, after[n], A_PAGES, before[n]);
	}
	fill(A, 500, 3);
	flags[0] = 1;
	wait_flag(1);
	CHECK(holds(A, 501, 0), "we do not see child 1's new page 501");
	for (int n = 0; n < 2; n++) {
		pid_t r = waitpid(kid[n], &st, 0);

		CHECK(r == kid[n] && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "child %d passed its own checks (status 0x%x)", n + 1, st);
	}
	return prog_done();
}
