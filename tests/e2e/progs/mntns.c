// SPDX-License-Identifier: MIT
/*
 * mntns: a process in a mount namespace of its own (it unshare()s it, all
 * private), with under DIR/mnt:
 *   t   a tmpfs (mode 0750) with files: a.txt (0640, uid 1234), a symlink
 *       link -> a.txt, sub/b.txt, a FIFO; made shared
 *   s   a bind of t/sub, made a slave of t
 *   ro  a read-only bind of the directory DIR/rodir
 *   f   a bind of the single file DIR/host.txt
 *   p   a new proc instance
 * It keeps an fd on t/a.txt and its cwd in t/sub.  After "go" it checks its
 * mounts in /proc/self/mountinfo (types, read-only, propagation kinds) as
 * they were, the tmpfs's files, EROFS on ro, its fd and cwd, and that a
 * mount made in t/sub still shows in s (s is t's slave).
 *
 *   mntns DIR refuse   also a ramfs at DIR/mnt/r (a type amber refuses)
 */
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "prog.h"

static const char *const points[] = {"t", "s", "ro", "f", "p"};
#define NR (sizeof(points) / sizeof(points[0]))

/* "TYPE ro|rw shared|- master|-" of mount point DIR/mnt/NAME, or "" */
static void describe(const char *name, char *out, size_t len)
{
	char want[2300], line[4096], mp[2300], opts[256], fstype[64];
	FILE *f = fopen("/proc/self/mountinfo", "r");

	snprintf(want, sizeof(want), "%s/mnt/%s", prog_dir, name);
	*out = 0;
	if (!f)
		prog_die("open mountinfo");
	while (fgets(line, sizeof(line), f)) {
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*u %*u %*s %*s %2299s %255s", mp, opts) != 2 ||
		    strcmp(mp, want) || sscanf(dash + 3, "%63s", fstype) != 1)
			continue;
		snprintf(out, len, "%s %s %s %s", fstype, strncmp(opts, "ro", 2) ? "rw" : "ro",
			 strstr(line, " shared:") ? "shared" : "-",
			 strstr(line, " master:") ? "master" : "-");
	}
	fclose(f);
}

static void put_file(const char *path, const char *s, mode_t mode)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(s, f) < 0 || fclose(f) || chmod(path, mode))
		prog_die("write %s", path);
}

