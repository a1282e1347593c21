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
 */
#include <stddef.h>
#include <sys/eventfd.h>
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

int main(int argc, char **argv)
{
	int a = prog_init(argc, argv);
	const char *mode = a < argc ? argv[a] : "rights";

	if (!strcmp(mode, "longq"))
		return longq();
	return rights();
}
