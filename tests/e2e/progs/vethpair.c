// SPDX-License-Identifier: MIT
/*
 * vethpair: a process in a network namespace (the test's unshare --net) and
 * its child in another one of its own (unshare), which the test joins with
 * a veth pair (10.79.0.1/24 in the parent's, 10.79.0.2/24 in the child's)
 * before it writes "netup"; the parent's namespace has a second pair with
 * both ends in it.  The child listens on 10.79.0.2:47480, the parent
 * connects through the pair; data is left queued both ways.  After the
 * restore: the connection carries the queued data and new data both ways,
 * and a new connection goes through the pair.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "prog.h"

static const char to_srv[] = "queued for the child", to_cli[] = "queued for the parent";

static struct sockaddr_in at(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static int read_all(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n < len) {
		ssize_t r = recv(fd, buf + n, len - n, 0);

		if (r <= 0)
			return -1;
		n += (size_t)r;
	}
	return 0;
}

static void wait_file(const char *name)
{
	for (int i = 0; i < 3000 && access(prog_path(name), F_OK); i++)
		usleep(10 * 1000);
	if (access(prog_path(name), F_OK))
		prog_die("no %s", name);
}

/* The child: the server, in a namespace of its own. */
static int child(int lsn)
{
	char buf[64];
	int srv = accept(lsn, NULL, NULL), s2;
	ssize_t n;

	if (srv < 0 || send(srv, to_cli, sizeof(to_cli), 0) != sizeof(to_cli))
		prog_die("child: accept or send");
	prog_write_atomic("seen.child", "1\n");
	prog_wait_go();
	CHECK(!read_all(srv, buf, sizeof(to_srv)) && !memcmp(buf, to_srv, sizeof(to_srv)),
	      "child: it reads what the parent had queued");
	errno = 0;
	n = send(srv, "pong", 4, MSG_NOSIGNAL);
	CHECK(n == 4, "child: new data goes to the parent (%zd: %s)", n, strerror(errno));
	CHECK((s2 = accept(lsn, NULL, NULL)) >= 0 && read_all(s2, buf, 3) == 0 &&
		      !memcmp(buf, "new", 3),
	      "child: a new connection comes through the pair");
	return prog_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in srv_at = at("10.79.0.2", 47480);
	char buf[64], pid[32], want[sizeof(to_cli)];
	int one = 1, lsn, cli, c2, st, go[2];
	pid_t c;

	prog_init(argc, argv);
	if (pipe(go))
		prog_die("pipe");
	c = fork();
	if (c < 0)
		prog_die("fork");
	if (c == 0) {
		if (unshare(CLONE_NEWNET))
			prog_die("child: unshare");
		close(go[0]);
		wait_file("netup");
		lsn = socket(AF_INET, SOCK_STREAM, 0);
		if (lsn < 0 || setsockopt(lsn, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
		    bind(lsn, (struct sockaddr *)&srv_at, sizeof(srv_at)) || listen(lsn, 4))
			prog_die("child: listen on 10.79.0.2:47480");
		if (write(go[1], "l", 1) != 1)
			prog_die("child: write");
		fflush(NULL);
		_exit(child(lsn));
	}
	close(go[1]);
	/* the child is in its namespace once its ns link differs from ours */
	for (int i = 0; i < 3000; i++) {
		char a[64] = "", b[64] = "", p[64];

		snprintf(p, sizeof(p), "/proc/%d/ns/net", c);
		if (readlink(p, a, sizeof(a) - 1) > 0 &&
		    readlink("/proc/self/ns/net", b, sizeof(b) - 1) > 0 && strcmp(a, b))
			break;
		usleep(10 * 1000);
	}
	snprintf(pid, sizeof(pid), "%d\n", c);
	prog_write_atomic("child.pid", pid);
	prog_ready();
	if (read(go[0], buf, 1) != 1)
		prog_die("the child did not listen");
	cli = socket(AF_INET, SOCK_STREAM, 0);
	if (cli < 0 || connect(cli, (struct sockaddr *)&srv_at, sizeof(srv_at)) ||
	    send(cli, to_srv, sizeof(to_srv), 0) != sizeof(to_srv))
		prog_die("connect to 10.79.0.2:47480 through the pair");
	usleep(100 * 1000); /* the data is in the receive queues */
	prog_write_atomic("seen", "1\n");
	prog_wait_go();
	memcpy(want, to_cli, sizeof(to_cli));
	if (prog_sabotage())
		want[0] ^= 1;
	CHECK(!read_all(cli, buf, sizeof(to_cli)) && !memcmp(buf, want, sizeof(to_cli)),
	      "it reads what the child had queued");
	CHECK(!read_all(cli, buf, 4) && !memcmp(buf, "pong", 4), "new data comes from the child");
	c2 = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c2 >= 0 && !connect(c2, (struct sockaddr *)&srv_at, sizeof(srv_at)) &&
		      send(c2, "new", 3, 0) == 3,
	      "a new connection goes through the pair");
	CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st),
	      "the child passed its checks (status %#x)", st);
	return prog_done();
}
