// SPDX-License-Identifier: MIT
/*
 * O_ASYNC and its owner across dump/restore, on a pipe, a socket and an
 * inotify fd (a regular file has no use for it: F_SETFL does not set it):
 *
 *   pipe read end   F_SETOWN_EX F_OWNER_PID (itself), F_SETSIG SIGRTMIN+1
 *   socketpair [0]  F_SETOWN_EX F_OWNER_PGRP (its group), F_SETSIG SIGRTMIN+3
 *   inotify         F_SETOWN_EX F_OWNER_TID (a thread's), F_SETSIG SIGRTMIN+4
 *
 * After the restore the test writes into the pipe (through /proc/PID/fd) and
 * then creates T/wrote; told to go, the program checks owners, signals and
 * flags, that the pipe's signal came with the pipe's fd in si_fd, then
 * writes into the socket and makes an inotify event, and wants both signals
 * with their fds.  Without amber (selftest) the program writes the pipe
 * itself.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>

#include "prog.h"

static volatile sig_atomic_t got_fd[3] = {-1, -1, -1}, got_code[3], got_tid[3];

static void on_sig(int sig, siginfo_t *si, void *uc)
{
	int i = sig == SIGRTMIN + 1 ? 0 : sig == SIGRTMIN + 3 ? 1 : 2;

	got_fd[i] = si->si_fd;
	got_code[i] = si->si_code;
	got_tid[i] = (int)syscall(SYS_gettid);
}

static pid_t thread_tid;
static volatile int stop_thread;

static void *thread_main(void *arg)
{
	thread_tid = (pid_t)syscall(SYS_gettid);
	while (!stop_thread)
		usleep(10 * 1000);
	return NULL;
}

static void set_async(int fd, int type, pid_t pid, int sig)
{
	struct f_owner_ex own = {.type = type, .pid = pid};

	if (fcntl(fd, F_SETOWN_EX, &own) || fcntl(fd, F_SETSIG, sig) ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC))
		prog_die("O_ASYNC on fd %d", fd);
}

static void check_owner(int fd, const char *what, int type, pid_t pid, int sig)
{
	struct f_owner_ex own = {0};

	fcntl(fd, F_GETOWN_EX, &own);
	CHECK(own.type == type && own.pid == pid, "%s: owner type %d pid %d (want %d %d)", what,
	      own.type, own.pid, type, pid);
	CHECK(fcntl(fd, F_GETSIG) == sig, "%s: F_GETSIG %d (want %d)", what, fcntl(fd, F_GETSIG),
	      sig);
	CHECK(fcntl(fd, F_GETFL) & O_ASYNC, "%s: O_ASYNC is set", what);
}

static void wait_sig(int i)
{
	for (int n = 0; n < 300 && got_fd[i] < 0; n++)
		usleep(10 * 1000);
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_sigaction = on_sig, .sa_flags = SA_SIGINFO | SA_RESTART};
	int p[2], s[2], in;
	pthread_t th;
	char c = 0;

	prog_init(argc, argv);
	sigaction(SIGRTMIN + 1, &sa, NULL);
	sigaction(SIGRTMIN + 3, &sa, NULL);
	sigaction(SIGRTMIN + 4, &sa, NULL);
	if (pthread_create(&th, NULL, thread_main, NULL))
		prog_die("pthread_create");
	while (!__atomic_load_n(&thread_tid, __ATOMIC_SEQ_CST))
		usleep(1000);
	if (pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, s))
		prog_die("pipe/socketpair");
	in = inotify_init1(IN_NONBLOCK);
	if (in < 0 || inotify_add_watch(in, prog_dir, IN_CREATE) < 0)
		prog_die("inotify");
	set_async(p[0], F_OWNER_PID, getpid(), SIGRTMIN + 1);
	set_async(s[0], F_OWNER_PGRP, getpgrp(), SIGRTMIN + 3);
	set_async(in, F_OWNER_TID, thread_tid, SIGRTMIN + 4);
	printf("fds: pipe %d %d socket %d inotify %d\n", p[0], p[1], s[0], in);
	prog_ready();
	prog_wait_go();

	check_owner(p[0], "pipe", F_OWNER_PID, getpid(), SIGRTMIN + 1);
	check_owner(s[0], "socket", F_OWNER_PGRP, getpgrp(), SIGRTMIN + 3);
	check_owner(in, "inotify", F_OWNER_TID, thread_tid, SIGRTMIN + 4);

	/* the test wrote 'T' after the restore; without amber nobody did */
	if (access(prog_path("wrote"), F_OK) && write(p[1], "P", 1) != 1)
		prog_die("write pipe");
	wait_sig(0);
	if (read(p[0], &c, 1) != 1)
		c = 0;
	CHECK(got_fd[0] == p[0] && got_code[0] == POLL_IN,
	      "pipe: SIGRTMIN+1 with si_fd %d (want %d), si_code %d (POLL_IN), for the byte '%c'",
	      (int)got_fd[0], p[0], (int)got_code[0], c ? c : '?');
	CHECK(c == (access(prog_path("wrote"), F_OK) ? 'P' : 'T'),
	      "pipe: the byte that raised it is the test's ('%c')", c ? c : '?');

	if (prog_sabotage())
		fcntl(s[0], F_SETFL, fcntl(s[0], F_GETFL) & ~O_ASYNC);
	if (write(s[1], "x", 1) != 1)
		prog_die("write socket");
	wait_sig(1);
	CHECK(got_fd[1] == s[0], "socket: SIGRTMIN+3 to the group with si_fd %d (want %d)",
	      (int)got_fd[1], s[0]);

	close(open(prog_path("async.new"), O_WRONLY | O_CREAT, 0644));
	wait_sig(2);
	CHECK(got_fd[2] == in && got_tid[2] == thread_tid,
	      "inotify: SIGRTMIN+4 to thread %d with si_fd %d (want thread %d, fd %d)",
	      (int)got_tid[2], (int)got_fd[2], thread_tid, in);
	stop_thread = 1;
	pthread_join(th, NULL);
	return prog_done();
}
