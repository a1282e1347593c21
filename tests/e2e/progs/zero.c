// SPDX-License-Identifier: MIT
/*
 * zero: pages that are not the process's own are not saved.  64 MiB of
 * anonymous memory is only read (the shared zero page) but for 16 written
 * pages, and a 4 MiB file is mapped privately and read, with one page written.
 * The test checks the image holds well under 1 MiB of pages; after restore
 * the program checks every page: zeros, the file's bytes, and what it wrote.
 */
#include <sys/mman.h>

#include "prog.h"

#define ANON   (64UL << 20)
#define FILESZ (4UL << 20)

int main(int argc, char **argv)
{
	unsigned char *a, *f, buf[4096];
	unsigned long sum = 0, bad = 0;
	int fd;

	prog_init(argc, argv);
	fd = open(prog_path("data"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	for (unsigned long i = 0; i < FILESZ; i += sizeof(buf)) {
		memset(buf, (int)(i >> 12) | 1, sizeof(buf));
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			prog_die("write");
	}
	a = mmap(NULL, ANON, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	f = mmap(NULL, FILESZ, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (a == MAP_FAILED || f == MAP_FAILED)
		prog_die("mmap");
	for (unsigned long i = 0; i < ANON; i += 4096)
		sum += a[i];
	for (unsigned long i = 0; i < FILESZ; i += 4096)
		sum += f[i];
	for (int k = 0; k < 16; k++)
		a[k * 4096 * 100] = 0xa0 + k;
	f[4096 * 7] = 0xee;
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		a[4096 * 3] = 1;
	for (unsigned long i = 0; i < ANON; i++) {
		unsigned char want = 0;

		for (int k = 0; k < 16; k++)
			if (i == (unsigned long)k * 4096 * 100)
				want = 0xa0 + k;
		bad += a[i] != want;
	}
	CHECK(!bad, "64 MiB of read-only-touched memory: zeros and 16 written pages (%lu bad)",
	      bad);
	bad = 0;
	for (unsigned long i = 0; i < FILESZ; i++)
		bad += f[i] != (i == 4096 * 7 ? 0xee : ((i >> 12) | 1) & 0xff);
	CHECK(!bad, "4 MiB private file mapping: the file's bytes and one written byte (%lu bad)",
	      bad);
	(void)sum;
	return prog_done();
}
