// SPDX-License-Identifier: MIT
/*
 * unix: what unix sockets hold beyond their bytes.
 *
 * "rights": descriptors in flight (SCM_RIGHTS), open nowhere else in the process:
 *   dgram pair D: message "files" carrying [file F at offset 4, the read end of a pipe
 *     holding "pipedata" (both ends closed here), the end of a stream pair holding
 *     "hello" whose other end the process keeps, an eventfd with counter 7], then two
 *     zero-length datagrams, then "again" carrying F once more (the same description);
 *   stream pair C: "abc" (no descriptors), "def" carrying F, "ghi" (a read gets
 *     "abcdef" with F, then "ghi");
 *   named dgram socket R (T/r.sock) with datagrams from T/s.sock (a sender closed and
 *     unlinked since), from an abstract name the process keeps, and from an unnamed one.
 * After restore each message comes back in order with its descriptors: the files are of
 * the same kinds with the same contents, offsets and counters, F's two copies share one
 * offset, the stream pair in flight still talks to the end kept; each datagram of R
 * names its sender.
 *
 * "longq": 70000 one-byte datagrams (and zero-length ones between) queued on a pair.
 *
 * "pending": connections not accept()ed yet.  Stream listener A (T/a.sock, backlog 8)
 *   has four in its queue: c1 (here), c5 (a child's), c2 (bound to T/c2.sock), c3 (shut
 *   down for writing); seqpacket listener B (abstract, backlog 1) has the child's c4.
 *   After restore accept() returns them in that order (each client then sends its
 *   number), with the listener's name, c2's name as the peer's, EOF from c3, then
 *   EAGAIN; replies reach the clients, record boundaries hold on B.
 * Refused at dump (the program goes on unharmed after the failed dump):
 *   "pendingdata": c1 wrote "early" before the dump (the data sits in a socket only
 *     accept() gives); after go it is accepted with that data.
 *   "pendingout": the client is a process outside the tree; after go it sends "x".
 *   "listenout": the listener is outside the tree; after go it accepts and sends "z".
 */
#include <grp.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "prog.h"

#define LONGQ 66000

static void send_fds(int s, const void *data, size_t len, const int *fds, int n)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = {(void *)data, len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (n) {
		struct cmsghdr *c;

		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	if (sendmsg(s, &mh, 0) != (ssize_t)len)
		prog_die("sendmsg");
}

/* One message: its length, its descriptors (nfds), the sender's address. */
static ssize_t recv_fds(int s, char *buf, size_t size, int *fds, int *nfds,
			struct sockaddr_un *from, socklen_t *fromlen)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = {buf, size};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf),
			    .msg_name = from,
			    .msg_namelen = from ? sizeof(*from) : 0};
	ssize_t r = recvmsg(s, &mh, MSG_DONTWAIT);

	*nfds = 0;
	if (r < 0)
		return r;
	buf[r] = 0;
	if (fromlen)
		*fromlen = mh.msg_namelen;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			*nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds, CMSG_DATA(c), sizeof(int) * *nfds);
		}
	return r;
}

static socklen_t addr_of(struct sockaddr_un *sa, const char *path, int abstract)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (abstract) {
		snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "%s", path);
		return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(path);
	}
	snprintf(sa->sun_path, sizeof(sa->sun_path), "%s", path);
	return offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1;
}

static int dgram_bound(const char *path, int abstract)
{
	struct sockaddr_un sa;
	socklen_t len = addr_of(&sa, path, abstract);
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);

	if (s < 0 || bind(s, (struct sockaddr *)&sa, len))
		prog_die("bind %s", path);
	return s;
}

