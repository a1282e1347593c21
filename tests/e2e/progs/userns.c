// SPDX-License-Identifier: MIT
/*
 * A user namespace (src/ns/userns.c).  The root forks H, which stays in
 * amber's namespaces; the root unshares a user, UTS and IPC namespace at
 * once (so the UTS and IPC ones are owned by the user one), H writes
 * setgroups "deny" and the maps "0 100000 65536" (root in the parent may) and
 * exits.  Inside, the root becomes uid and gid 0 (100000 for the host), sets
 * the hostname (it has CAP_SYS_ADMIN in its namespace), creates DIR/owned,
 * and forks A, which shares all of it.  After the restore each checks its
 * ids, its /proc/self/uid_map, gid_map and setgroups as before, that it may
 * still set the hostname in its namespace but not make a device node (a
 * capability of amber's namespace), and the hostname; the root that
 * DIR/owned is its own.  The test checks the host's view from outside.
 */
#include <sched.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "prog.h"

#define HOST "amber-userns"
#define MAP  "0 100000 65536"

struct view {
	char uid_map[256], gid_map[256], setgroups[16];
};

static void read_view(struct view *v)
{
	if (prog_read_file("/proc/self/uid_map", v->uid_map, sizeof(v->uid_map)) <= 0 ||
	    prog_read_file("/proc/self/gid_map", v->gid_map, sizeof(v->gid_map)) <= 0 ||
	    prog_read_file("/proc/self/setgroups", v->setgroups, sizeof(v->setgroups)) <= 0)
		prog_die("read /proc/self maps");
}

static void write_file(pid_t pid, const char *name, const char *text)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		prog_die("write %s", path);
}

static void check(const char *who, const struct view *before, const char *host)
{
	uid_t r, e, s;
	gid_t gr, ge, gs;
	struct utsname u;
	struct view now;
	char dev[2048];

	read_view(&now);
	CHECK(!getresuid(&r, &e, &s) && !r && !e && !s, "%s: uids 0 inside (%u %u %u)", who, r, e,
	      s);
	CHECK(!getresgid(&gr, &ge, &gs) && !gr && !ge && !gs, "%s: gids 0 inside (%u %u %u)", who,
	      gr, ge, gs);
	CHECK(!strcmp(now.uid_map, before->uid_map), "%s: uid_map %s (was %s)", who, now.uid_map,
	      before->uid_map);
	CHECK(!strcmp(now.gid_map, before->gid_map), "%s: gid_map %s (was %s)", who, now.gid_map,
	      before->gid_map);
	CHECK(!strcmp(now.setgroups, before->setgroups), "%s: setgroups %s (was %s)", who,
	      now.setgroups, before->setgroups);
	uname(&u);
	CHECK(!strcmp(u.nodename, host), "%s: hostname %s (want %s)", who, u.nodename, host);
	/* CAP_SYS_ADMIN in its UTS namespace's owner, its own user namespace */
	CHECK(!sethostname(u.nodename, strlen(u.nodename)), "%s: may set its hostname: %s", who,
	      strerror(errno));
	/* CAP_MKNOD of amber's namespace: not its */
	snprintf(dev, sizeof(dev), "%s", prog_path("dev-null"));
	CHECK(mknod(dev, S_IFCHR | 0600, makedev(1, 3)) && errno == EPERM,
	      "%s: may not make a device node (no capability outside)", who);
}

int main(int argc, char **argv)
{
	int go[2], made[2], st, fd;
	struct view before;
	struct stat sb;
	char c = 0;
	pid_t h, a;
	FILE *f;

	prog_init(argc, argv);
	if (pipe(go) || pipe(made))
		prog_die("pipe");
	h = fork();
	if (!h) {
		if (read(made[0], &c, 1) != 1)
			_exit(1);
		write_file(getppid(), "setgroups", "deny");
		write_file(getppid(), "uid_map", MAP);
		write_file(getppid(), "gid_map", MAP);
		_exit(write(go[1], &c, 1) != 1);
	}
	if (unshare(CLONE_NEWUSER | CLONE_NEWUTS | CLONE_NEWIPC)) {
		if (errno == EINVAL || errno == EPERM || errno == ENOSPC)
			return 77; /* no user namespaces here */
		prog_die("unshare(CLONE_NEWUSER)");
	}
	if (write(made[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
		prog_die("sync with the map writer");
	if (waitpid(h, &st, 0) != h || !WIFEXITED(st) || WEXITSTATUS(st))
		prog_die("the map writer failed");
	if (setresgid(0, 0, 0) || setresuid(0, 0, 0))
		prog_die("become root inside");
	if (sethostname(HOST, strlen(HOST)))
		prog_die("sethostname");
	fd = open(prog_path("owned"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0)
		prog_die("create owned");
	close(fd);
	read_view(&before);
	check("root before", &before, HOST);
	a = fork();
	if (!a) {
		prog_wait_go();
		check("A", &before, HOST);
		_exit(prog_failures ? 1 : 0);
	}
	f = fopen(prog_path("pids"), "w");
	if (!f || fprintf(f, "%d %d\n", getpid(), a) < 0 || fclose(f))
		prog_die("pids");
	prog_ready();
	prog_wait_go();
	check("root", &before, prog_sabotage() ? "amber-sabotage" : HOST);
	CHECK(!stat(prog_path("owned"), &sb) && !sb.st_uid && !sb.st_gid,
	      "root: DIR/owned is uid 0 gid 0 inside");
	CHECK(waitpid(a, &st, 0) == a && WIFEXITED(st) && !WEXITSTATUS(st), "A's checks");
	return prog_done();
}
