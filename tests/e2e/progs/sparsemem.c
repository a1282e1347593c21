// SPDX-License-Identifier: MIT
/*
 * sparsemem: 192 MiB of private anonymous memory written in runs of 1 to 7
 * pages with holes of 1 to 5 pages between them, and one dense 32 MiB run:
 * large enough that the restore fills it with userfaultfd in two threads.
 * About 55 MiB of the sparse pages come before the dense run and 68 MiB
 * after it, so the two threads' halves meet inside the dense run.
 * After go: every written page holds its own pattern in every word, and
 * every hole is still a hole (not present in pagemap) and reads as zeros.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>

#include "prog.h"

#define SIZE  (192UL << 20)
#define DENSE (32UL << 20) /* from SIZE / 2 */
#define PG    4096UL

static uint64_t pattern(unsigned long pg, unsigned long w)
{
	return (pg * 2654435761UL) ^ (w << 32) ^ 0x5a5a;
}

static bool wr[SIZE / PG]; /* whether each page is written */

/* runs and holes, and the dense part */
static void plan(void)
{
	unsigned long pg = 0;

	for (unsigned long k = 0; pg < SIZE / PG; k++) {
		for (unsigned long r = 0; r < 1 + k % 7 && pg < SIZE / PG; r++)
			wr[pg++] = true;
		pg += 1 + k % 5;
	}
	for (pg = SIZE / 2 / PG; pg < (SIZE / 2 + DENSE) / PG; pg++)
		wr[pg] = true;
}

int main(int argc, char **argv)
{
	unsigned long npg = SIZE / PG, bad = 0, holes = 0, present = 0, zero = 0, nwritten = 0;
	uint64_t *p, *pm;
	int fd;

	prog_init(argc, argv);
	plan();
	p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pm = malloc(npg * sizeof(*pm));
	if (p == MAP_FAILED || !pm)
		prog_die("mmap");
	madvise(p, SIZE, MADV_NOHUGEPAGE); /* holes stay holes */
	for (unsigned long pg = 0; pg < npg; pg++)
		if (wr[pg])
			for (unsigned long w = 0; w < PG / 8; w++)
				p[pg * PG / 8 + w] = pattern(pg, w);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		p[(SIZE / 2 + DENSE / 2) / 8 + 3] = 0;

	/* holes first: reading one maps the zero page */
	fd = open("/proc/self/pagemap", O_RDONLY);
	if (fd < 0 || pread(fd, pm, npg * sizeof(*pm), (off_t)((unsigned long)p / PG * 8)) !=
			      (ssize_t)(npg * sizeof(*pm)))
		prog_die("pagemap");
	close(fd);
	for (unsigned long pg = 0; pg < npg; pg++) {
		bool w = wr[pg];

		nwritten += w;
		if (!w) {
			holes++;
			present += (pm[pg] >> 63) & 1;
			continue;
		}
		for (unsigned long k = 0; k < PG / 8; k++)
			bad += p[pg * PG / 8 + k] != pattern(pg, k);
	}
	for (unsigned long pg = 0; pg < npg; pg++)
		if (!wr[pg])
			for (unsigned long k = 0; k < PG / 8; k++)
				zero += p[pg * PG / 8 + k] != 0;
	CHECK(!bad, "%lu written pages hold their pattern in every word (%lu bad words)", nwritten,
	      bad);
	CHECK(!present, "%lu holes are not present (%lu are)", holes, present);
	CHECK(!zero, "the holes read as zeros (%lu words are not)", zero);
	return prog_done();
}
