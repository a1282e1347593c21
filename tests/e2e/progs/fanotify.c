// SPDX-License-Identifier: MIT
/*
 * fanotify: two groups and their marks, on files of DIR/mnt (a tmpfs the test mounts).
 *
 *   fd 30  group A: FAN_CLASS_NOTIF | FAN_NONBLOCK, events opened O_RDONLY | O_LARGEFILE
 *          - an inode mark on marked.txt (FAN_MODIFY); the file has a second link,
 *            kept.txt, and the test puts another file in marked.txt's place between
 *            dump and restore: the mark must stay on the original inode
 *          - an inode mark on quiet.txt: FAN_MODIFY | FAN_CLOSE_WRITE, with FAN_CLOSE_WRITE
 *            ignored (FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY)
 *   fd 31  group B: FAN_CLASS_NOTIF | FAN_NONBLOCK, events O_RDONLY
 *          - a mount mark on the work dir's mount (FAN_CLOSE_WRITE)
 *          - a filesystem mark on its filesystem (FAN_MODIFY)
 *
 * After restore: writing kept.txt (the original inode) gives group A a FAN_MODIFY for
 * that inode; writing the new marked.txt gives none; writing quiet.txt gives FAN_MODIFY
 * but no FAN_CLOSE_WRITE (ignored); writing b.txt gives group B both FAN_MODIFY (the
 * filesystem mark) and FAN_CLOSE_WRITE (the mount mark).  Events of other files (the
 * mount and filesystem are shared with the rest of the machine) are skipped.
 *
 * With the argument "queued", group A has an event queued when the program is ready
 * (the dump must refuse it).
 */
#include <poll.h>
#include <sys/fanotify.h>

#include "prog.h"

#define GA 30
#define GB 31

static void at(int fd, int want)
{
	if (fd < 0)
		prog_die("creating fd %d", want);
	if (fd != want) {
		if (dup2(fd, want) != want)
			prog_die("dup2 %d -> %d", fd, want);
		close(fd);
	}
}

static void append(const char *name, const char *s)
{
	int fd = open(name, O_WRONLY | O_APPEND | O_CREAT, 0644);

	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		prog_die("write %s", name);
	close(fd);
}

static ino_t ino_of(const char *name)
{
	struct stat st;

	if (stat(name, &st))
		prog_die("stat %s", name);
	return st.st_ino;
}

/* The events of group g on inode ino within ms: their masks OR'ed. */
static unsigned long long events_on(int g, ino_t ino, int ms)
{
	unsigned long long got = 0;
	char buf[8192] __attribute__((aligned(8)));
	struct pollfd p = {.fd = g, .events = POLLIN};

	while (poll(&p, 1, ms) == 1) {
		ssize_t n = read(g, buf, sizeof(buf));
		struct fanotify_event_metadata *m = (void *)buf;

		if (n <= 0)
			break;
		for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
			struct stat st;

			if (m->fd >= 0) {
				if (!fstat(m->fd, &st) && st.st_ino == ino)
					got |= m->mask;
				close(m->fd);
			}
		}
		ms = 200; /* what follows comes with it */
	}
	return got;
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	int queued = argc > first && !strcmp(argv[first], "queued");
	unsigned long long ev;
	ino_t kept, fresh, quiet, b;

	/* a mount of the test's own (tmpfs): the mount and filesystem marks see only us */
	if (chdir("mnt") && (mkdir("mnt", 0755) || chdir("mnt")))
		prog_die("chdir mnt");

	/* marked.txt last: the name the kernel gives the inode (its newest link) */
	append("kept.txt", "original\n");
	if (link("kept.txt", "marked.txt"))
		prog_die("link marked.txt");
	append("quiet.txt", "quiet\n");
	append("b.txt", "b\n");

	at(fanotify_init(FAN_CLASS_NOTIF | FAN_NONBLOCK, O_RDONLY | O_LARGEFILE), GA);
	if (fanotify_mark(GA, FAN_MARK_ADD, FAN_MODIFY, AT_FDCWD, "marked.txt"))
		prog_die("mark marked.txt");
	if (fanotify_mark(GA, FAN_MARK_ADD, FAN_MODIFY | FAN_CLOSE_WRITE, AT_FDCWD, "quiet.txt") ||
	    fanotify_mark(GA, FAN_MARK_ADD | FAN_MARK_IGNORED_MASK | FAN_MARK_IGNORED_SURV_MODIFY,
			  FAN_CLOSE_WRITE, AT_FDCWD, "quiet.txt"))
		prog_die("mark quiet.txt");
	if (queued) /* before group B exists: only group A has it */
		append("kept.txt", "queued\n");
	at(fanotify_init(FAN_CLASS_NOTIF | FAN_NONBLOCK, O_RDONLY), GB);
	if (fanotify_mark(GB, FAN_MARK_ADD | FAN_MARK_MOUNT, FAN_CLOSE_WRITE, AT_FDCWD, "."))
		prog_die("mount mark");
	if (fanotify_mark(GB, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FAN_MODIFY, AT_FDCWD, "."))
		prog_die("filesystem mark");
	kept = ino_of("kept.txt");

	prog_ready();
	prog_wait_go();
	if (prog_sabotage() && fanotify_mark(GA, FAN_MARK_REMOVE, FAN_MODIFY, AT_FDCWD, "kept.txt"))
		prog_die("sabotage");

	/* what happened before "go" (the test's own writes) is not ours to check */
	events_on(GA, 0, 0);
	events_on(GB, 0, 0);
	fresh = ino_of("marked.txt");
	quiet = ino_of("quiet.txt");
	b = ino_of("b.txt");

	append("kept.txt", "after\n");
	ev = events_on(GA, kept, 2000);
	CHECK(ev & FAN_MODIFY,
	      "group A: FAN_MODIFY of the marked inode, through its other link "
	      "kept.txt (mask 0x%llx)",
	      ev);
	if (fresh != kept) {
		append("marked.txt", "after\n");
		ev = events_on(GA, fresh, 500);
		CHECK(!ev, "group A: nothing for the file now called marked.txt (mask 0x%llx)", ev);
	}
	append("quiet.txt", "after\n");
	ev = events_on(GA, quiet, 2000);
	CHECK((ev & FAN_MODIFY) && !(ev & FAN_CLOSE_WRITE),
	      "group A: quiet.txt gives FAN_MODIFY, its FAN_CLOSE_WRITE ignored (mask 0x%llx)", ev);
	append("b.txt", "after\n");
	ev = events_on(GB, b, 2000);
	CHECK((ev & FAN_MODIFY) && (ev & FAN_CLOSE_WRITE),
	      "group B: b.txt gives FAN_MODIFY (filesystem mark) and FAN_CLOSE_WRITE (mount "
	      "mark) (mask 0x%llx)",
	      ev);
	CHECK((fcntl(GA, F_GETFL) & O_NONBLOCK) && (fcntl(GB, F_GETFL) & O_NONBLOCK),
	      "both groups non-blocking");
	return prog_done();
}
