// SPDX-License-Identifier: MIT
/*
 * File locks across dump/restore: every kind, read and write, whole files and
 * byte ranges, in two processes.
 *
 *   flock.sh   flock LOCK_SH on one description shared with the child by fork
 *   flock.ex   flock LOCK_EX
 *   posix      POSIX write lock on bytes 0-99 and read lock on 200-299 (the parent),
 *              POSIX write lock on 100-199 (the child: a lock of its own)
 *   ofd        OFD write lock on bytes 0-9, OFD read lock from 50 to EOF
 *   lease.rd   read lease; lease.wr write lease (F_SETSIG SIGRTMIN+2)
 *
 * After "go" a checker process (forked then, so no part of the restored state)
 * asks the kernel with F_GETLK / F_OFD_GETLK / flock(LOCK_NB) what is held
 * and by whom; then it breaks the write lease and the holder must get its
 * signal with the lease's fd in si_fd.
 */
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>

#include "prog.h"

static volatile sig_atomic_t lease_sig_rd, lease_sig_wr;
static int frd, fwr;

static void on_lease(int sig, siginfo_t *si, void *uc)
{
	if (si->si_fd == frd)
		lease_sig_rd = 1;
	if (si->si_fd == fwr)
		lease_sig_wr = 1;
}

static int open_file(const char *name, int flags)
{
	int fd = open(prog_path(name), flags | O_CREAT, 0644);

	if (fd < 0)
		prog_die("open %s", name);
	if (ftruncate(fd, 4096) && (flags & O_ACCMODE) != O_RDONLY)
		prog_die("ftruncate %s", name);
	return fd;
}

static void posix_lock(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};

	if (fcntl(fd, cmd, &fl))
		prog_die("fcntl lock %d type %d at %lld", cmd, type, (long long)start);
}

/* What someone else sees: the lock conflicting with a request (F_UNLCK: none). */
static struct flock probe(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};

	if (fcntl(fd, cmd, &fl))
		fl.l_type = -1;
	return fl;
}

