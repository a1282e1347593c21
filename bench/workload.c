// SPDX-License-Identifier: MIT
/*
 * Benchmark workloads, started by bench/run.sh:
 *   workload mem MIB        one process with MIB of touched anonymous memory
 *   workload sparse MIB     the same with every other page touched (one run per page)
 *   workload tree N         a tree of N sleeping processes (root + N-1 children)
 *   workload threads N      one process with N threads (sleeping)
 *   workload fds N          a tree of N processes with 50 open files each
 * Prints "ready" on stdout once set up, then sleeps until killed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
	for (;;)
		pause();
	return arg;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 0;

	if (argc < 3)
		return 2;
	if (!strcmp(argv[1], "mem") || !strcmp(argv[1], "sparse")) {
		size_t len = (size_t)n << 20, step = argv[1][0] == 's' ? 8192 : 4096;
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return 1;
		for (size_t i = 0; i < len; i += step)
			p[i] = (char)(i >> 12) | 1;
	} else if (!strcmp(argv[1], "tree")) {
		for (long i = 1; i < n; i++)
			if (fork() == 0)
				for (;;)
					pause();
	} else if (!strcmp(argv[1], "fds")) {
		for (long i = 1; i < n; i++)
			if (fork() == 0)
				break;
		for (int k = 0; k < 50; k++)
			if (open(k % 2 ? "/dev/null" : "/proc/self/exe", O_RDONLY) < 0)
				return 1;
		if (getpid() != getpgrp() && getppid() != 1)
			for (;;)
				pause();
	} else if (!strcmp(argv[1], "threads")) {
		for (long i = 1; i < n; i++) {
			pthread_t t;

			if (pthread_create(&t, NULL, sleeper, NULL))
				return 1;
		}
	} else {
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
