// SPDX-License-Identifier: MIT
/*
 * pidfd: we hold a pidfd (PIDFD_NONBLOCK) of our child at fd 20 and its dup
 * at fd 22, and one of ourselves at fd 21; the child holds one of us at fd 20.
 * After the restore they must still refer to those processes: fdinfo Pid,
 * waitid(P_PIDFD) sees the child running, pidfd_send_signal() reaches it and
 * waitid(P_PIDFD) on the dup then reaps it with its exit status.
 *
 * With the argument "dead": fd 23 is a pidfd of a child that exited and was
 * reaped, which amber must refuse to dump.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "prog.h"

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
	pid_t kid, parent = getpid();

	sigemptyset(&ss);
	sigaddset(&ss, SIGUSR1);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	kid = fork();
	if (kid < 0)
		prog_die("fork");
	if (kid == 0) {
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

		if (gone == 0)
			_exit(0);
		at(pidfd_open(gone, 0), 23);
		waitpid(gone, NULL, 0);
	}
	prog_ready();
	prog_wait_go();

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
	memset(&si, 0, sizeof(si));
	rc = waitid(P_PIDFD, 22, &si, WEXITED);
	CHECK(rc == 0 && si.si_pid == kid && si.si_code == CLD_EXITED &&
		      si.si_status == want_status,
	      "waitid(P_PIDFD, fd 22) reaps the child, exit status %d (%d)", want_status,
	      si.si_status);
	return prog_done();
}
