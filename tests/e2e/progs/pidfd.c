// SPDX-License-Identifier: MIT
/*
 * pidfd: we hold a pidfd (PIDFD_NONBLOCK) of our child at fd 20 and its dup
 * at fd 22, and one of ourselves at fd 21; the child holds one of us at fd 20.
 * After the restore they must still refer to those processes: fdinfo Pid,
 * waitid(P_PIDFD) sees the child running, pidfd_send_signal() reaches it and
 * waitid(P_PIDFD) on the dup then reaps it with its exit status.
 *
 * With the argument "dead", also: fd 23 is a pidfd of a child that exited and
 * was reaped: after the restore it is dead too (fdinfo Pid -1, poll readable
 * as before, pidfd_send_signal ESRCH); fd 24 one of a child Z that exited
 * with status 5 and was not reaped (a zombie): waitid(P_PIDFD) reaps it with
 * that status; fd 25 one of the child's child G (neither our child, sibling
 * nor ancestor): it is G, alive, and SIGKILL through it makes it readable;
 * fd 26 an epoll watching fds 20 and 24: only the zombie's is ready; fd 27 a
 * PIDFD_THREAD pidfd of our second thread.
 *
 * With "outside": fd 26 is a pidfd of our parent, outside the tree, which
 * amber must refuse to dump.
 */
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/wait.h>

#include "prog.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static volatile sig_atomic_t got_usr1;

static void on_usr1(int sig)
{
	got_usr1 = 1;
}

static int pidfd_open(pid_t pid, unsigned int flags)
{
	return (int)syscall(SYS_pidfd_open, pid, flags);
}

static void at(int fd, int want)
{
	if (fd < 0 || (fd != want && dup2(fd, want) != want))
		prog_die("fd %d", want);
	if (fd != want)
		close(fd);
}

static long fdinfo_pid(int fd)
{
	char path[64], buf[1024], *p;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (prog_read_file(path, buf, sizeof(buf)) < 0 || !(p = strstr(buf, "\nPid:")))
		return -2;
	return strtol(p + 5, NULL, 10);
}

static pid_t thread_tid;

static void *thread_main(void *arg)
{
	__atomic_store_n(&thread_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	for (;;)
		pause();
	return NULL;
}

static void watch(int ep, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)fd};

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		prog_die("epoll_ctl %d", fd);
}

/* linux/pidfd.h of 6.15: the exit status of a reaped process (PIDFD_INFO_EXIT) */
struct pidfd_info_v0 {
	uint64_t mask, cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};

/* its wait status, or -1 where the kernel keeps none */
static long exit_info(int fd)
{
	struct pidfd_info_v0 i = {.mask = 1UL << 3};

	if (ioctl(fd, _IOWR(0xFF, 11, struct pidfd_info_v0), &i) || !(i.mask & (1UL << 3)))
		return -1;
	return i.exit_code;
}

