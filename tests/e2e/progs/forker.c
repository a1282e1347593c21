// SPDX-License-Identifier: MIT
/*
 * forker: a tree that keeps forking while it is dumped.  The root forks a
 * child every 10 ms, each child one grandchild, up to MAX
 * processes.  Each new process registers itself in shared memory (its pid
 * and parent) and appends its pid to DIR/started as it starts.  Ready once
 * 20 have started; it forks on until go.  After go forking stops and the
 * root checks that the registered processes are exactly the live tree:
 * every one alive, a child of its registered parent, no live one missing;
 * a dump that missed a child forked meanwhile (or kept one it had not
 * frozen) breaks that.  The test compares DIR/started with the image.
 */
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "prog.h"

#define MAX 400

struct shared {
	atomic_int n;
	atomic_int stop; /* no more forks */
	atomic_int done; /* the root checked: everyone exits */
	pid_t pid[MAX], parent[MAX];
};

static struct shared *sh;

static void nap(long ms)
{
	struct timespec ts = {0, ms * 1000 * 1000};

	nanosleep(&ts, NULL);
}

static void registered(void)
{
	int i = atomic_fetch_add(&sh->n, 1);
	char line[32];
	int fd;

	if (i >= MAX)
		_exit(0);
	sh->pid[i] = getpid();
	sh->parent[i] = getppid();
	fd = open(prog_path("started"), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
	snprintf(line, sizeof(line), "%d\n", (int)getpid());
	if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		_exit(4);
	close(fd);
}

/* One fork; the child registers, maybe forks one of its own, then waits for done. */
static void spawn(int depth)
{
	pid_t c;

	if (atomic_load(&sh->stop) || atomic_load(&sh->n) >= MAX)
		return;
	c = fork();
	if (c != 0)
		return;
	registered();
	if (depth < 2)
		spawn(depth + 1);
	while (!atomic_load(&sh->done))
		nap(5);
	while (wait(NULL) > 0)
		;
	_exit(0);
}

static pid_t getppid_of(pid_t pid)
{
	char path[64], stat[512], *p;
	int ppid = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (prog_read_file(path, stat, sizeof(stat)) < 0 || !(p = strrchr(stat, ')')))
		return -1;
	return sscanf(p + 2, "%*c %d", &ppid) == 1 ? ppid : -1;
}

static bool is_member(pid_t pid, int n)
{
	for (int i = 0; i < n; i++)
		if (sh->pid[i] == pid)
			return true;
	return false;
}

/* Every live process below pid, through each thread's children file. */
static int count_tree(pid_t pid, int n, int *strangers)
{
	char path[64], buf[65536];
	int count = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	if (prog_read_file(path, buf, sizeof(buf)) < 0)
		return 0;
	for (char *p = buf, *end; *p; p = end) {
		pid_t kid = (pid_t)strtol(p, &end, 10);

		if (end == p)
			break;
		if (!is_member(kid, n))
			(*strangers)++;
		count += 1 + count_tree(kid, n, strangers);
	}
	return count;
}

int main(int argc, char **argv)
{
	int n, alive = 0, parents = 0, strangers = 0, live;

	prog_init(argc, argv);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		prog_die("mmap");
	while (atomic_load(&sh->n) < 20) {
		spawn(1);
		nap(4);
	}
	prog_ready();
	while (!prog_go_exists()) {
		spawn(1);
		nap(10);
	}
	atomic_store(&sh->stop, 1);
	nap(300); /* a fork that passed its stop check registers meanwhile */
	n = atomic_load(&sh->n);
	if (n > MAX)
		n = MAX;
	if (prog_sabotage())
		sh->pid[0] = 1;
	for (int i = 0; i < n; i++) {
		char path[64], stat[512];

		snprintf(path, sizeof(path), "/proc/%d/stat", sh->pid[i]);
		if (prog_read_file(path, stat, sizeof(stat)) < 0 || strstr(stat, ") Z "))
			continue;
		alive++;
		parents += getppid_of(sh->pid[i]) == sh->parent[i];
	}
	live = count_tree(getpid(), n, &strangers);
	CHECK(alive == n, "%d of the %d registered processes alive", alive, n);
	CHECK(parents == n, "%d of the %d registered processes children of their parent", parents,
	      n);
	CHECK(live == n && !strangers,
	      "%d live processes in the tree, %d unregistered (want %d, 0)", live, strangers, n);
	atomic_store(&sh->done, 1);
	while (wait(NULL) > 0)
		;
	return prog_done();
}
