// SPDX-License-Identifier: MIT
/*
 * fds on /proc files of the tree's own processes and on its namespaces.
 * A process P (with a second thread T) forks C, which forks G.
 *  P: fd 20 /proc/self/status read 40 bytes in; 21 /proc/self/maps
 *     O_NONBLOCK; 22 /proc/C/status; 23 /proc/G/stat (a grandchild: made after
 *     P places its fds); 24 /proc/C (a directory); 25 /proc/self/task/T/stat;
 *     26 /proc/self/exe O_PATH|O_NOFOLLOW (the link itself); 27
 *     /proc/self/stat, opened before the fork, so C shares it (one offset);
 *     30 /proc/self/ns/net, 31 /proc/self/ns/pid_for_children, 32 an O_PATH
 *     fd of /proc/self/ns/mnt (the namespace file), 33 /proc/self/ns/uts;
 *     34 a pidfd of G; 35 an epoll watching 36, /proc/self/mountinfo (EPOLLPRI).
 *  C: fd 20 /proc/P/status (its parent), 21 /proc/G (its child's directory).
 *  G: fd 20 /proc/C/stat, 21 /proc/self/stat 10 bytes in, 22 /proc/P/cmdline
 *     (an ancestor that is not its parent).
 * After the restore each process checks that its fds name the restored
 * processes (their contents), with their offsets and flags, and that the
 * namespace fds are the restored process's namespaces (st_ino).
 */
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>

#include "prog.h"

#ifndef KCMP_FILE
#define KCMP_FILE 0
#endif

static pid_t P, C, G, T;
static int sab;

static void at(int fd, int want, const char *what)
{
	if (fd < 0 || (fd != want && dup2(fd, want) != want))
		prog_die("fd %d (%s)", want, what);
	if (fd != want)
		close(fd);
}

