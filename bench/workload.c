// SPDX-License-Identifier: MIT
/*
 * Benchmark workloads, started by bench/run.sh:
 *   workload mem MIB        one process with MIB of touched anonymous memory
 *   workload sparse MIB     the same with every other page touched (one run per page)
 *   workload tree N         a tree of N sleeping processes (root + N-1 children)
 *   workload threads N      one process with N threads (sleeping)
 *   workload fds N          a tree of N processes with 50 open files each
 *   workload vmas N         one process with N mappings (every other one written)
 * Prints "ready" on stdout once set up, then sleeps until killed.  On SIGUSR1
 * the root checks that it is still what it was made (its memory's bytes,
 * children, threads, fds, mappings) and writes "ok" or "bad: why" to the
 * file named by $BENCH_VERDICT: a restore that came back wrong does not count.
 *
 *   workload limit-write MIB FILE   prints the seconds write() takes to put MIB
 *                                   of touched memory into FILE (new)
 *   workload limit-fill MIB FILE    prints the seconds it takes to put FILE's MIB
 *                                   into fresh anonymous memory: the faster of
 *                                   read() and UFFDIO_COPY from the file's pages
 * (the machine's own cost of moving a dense row's bytes, for amber/limit).
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char *kind;
static long n;
static char *mem;
static size_t mem_len, mem_step;

static void *sleeper(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static long count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	long c = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		c += de->d_name[0] != '.';
	closedir(d);
	return c;
}

/* The children of this process that are alive (not zombies). */
static long live_children(void)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	long c = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", getpid());
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (getdelim(&line, &cap, ' ', f) > 0) {
		char stat[64], buf[256], *p;
		FILE *s;

		snprintf(stat, sizeof(stat), "/proc/%ld/stat", atol(line));
		s = fopen(stat, "r");
		if (s && fgets(buf, sizeof(buf), s) && (p = strrchr(buf, ')')) && p[2] != 'Z')
			c++;
		if (s)
			fclose(s);
	}
	free(line);
	fclose(f);
	return c;
}

static const char *check(char *why, size_t len)
{
	long c;

	if (mem) {
		/* mem, sparse: the bytes; vmas: every other mapping's first byte */
		for (size_t i = 0; i < mem_len; i += mem_step)
			if (mem[i] != ((char)(i >> 12) | 1)) {
				snprintf(why, len, "byte at offset %zu changed", i);
				return why;
			}
	}
	if (!strcmp(kind, "vmas")) {
		FILE *f = fopen("/proc/self/maps", "r");
		char line[512];

		c = 0;
		while (f && fgets(line, sizeof(line), f))
			c++;
		if (f)
			fclose(f);
		if (c < n) {
			snprintf(why, len, "%ld mappings, want at least %ld", c, n);
			return why;
		}
	}
	if ((!strcmp(kind, "tree") || !strcmp(kind, "fds")) && (c = live_children()) != n - 1) {
		snprintf(why, len, "%ld live children, want %ld", c, n - 1);
		return why;
	}
	if (!strcmp(kind, "fds") && (c = count_dir("/proc/self/fd")) < 53) {
		snprintf(why, len, "%ld fds, want 53", c);
		return why;
	}
	if (!strcmp(kind, "threads") && (c = count_dir("/proc/self/task")) != n) {
		snprintf(why, len, "%ld threads, want %ld", c, n);
		return why;
	}
	return NULL;
}

static void on_usr1(int sig)
{
	const char *path = getenv("BENCH_VERDICT");
	char why[128];
	const char *bad = check(why, sizeof(why));
	FILE *f;

	(void)sig;
	if (!path || !(f = fopen(path, "w")))
		return;
	fprintf(f, bad ? "bad: %s\n" : "ok\n", bad);
	fclose(f);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* UFFDIO_COPY of the file's page-cache pages into fresh memory: no zeroing first. */
static double fill_uffd(size_t len, int fd)
{
	char *src = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	char *dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	struct uffdio_api api = {.api = UFFD_API};
	struct uffdio_register reg = {.range = {(unsigned long)dst, len},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	double t0, t;

	if (src == MAP_FAILED || dst == MAP_FAILED || uffd < 0 || ioctl(uffd, UFFDIO_API, &api) ||
	    ioctl(uffd, UFFDIO_REGISTER, &reg))
		return -1;
	t0 = now();
	for (size_t off = 0; off < len; off += 1 << 20) {
		struct uffdio_copy c = {.dst = (unsigned long)dst + off,
					.src = (unsigned long)src + off,
					.len = len - off < (1 << 20) ? len - off : 1 << 20};

		if (ioctl(uffd, UFFDIO_COPY, &c))
			return -1;
	}
	t = now() - t0;
	close(uffd);
	munmap(src, len);
	munmap(dst, len);
	return t;
}

/* The machine's cost of a dense row's bytes, without amber: see above. */
static int limit(const char *what, size_t len, const char *file)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool writing = !strcmp(what, "limit-write");
	int fd;
	double t0;

	if (p == MAP_FAILED)
		return 1;
	if (writing)
		for (size_t i = 0; i < len; i += 4096)
			p[i] = (char)(i >> 12) | 1;
	fd = writing ? open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600) : open(file, O_RDONLY);
	t0 = now();
	for (size_t off = 0; fd >= 0 && off < len;) {
		ssize_t r = writing ? write(fd, p + off, len - off) : read(fd, p + off, len - off);

		if (r <= 0)
			return 1;
		off += (size_t)r;
	}
	if (fd < 0)
		return 1;
	t0 = now() - t0;
	if (!writing) {
		double u = fill_uffd(len, fd);

		if (u >= 0 && u < t0)
			t0 = u;
	}
	printf("%.3f\n", t0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	kind = argv[1];
	n = atol(argv[2]);
	if (!strncmp(kind, "limit-", 6))
		return argc < 4 ? 2 : limit(kind, (size_t)n << 20, argv[3]);
	if (!strcmp(kind, "mem") || !strcmp(kind, "sparse")) {
		mem_len = (size_t)n << 20;
		mem_step = kind[0] == 's' ? 8192 : 4096;
		mem = mmap(NULL, mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			   0);
		if (mem == MAP_FAILED)
			return 1;
		for (size_t i = 0; i < mem_len; i += mem_step)
			mem[i] = (char)(i >> 12) | 1;
	} else if (!strcmp(kind, "vmas")) {
		/* n pages, every other one PROT_NONE: n mappings the kernel cannot merge */
		mem_len = (size_t)n * 4096;
		mem_step = 8192;
		mem = mmap(NULL, mem_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			return 1;
		for (size_t i = 0; i < mem_len; i += mem_step) {
			if (mprotect(mem + i, 4096, PROT_READ | PROT_WRITE))
				return 1;
			mem[i] = (char)(i >> 12) | 1;
		}
	} else if (!strcmp(kind, "tree")) {
		for (long i = 1; i < n; i++)
			if (fork() == 0)
				for (;;)
					pause();
	} else if (!strcmp(kind, "fds")) {
		for (long i = 1; i < n; i++)
			if (fork() == 0)
				break;
		for (int k = 0; k < 50; k++)
			if (open(k % 2 ? "/dev/null" : "/proc/self/exe", O_RDONLY) < 0)
				return 1;
		if (getpid() != getpgrp() && getppid() != 1)
			for (;;)
				pause();
	} else if (!strcmp(kind, "threads")) {
		for (long i = 1; i < n; i++) {
			pthread_t t;

			if (pthread_create(&t, NULL, sleeper, NULL))
				return 1;
		}
	} else {
		return 2;
	}
	signal(SIGUSR1, on_usr1);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
