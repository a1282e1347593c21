// SPDX-License-Identifier: MIT
/*
 * memtree: the memory of every process of a tree, rebuilt while amber drives
 * the process before it (each one after the first is cleared, mapped and
 * filled ahead of its turn, on the other CPU).
 *
 *   the root, then 4 children, each:
 *     a private region of 512 pages, every other page written with its own
 *     pattern (256 runs: their iovecs go in the scratch area), the pages
 *     between never touched;
 *     one page of a MAP_SHARED anonymous region the root made before the
 *     forks, its own slot, written after the fork;
 *     its program break moved by 3 pages and written there (PR_SET_MM_MAP;
 *     the root's, where its stdio left it).
 *
 * After go each process checks its private pages (patterns, and the untouched
 * ones zero), its break and the memory above it, and writes a second word in
 * its shared slot; the root sees every child's two words in the shared region.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "prog.h"

#define KIDS  4
#define PAGES 512
#define PG    4096UL
#define BRK   (3 * PG)

static unsigned long pattern(int who, size_t page, size_t word)
{
	return 0x6d656d7472656500UL ^ ((unsigned long)who << 40) ^ (page << 16) ^ word;
}

static unsigned char *region;
static volatile unsigned long *shared;
static char *brk_at, *brk_end; /* ours, and the break (the root's stdio moves it on) */

/* who: 0 the root, k + 1 child k */
static void fill(int who)
{
	region = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		prog_die("mmap");
	for (size_t p = 0; p < PAGES; p += 2)
		for (size_t w = 0; w < PG / sizeof(long); w++)
			((unsigned long *)(region + p * PG))[w] = pattern(who, p, w);
	brk_at = sbrk(0);
	if (sbrk(BRK) == (void *)-1)
		prog_die("sbrk");
	memset(brk_at, 0x40 + who, BRK);
	brk_end = sbrk(0);
}

/* wrong words or pages of this process's memory */
static int check(int who)
{
	int bad = 0;

	for (size_t p = 0; p < PAGES; p++) {
		const unsigned long *v = (const unsigned long *)(region + p * PG);

		for (size_t w = 0; w < PG / sizeof(long); w++)
			if (v[w] != (p % 2 ? 0 : pattern(who, p, w))) {
				if (bad++ < 4)
					fprintf(stderr, "  %d: page %zu word %zu is %lx\n", who, p,
						w, v[w]);
				break;
			}
	}
	if (sbrk(0) != brk_end) {
		bad++;
		fprintf(stderr, "  %d: break at %p, want %p\n", who, sbrk(0), brk_end);
	}
	for (size_t i = 0; i < BRK; i++)
		if (brk_at[i] != 0x40 + who) {
			bad++;
			fprintf(stderr, "  %d: byte %zu above the old break is %x\n", who, i,
				brk_at[i]);
			break;
		}
	return bad;
}

static void __attribute__((noreturn)) child(int k, int ready)
{
	fill(k + 1);
	shared[(k + 1) * PG / sizeof(long)] = pattern(k + 1, 0, 1);
	if (write(ready, "r", 1) != 1)
		_exit(2);
	close(ready);
	while (!prog_go_exists())
		usleep(10 * 1000);
	if (check(k + 1))
		_exit(1);
	shared[(k + 1) * PG / sizeof(long) + 1] = pattern(k + 1, 0, 2);
	_exit(0);
}

int main(int argc, char **argv)
{
	pid_t kids[KIDS];
	int st, bad;

	prog_init(argc, argv);
	shared = mmap(NULL, (KIDS + 1) * PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (shared == MAP_FAILED)
		prog_die("mmap");
	prog_fork_ready(kids, KIDS, child);
	fill(0);
	prog_ready();
	brk_end = sbrk(0);
	prog_wait_go();
	if (prog_sabotage())
		region[6 * PG + 8]++;
	bad = check(0); /* before its output moves the break */
	for (int k = 0; k < KIDS; k++) {
		st = -1;
		CHECK(waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && !WEXITSTATUS(st),
		      "child %d: its %d pages every other, its break (wait status 0x%x)", kids[k],
		      PAGES / 2, st);
		CHECK(shared[(k + 1) * PG / sizeof(long)] == pattern(k + 1, 0, 1) &&
			      shared[(k + 1) * PG / sizeof(long) + 1] == pattern(k + 1, 0, 2),
		      "child %d's slot in the shared region: its word from before and after", k);
	}
	CHECK(!bad, "the root: its %d pages every other and its break (%d wrong)", PAGES / 2, bad);
	return prog_done();
}
