// SPDX-License-Identifier: MIT
/*
 * Cgroup namespaces (src/ns/cgroupns.c).  C, the root's first child, stays
 * in amber's cgroup namespace; the root then unshares one (CLONE_NEWCGROUP,
 * rooted at its cgroups) and makes A, which shares it.  The root and A read
 * /proc/self/cgroup before "go" and after: every hierarchy's path is "/"
 * (they are at the namespace's root) and the same after the restore.
 * DIR/nspids lists "NAME PID" for the test, which compares
 * /proc/PID/ns/cgroup.
 */
#include <sched.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "prog.h"

static void read_view(char *buf, size_t size)
{
	if (prog_read_file("/proc/self/cgroup", buf, size) <= 0)
		prog_die("read /proc/self/cgroup");
}

/* Every line "ID:CONTROLLERS:/" */
static bool at_root(const char *view)
{
	for (const char *l = view; *l; l = strchr(l, '\n') + 1) {
		const char *nl = strchr(l, '\n');

		if (!nl || nl - l < 2 || nl[-1] != '/' || nl[-2] != ':')
			return false;
	}
	return *view;
}

static void check(const char *who, const char *before)
{
	char after[4096];

	read_view(after, sizeof(after));
	CHECK(!strcmp(before, after), "%s: /proc/self/cgroup as before:\n%s(was:\n%s)", who, after,
	      before);
	CHECK(at_root(after), "%s: at the namespace's root in every hierarchy", who);
}

int main(int argc, char **argv)
{
	char before[4096], a_before[4096];
	pid_t a, c;
	FILE *f;
	int st;

	prog_init(argc, argv);
	c = fork();
	if (!c) {
		prog_wait_go();
		_exit(0);
	}
	if (unshare(CLONE_NEWCGROUP)) {
		if (errno == EINVAL || errno == EPERM)
			return 77; /* no cgroup namespaces here */
		prog_die("unshare(CLONE_NEWCGROUP)");
	}
	read_view(before, sizeof(before));
	a = fork();
	if (!a) {
		read_view(a_before, sizeof(a_before));
		prog_wait_go();
		check("A", a_before);
		_exit(prog_failures ? 1 : 0);
	}
	CHECK(at_root(before), "root: at the namespace's root before:\n%s", before);
	f = fopen(prog_path("nspids"), "w");
	if (!f)
		prog_die("nspids");
	fprintf(f, "root %d\nA %d\nC %d\n", getpid(), a, c);
	fclose(f);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		before[0] ^= 1;
	check("root", before);
	CHECK(waitpid(a, &st, 0) == a && WIFEXITED(st) && !WEXITSTATUS(st), "A's checks");
	CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st), "C ran on");
	return prog_done();
}