static short revents(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

static int is_pidfd(int fd)
{
	char path[64], buf[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, buf, sizeof(buf) - 1);
	return n > 0 && (buf[n] = 0, !strcmp(buf, "anon_inode:[pidfd]"));
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv), dead = argc > first && !strcmp(argv[first], "dead");
	int want_status = 7, rc;
	struct sigaction sa = {.sa_handler = on_usr1};
	siginfo_t si;
	sigset_t ss;
	pid_t kid, parent = getpid(), zombie = 0, grandchild = 0;
	short dead_revents = 0, zombie_revents = 0;
	long dead_exit = -2;
	struct epoll_event ep_ev[4];
	pthread_t th;
	int ep_n = -1;

	sigemptyset(&ss);
	sigaddset(&ss, SIGUSR1);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	kid = fork();
	if (kid < 0)
		prog_die("fork");
	if (kid == 0) {
		if (dead) {
			pid_t g = fork();
			char buf[32];

			if (g == 0) {
				while (!prog_go_exists())
					usleep(10000);
				for (;;)
					pause();
			}
			snprintf(buf, sizeof(buf), "%d\n", g);
			prog_write_atomic("grandchild", buf);
		}
		at(pidfd_open(parent, 0), 20);
		while (!prog_go_exists())
			usleep(10000);
		CHECK(is_pidfd(20) && fdinfo_pid(20) == parent, "child: fd 20 is a pidfd of pid %d",
		      parent);
		sigemptyset(&ss);
		for (int i = 0; i < 500 && !got_usr1; i++) {
			struct timespec ts = {0, 10000000};

			sigprocmask(SIG_UNBLOCK, &sa.sa_mask, NULL);
			sigsuspend(&ss);
			nanosleep(&ts, NULL);
		}
		CHECK(got_usr1, "child: SIGUSR1 from pidfd_send_signal arrived");
		_exit(prog_failures ? 1 : 7);
	}
	at(pidfd_open(kid, O_NONBLOCK), 20);
	at(pidfd_open(getpid(), 0), 21);
	at(dup(20), 22);
	if (dead) {
		pid_t gone = fork();
		char buf[32];

		if (gone == 0)
			raise(SIGTERM);
		at(pidfd_open(gone, 0), 23);
		waitpid(gone, NULL, 0);
		zombie = fork();
		if (zombie == 0)
			_exit(5);
		at(pidfd_open(zombie, 0), 24);
		/* a zombie: readable, not reaped */
		{
			struct pollfd p = {.fd = 24, .events = POLLIN};

			poll(&p, 1, 5000);
		}
		dead_revents = revents(23);
		dead_exit = exit_info(23);
		zombie_revents = revents(24);
		while (prog_read_file(prog_path("grandchild"), buf, sizeof(buf)) <= 0)
			usleep(10000);
		grandchild = atoi(buf);
		at(pidfd_open(grandchild, 0), 25);
		at(epoll_create1(0), 26);
		watch(26, 20);
		watch(26, 24);
		if (pthread_create(&th, NULL, thread_main, NULL))
			prog_die("pthread_create");
		while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
			usleep(1000);
		at(pidfd_open(thread_tid, PIDFD_THREAD), 27);
	}
	if (argc > first && !strcmp(argv[first], "outside")) {
		at(pidfd_open(getppid(), 0), 26);
	}
	prog_ready();
	prog_wait_go();
	/* before the child is told to exit */
	if (dead)
		ep_n = epoll_wait(26, ep_ev, 4, 0);

	if (prog_sabotage())
		want_status = 8;
	CHECK(is_pidfd(20) && fdinfo_pid(20) == kid, "fd 20 is a pidfd of the child %d (%ld)", kid,
	      fdinfo_pid(20));
	CHECK(is_pidfd(21) && fdinfo_pid(21) == getpid(), "fd 21 is a pidfd of ourselves");
	CHECK(fcntl(20, F_GETFL) & O_NONBLOCK, "fd 20 is PIDFD_NONBLOCK");
	CHECK(!(fcntl(21, F_GETFL) & O_NONBLOCK), "fd 21 blocks");
	CHECK(fcntl(22, F_GETFL) & O_NONBLOCK, "fd 22 (its dup) is non-blocking too");
	memset(&si, 0, sizeof(si));
	CHECK(waitid(P_PIDFD, 20, &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0,
	      "waitid(P_PIDFD, fd 20): the child still runs");
	rc = (int)syscall(SYS_pidfd_send_signal, 20, SIGUSR1, NULL, 0);
	CHECK(rc == 0, "pidfd_send_signal(fd 20, SIGUSR1) (%s)", rc ? strerror(errno) : "sent");
	{
		struct pollfd p = {.fd = 22, .events = POLLIN};

		CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN),
		      "fd 22 becomes readable when the child exits");
	}
	if (dead) {
		CHECK(is_pidfd(23) && fdinfo_pid(23) == -1, "fd 23 is a pidfd of a reaped process");
		CHECK(dead_revents && revents(23) == dead_revents,
		      "fd 23 polls as before the dump (%#x, was %#x)", revents(23), dead_revents);
		CHECK(exit_info(23) == dead_exit,
		      "fd 23: the reaped process's exit status is %#lx as before (%#lx)", dead_exit,
		      exit_info(23));
		errno = 0;
		rc = (int)syscall(SYS_pidfd_send_signal, 23, 0, NULL, 0);
		CHECK(rc < 0 && errno == ESRCH, "pidfd_send_signal(fd 23) fails with ESRCH (%s)",
		      rc < 0 ? strerror(errno) : "sent");
		CHECK(is_pidfd(24) && fdinfo_pid(24) == zombie, "fd 24 is a pidfd of the zombie %d",
		      zombie);
		CHECK(ep_n == 1 && ep_ev[0].data.u64 == 24 && (ep_ev[0].events & EPOLLIN),
		      "epoll fd 26: only fd 24 (the zombie's) was ready (%d)", ep_n);
		CHECK(zombie_revents && revents(24) == zombie_revents,
		      "fd 24 polls as before the dump (%#x, was %#x)", revents(24), zombie_revents);
		memset(&si, 0, sizeof(si));
		rc = waitid(P_PIDFD, 24, &si, WEXITED);
		CHECK(rc == 0 && si.si_pid == zombie && si.si_code == CLD_EXITED &&
			      si.si_status == 5,
		      "waitid(P_PIDFD, fd 24) reaps the zombie, status 5 (%d)", si.si_status);
		CHECK(is_pidfd(27) && fdinfo_pid(27) == thread_tid && (fcntl(27, F_GETFL) & O_EXCL),
		      "fd 27 is a PIDFD_THREAD pidfd of our thread %d (%ld)", thread_tid,
		      fdinfo_pid(27));
		CHECK(is_pidfd(25) && fdinfo_pid(25) == grandchild,
		      "fd 25 is a pidfd of the grandchild %d (%ld)", grandchild, fdinfo_pid(25));
		CHECK(revents(25) == 0, "fd 25: the grandchild runs");
		rc = (int)syscall(SYS_pidfd_send_signal, 25, SIGKILL, NULL, 0);
		CHECK(rc == 0, "pidfd_send_signal(fd 25, SIGKILL) (%s)",
		      rc ? strerror(errno) : "sent");
		{
			struct pollfd p = {.fd = 25, .events = POLLIN};

			CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN),
			      "fd 25 becomes readable when the grandchild dies");
		}
	}
	memset(&si, 0, sizeof(si));
	rc = waitid(P_PIDFD, 22, &si, WEXITED);
	CHECK(rc == 0 && si.si_pid == kid && si.si_code == CLD_EXITED &&
		      si.si_status == want_status,
	      "waitid(P_PIDFD, fd 22) reaps the child, exit status %d (%d)", want_status,
	      si.si_status);
	return prog_done();
}
