// SPDX-License-Identifier: MIT
/*
 * bigmem: 1 GiB of written memory, so that a dump takes long enough to be
 * interrupted.  After go it checks every page still holds its pattern.
 */
#include <sys/mman.h>

#include "prog.h"

#define SIZE (1UL << 30)

int main(int argc, char **argv)
{
	unsigned long bad = 0;
	uint64_t *p;

	prog_init(argc, argv);
	p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		prog_die("mmap");
	for (unsigned long i = 0; i < SIZE / 8; i += 512)
		p[i] = i * 2654435761UL;
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		p[512] = 0;
	for (unsigned long i = 0; i < SIZE / 8; i += 512)
		bad += p[i] != i * 2654435761UL;
	CHECK(!bad, "1 GiB of pages hold their pattern (%lu bad)", bad);
	return prog_done();
}
