// SPDX-License-Identifier: MIT
/*
 * memflags-novdso: a process that unmapped its vDSO ([vdso], [vvar],
 * [vvar_vclock]) is dumped through a syscall instruction of its own code and
 * restored through one in amber's scratch area, which goes away: after
 * restore /proc/self/maps is exactly what it was (no vDSO, nothing of
 * amber's), and memory and registers-held state are intact.  (glibc's time
 * functions call the vDSO: the program uses raw syscalls only after unmapping.)
 */
#include <sys/mman.h>

#include "prog.h"

static char maps_before[1 << 16];

static int vdso_part(const char *line)
{
	return strstr(line, "[vdso]") || strstr(line, "[vvar]") || strstr(line, "[vvar_vclock]");
}

int main(int argc, char **argv)
{
	static char buf[1 << 16], now[1 << 16];
	unsigned char *mem;
	unsigned long bad = 0;
	volatile unsigned long counter = 0;
	int found = 0;

	prog_init(argc, argv);
	mem = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		prog_die("mmap");
	for (unsigned long i = 0; i < 1 << 20; i++)
		mem[i] = (unsigned char)(i * 7 + 3);
	if (prog_read_file("/proc/self/maps", buf, sizeof(buf)) < 0)
		prog_die("read maps");
	for (char *l = buf; *l;) {
		char *nl = strchr(l, '\n');
		unsigned long s, e;

		if (nl)
			*nl = 0;
		if (vdso_part(l) && sscanf(l, "%lx-%lx", &s, &e) == 2) {
			if (munmap((void *)s, e - s))
				prog_die("munmap %s", l);
			found++;
		}
		if (!nl)
			break;
		l = nl + 1;
	}
	if (!found)
		prog_die("no vDSO to unmap");
	if (prog_read_file("/proc/self/maps", maps_before, sizeof(maps_before)) < 0)
		prog_die("read maps");
	for (int i = 0; i < 1000; i++)
		counter++;
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		mem[12345] ^= 1;
	if (prog_read_file("/proc/self/maps", now, sizeof(now)) < 0)
		prog_die("read maps");
	CHECK(!strstr(now, "[vdso]") && !strstr(now, "[vvar"), "no vDSO or vvar mapped");
	CHECK(!strcmp(now, maps_before), "/proc/self/maps is what it was (%zu bytes)", strlen(now));
	for (unsigned long i = 0; i < 1 << 20; i++)
		bad += mem[i] != (unsigned char)(i * 7 + 3);
	CHECK(!bad, "1 MiB of memory intact (%lu bad bytes)", bad);
	CHECK(counter == 1000, "a stack variable: %lu", (unsigned long)counter);
	CHECK(getpid() == atoi(prog_status_field("Pid")), "syscalls work: getpid %d",
	      (int)getpid());
	return prog_done();
}
