// SPDX-License-Identifier: MIT
/*
 * clonevm: children made with clone(CLONE_VM), not threads.  Child A also
 * shares the signal handlers, fd table and fs (CLONE_SIGHAND | CLONE_FILES |
 * CLONE_FS, as posix_spawn-style helpers do), child B has its own copies.
 * After go:
 *  - kcmp says A and B share our address space, A our handlers, fd table and
 *    fs, B none of those;
 *  - a request written into plain (private) memory reaches both children and
 *    their answers reach us: one address space, as before the dump;
 *  - we install a new SIGUSR1 handler: A runs it, B still runs the old one;
 *  - both exit with the status we ask for and we reap them.
 * The children stay off libc (they share our TLS): raw syscalls only.
 *
 * "clonevm DIR split": a forked child Q makes A and B with CLONE_VM, then
 * execs sleep, so A and B share an address space that their parent no
 * longer has.  amber must refuse that tree and leave all of it running; we
 * check after go that Q, A and B are alive and not stopped, then kill them.
 */
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "prog.h"

#define STACK (64 << 10)

static volatile long request;	 /* written by us, read by the children */
static volatile long answer[2];	 /* written by the children */
static volatile long handled[2]; /* per child: which handler ran (1 old, 2 new) */
static volatile long ready[2];

static long raw(long nr, long a, long b, long c)
{
	return syscall(nr, a, b, c);
}

static int who(void)
{
	return (int)raw(SYS_getpid, 0, 0, 0);
}

static pid_t kid[2];

static int me(void)
{
	return who() == kid[1];
}

static void old_handler(int sig)
{
	handled[me()] = 1;
}

static void new_handler(int sig)
{
	handled[me()] = 2;
}

static int child(void *arg)
{
	long n = (long)arg;
	struct timespec ts = {0, 5 * 1000 * 1000};

	ready[n] = 1;
	for (;;) {
		long r = request;

		if (r == -1)
			raw(SYS_exit, 40 + n, 0, 0);
		if (r > 0)
			answer[n] = r * 10 + n;
		raw(SYS_nanosleep, (long)&ts, 0, 0);
	}
	return 0;
}

static void wait_until(volatile long *p, long want, const char *what)
{
	for (int i = 0; i < 1000 && *p != want; i++)
		usleep(5000);
	if (*p != want)
		fprintf(stderr, "timeout waiting for %s\n", what);
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	int fd, n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return '?';
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	p = strrchr(buf, ')');
	return p && p[1] && p[2] ? p[2] : '?';
}

static int split(void)
{
	pid_t *pids = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t q;
	int st;

	if (pids == MAP_FAILED)
		prog_die("mmap");
	q = fork();
	if (q < 0)
		prog_die("fork");
	if (q == 0) {
		for (long n = 0; n < 2; n++) {
			char *stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
					   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

			if (stack == MAP_FAILED)
				_exit(1);
			pids[n] = clone(child, stack + STACK, CLONE_VM | SIGCHLD, (void *)n);
			wait_until(&ready[n], 1, "child start");
		}
		execl("/bin/sleep", "sleep", "300", (char *)NULL);
		_exit(1);
	}
	for (int i = 0; i < 500 && (!pids[0] || !pids[1] || proc_state(q) == '?'); i++)
		usleep(10000);
	usleep(100000); /* let Q exec */
	prog_ready();
	prog_wait_go();
	pids[2] = q;
	for (int n = 0; n < 3; n++) {
		char c = proc_state(pids[n]);

		if (prog_sabotage() && n == 2)
			c = 'T';
		CHECK(c == 'S' || c == 'R', "%s %d still runs after the refused dump (state %c)",
		      n == 2 ? "Q"
		      : n    ? "B"
			     : "A",
		      pids[n], c);
	}
	for (int n = 0; n < 3; n++)
		kill(pids[n], SIGKILL);
	waitpid(q, &st, 0);
	return prog_done();
}

int main(int argc, char **argv)
{
	static const int flags[2] = {CLONE_VM | CLONE_SIGHAND | CLONE_FILES | CLONE_FS, CLONE_VM};
	static const int kinds[3] = {KCMP_SIGHAND, KCMP_FILES, KCMP_FS};
	static const char *const names[3] = {"signal handlers", "fd table", "fs"};
	struct sigaction sa = {.sa_handler = old_handler};
	int st, kv, ks;

	prog_init(argc, argv);
	if (argc > 2 && !strcmp(argv[2], "split"))
		return split();
	sigaction(SIGUSR1, &sa, NULL);
	for (long n = 0; n < 2; n++) {
		char *stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

		if (stack == MAP_FAILED)
			prog_die("mmap");
		kid[n] = clone(child, stack + STACK, flags[n] | SIGCHLD, (void *)n);
		if (kid[n] < 0)
			prog_die("clone");
		wait_until(&ready[n], 1, "child start");
	}
	prog_ready();
	prog_wait_go();

	for (int n = 0; n < 2; n++) {
		kv = (int)syscall(SYS_kcmp, getpid(), kid[n], KCMP_VM, 0, 0);
		CHECK(kv == 0, "child %d (pid %d) shares our address space (kcmp VM %d)", n, kid[n],
		      kv);
		for (int k = 0; k < 3; k++) {
			ks = (int)syscall(SYS_kcmp, getpid(), kid[n], kinds[k], 0, 0);
			CHECK(n == 0 ? ks == 0 : ks > 0, "child %d: %s %s (kcmp %d)", n, names[k],
			      n == 0 ? "shared" : "its own", ks);
		}
	}

	request = prog_sabotage() ? 6 : 7;
	wait_until(&answer[0], 70, "answer of child 0");
	wait_until(&answer[1], 71, "answer of child 1");
	CHECK(answer[0] == 70 && answer[1] == 71,
	      "a store in plain memory reached both children and theirs reached us: %ld %ld",
	      answer[0], answer[1]);

	sa.sa_handler = new_handler;
	sigaction(SIGUSR1, &sa, NULL);
	for (int n = 0; n < 2; n++) {
		kill(kid[n], SIGUSR1);
		wait_until(&handled[n], n == 0 ? 2 : 1, "the signal handler");
	}
	CHECK(handled[0] == 2, "child 0 runs our new handler (shared sighand): %ld", handled[0]);
	CHECK(handled[1] == 1, "child 1 keeps the old handler (own sighand): %ld", handled[1]);

	request = -1;
	for (int n = 0; n < 2; n++) {
		pid_t r = waitpid(kid[n], &st, __WALL);

		CHECK(r == kid[n] && WIFEXITED(st) && WEXITSTATUS(st) == 40 + n,
		      "child %d exited with %d (status 0x%x)", n, 40 + n, st);
	}
	return prog_done();
}