static int openf(int flags, const char *fmt, ...)
{
	char path[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return open(path, flags);
}

/* All of fd from offset 0 (pread: its offset stays). */
static char *content(int fd)
{
	static char buf[1 << 16];
	ssize_t n, len = 0;

	while ((n = pread(fd, buf + len, sizeof(buf) - 1 - len, len)) > 0)
		len += n;
	buf[len] = 0;
	return buf;
}

static long field_pid(const char *status)
{
	const char *p = strstr(status, "\nPid:");

	return p ? strtol(p + 5, NULL, 10) : -1;
}

static long stat_pid(int fd)
{
	return strtol(content(fd), NULL, 10);
}

static off_t pos(int fd)
{
	return lseek(fd, 0, SEEK_CUR);
}

/* the ns fd refers to the namespace NAME of pid (0: self) */
static int same_ns(int fd, const char *name)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	return !fstat(fd, &a) && !stat(path, &b) && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static void *thread_main(void *arg)
{
	T = (pid_t)syscall(SYS_gettid);
	for (;;)
		pause();
	return NULL;
}

static int grandchild(void)
{
	char buf[16];

	at(openf(O_RDONLY, "/proc/%d/stat", C), 20, "C's stat");
	at(openf(O_RDONLY, "/proc/self/stat"), 21, "own stat");
	if (read(21, buf, 10) != 10)
		prog_die("read");
	at(openf(O_RDONLY, "/proc/%d/cmdline", P), 22, "P's cmdline");
	while (!prog_go_exists())
		usleep(10000);
	CHECK(stat_pid(20) == C, "G: fd 20 is /proc/%d/stat (%ld)", C, stat_pid(20));
	CHECK(pos(21) == 10, "G: fd 21 is 10 bytes in (%ld)", (long)pos(21));
	CHECK(stat_pid(21) == getpid(), "G: fd 21 is its own stat");
	CHECK(strstr(content(22), "procfd") != NULL, "G: fd 22 is P's cmdline (%s)", content(22));
	/* alive until P has read our files */
	while (access(prog_path("p-done"), F_OK))
		usleep(10000);
	return prog_failures;
}

static int child(void)
{
	char path[64];
	int st;

	C = getpid();
	at(openf(O_RDONLY, "/proc/%d/status", P), 20, "P's status");
	G = fork();
	if (G < 0)
		prog_die("fork");
	if (G == 0)
		_exit(grandchild());
	at(openf(O_RDONLY | O_DIRECTORY, "/proc/%d", G), 21, "G's dir");
	snprintf(path, sizeof(path), "%d\n", G);
	prog_write_atomic("grandchild", path);
	while (!prog_go_exists())
		usleep(10000);
	CHECK(field_pid(content(20)) == P, "C: fd 20 is /proc/%d/status", P);
	{
		int s = openat(21, "stat", O_RDONLY);

		CHECK(s >= 0 && stat_pid(s) == G, "C: fd 21 is the directory /proc/%d", G);
		if (s >= 0)
			close(s);
	}
	CHECK(waitpid(G, &st, 0) == G && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "C: the grandchild's checks passed (status %#x)", st);
	return prog_failures;
}

int main(int argc, char **argv)
{
	char buf[64], link[64];
	pthread_t th;
	struct stat st;
	int status;
	ssize_t n;

	prog_init(argc, argv);
	P = getpid();
	if (pthread_create(&th, NULL, thread_main, NULL))
		prog_die("pthread_create");
	while (!__atomic_load_n(&T, __ATOMIC_SEQ_CST))
		usleep(1000);
	at(openf(O_RDONLY, "/proc/self/stat"), 27, "own stat");
	C = fork();
	if (C < 0)
		prog_die("fork");
	if (C == 0)
		_exit(child());
	while ((n = prog_read_file(prog_path("grandchild"), buf, sizeof(buf))) <= 0)
		usleep(10000);
	G = (pid_t)atoi(buf);
	at(openf(O_RDONLY, "/proc/self/status"), 20, "own status");
	if (read(20, buf, 40) != 40)
		prog_die("read");
	at(openf(O_RDONLY | O_NONBLOCK, "/proc/self/maps"), 21, "own maps");
	at(openf(O_RDONLY, "/proc/%d/status", C), 22, "C's status");
	at(openf(O_RDONLY, "/proc/%d/stat", G), 23, "G's stat");
	at(openf(O_RDONLY | O_DIRECTORY, "/proc/%d", C), 24, "C's dir");
	at(openf(O_RDONLY, "/proc/self/task/%d/stat", T), 25, "T's stat");
	at(openf(O_PATH | O_NOFOLLOW, "/proc/self/exe"), 26, "exe link");
	at(openf(O_RDONLY, "/proc/self/ns/net"), 30, "net ns");
	at(openf(O_RDONLY, "/proc/self/ns/pid_for_children"), 31, "pid ns");
	at(openf(O_PATH, "/proc/self/ns/mnt"), 32, "mnt ns");
	at(openf(O_RDONLY, "/proc/self/ns/uts"), 33, "uts ns");
	at((int)syscall(SYS_pidfd_open, G, 0), 34, "G's pidfd");
	at(epoll_create1(0), 35, "epoll");
	at(openf(O_RDONLY, "/proc/self/mountinfo"), 36, "mountinfo");
	{
		struct epoll_event ev = {.events = EPOLLPRI, .data.u64 = 36};

		if (epoll_ctl(35, EPOLL_CTL_ADD, 36, &ev))
			prog_die("epoll_ctl");
	}
	prog_ready();
	prog_wait_go();
	sab = prog_sabotage();

	CHECK(pos(20) == (sab ? 41 : 40), "fd 20 is 40 bytes into /proc/self/status (%ld)",
	      (long)pos(20));
	CHECK(field_pid(content(20)) == getpid(), "fd 20 is our own status");
	n = read(20, buf, 10);
	CHECK(n == 10 && !memcmp(buf, content(20) + 40, 10), "fd 20 reads on from byte 40");
	CHECK(fcntl(21, F_GETFL) & O_NONBLOCK, "fd 21 (maps) is O_NONBLOCK");
	CHECK(pos(21) == 0 && strstr(content(21), "[stack]"), "fd 21 is our maps, at 0");
	CHECK(field_pid(content(22)) == C, "fd 22 is /proc/%d/status", C);
	CHECK(stat_pid(23) == G, "fd 23 is /proc/%d/stat (%ld)", G, stat_pid(23));
	{
		int s = openat(24, "status", O_RDONLY);

		CHECK(s >= 0 && field_pid(content(s)) == C, "fd 24 is the directory /proc/%d", C);
		if (s >= 0)
			close(s);
		CHECK(!fstat(24, &st) && S_ISDIR(st.st_mode), "fd 24 is a directory");
	}
	CHECK(stat_pid(25) == T, "fd 25 is /proc/self/task/%d/stat (%ld)", T, stat_pid(25));
	snprintf(buf, sizeof(buf), "/proc/self/fd/26");
	n = readlink(buf, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	snprintf(buf, sizeof(buf), "/proc/%d/exe", getpid());
	CHECK(!strcmp(link, buf) && (fcntl(26, F_GETFL) & O_PATH) && !fstat(26, &st) &&
		      S_ISLNK(st.st_mode),
	      "fd 26 is the O_PATH link %s (%s)", buf, link);
	CHECK(syscall(SYS_kcmp, getpid(), C, KCMP_FILE, 27, 27) == 0,
	      "fd 27 is one description with the child's fd 27");
	CHECK(stat_pid(27) == getpid(), "fd 27 is our stat");
	CHECK(same_ns(30, "net"), "fd 30 is our net namespace");
	CHECK(same_ns(31, "pid_for_children"), "fd 31 is our pid_for_children namespace");
	CHECK(same_ns(32, "mnt") && (fcntl(32, F_GETFL) & O_PATH),
	      "fd 32 is our mnt namespace, O_PATH");
	CHECK(same_ns(33, "uts"), "fd 33 is our uts namespace");
	snprintf(buf, sizeof(buf), "/proc/self/fdinfo/34");
	{
		char info[1024], *p;

		p = prog_read_file(buf, info, sizeof(info)) > 0 ? strstr(info, "\nPid:") : NULL;
		CHECK(p && strtol(p + 5, NULL, 10) == G, "fd 34 is a pidfd of G %d", G);
	}
	{
		char info[1024];

		snprintf(buf, sizeof(buf), "/proc/self/fdinfo/35");
		CHECK(prog_read_file(buf, info, sizeof(info)) > 0 &&
			      strstr(info, "tfd:       36 events:       1a data:               24"),
		      "epoll fd 35 watches fd 36 for EPOLLPRI (%s)", info);
	}
	prog_write_atomic("p-done", "1\n");
	CHECK(waitpid(C, &status, 0) == C && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child's checks passed (status %#x)", status);
	return prog_done();
}
