// SPDX-License-Identifier: MIT
/*
 * inotify2: watches kept by file handle, on files of DIR/mnt (a tmpfs the test mounts).
 *
 *   fd 30  inotify: wd 1 on w.txt (IN_MODIFY), which has a second link keep.txt; the test
 *          puts another file in w.txt's place between dump and restore: the watch must
 *          stay on the original inode.  wd 2 on hid/h.txt (IN_MODIFY); the test mounts a
 *          tmpfs over hid/ before the dump, so that no path reaches the file: only its
 *          file handle (the program keeps it, name_to_handle_at) does.
 *
 * After restore: writing keep.txt gives IN_MODIFY on wd 1, writing the new w.txt gives
 * nothing, writing h.txt (opened by its handle) gives IN_MODIFY on wd 2.
 *
 * With the argument "deleted", wd 3 watches gone.txt, which is then unlinked while an fd
 * keeps it open (the watch stays): the watched inode dies with the process, so the dump
 * must refuse it.
 */
#include <poll.h>
#include <sys/inotify.h>

#include "prog.h"

#define INFD 30

static void append(const char *name, const char *s)
{
	int fd = open(name, O_WRONLY | O_APPEND | O_CREAT, 0644);

	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		prog_die("write %s", name);
	close(fd);
}

/* The events of wd within ms: their masks OR'ed. */
static unsigned events_of(int wd, int ms)
{
	char buf[4096] __attribute__((aligned(8)));
	struct pollfd p = {.fd = INFD, .events = POLLIN};
	unsigned got = 0;

	while (poll(&p, 1, ms) == 1) {
		ssize_t n = read(INFD, buf, sizeof(buf));

		if (n <= 0)
			break;
		for (char *q = buf; q < buf + n;) {
			struct inotify_event *e = (void *)q;

			if (e->wd == wd)
				got |= e->mask;
			q += sizeof(*e) + e->len;
		}
		ms = 200;
	}
	return got;
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	int deleted = argc > first && !strcmp(argv[first], "deleted");
	struct {
		struct file_handle fh;
		unsigned char bytes[128];
	} h = {.fh.handle_bytes = 128};
	int fd, wd, mnt_id, root;
	struct stat st, st2;
	unsigned ev;

	if (chdir("mnt") && (mkdir("mnt", 0755) || chdir("mnt")))
		prog_die("chdir mnt");
	root = open(".", O_RDONLY | O_DIRECTORY);
	append("w.txt", "w\n");
	if (link("w.txt", "keep.txt"))
		prog_die("link keep.txt");
	if (mkdir("hid", 0755))
		prog_die("mkdir hid");
	append("hid/h.txt", "h\n");
	if (name_to_handle_at(AT_FDCWD, "hid/h.txt", &h.fh, &mnt_id, 0))
		prog_die("name_to_handle_at");
	fd = inotify_init1(IN_NONBLOCK);
	if (fd < 0 || dup2(fd, INFD) != INFD)
		prog_die("inotify");
	close(fd);
	if (inotify_add_watch(INFD, "w.txt", IN_MODIFY) != 1 ||
	    inotify_add_watch(INFD, "hid/h.txt", IN_MODIFY) != 2)
		prog_die("watches");
	if (deleted) {
		append("gone.txt", "gone\n");
		/* an fd keeps the dentry, so that the watch outlives the unlink */
		if (inotify_add_watch(INFD, "gone.txt", IN_MODIFY) != 3 ||
		    open("gone.txt", O_RDONLY) < 0 || unlink("gone.txt"))
			prog_die("watch gone.txt");
		events_of(0, 0);
	}

	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		inotify_rm_watch(INFD, 1);

	events_of(0, 0);
	append("keep.txt", "after\n");
	ev = events_of(1, 2000);
	CHECK(ev & IN_MODIFY, "wd 1: IN_MODIFY of the watched inode, through keep.txt (0x%x)", ev);
	if (stat("w.txt", &st) || stat("keep.txt", &st2))
		prog_die("stat");
	if (st.st_ino != st2.st_ino) { /* replaced by the test */
		append("w.txt", "after\n");
		ev = events_of(1, 500);
		CHECK(!(ev & IN_MODIFY), "wd 1: nothing for the file now called w.txt (0x%x)", ev);
	}
	fd = open_by_handle_at(root, &h.fh, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, "after\n", 6) != 6)
		prog_die("write h.txt by its handle");
	close(fd);
	ev = events_of(2, 2000);
	CHECK(ev & IN_MODIFY, "wd 2: IN_MODIFY of hid/h.txt, which no path reaches (0x%x)", ev);
	wd = inotify_add_watch(INFD, ".", IN_CREATE);
	CHECK(wd == 3 + deleted, "the next watch gets wd %d (got %d)", 3 + deleted, wd);
	return prog_done();
}
