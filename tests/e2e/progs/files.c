// SPDX-License-Identifier: MIT
/*
 * files: file descriptors and the fs context.
 *
 *   fd 3   a.dat O_RDWR, offset 123
 *   fd 10  dup of 3 (shares its offset)
 *   fd 900 dup of 3 with close-on-exec (a high fd; 4-9, 11-19, 24-899 are gaps)
 *   fd 20  b.log O_WRONLY|O_APPEND
 *   fd 21  a.dat again O_RDONLY|O_NONBLOCK|O_CLOEXEC, offset 50 (its own description)
 *   fd 22  the work dir, O_DIRECTORY
 *   fd 23  c.dat O_WRONLY|O_DSYNC
 *   root   chroot()ed into the work dir; cwd /sub/deeper; umask 027
 *
 * After restore: the exact fd set, offsets, status flags and FD_CLOEXEC; reads and writes
 * behave (the dups move one shared offset, O_APPEND appends); same files (inode numbers),
 * same root, cwd and umask.
 */
#include <dirent.h>
#include <linux/close_range.h>

#include "prog.h"

#define ALEN 4096

static int fd_exists(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

static void xdup(int old, int new, int flags)
{
	if (dup3(old, new, flags) != new)
		prog_die("dup3 %d -> %d", old, new);
}

static int xopen_at(const char *path, int flags, int want)
{
	int fd = open(path, flags, 0644);

	if (fd < 0)
		prog_die("open %s", path);
	if (fd != want) {
		xdup(fd, want, flags & O_CLOEXEC);
		close(fd);
	}
	return want;
}

int main(int argc, char **argv)
{
	static const int want_fds[] = {0, 1, 2, 3, 10, 20, 21, 22, 23, 900};
	static const int cloexec_fds[] = {21, 900};
	char apat[ALEN], buf[256];
	struct stat st_root, st_a, st;
	unsigned i;
	int fd, bad;
	mode_t um;

	prog_init(argc, argv);
	syscall(SYS_close_range, 3, ~0U, 0);
	if (chdir(prog_dir) || mkdir("sub", 0755) || mkdir("sub/deeper", 0755))
		prog_die("mkdir sub/deeper in %s", prog_dir);

	prog_fill(apat, ALEN, 0xf11e);
	xopen_at("a.dat", O_RDWR | O_CREAT | O_TRUNC, 3);
	if (write(3, apat, ALEN) != ALEN)
		prog_die("write a.dat");
	lseek(3, 123, SEEK_SET);
	xdup(3, 10, 0);
	xdup(3, 900, O_CLOEXEC);
	xopen_at("b.log", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 20);
	if (write(20, "first\n", 6) != 6)
		prog_die("write b.log");
	xopen_at("a.dat", O_RDONLY | O_NONBLOCK | O_CLOEXEC, 21);
	lseek(21, 50, SEEK_SET);
	xopen_at(".", O_RDONLY | O_DIRECTORY, 22);
	xopen_at("c.dat", O_WRONLY | O_CREAT | O_TRUNC | O_DSYNC, 23);
	if (write(23, "c", 1) != 1)
		prog_die("write c.dat");

	stat(".", &st_root);
	stat("a.dat", &st_a);
	if (chroot(".") || chdir("/sub/deeper"))
		prog_die("chroot %s", prog_dir);
	prog_set_dir("/");
	umask(027);

	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		lseek(21, 51, SEEK_SET);

	/* the fd set */
	for (bad = 0, fd = 0; fd < 2048; fd++) {
		int want = 0;

		for (i = 0; i < sizeof(want_fds) / sizeof(*want_fds); i++)
			want |= want_fds[i] == fd;
		if (fd_exists(fd) != want) {
			bad++;
			fprintf(stderr, "  fd %d is %s\n", fd, want ? "missing" : "unexpected");
		}
	}
	CHECK(bad == 0, "exactly fds 0 1 2 3 10 20 21 22 23 900 are open (%d wrong)", bad);

	/* close-on-exec */
	for (bad = 0, i = 0; i < sizeof(want_fds) / sizeof(*want_fds); i++) {
		int f = want_fds[i], want = 0, j;

		for (j = 0; j < 2; j++)
			want |= cloexec_fds[j] == f;
		if (!!(fcntl(f, F_GETFD) & FD_CLOEXEC) != want) {
			bad++;
			fprintf(stderr, "  fd %d: FD_CLOEXEC %s\n", f, want ? "lost" : "gained");
		}
	}
	CHECK(bad == 0, "FD_CLOEXEC exactly on fds 21 and 900 (%d wrong)", bad);

	/* status flags */
	CHECK((fcntl(3, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK)) == O_RDWR, "fd 3 flags %#o",
	      fcntl(3, F_GETFL));
	CHECK((fcntl(20, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK)) == (O_WRONLY | O_APPEND),
	      "fd 20 flags %#o (O_WRONLY|O_APPEND)", fcntl(20, F_GETFL));
	CHECK((fcntl(21, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK)) == (O_RDONLY | O_NONBLOCK),
	      "fd 21 flags %#o (O_RDONLY|O_NONBLOCK)", fcntl(21, F_GETFL));
	CHECK((fcntl(22, F_GETFL) & (O_ACCMODE | O_DIRECTORY)) == (O_RDONLY | O_DIRECTORY),
	      "fd 22 flags %#o (O_DIRECTORY)", fcntl(22, F_GETFL));
	CHECK((fcntl(23, F_GETFL) & (O_ACCMODE | O_DSYNC)) == (O_WRONLY | O_DSYNC),
	      "fd 23 flags %#o (O_WRONLY|O_DSYNC)", fcntl(23, F_GETFL));

	/* offsets, and sharing */
	CHECK(lseek(3, 0, SEEK_CUR) == 123 && lseek(10, 0, SEEK_CUR) == 123 &&
		      lseek(900, 0, SEEK_CUR) == 123,
	      "fds 3/10/900 at offset 123 (%ld %ld %ld)", (long)lseek(3, 0, SEEK_CUR),
	      (long)lseek(10, 0, SEEK_CUR), (long)lseek(900, 0, SEEK_CUR));
	CHECK(lseek(21, 0, SEEK_CUR) == 50, "fd 21 at offset 50 (%ld)",
	      (long)lseek(21, 0, SEEK_CUR));
	CHECK(read(10, buf, 7) == 7 && !memcmp(buf, apat + 123, 7),
	      "read 7 bytes at 123 via fd 10");
	CHECK(lseek(900, 0, SEEK_CUR) == 130 && lseek(3, 0, SEEK_CUR) == 130,
	      "dups share the offset: fd 900 at %ld, fd 3 at %ld after reading via fd 10",
	      (long)lseek(900, 0, SEEK_CUR), (long)lseek(3, 0, SEEK_CUR));
	CHECK(lseek(21, 0, SEEK_CUR) == 50 && read(21, buf, 5) == 5 && !memcmp(buf, apat + 50, 5),
	      "fd 21 has its own offset and reads the same file");

	/* O_APPEND still appends */
	lseek(20, 0, SEEK_SET);
	CHECK(write(20, "second\n", 7) == 7, "write via fd 20");
	fd = open("/b.log", O_RDONLY);
	memset(buf, 0, sizeof(buf));
	CHECK(fd >= 0 && read(fd, buf, sizeof(buf) - 1) == 13 && !strcmp(buf, "first\nsecond\n"),
	      "b.log is \"first\\nsecond\\n\" (O_APPEND)");
	close(fd);

	/* same files, same root, cwd and umask */
	CHECK(!fstat(3, &st) && st.st_ino == st_a.st_ino && st.st_dev == st_a.st_dev,
	      "fd 3 is a.dat (inode %lu, expected %lu)", (unsigned long)st.st_ino,
	      (unsigned long)st_a.st_ino);
	CHECK(!fstat(22, &st) && st.st_ino == st_root.st_ino, "fd 22 is the work dir");
	CHECK(!fstatat(22, "c.dat", &st, 0) && st.st_size == 1, "c.dat through the dir fd");
	CHECK(!stat("/", &st) && st.st_ino == st_root.st_ino && st.st_dev == st_root.st_dev,
	      "root is the work dir (inode %lu, expected %lu)", (unsigned long)st.st_ino,
	      (unsigned long)st_root.st_ino);
	CHECK(getcwd(buf, sizeof(buf)) && !strcmp(buf, "/sub/deeper"), "cwd is %s", buf);
	um = umask(0);
	umask(um);
	CHECK(um == 027, "umask %03o", (unsigned)um);
	fd = open("/new.dat", O_CREAT | O_WRONLY, 0666);
	CHECK(fd >= 0 && !fstat(fd, &st) && (st.st_mode & 0777) == 0640,
	      "a new file gets mode %03o", (unsigned)(st.st_mode & 0777));
	close(fd);
	return prog_done();
}
