// SPDX-License-Identifier: MIT
/*
 * fdtree: many descriptions in several processes, each with its own.
 *
 *   the root: fds 100..399, root-N.dat, each its own description at offset N + 1;
 *             fd 50, shared.dat, one description all four processes share;
 *   3 children: the root's 100..399 closed, their own cK-N.dat on 100..399 at
 *             offset (K + 1) * 1000 + N, and fd 50 inherited.
 *
 * After go each process checks that exactly fds 0 1 2 50 100..399 are open,
 * each on its own file at its own offset (more fds than one SCM_RIGHTS
 * message carries: amber passes each process its descriptions), and each
 * child writes one byte through fd 50: the root sees the shared offset move
 * by three, and every child exits 0.
 */
#include <signal.h>
#include <sys/wait.h>

#include "prog.h"

#define NR_FDS	 300
#define FIRST_FD 100
#define SHARED	 50
#define KIDS	 3

static void open_at(const char *name, int fd, off_t off)
{
	int f = open(prog_path(name), O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (f < 0 || (f != fd && (dup2(f, fd) != fd || close(f))) || lseek(fd, off, SEEK_SET) != off)
		prog_die("open %s as fd %d", name, fd);
}

/* fds 0..2047 against the wanted set, and each of ours on name-N at its offset; wrong ones */
static int check_fds(const char *prefix, off_t base)
{
	int bad = 0;

	for (int fd = 0; fd < 2048; fd++) {
		int want = fd <= 2 || fd == SHARED || (fd >= FIRST_FD && fd < FIRST_FD + NR_FDS);

		if ((fcntl(fd, F_GETFD) != -1) != want) {
			bad++;
			fprintf(stderr, "  pid %d: fd %d is %s\n", getpid(), fd,
				want ? "missing" : "unexpected");
		}
	}
	for (int n = 0; n < NR_FDS; n++) {
		char link[64], got[4096] = "", name[64];
		int fd = FIRST_FD + n;
		off_t off = lseek(fd, 0, SEEK_CUR);
		ssize_t len;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		snprintf(name, sizeof(name), "/%s-%d.dat", prefix, n);
		len = readlink(link, got, sizeof(got) - 1);
		got[len > 0 ? len : 0] = 0;
		if (off != base + n || len < (ssize_t)strlen(name) ||
		    strcmp(got + len - strlen(name), name)) {
			bad++;
			fprintf(stderr, "  pid %d: fd %d is %s at %ld, want %s at %ld\n", getpid(),
				fd, got, (long)off, name, (long)(base + n));
		}
	}
	return bad;
}

static void __attribute__((noreturn)) child(int k, int ready)
{
	char name[64];

	close_range(FIRST_FD, FIRST_FD + NR_FDS - 1, 0);
	for (int n = 0; n < NR_FDS; n++) {
		snprintf(name, sizeof(name), "c%d-%d.dat", k, n);
		open_at(name, FIRST_FD + n, (k + 1) * 1000 + n);
	}
	snprintf(name, sizeof(name), "c%d", k);
	if (write(ready, "r", 1) != 1)
		_exit(2);
	close(ready);
	while (!prog_go_exists())
		usleep(10 * 1000);
	if (check_fds(name, (k + 1) * 1000))
		_exit(1);
	_exit(write(SHARED, "c", 1) == 1 ? 0 : 1);
}

int main(int argc, char **argv)
{
	pid_t kids[KIDS];
	int st, bad;
	off_t before, after;

	prog_init(argc, argv);
	for (int n = 0; n < NR_FDS; n++) {
		char name[64];

		snprintf(name, sizeof(name), "root-%d.dat", n);
		open_at(name, FIRST_FD + n, n + 1);
	}
	open_at("shared.dat", SHARED, 7);
	prog_fork_ready(kids, KIDS, child);
	before = lseek(SHARED, 0, SEEK_CUR);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		lseek(FIRST_FD + 7, 3, SEEK_SET);
	/* (the children's writes move the offset; the root looks once they are done) */
	for (int k = 0; k < KIDS; k++) {
		st = -1;
		CHECK(waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && !WEXITSTATUS(st),
		      "child %d: its %d fds and the shared one (wait status 0x%x)", kids[k], NR_FDS,
		      st);
	}
	bad = check_fds("root", 1);
	CHECK(!bad, "the root: exactly fds 0-2, 50 and 100-399, each on its file and offset "
		    "(%d wrong)",
	      bad);
	after = lseek(SHARED, 0, SEEK_CUR);
	CHECK(before == 7 && after == before + KIDS, "fd 50 shared by all four: offset %ld -> %ld",
	      (long)before, (long)after);
	return prog_done();
}
