// SPDX-License-Identifier: MIT
/*
 * A container's init the way a runtime makes one: run as
 * `unshare --mount --fork --pid --mount-proc DIR/mntroot DIR HOSTFILE`, it
 * bind mounts DIR (the rootfs, which holds this static program as
 * /mntroot) onto itself with HOSTFILE bound on its /etc/hostname,
 * pivot_root()s into it, detaches the old root, mounts a proc and a tmpfs
 * (with /tmp/data), takes the rootfs's /stdin, /out and /err (start_prog's
 * files) as its stdio, and execs /mntroot / (the protocol's DIR is then the
 * rootfs's /).  After "go" it checks that its root is the rootfs (the
 * marker it read before), its proc, the tmpfs's file and its mounts, and
 * writes /etc/hostname's content to /seen for the test (the restore binds
 * another file there).
 */
#include <sys/mount.h>

#include "prog.h"

static void setup(const char *dir, const char *hostfile)
{
	char p[4096];

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		prog_die("make / private");
	if (mount(dir, dir, NULL, MS_BIND, NULL))
		prog_die("bind %s onto itself", dir);
	snprintf(p, sizeof(p), "%s/etc/hostname", dir);
	if (mount(hostfile, p, NULL, MS_BIND, NULL))
		prog_die("bind %s on %s", hostfile, p);
	if (chdir(dir) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) ||
	    chdir("/"))
		prog_die("pivot_root into %s", dir);
	/* stdio inside the rootfs, as a runtime gives it (the test's files, seen from here) */
	if (!freopen("/stdin", "r", stdin) || !freopen("/out", "a", stdout) ||
	    !freopen("/err", "a", stderr))
		prog_die("stdio in the rootfs");
	if (mount("proc", "/proc", "proc", 0, NULL))
		prog_die("proc");
	if (mount("ctmp", "/tmp", "tmpfs", 0, "size=1m,mode=0755"))
		prog_die("tmpfs");
	prog_write_atomic("tmp/data", "in the tmpfs\n");
	execl("/mntroot", "/mntroot", "/", (char *)NULL);
	prog_die("exec /mntroot");
}

static void slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, size - 1);

	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
}

/* Whether mountinfo lists a mount of type type at mp. */
static int mounted(const char *mp, const char *type)
{
	char buf[16384], want[512], *l, *save;

	slurp("/proc/self/mountinfo", buf, sizeof(buf));
	snprintf(want, sizeof(want), " %s ", mp);
	for (l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *dash = strstr(l, " - ");
		char *f = strchr(l, ' ');

		/* fields: ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - TYPE */
		for (int i = 0; f && i < 3; i++)
			f = strchr(f + 1, ' ');
		if (f && dash && !strncmp(f, want, strlen(want)) &&
		    !strncmp(dash + 3, type, strlen(type)))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char marker[256], now[256], data[256], host[256], cmd[256];

	if (argc == 3) {
		setup(argv[1], argv[2]);
		return 2;
	}
	prog_init(argc, argv);
	if (getpid() != 1)
		prog_die("not the init of a pid namespace");
	slurp("/rootfs.marker", marker, sizeof(marker));
	if (!*marker)
		prog_die("no /rootfs.marker: not in the rootfs");
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		marker[0] ^= 1;
	slurp("/rootfs.marker", now, sizeof(now));
	CHECK(!strcmp(now, marker), "the root is the rootfs (marker '%s')", now);
	slurp("/proc/1/cmdline", cmd, sizeof(cmd));
	CHECK(!strcmp(cmd, "/mntroot") && getpid() == 1, "its proc shows it as pid 1 (%s)", cmd);
	slurp("/tmp/data", data, sizeof(data));
	CHECK(!strcmp(data, "in the tmpfs\n"), "the tmpfs kept /tmp/data");
	CHECK(mounted("/", ""), "a mount at /");
	CHECK(mounted("/proc", "proc"), "a proc at /proc");
	CHECK(mounted("/tmp", "tmpfs"), "a tmpfs at /tmp");
	CHECK(mounted("/etc/hostname", ""), "a mount at /etc/hostname");
	slurp("/etc/hostname", host, sizeof(host));
	prog_write_atomic("seen", host);
	return prog_done();
}
