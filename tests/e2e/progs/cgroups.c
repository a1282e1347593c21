// SPDX-License-Identifier: MIT
/*
 * cgroups: a parent and its child, which the test moves into cgroups of
 * their own (each into its own, DIR/cg-a and DIR/cg-b name them) before
 * "ready"; the child's cgroup has pids.max 42.  After the restore each
 * checks /proc/self/cgroup is what it was, and the child that the limit
 * holds: of 60 forks, some fail with EAGAIN, while the parent makes 60.
 */
#include <signal.h>
#include <sys/wait.h>

#include "prog.h"

static void read_self(char *buf, size_t len)
{
	int fd = open("/proc/self/cgroup", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
}

/* How many of n forks succeed (the children wait for the end, then exit). */
static int forks(int n)
{
	pid_t kids[64];
	int ok = 0;

	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			pause();
			_exit(0);
		}
		ok += kids[i] > 0;
	}
	for (int i = 0; i < n; i++)
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
		}
	return ok;
}

static void side(const char *who, int limited)
{
	char before[4096], after[4096];
	int made;

	/* the test moves us, then writes "moved" */
	for (int i = 0; i < 3000 && access(prog_path("moved"), F_OK); i++)
		usleep(10 * 1000);
	read_self(before, sizeof(before));
	prog_write_atomic(limited ? "seen.child" : "seen.parent", "1\n");
	prog_wait_go();
	read_self(after, sizeof(after));
	if (prog_sabotage())
		limited = !limited;
	CHECK(!strcmp(before, after), "%s: /proc/self/cgroup is as before the dump:\n%s", who,
	      after);
	made = forks(60);
	CHECK(limited ? made < 60 : made == 60, "%s: %d of 60 forks (pids.max 42 %s)", who, made,
	      limited ? "holds" : "is not ours");
}

int main(int argc, char **argv)
{
	char buf[32];
	pid_t c;
	int st;

	prog_init(argc, argv);
	c = fork();
	if (c < 0)
		prog_die("fork");
	if (c == 0) {
		side("child", 1);
		fflush(NULL);
		_exit(prog_failures ? 1 : 0); /* the parent's result says it */
	}
	snprintf(buf, sizeof(buf), "%d\n", c);
	prog_write_atomic("child.pid", buf);
	prog_ready();
	side("parent", 0);
	CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st),
	      "the child passed its checks (status %#x)", st);
	return prog_done();
}