static int rights(void)
{
	int d[2], c[2], sp[2], p[2], f, efd, r, fds[8], n, keep_abs;
	char buf[256], abs_name[64];
	struct sockaddr_un sa, from;
	socklen_t salen, fromlen;
	uint64_t v;
	struct stat st;

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, d) || socketpair(AF_UNIX, SOCK_STREAM, 0, c) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, sp) || pipe(p))
		prog_die("socketpair");
	f = open(prog_path("inflight.txt"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (f < 0 || write(f, "0123456789", 10) != 10 || lseek(f, 4, SEEK_SET) != 4)
		prog_die("inflight.txt");
	efd = eventfd(7, 0);
	if (efd < 0 || write(p[1], "pipedata", 8) != 8 || write(sp[0], "hello", 5) != 5)
		prog_die("setup");
	send_fds(d[0], "files", 5, (int[]){f, p[0], sp[1], efd}, 4);
	send_fds(d[0], "", 0, NULL, 0);
	send_fds(d[0], "", 0, NULL, 0);
	send_fds(d[0], "again", 5, (int[]){f}, 1);
	send_fds(c[0], "abc", 3, NULL, 0);
	send_fds(c[0], "def", 3, (int[]){f}, 1);
	send_fds(c[0], "ghi", 3, NULL, 0);
	close(f);
	close(p[0]);
	close(p[1]);
	close(sp[1]);
	close(efd);

	/* named receiver R; senders: a gone path, a kept abstract name, an unnamed one */
	int rsk = dgram_bound(prog_path("r.sock"), 0), s1, s3;

	salen = addr_of(&sa, prog_path("r.sock"), 0);
	s1 = dgram_bound(prog_path("s.sock"), 0);
	snprintf(abs_name, sizeof(abs_name), "amb-unix-%d", (int)getpid());
	keep_abs = dgram_bound(abs_name, 1);
	s3 = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (sendto(s1, "from-s", 6, 0, (struct sockaddr *)&sa, salen) != 6 ||
	    sendto(keep_abs, "from-abs", 8, 0, (struct sockaddr *)&sa, salen) != 8 ||
	    sendto(s3, "anon", 4, 0, (struct sockaddr *)&sa, salen) != 4)
		prog_die("sendto r.sock");
	close(s1);
	close(s3);
	unlink(prog_path("s.sock"));

	prog_ready();
	prog_wait_go();

	/* D: "files" with its four descriptors */
	r = (int)recv_fds(d[1], buf, sizeof(buf), fds, &n, NULL, NULL);
	CHECK(r == 5 && !strcmp(buf, "files") && n == 4,
	      "D: 'files' with 4 fds (got %d '%s', %d fds)", r, r >= 0 ? buf : "", n);
	if (n == 4) {
		int ff = fds[0];

		CHECK(lseek(ff, 0, SEEK_CUR) == 4, "F in flight is at offset 4 (%lld)",
		      (long long)lseek(ff, 0, SEEK_CUR));
		CHECK(read(ff, buf, 3) == 3 && !memcmp(buf, "456", 3), "F reads '456' from there");
		CHECK(!fstat(ff, &st) && S_ISREG(st.st_mode) &&
			      (fcntl(ff, F_GETFL) & O_ACCMODE) == O_RDWR,
		      "F is a regular file opened O_RDWR");
		CHECK(!fstat(fds[1], &st) && S_ISFIFO(st.st_mode), "the pipe end is a FIFO");
		r = (int)read(fds[1], buf, sizeof(buf));
		CHECK(r == 8 && !memcmp(buf, "pipedata", 8),
		      "the pipe in flight holds 'pipedata' (%d)", r);
		r = (int)read(fds[2], buf, sizeof(buf));
		if (prog_sabotage())
			r = 4;
		CHECK(r == 5 && !memcmp(buf, "hello", 5),
		      "the stream end in flight holds 'hello' (%d)", r);
		CHECK(write(sp[0], "back", 4) == 4 && read(fds[2], buf, 4) == 4 &&
			      !memcmp(buf, "back", 4),
		      "the stream end in flight still talks to the end kept");
		CHECK(read(fds[3], &v, 8) == 8 && v == 7, "the eventfd in flight counts 7");
		/* "again": F once more, the same description (shares the offset) */
		r = (int)recv_fds(d[1], buf, sizeof(buf), fds, &n, NULL, NULL);
		CHECK(r == 0 && n == 0, "D: a zero-length datagram (%d)", r);
		r = (int)recv_fds(d[1], buf, sizeof(buf), fds, &n, NULL, NULL);
		CHECK(r == 0 && n == 0, "D: a second zero-length datagram (%d)", r);
		r = (int)recv_fds(d[1], buf, sizeof(buf), fds + 4, &n, NULL, NULL);
		CHECK(r == 5 && !strcmp(buf, "again") && n == 1,
		      "D: 'again' with 1 fd (%d, %d fds)", r, n);
		if (n == 1)
			CHECK(lseek(fds[4], 0, SEEK_CUR) == 7,
			      "F's second copy shares the first's offset (7: %lld)",
			      (long long)lseek(fds[4], 0, SEEK_CUR));
	}
	r = (int)recv_fds(d[1], buf, sizeof(buf), fds, &n, NULL, NULL);
	CHECK(r < 0 && errno == EAGAIN, "D: nothing more queued");

	/* C: the descriptor comes with "def" (and the data before it), not with "ghi" */
	r = (int)recv_fds(c[1], buf, sizeof(buf), fds, &n, NULL, NULL);
	CHECK(r == 6 && !strcmp(buf, "abcdef") && n == 1, "C: 'abcdef' with F (%d '%s', %d fds)", r,
	      r >= 0 ? buf : "", n);
	if (n == 1)
		CHECK(lseek(fds[0], 0, SEEK_CUR) == 7,
		      "C's F is the same description as D's (offset 7)");
	r = (int)recv_fds(c[1], buf, sizeof(buf), fds, &n, NULL, NULL);
	CHECK(r == 3 && !strcmp(buf, "ghi") && n == 0, "C: 'ghi'");

	/* R: each datagram names its sender */
	r = (int)recv_fds(rsk, buf, sizeof(buf), fds, &n, &from, &fromlen);
	CHECK(r == 6 && !strcmp(buf, "from-s") &&
		      fromlen > offsetof(struct sockaddr_un, sun_path) &&
		      !strcmp(from.sun_path, prog_path("s.sock")),
	      "R: 'from-s' from %s (%s)", prog_path("s.sock"),
	      fromlen > offsetof(struct sockaddr_un, sun_path) ? from.sun_path : "unnamed");
	CHECK(access(prog_path("s.sock"), F_OK) != 0, "the gone sender's socket file is not back");
	r = (int)recv_fds(rsk, buf, sizeof(buf), fds, &n, &from, &fromlen);
	CHECK(r == 8 && !strcmp(buf, "from-abs") &&
		      fromlen == offsetof(struct sockaddr_un, sun_path) + 1 + strlen(abs_name) &&
		      !from.sun_path[0] && !memcmp(from.sun_path + 1, abs_name, strlen(abs_name)),
	      "R: 'from-abs' from @%s", abs_name);
	r = (int)recv_fds(rsk, buf, sizeof(buf), fds, &n, &from, &fromlen);
	CHECK(r == 4 && !strcmp(buf, "anon") && fromlen <= offsetof(struct sockaddr_un, sun_path),
	      "R: 'anon' from an unnamed socket (namelen %u)", (unsigned)fromlen);
	return prog_done();
}

static int longq(void)
{
	int d[2], big = 256 << 20, r, bad = 0, zeros = 0;
	char b, buf[8];

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, d) ||
	    setsockopt(d[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
		prog_die("socketpair");
	for (int i = 0; i < LONGQ; i++) {
		b = (char)(i % 251);
		if (send(d[0], &b, i % 1000 == 999 ? 0 : 1, MSG_DONTWAIT) < 0)
			prog_die("send %d", i);
	}
	prog_ready();
	prog_wait_go();
	for (int i = 0; i < LONGQ; i++) {
		r = (int)recv(d[1], buf, sizeof(buf), MSG_DONTWAIT);
		if (i % 1000 == 999) {
			zeros += r == 0;
			bad += r != 0;
		} else {
			bad += r != 1 || buf[0] != (char)(i % 251);
		}
	}
	if (prog_sabotage())
		bad++;
	CHECK(!bad, "%d queued datagrams come back in order (%d wrong)", LONGQ, bad);
	CHECK(zeros == LONGQ / 1000, "the %d zero-length ones among them too (%d)", LONGQ / 1000,
	      zeros);
	CHECK(recv(d[1], buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN, "nothing more");
	return prog_done();
}

static int listener_at(int type, const char *path, int abstract, int backlog)
{
	struct sockaddr_un sa;
	socklen_t len = addr_of(&sa, path, abstract);
	int l = socket(AF_UNIX, type, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&sa, len) || listen(l, backlog))
		prog_die("listen on %s", path);
	return l;
}

/* A client connected to path (not accepted); bound first to name when given. */
static int client_of(int type, const char *path, int abstract, const char *name)
{
	struct sockaddr_un sa;
	socklen_t len;
	int c = socket(AF_UNIX, type, 0);

	if (c < 0)
		prog_die("socket");
	if (name) {
		len = addr_of(&sa, name, 0);
		if (bind(c, (struct sockaddr *)&sa, len))
			prog_die("bind %s", name);
	}
	len = addr_of(&sa, path, abstract);
	if (connect(c, (struct sockaddr *)&sa, len))
		prog_die("connect to %s", path);
	return c;
}

static void wait_for_file(const char *name)
{
	for (int i = 0; i < 1500 && access(prog_path(name), F_OK); i++)
		usleep(10 * 1000);
	if (access(prog_path(name), F_OK))
		prog_die("%s did not come", name);
}

/* The accepted connection's first byte: the client's number (-1: EOF, -2: error). */
static int first_byte(int a)
{
	char b;
	ssize_t r;

	for (int i = 0; i < 500; i++) {
		r = recv(a, &b, 1, MSG_DONTWAIT);
		if (r == 1)
			return b;
		if (r == 0)
			return -1;
		if (errno != EAGAIN)
			return -2;
		usleep(10 * 1000);
	}
	return -2;
}

static int pending(void)
{
	char apath[4096], c2path[4096], bname[64], buf[16];
	int l_a, l_b, c1, c2, c3, sync[2], order[4] = {1, 5, 2, 3}, acc[4], b1, st;
	struct sockaddr_un sa;
	socklen_t len;
	pid_t child;

	snprintf(apath, sizeof(apath), "%s", prog_path("a.sock"));
	snprintf(c2path, sizeof(c2path), "%s", prog_path("c2.sock"));
	snprintf(bname, sizeof(bname), "amber-pending-%d", (int)getpid());
	l_a = listener_at(SOCK_STREAM, apath, 0, 8);
	l_b = listener_at(SOCK_SEQPACKET, bname, 1, 1);
	if (pipe(sync))
		prog_die("pipe");
	c1 = client_of(SOCK_STREAM, apath, 0, NULL);
	child = fork();
	if (child < 0)
		prog_die("fork");
	if (child == 0) {
		int c5 = client_of(SOCK_STREAM, apath, 0, NULL);
		int c4 = client_of(SOCK_SEQPACKET, bname, 1, NULL);

		if (write(sync[1], "1", 1) != 1)
			_exit(3);
		prog_wait_go();
		/* a seqpacket message of two bytes, then one of one */
		if (send(c5, "\005", 1, 0) != 1 || send(c4, "\004\004", 2, 0) != 2 ||
		    send(c4, "\004", 1, 0) != 1)
			_exit(4);
		if (recv(c5, buf, sizeof(buf), 0) != 2 || memcmp(buf, "r5", 2) ||
		    recv(c4, buf, sizeof(buf), 0) != 2 || memcmp(buf, "r4", 2))
			_exit(5);
		_exit(0);
	}
	if (read(sync[0], buf, 1) != 1)
		prog_die("the child's clients");
	c2 = client_of(SOCK_STREAM, apath, 0, c2path);
	c3 = client_of(SOCK_STREAM, apath, 0, NULL);
	shutdown(c3, SHUT_WR);
	prog_ready();
	prog_wait_go();

	if (send(c1, "\001", 1, 0) != 1 || send(c2, "\002", 1, 0) != 1)
		prog_die("the clients' send");
	/* accept() says EAGAIN rather than waiting for a connection that is not there */
	if (fcntl(l_a, F_SETFL, O_NONBLOCK) || fcntl(l_b, F_SETFL, O_NONBLOCK))
		prog_die("O_NONBLOCK");
	for (int i = 0; i < 4; i++) {
		acc[i] = accept4(l_a, (struct sockaddr *)&sa, &(socklen_t){sizeof(sa)},
				 SOCK_NONBLOCK);
		CHECK(acc[i] >= 0, "A: connection %d is accepted (%s)", i + 1,
		      acc[i] < 0 ? strerror(errno) : "ok");
		if (acc[i] < 0)
			return prog_done();
	}
	if (prog_sabotage()) { /* swap two: the order check must see it */
		int t = acc[0];

		acc[0] = acc[1];
		acc[1] = t;
	}
	for (int i = 0; i < 4; i++) {
		int got = first_byte(acc[i]);

		CHECK(got == (order[i] == 3 ? -1 : order[i]),
		      "A: accept %d gives c%d's connection (%s %d)", i + 1, order[i],
		      got == -1 ? "EOF" : "its first byte", got);
	}
	CHECK(accept4(l_a, NULL, NULL, SOCK_NONBLOCK) < 0 && errno == EAGAIN,
	      "A: nothing more to accept");
	len = sizeof(sa);
	CHECK(!getsockname(acc[0], (struct sockaddr *)&sa, &len) && !strcmp(sa.sun_path, apath),
	      "an accepted connection has the listener's name (%s)", sa.sun_path);
	len = sizeof(sa);
	CHECK(!getpeername(acc[2], (struct sockaddr *)&sa, &len) && !strcmp(sa.sun_path, c2path),
	      "c2's connection names c2 as the peer (%s)", sa.sun_path);
	CHECK(send(acc[0], "r1", 2, 0) == 2 && first_byte(c1) == 'r' && first_byte(c1) == '1',
	      "c1 gets the accepted end's reply");
	CHECK(send(acc[1], "r5", 2, 0) == 2, "a reply to the child's c5");
	b1 = accept4(l_b, NULL, NULL, SOCK_NONBLOCK);
	CHECK(b1 >= 0, "B: the child's seqpacket connection is accepted");
	CHECK(first_byte(b1) == 4 && first_byte(b1) == 4,
	      "B: its first message (2 bytes) is one record, then the next");
	CHECK(send(b1, "r4", 2, 0) == 2, "a reply to the child's c4");
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
	      "the child's clients got their replies (status %#x)", st);
	return prog_done();
}

/* One message and its credentials (pid 0: it carries none). */
static ssize_t recv_creds(int s, char *buf, size_t size, struct ucred *cr)
{
	char cbuf[CMSG_SPACE(sizeof(*cr))];
	struct iovec iov = {buf, size - 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	ssize_t r = recvmsg(s, &mh, MSG_DONTWAIT);

	memset(cr, 0, sizeof(*cr));
	buf[r > 0 ? r : 0] = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
			memcpy(cr, CMSG_DATA(c), sizeof(*cr));
	return r;
}

/* A child that sends msg on s as uid/gid (-1: root's) and exits: a sender gone since. */
static pid_t send_as_child(int s, const char *msg, int id, int stream)
{
	int p[2];
	pid_t c;

	if (pipe(p))
		prog_die("pipe");
	c = fork();
	if (c < 0)
		prog_die("fork");
	if (c == 0) {
		if (id >= 0 && (setgroups(0, NULL) || setgid(id) || setuid(id)))
			_exit(3);
		_exit(send(s, msg, strlen(msg), 0) == (ssize_t)strlen(msg) ? 0 : 4);
	}
	close(p[0]);
	close(p[1]);
	if (waitpid(c, &(int){0}, 0) != c)
		prog_die("waitpid");
	(void)stream;
	return c;
}

/*
 * "creds": queued messages' credentials (SCM_CREDENTIALS).  Stream pair S
 * (reader passes credentials): "aaa" from us, "bbb" from a child gone since,
 * "ccc" from us: three reads, each with its writer's pid and ids.  Datagram
 * pair D: "nocred" sent while neither end passed credentials (it carries
 * none), then the reader passes them: "mine" from us, "uid1000" from a child
 * of uid and gid 1000, gone since.
 */
static int creds(void)
{
	int st[2], d[2], one = 1;
	pid_t gone_s, gone_d, me = getpid();
	struct ucred cr;
	char buf[64];
	ssize_t r;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, st) || socketpair(AF_UNIX, SOCK_DGRAM, 0, d) ||
	    setsockopt(st[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)))
		prog_die("socketpair");
	if (send(st[0], "aaa", 3, 0) != 3)
		prog_die("send");
	gone_s = send_as_child(st[0], "bbb", -1, 1);
	if (send(st[0], "ccc", 3, 0) != 3 || send(d[0], "nocred", 6, 0) != 6 ||
	    setsockopt(d[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) ||
	    send(d[0], "mine", 4, 0) != 4)
		prog_die("send");
	gone_d = send_as_child(d[0], "uid1000", 1000, 0);
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		me++;

	r = recv_creds(st[1], buf, sizeof(buf), &cr);
	CHECK(r == 3 && !strcmp(buf, "aaa") && cr.pid == me && cr.uid == 0 && cr.gid == 0,
	      "S: 'aaa' alone, from us (%zd '%s' pid %d uid %u gid %u)", r, buf, cr.pid, cr.uid,
	      cr.gid);
	r = recv_creds(st[1], buf, sizeof(buf), &cr);
	CHECK(r == 3 && !strcmp(buf, "bbb") && cr.pid == gone_s && cr.uid == 0,
	      "S: 'bbb' alone, from the child gone since, pid %d (%zd '%s' pid %d uid %u)", gone_s,
	      r, buf, cr.pid, cr.uid);
	r = recv_creds(st[1], buf, sizeof(buf), &cr);
	CHECK(r == 3 && !strcmp(buf, "ccc") && cr.pid == me,
	      "S: 'ccc' from us again (%zd '%s' pid %d)", r, buf, cr.pid);
	r = recv_creds(d[1], buf, sizeof(buf), &cr);
	CHECK(r == 6 && !strcmp(buf, "nocred") && cr.pid == 0 && cr.uid == 65534,
	      "D: 'nocred' carries no credentials (pid %d uid %u)", cr.pid, cr.uid);
	r = recv_creds(d[1], buf, sizeof(buf), &cr);
	CHECK(r == 4 && !strcmp(buf, "mine") && cr.pid == me && cr.uid == 0,
	      "D: 'mine' from us (pid %d uid %u)", cr.pid, cr.uid);
	r = recv_creds(d[1], buf, sizeof(buf), &cr);
	CHECK(r == 7 && !strcmp(buf, "uid1000") && cr.pid == gone_d && cr.uid == 1000 &&
		      cr.gid == 1000,
	      "D: 'uid1000' from the child gone since, pid %d, uid and gid 1000 (pid %d uid %u "
	      "gid %u)",
	      gone_d, cr.pid, cr.uid, cr.gid);
	CHECK(kill(gone_s, 0) < 0 && errno == ESRCH, "the gone senders' pids are free again");
	return prog_done();
}

/* A process outside the tree (setsid, not our child): listener or client on path. */
static void outside(const char *role, const char *path)
{
	pid_t m = fork();

	if (m < 0)
		prog_die("fork");
	if (m == 0) {
		if (fork() == 0) {
			setsid();
			execl("/proc/self/exe", "unix", prog_dir, role, path, (char *)NULL);
			_exit(127);
		}
		_exit(0);
	}
	waitpid(m, NULL, 0);
}

/* The outside process: "outlisten" accepts after go and sends "z"; "outclient" sends "x". */
static int outside_main(const char *role, const char *path)
{
	int s;

	alarm(120);
	if (!strcmp(role, "outlisten")) {
		s = listener_at(SOCK_STREAM, path, 0, 4);
		prog_write_atomic("out.ready", "1\n");
		prog_wait_go();
		s = accept(s, NULL, NULL);
		return s < 0 || send(s, "z", 1, 0) != 1;
	}
	s = client_of(SOCK_STREAM, path, 0, NULL);
	prog_write_atomic("out.ready", "1\n");
	prog_wait_go();
	return send(s, "x", 1, 0) != 1;
}

static int refused_modes(const char *mode)
{
	char path[4096];
	int l = -1, c = -1, a;

	snprintf(path, sizeof(path), "%s", prog_path("r.sock"));
	if (!strcmp(mode, "listenout")) {
		outside("outlisten", path);
		wait_for_file("out.ready");
		c = client_of(SOCK_STREAM, path, 0, NULL);
	} else {
		l = listener_at(SOCK_STREAM, path, 0, 4);
		if (!strcmp(mode, "pendingout")) {
			outside("outclient", path);
			wait_for_file("out.ready");
		} else {
			c = client_of(SOCK_STREAM, path, 0, NULL);
			if (send(c, "early", 5, 0) != 5)
				prog_die("send");
		}
	}
	prog_ready();
	prog_wait_go();
	if (c >= 0 && l < 0) {
		CHECK(first_byte(c) == (prog_sabotage() ? 'y' : 'z'),
		      "after the refused dump the outside listener accepts us and we get its 'z'");
		return prog_done();
	}
	if (fcntl(l, F_SETFL, O_NONBLOCK))
		prog_die("O_NONBLOCK");
	for (int i = 0; i < 500 && (a = accept4(l, NULL, NULL, SOCK_NONBLOCK)) < 0; i++)
		usleep(10 * 1000);
	CHECK(a >= 0, "after the refused dump the connection is accepted");
	if (c >= 0) {
		char buf[8] = "";

		for (int i = 0; i < 100 && recv(a, buf, 5, MSG_DONTWAIT) < 0; i++)
			usleep(10 * 1000);
		CHECK(!memcmp(buf, prog_sabotage() ? "early!" : "early", 5),
		      "with the data sent before the dump (%.5s)", buf);
	} else {
		CHECK(first_byte(a) == (prog_sabotage() ? 'y' : 'x'),
		      "the outside client's 'x' arrives");
	}
	return prog_done();
}

int main(int argc, char **argv)
{
	int a = prog_init(argc, argv);
	const char *mode = a < argc ? argv[a] : "rights";

	if (!strcmp(mode, "longq"))
		return longq();
	if (!strcmp(mode, "pending"))
		return pending();
	if (!strcmp(mode, "creds"))
		return creds();
	if (!strcmp(mode, "outlisten") || !strcmp(mode, "outclient"))
		return a + 1 < argc ? outside_main(mode, argv[a + 1]) : 2;
	if (!strcmp(mode, "pendingdata") || !strcmp(mode, "pendingout") ||
	    !strcmp(mode, "listenout"))
		return refused_modes(mode);
	return rights();
}