/* In a fresh process: fresh descriptions, its own fd table. */
static int checker(pid_t parent, pid_t child)
{
	int fd = open(prog_path("posix"), O_RDWR), f;
	struct flock fl;

	fl = probe(fd, F_GETLK, F_RDLCK, 0, 100);
	CHECK(fl.l_type == F_WRLCK && fl.l_pid == parent && fl.l_start == 0 && fl.l_len == 100,
	      "posix 0-99: write-locked by the parent %d (type %d, pid %d, %lld+%lld)", parent,
	      fl.l_type, fl.l_pid, (long long)fl.l_start, (long long)fl.l_len);
	fl = probe(fd, F_GETLK, F_RDLCK, 100, 100);
	CHECK(fl.l_type == F_WRLCK && fl.l_pid == child && fl.l_start == 100 && fl.l_len == 100,
	      "posix 100-199: write-locked by the child %d (type %d, pid %d)", child, fl.l_type,
	      fl.l_pid);
	fl = probe(fd, F_GETLK, F_WRLCK, 200, 100);
	CHECK(fl.l_type == F_RDLCK && fl.l_pid == parent && fl.l_start == 200 && fl.l_len == 100,
	      "posix 200-299: read-locked by the parent (type %d, pid %d)", fl.l_type, fl.l_pid);
	fl = probe(fd, F_GETLK, F_RDLCK, 200, 100);
	CHECK(fl.l_type == F_UNLCK, "posix 200-299: a read lock is compatible (type %d)",
	      fl.l_type);
	fl = probe(fd, F_GETLK, F_WRLCK, 300, 0);
	CHECK(fl.l_type == F_UNLCK, "posix 300-EOF: free (type %d)", fl.l_type);
	close(fd);

	fd = open(prog_path("ofd"), O_RDWR);
	fl = probe(fd, F_OFD_GETLK, F_RDLCK, 0, 50);
	CHECK(fl.l_type == F_WRLCK && fl.l_pid == -1 && fl.l_start == 0 && fl.l_len == 10,
	      "ofd 0-9: OFD write lock (type %d, pid %d, %lld+%lld)", fl.l_type, fl.l_pid,
	      (long long)fl.l_start, (long long)fl.l_len);
	fl = probe(fd, F_OFD_GETLK, F_WRLCK, 50, 10);
	CHECK(fl.l_type == F_RDLCK && fl.l_start == 50 && fl.l_len == 0,
	      "ofd 50-EOF: OFD read lock (type %d, %lld+%lld)", fl.l_type, (long long)fl.l_start,
	      (long long)fl.l_len);
	fl = probe(fd, F_OFD_GETLK, F_WRLCK, 10, 40);
	CHECK(fl.l_type == F_UNLCK, "ofd 10-49: free (type %d)", fl.l_type);
	close(fd);

	fd = open(prog_path("flock.sh"), O_RDONLY);
	CHECK(flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK,
	      "flock.sh: an exclusive flock is refused");
	CHECK(!flock(fd, LOCK_SH | LOCK_NB), "flock.sh: a shared flock is granted");
	close(fd);
	fd = open(prog_path("flock.ex"), O_RDONLY);
	CHECK(flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK,
	      "flock.ex: even a shared flock is refused");
	close(fd);

	/* a writer breaks the read lease (no wait: O_NONBLOCK) */
	f = open(prog_path("lease.rd"), O_WRONLY | O_NONBLOCK);
	CHECK(f < 0 && errno == EWOULDBLOCK, "lease.rd: an open for writing must break a lease");
	if (f >= 0)
		close(f);
	/* and any open breaks the write lease: its holder gets SIGRTMIN+2 */
	f = open(prog_path("lease.wr"), O_RDONLY | O_NONBLOCK);
	CHECK(f < 0 && errno == EWOULDBLOCK, "lease.wr: an open must break a write lease");
	if (f >= 0)
		close(f);
	return prog_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	int fsh, fex, fposix, fofd, p[2], st;
	struct sigaction sa = {.sa_sigaction = on_lease, .sa_flags = SA_SIGINFO | SA_RESTART};
	pid_t child, chk, self;
	char c;

	prog_init(argc, argv);
	self = getpid();
	fsh = open_file("flock.sh", O_RDWR);
	fex = open_file("flock.ex", O_RDWR);
	fposix = open_file("posix", O_RDWR);
	fofd = open_file("ofd", O_RDWR);
	close(open_file("lease.rd", O_RDWR));
	close(open_file("lease.wr", O_RDWR));
	frd = open(prog_path("lease.rd"), O_RDONLY);
	fwr = open(prog_path("lease.wr"), O_RDWR);
	if (frd < 0 || fwr < 0)
		prog_die("open lease files");
	if (flock(fsh, LOCK_SH) || flock(fex, LOCK_EX))
		prog_die("flock");
	posix_lock(fposix, F_SETLK, F_WRLCK, 0, 100);
	posix_lock(fposix, F_SETLK, F_RDLCK, 200, 100);
	posix_lock(fofd, F_OFD_SETLK, F_WRLCK, 0, 10);
	posix_lock(fofd, F_OFD_SETLK, F_RDLCK, 50, 0);
	sigaction(SIGRTMIN + 2, &sa, NULL);
	if (fcntl(frd, F_SETSIG, SIGRTMIN + 2) || fcntl(frd, F_SETLEASE, F_RDLCK) ||
	    fcntl(fwr, F_SETSIG, SIGRTMIN + 2) || fcntl(fwr, F_SETLEASE, F_WRLCK))
		prog_die("F_SETLEASE");
	if (pipe(p))
		prog_die("pipe");
	child = fork();
	if (child == 0) {
		/* fork shares fsh's description, and with it the flock; POSIX locks are not */
		posix_lock(fposix, F_SETLK, F_WRLCK, 100, 100);
		close(p[1]);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	usleep(100 * 1000); /* the child's lock is in place */
	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		posix_lock(fposix, F_SETLK, F_UNLCK, 0, 100);
	CHECK(fcntl(frd, F_GETLEASE) == F_RDLCK, "lease.rd: still a read lease (%d)",
	      fcntl(frd, F_GETLEASE));
	CHECK(fcntl(fwr, F_GETLEASE) == F_WRLCK, "lease.wr: still a write lease (%d)",
	      fcntl(fwr, F_GETLEASE));
	CHECK(fcntl(fwr, F_GETSIG) == SIGRTMIN + 2, "lease.wr: F_GETSIG is SIGRTMIN+2");
	CHECK(fcntl(fwr, F_GETOWN) == self, "lease.wr: owned by this process (%d)",
	      fcntl(fwr, F_GETOWN));
	fflush(stdout);
	chk = fork();
	if (chk == 0)
		_exit(checker(self, child));
	if (waitpid(chk, &st, 0) != chk)
		prog_die("waitpid checker");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the checker process's checks passed");
	for (int i = 0; i < 300 && !(lease_sig_rd && lease_sig_wr); i++)
		usleep(10 * 1000);
	CHECK(lease_sig_rd, "breaking lease.rd sent SIGRTMIN+2 with its fd %d in si_fd", frd);
	CHECK(lease_sig_wr, "breaking lease.wr sent SIGRTMIN+2 with its fd %d in si_fd", fwr);
	fcntl(frd, F_SETLEASE, F_UNLCK);
	fcntl(fwr, F_SETLEASE, F_UNLCK);
	close(p[1]);
	waitpid(child, NULL, 0);
	return prog_done();
}