static int read_is(int dirfd, const char *path, const char *want)
{
	char buf[64] = "";
	int fd = openat(dirfd, path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	return n >= 0 && !strcmp(buf, want);
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	int refuse = argc > first && !strcmp(argv[first], "refuse");
	char before[NR][128], after[128], p[NR + 2][2300], buf[2400], cwd[2400];
	struct stat st;
	ssize_t n;
	int fd, dfd;

	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		prog_die("a mount namespace of its own");
	for (size_t i = 0; i < NR; i++)
		snprintf(p[i], sizeof(p[i]), "%s/mnt/%s", prog_dir, points[i]);
	snprintf(buf, sizeof(buf), "%s/mnt", prog_dir);
	mkdir(buf, 0755);
	for (size_t i = 0; i < NR; i++)
		if (i != 3)
			mkdir(p[i], 0755);
	put_file(p[3], "", 0644);
	snprintf(buf, sizeof(buf), "%s/rodir", prog_dir);
	mkdir(buf, 0755);
	snprintf(buf, sizeof(buf), "%s/rodir/in.txt", prog_dir);
	put_file(buf, "read only", 0644);
	snprintf(buf, sizeof(buf), "%s/host.txt", prog_dir);
	put_file(buf, "host file", 0644);

	if (mount("amber-t", p[0], "tmpfs", 0, "size=4m,mode=0750"))
		prog_die("mount tmpfs");
	if (chdir(p[0]) || mkdir("sub", 0711) || symlink("a.txt", "link") || mkfifo("fifo", 0600))
		prog_die("fill the tmpfs");
	put_file("a.txt", "hello", 0640);
	put_file("sub/b.txt", "bee", 0604);
	if (chown("a.txt", 1234, 4321))
		prog_die("chown");
	if (mount(NULL, p[0], NULL, MS_SHARED, NULL))
		prog_die("make t shared");
	snprintf(buf, sizeof(buf), "%s/sub", p[0]);
	if (mount(buf, p[1], NULL, MS_BIND, NULL) || mount(NULL, p[1], NULL, MS_SLAVE, NULL))
		prog_die("s, a slave of t");
	snprintf(buf, sizeof(buf), "%s/rodir", prog_dir);
	if (mount(buf, p[2], NULL, MS_BIND, NULL) ||
	    mount(NULL, p[2], NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL))
		prog_die("ro bind");
	snprintf(buf, sizeof(buf), "%s/host.txt", prog_dir);
	if (mount(buf, p[3], NULL, MS_BIND, NULL))
		prog_die("file bind");
	if (mount("proc", p[4], "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		prog_die("proc");
	if (refuse) {
		snprintf(buf, sizeof(buf), "%s/mnt/r", prog_dir);
		if (mkdir(buf, 0755) || mount("none", buf, "ramfs", 0, NULL))
			prog_die("ramfs");
	}
	fd = open("a.txt", O_RDONLY);
	if (fd < 0 || chdir("sub"))
		prog_die("fd and cwd");
	for (size_t i = 0; i < NR; i++)
		describe(points[i], before[i], sizeof(before[i]));
	CHECK(!strcmp(before[0], "tmpfs rw shared -"), "t is %s", before[0]);
	CHECK(!strcmp(before[1], "tmpfs rw - master"), "s is %s", before[1]);

	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		unlink("b.txt"); /* in t/sub, the cwd */

	for (size_t i = 0; i < NR; i++) {
		describe(points[i], after, sizeof(after));
		CHECK(!strcmp(before[i], after), "mount %s: was '%s', now '%s'", points[i],
		      before[i], after);
	}
	dfd = open(p[0], O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0 && read_is(dfd, "a.txt", "hello"), "t/a.txt reads hello");
	CHECK(!fstatat(dfd, "a.txt", &st, 0) && (st.st_mode & 07777) == 0640 && st.st_uid == 1234 &&
		      st.st_gid == 4321,
	      "t/a.txt: mode %o, owner %u:%u", st.st_mode & 07777, st.st_uid, st.st_gid);
	CHECK(!fstatat(dfd, "sub", &st, 0) && (st.st_mode & 07777) == 0711, "t/sub: mode %o",
	      st.st_mode & 07777);
	CHECK(!fstatat(dfd, "fifo", &st, 0) && S_ISFIFO(st.st_mode), "t/fifo is a FIFO");
	CHECK(!stat(p[0], &st) && (st.st_mode & 07777) == 0750, "t's root: mode %o",
	      st.st_mode & 07777);
	n = readlinkat(dfd, "link", buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	CHECK(!strcmp(buf, "a.txt"), "t/link -> '%s'", buf);
	CHECK(read_is(AT_FDCWD, "b.txt", "bee"), "cwd: b.txt reads bee");
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "(getcwd: %s)", strerror(errno));
	snprintf(buf, sizeof(buf), "%s/sub", p[0]);
	CHECK(!strcmp(cwd, buf), "cwd is %s, was %s", cwd, buf);
	n = pread(fd, buf, 5, 0);
	CHECK(n == 5 && !memcmp(buf, "hello", 5), "the fd on t/a.txt reads hello");
	snprintf(buf, sizeof(buf), "%s/new", p[2]);
	CHECK(open(buf, O_WRONLY | O_CREAT, 0644) < 0 && errno == EROFS, "ro rejects writes: %s",
	      strerror(errno));
	snprintf(buf, sizeof(buf), "%s/in.txt", p[2]);
	CHECK(read_is(AT_FDCWD, buf, "read only"), "ro/in.txt");
	CHECK(read_is(AT_FDCWD, p[3], "host file"), "f is the host file");
	snprintf(buf, sizeof(buf), "%s/self/stat", p[4]);
	CHECK(!access(buf, R_OK), "p is a proc");
	/* s still receives what is mounted in t/sub */
	if (mkdir("x", 0755) == 0 && !mount("x", "x", "tmpfs", 0, NULL)) {
		struct stat a, b;

		snprintf(buf, sizeof(buf), "%s/x", p[1]);
		CHECK(!stat(buf, &a) && !stat("x", &b) && a.st_dev == b.st_dev,
		      "s/x shows the tmpfs mounted in t/sub/x (s is t's slave)");
		umount2("x", MNT_DETACH);
	} else {
		CHECK(0, "mount in t/sub: %s", strerror(errno));
	}
	return prog_done();
}
