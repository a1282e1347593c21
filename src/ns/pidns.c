// SPDX-License-Identifier: MIT
/*
 * restore --new-pidns: the tree comes back in a new pid namespace, where its
 * pids are free even when the host has given them to other processes since
 * the dump (the clash CRIU's users meet most).  Each process keeps the pid
 * it had, as it sees it: clone3's set_tid names the pid of the innermost
 * level only, the host gives it another.
 *
 * amber forks itself into the namespace as its init (pid 1) and in a new
 * mount namespace (a slave of amber's, so mounts made on the host still
 * appear) with a /proc of its own, so that /proc/PID is the restored
 * process PID.  That child runs the whole restore, seeing the namespace's
 * pids like the restored processes, then stays as the namespace's init,
 * reaping, until no process is left in it: the namespace ends with its
 * init.  The parent waits for the child's word, writes the host pid of the
 * root to --pidfile, and exits as the restore would (with -d once the tree
 * runs, else with the root's exit status).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns.h"
#include "restore.h"
#include "sys.h"

/* What the namespace's init tells amber: the tree runs, then how its root ended. */
struct pidns_word {
	int ret;    /* the restore's result: 0 or -errno */
	int status; /* without -d: the root's exit status (as do_restore gives it) */
};

static int send_word(int fd, int ret, int status)
{
	struct pidns_word w = {ret, status};

	return sys_write_full(fd, &w, sizeof(w)) == sizeof(w) ? 0 : -EPIPE;
}

/* In the child, pid 1 of the new namespace: its own mounts and /proc. */
static int pidns_mounts(void)
{
	if (unshare(CLONE_NEWNS)) {
		pr_err("--new-pidns: cannot make a mount namespace: %m");
		return -errno;
	}
	/* nothing mounted here propagates back to the host */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL)) {
		pr_err("--new-pidns: cannot make / a slave mount: %m");
		return -errno;
	}
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) {
		pr_err("--new-pidns: cannot mount /proc for the new pid namespace: %m");
		return -errno;
	}
	return 0;
}

/* The namespace's init: reap whatever ends in it until nothing is left. */
static void __attribute__((noreturn)) pidns_reap(pid_t root, int word_fd, bool wait_root)
{
	int st;
	pid_t p;

	for (;;) {
		p = waitpid(-1, &st, 0);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			_exit(0);
		if (p == root && wait_root && (WIFEXITED(st) || WIFSIGNALED(st))) {
			int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);

			send_word(word_fd, 0, status);
			close(word_fd);
			wait_root = false;
		}
	}
}

static void __attribute__((noreturn))
pidns_init(struct opts *o, int (*restore)(struct opts *o, uint32_t *root), int word_fd,
	   int alive_fd)
{
	bool wait_root = !o->detached;
	uint32_t root = 0;
	sigset_t all;
	int ret;

	struct pollfd alive = {.fd = alive_fd, .events = POLLIN};

	/* dies with amber until the tree runs; the tree then goes with it (an
	 * init's getppid() is 0: amber's end of the pipe tells it is there) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (poll(&alive, 1, 0) != 0)
		_exit(1);
	ret = pidns_mounts();
	if (!ret) {
		/* the root stays this process's child: it is waited for here */
		o->detached = true;
		o->pidfile = NULL;
		ret = restore(o, &root);
	}
	if (ret) {
		send_word(word_fd, ret, 0);
		_exit(1);
	}
	prctl(PR_SET_PDEATHSIG, 0);
	/* an init gets only the signals it handles: block them, reap in peace */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* the tree runs; without -d its root's status follows */
	send_word(word_fd, 0, 0);
	if (!wait_root)
		close(word_fd);
	pidns_reap((pid_t)root, word_fd, wait_root);
}

/* The host pid of the root: the init's one child that is not a zombie. */
static pid_t host_root(pid_t init)
{
	char path[64], *buf = NULL;
	long pid = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", init, init);
	if (!sys_read_file(path, &buf, NULL))
		pid = strtol(buf, NULL, 10);
	free(buf);
	return (pid_t)pid;
}

int pidns_restore(struct opts *o, int (*restore)(struct opts *o, uint32_t *root))
{
	bool detached = o->detached;
	int fds[2], alive[2], st, ret;
	struct pidns_word w;
	pid_t child;
	ssize_t n;

	if (o->shell_job) {
		pr_err("--new-pidns with --shell-job is not supported yet: restore the job "
		       "without one of them");
		return -EOPNOTSUPP;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		pr_err("--new-pidns: pipe: %m");
		return -errno;
	}
	/* amber holds the write end until it exits */
	if (pipe2(alive, O_CLOEXEC)) {
		pr_err("--new-pidns: pipe: %m");
		ret = -errno;
		goto close_word;
	}
	/* amber's next child is the namespace's first process, its init */
	if (unshare(CLONE_NEWPID)) {
		pr_err("--new-pidns: cannot make a pid namespace: %m (needs CAP_SYS_ADMIN)");
		ret = -errno;
		goto close_alive;
	}
	child = fork();
	if (child < 0) {
		pr_err("--new-pidns: cannot create the namespace's init: %m");
		ret = -errno;
		goto close_alive;
	}
	if (!child) {
		close(fds[0]);
		close(alive[1]);
		pidns_init(o, restore, fds[1], alive[0]);
	}
	close(fds[1]);
	fds[1] = -1;
	n = sys_read_full(fds[0], &w, sizeof(w));
	if (n != sizeof(w) || w.ret) {
		/* it said why; if it died without a word, nothing runs either */
		waitpid(child, &st, 0);
		if (n != sizeof(w))
			pr_err("--new-pidns: the namespace's init died during the restore");
		ret = n == sizeof(w) ? w.ret : -EIO;
		goto close_alive;
	}
	if (o->pidfile && write_pidfile(o->pidfile, host_root(child)))
		pr_warn("the tree runs, but the pidfile was not written");
	ret = 0;
	if (!detached) {
		n = sys_read_full(fds[0], &w, sizeof(w));
		if (n != sizeof(w))
			pr_err("--new-pidns: the namespace's init died before the root");
		ret = (n == sizeof(w) ? w.status : 1) | RESTORE_WAITED;
	}
close_alive:
	close(alive[0]);
	close(alive[1]);
close_word:
	close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	return ret;
}
