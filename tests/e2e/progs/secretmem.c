// SPDX-License-Identifier: MIT
/*
 * secretmem MODE: memory from memfd_secret(), which only this process can
 * read.  MODE fd keeps the fd and the mapping, map only the mapping.  amber
 * must refuse the dump naming it and leave the process running: after "go"
 * the program checks its secret is still there.
 */
#include <sys/mman.h>

#include "prog.h"

#define LEN (3 * 4096UL)

int main(int argc, char **argv)
{
	unsigned long bad = 0;
	unsigned char *p;
	int fd;

	prog_init(argc, argv);
	fd = (int)syscall(SYS_memfd_secret, 0);
	if (fd < 0)
		prog_die("memfd_secret");
	if (ftruncate(fd, LEN))
		prog_die("ftruncate");
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		prog_die("mmap");
	for (unsigned long i = 0; i < LEN; i++)
		p[i] = (unsigned char)(i * 7 + 1);
	if (argc > 2 && !strcmp(argv[2], "map"))
		close(fd);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		p[5] ^= 1;
	for (unsigned long i = 0; i < LEN; i++)
		bad += p[i] != (unsigned char)(i * 7 + 1);
	CHECK(!bad, "%lu bytes of secret memory as written (%lu bad)", LEN, bad);
	return prog_done();
}
