// SPDX-License-Identifier: MIT
/*
 * owner: an unprivileged user's process holding one of each thing a restore
 * does on the image's word (security-owner.sh edits its image to point them
 * at root's things and checks that the restore refuses).
 *
 *   owner DIR       (run as an unprivileged user)
 *
 * fd 10: DIR/data O_RDWR, 11: the FIFO DIR/fifo O_RDWR, 12: the directory
 * DIR/dir, 13: an inotify fd watching DIR/dir, 14: a unix datagram socket
 * bound to DIR/sock, 15: DIR/ghost, deleted; nice 3; a PROT_READ page mapped
 * at 0x10000000; fds 16 and 17: a stream socketpair.  After go it checks that
 * all of it came back, that the pair's peer credentials (SO_PEERCRED) name its
 * own uid and gid, not root's, that the message queued on 17 carries its
 * credentials (SCM_CREDENTIALS), and that its uid, gids and groups are what
 * they were.
 */
#include <grp.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "prog.h"

#define LOW_MAP ((void *)0x10000000)

static void check_link(int fd, const char *want)
{
	char path[64], got[4096];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, got, sizeof(got) - 1);
	got[n < 0 ? 0 : n] = 0;
	CHECK(n > 0 && !strncmp(got, want, strlen(want)) &&
		      (want[strlen(want) - 1] == ':' || !got[strlen(want)]),
	      "fd %d is %s, want %s", fd, got, want);
}

static int at(int fd, int want)
{
	if (fd < 0)
		prog_die("open for fd %d", want);
	if (dup2(fd, want) != want)
		prog_die("dup2 %d", want);
	close(fd);
	return want;
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char want[4200], buf[16];
	gid_t groups[64];
	int ngroups, fd;
	uid_t uid = getuid();
	gid_t gid = getgid();

	prog_init(argc, argv);
	if (!uid)
		prog_die("run me as an unprivileged user");
	ngroups = getgroups(64, groups);
	at(open(prog_path("data"), O_RDWR | O_CREAT | O_TRUNC, 0600), 10);
	if (write(10, "hello", 5) != 5)
		prog_die("write data");
	if (mkfifo(prog_path("fifo"), 0600))
		prog_die("mkfifo");
	at(open(prog_path("fifo"), O_RDWR), 11);
	if (mkdir(prog_path("dir"), 0700))
		prog_die("mkdir");
	at(open(prog_path("dir"), O_RDONLY | O_DIRECTORY), 12);
	at(inotify_init1(0), 13);
	if (inotify_add_watch(13, prog_path("dir"), IN_CREATE) != 1)
		prog_die("inotify_add_watch");
	at(socket(AF_UNIX, SOCK_DGRAM, 0), 14);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", prog_path("sock"));
	if (bind(14, (struct sockaddr *)&sa, sizeof(sa)))
		prog_die("bind");
	{
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			prog_die("socketpair");
		at(sv[0], 16);
		at(sv[1], 17);
		/* a message with its credentials (ours) queued on 17 */
		if (setsockopt(17, SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int)) ||
		    send(16, "cred", 4, 0) != 4)
			prog_die("SO_PASSCRED");
	}
	at(open(prog_path("ghost"), O_RDWR | O_CREAT | O_TRUNC, 0640), 15);
	if (write(15, "ghost", 5) != 5 || unlink(prog_path("ghost")))
		prog_die("ghost");
	if (setpriority(PRIO_PROCESS, 0, 3))
		prog_die("nice");
	if (mmap(LOW_MAP, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
		 0) != LOW_MAP)
		prog_die("mmap");

	prog_ready();
	prog_wait_go();

	check_link(10, prog_path("data"));
	CHECK(pread(10, buf, 5, 0) == 5 && !memcmp(buf, "hello", 5), "data holds hello");
	CHECK(lseek(10, 0, SEEK_CUR) == 5, "data offset 5");
	check_link(11, prog_path("fifo"));
	check_link(12, prog_path("dir"));
	fd = open(prog_path("dir/new"), O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0, "create dir/new");
	CHECK(read(13, want, sizeof(want)) > 0, "the inotify watch on dir reports it");
	check_link(14, "socket:");
	snprintf(want, sizeof(want), "%s (deleted)", prog_path("ghost"));
	check_link(15, want);
	CHECK(pread(15, buf, 5, 0) == 5 && !memcmp(buf, "ghost", 5), "ghost holds ghost");
	for (int i = 16; i <= 17; i++) {
		struct ucred c = {0};
		socklen_t len = sizeof(c);
		int r = getsockopt(i, SOL_SOCKET, SO_PEERCRED, &c, &len);

		CHECK(!r && c.uid == uid && c.gid == gid,
		      "fd %d's peer credentials: uid %u gid %u (want %u %u)", i, c.uid, c.gid, uid,
		      gid);
	}
	{
		char cbuf[CMSG_SPACE(sizeof(struct ucred))], data[8] = "";
		struct iovec iov = {data, sizeof(data)};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf,
				    .msg_controllen = sizeof(cbuf)};
		struct cmsghdr *c;
		struct ucred cr = {0};

		CHECK(recvmsg(17, &mh, MSG_DONTWAIT) == 4 && !memcmp(data, "cred", 4),
		      "the message queued on fd 17");
		c = CMSG_FIRSTHDR(&mh);
		if (c && c->cmsg_type == SCM_CREDENTIALS)
			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
		CHECK(cr.pid == getpid() && cr.uid == uid && cr.gid == gid,
		      "its credentials: pid %d uid %u gid %u (want %d %u %u)", cr.pid, cr.uid,
		      cr.gid, getpid(), uid, gid);
	}
	errno = 0;
	CHECK(getpriority(PRIO_PROCESS, 0) == 3 + prog_sabotage(), "nice 3");
	CHECK(getuid() == uid && geteuid() == uid, "uid %u", uid);
	CHECK(getgid() == gid && getegid() == gid, "gid %u", gid);
	CHECK(getgroups(64, buf == NULL ? NULL : (gid_t[64]){0}) == ngroups, "%d groups", ngroups);
	return prog_done();
}
