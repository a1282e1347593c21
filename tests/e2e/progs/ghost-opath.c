// SPDX-License-Identifier: MIT
/*
 * ghost-opath: O_PATH descriptors.
 *
 *   fd 20  O_PATH on DIR/reg (a regular file, "regular")
 *   fd 21  O_PATH|O_NOFOLLOW on DIR/link, a symlink to "reg"
 *   fd 22  O_PATH|O_DIRECTORY on DIR
 *   fd 23  O_PATH on DIR/fifo, a FIFO
 *   fd 24  O_PATH on DIR/gone, a regular file since deleted ("gone data")
 *
 * After restore: each is still O_PATH (F_GETFL and /proc/self/fdinfo), refers to a file
 * of its kind (the symlink itself, not its target), and can be used as one: openat()
 * through the directory, readlinkat() of the symlink, a reopen of the file and of the
 * deleted file through /proc/self/fd.
 */
#include <sys/sysmacros.h>

#include "prog.h"

static void at(int fd, int want)
{
	if (fd < 0)
		prog_die("open for fd %d", want);
	if (fd != want && (dup2(fd, want) != want || close(fd)))
		prog_die("dup2 %d", want);
}

/* The flags: field of /proc/self/fdinfo/FD, or -1. */
static long fdinfo_flags(int fd)
{
	char path[64], buf[1024], *p;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (prog_read_file(path, buf, sizeof(buf)) < 0 || !(p = strstr(buf, "flags:")))
		return -1;
	return strtol(p + 6, NULL, 8);
}

static int reopen(int fd, int flags)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, flags);
}

int main(int argc, char **argv)
{
	struct stat st, want;
	char buf[64];
	int fd;

	prog_init(argc, argv);
	fd = open(prog_path("reg"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "regular", 7) != 7 || close(fd))
		prog_die("reg");
	if (symlink("reg", prog_path("link")) || mkfifo(prog_path("fifo"), 0600))
		prog_die("link, fifo");
	fd = open(prog_path("gone"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, "gone data", 9) != 9 || close(fd))
		prog_die("gone");
	at(open(prog_path("reg"), O_PATH), 20);
	at(open(prog_path("link"), O_PATH | O_NOFOLLOW), 21);
	at(open(prog_dir, O_PATH | O_DIRECTORY), 22);
	at(open(prog_path("fifo"), O_PATH), 23);
	at(open(prog_path("gone"), O_PATH), 24);
	if (unlink(prog_path("gone")))
		prog_die("unlink gone");

	prog_ready();
	prog_wait_go();
	if (prog_sabotage()) /* the symlink's target instead of the symlink */
		at(open(prog_path("link"), O_PATH), 21);

	for (int i = 20; i <= 24; i++)
		CHECK((fcntl(i, F_GETFL) & O_PATH) && (fdinfo_flags(i) & O_PATH),
		      "fd %d is O_PATH (F_GETFL %#x, fdinfo %#lo)", i, fcntl(i, F_GETFL),
		      fdinfo_flags(i));
	CHECK(fstat(20, &st) == 0 && stat(prog_path("reg"), &want) == 0 &&
		      st.st_ino == want.st_ino && S_ISREG(st.st_mode),
	      "fd 20 is DIR/reg");
	fd = reopen(20, O_RDONLY);
	CHECK(fd >= 0 && read(fd, buf, 7) == 7 && !memcmp(buf, "regular", 7),
	      "fd 20 reopens to read \"regular\"");
	close(fd);
	CHECK(fstat(21, &st) == 0 && S_ISLNK(st.st_mode), "fd 21 is the symlink itself (mode %o)",
	      st.st_mode & S_IFMT);
	memset(buf, 0, sizeof(buf));
	CHECK(readlinkat(21, "", buf, sizeof(buf) - 1) == 3 && !strcmp(buf, "reg"),
	      "fd 21 reads as the link to \"%s\"", buf);
	CHECK((fcntl(21, F_GETFL) & O_NOFOLLOW), "fd 21 keeps O_NOFOLLOW");
	CHECK(fstat(22, &st) == 0 && S_ISDIR(st.st_mode) && stat(prog_dir, &want) == 0 &&
		      st.st_ino == want.st_ino,
	      "fd 22 is DIR");
	fd = openat(22, "reg", O_RDONLY);
	CHECK(fd >= 0, "openat(fd 22, \"reg\")");
	close(fd);
	CHECK(fstat(23, &st) == 0 && S_ISFIFO(st.st_mode), "fd 23 is the FIFO");
	CHECK(fstat(24, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 0 && st.st_size == 9,
	      "fd 24 is the deleted file, 9 bytes");
	fd = reopen(24, O_RDONLY);
	CHECK(fd >= 0 && read(fd, buf, 9) == 9 && !memcmp(buf, "gone data", 9),
	      "fd 24 reopens to read \"gone data\"");
	return prog_done();
}
