// SPDX-License-Identifier: MIT
/*
 * hugetlb MODE: 4 MiB of huge pages (MAP_HUGETLB, the default size), MODE
 * private or shared, written.  After "go" the program checks its bytes and
 * that the mapping is still of huge pages (KernelPageSize in smaps).
 */
#include <stdbool.h>
#include <sys/mman.h>

#include "prog.h"

#define LEN (4UL << 20)

/* KernelPageSize of the VMA at p, in KiB (0: not found) */
static unsigned long page_kib(void *p)
{
	char line[256];
	unsigned long start, end, kib = 0;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2)
			in = start == (unsigned long)p;
		else if (in && sscanf(line, "KernelPageSize: %lu kB", &kib) == 1)
			break;
	}
	fclose(f);
	return in ? kib : 0;
}

int main(int argc, char **argv)
{
	bool shared = argc > 2 && !strcmp(argv[2], "shared");
	unsigned long bad = 0, kib;
	unsigned char *p;

	prog_init(argc, argv);
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		 MAP_ANONYMOUS | MAP_HUGETLB | (shared ? MAP_SHARED : MAP_PRIVATE), -1, 0);
	if (p == MAP_FAILED)
		prog_die("mmap MAP_HUGETLB (are there huge pages? vm.nr_hugepages)");
	for (unsigned long i = 0; i < LEN; i += 512)
		p[i] = (unsigned char)(i / 512 + 3);
	kib = page_kib(p);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		p[512 * 9] ^= 1;
	for (unsigned long i = 0; i < LEN; i += 512)
		bad += p[i] != (unsigned char)(i / 512 + 3);
	CHECK(!bad, "%lu KiB of huge pages as written (%lu bad)", LEN >> 10, bad);
	CHECK(kib >= 2048 && page_kib(p) == kib, "still huge pages of %lu KiB (%lu before)",
	      page_kib(p), kib);
	return prog_done();
}
