// SPDX-License-Identifier: MIT
/*
 * The init of a container made by `unshare --fork --pid --mount-proc --net
 * --ipc --uts` (tests/e2e/tests.d/container.sh), pid 1 there:
 *   container DIR CTR
 * DIR is the test's work dir (the host's, seen through the copied mount
 * table), CTR a tmpfs mounted inside the container.  The init forks
 *  - a counter: every 20 ms its count in memory goes up by one and is
 *    written to CTR/count;
 *  - a server on 127.0.0.1:47500 of the container's network namespace:
 *    each "ping" line is answered "pong N", N counting every answer;
 *  - a client holding one connection to it, pinging every 50 ms, the last
 *    answer's N in CTR/pong; a failed connection ends it (CTR/client.err);
 *  - an interactive sh (/bin/sh), stdin the FIFO DIR/sh.in (opened for
 *    reading and writing: no end of file between the test's commands),
 *    stdout and stderr DIR/sh.out;
 * and reaps; a child that ends is recorded in DIR/died.  DIR/ready is
 * written once the client has its first answer.  Ports 47500.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "prog.h"

#define PORT 47500

static char ctr[2048];

static void ctr_write(const char *name, const char *content)
{
	char tmp[4096], dst[4096];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", ctr, name);
	snprintf(dst, sizeof(dst), "%s/%s", ctr, name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		prog_die("open %s", tmp);
	if (write(fd, content, strlen(content)) != (ssize_t)strlen(content))
		prog_die("write %s", tmp);
	close(fd);
	if (rename(tmp, dst))
		prog_die("rename %s", tmp);
}

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void __attribute__((noreturn)) counter(void)
{
	unsigned long n = 0;
	char buf[32];

	for (;;) {
		snprintf(buf, sizeof(buf), "%lu\n", ++n);
		ctr_write("count", buf);
		msleep(20);
	}
}

static int listener(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		prog_die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16))
		prog_die("bind/listen 127.0.0.1:%d", PORT);
	return fd;
}

/* One poll loop: the listener and up to 15 connections, a line at a time. */
static void __attribute__((noreturn)) server(int lfd)
{
	struct pollfd p[16] = {{.fd = lfd, .events = POLLIN}};
	unsigned long answers = 0;
	int n = 1;

	for (;;) {
		if (poll(p, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			prog_die("server: poll");
		}
		if (p[0].revents & POLLIN) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (c >= 0 && n < 16)
				p[n++] = (struct pollfd){.fd = c, .events = POLLIN};
			else if (c >= 0)
				close(c);
		}
		for (int i = 1; i < n; i++) {
			char buf[256], out[64];
			ssize_t r;

			if (!p[i].revents)
				continue;
			r = read(p[i].fd, buf, sizeof(buf) - 1);
			if (r <= 0) {
				close(p[i].fd);
				p[i--] = p[--n];
				continue;
			}
			buf[r] = 0;
			/* each "ping" in what came is answered */
			for (char *s = buf; (s = strstr(s, "ping")); s += 4) {
				int len = snprintf(out, sizeof(out), "pong %lu\n", ++answers);

				if (write(p[i].fd, out, len) != len)
					break;
			}
		}
	}
}

static void __attribute__((noreturn)) client(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[64], err[128];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		prog_die("client: connect");
	for (;;) {
		ssize_t r;
		char *nl;

		if (write(fd, "ping\n", 5) != 5) {
			snprintf(err, sizeof(err), "write: %s\n", strerror(errno));
			break;
		}
		r = read(fd, buf, sizeof(buf) - 1);
		if (r <= 0) {
			snprintf(err, sizeof(err), "read: %s\n",
				 r ? strerror(errno) : "end of file");
			break;
		}
		buf[r] = 0;
		nl = strchr(buf, '\n');
		if (strncmp(buf, "pong ", 5) || !nl) {
			snprintf(err, sizeof(err), "unexpected answer '%s'\n", buf);
			break;
		}
		nl[1] = 0;
		ctr_write("pong", buf + 5);
		msleep(50);
	}
	ctr_write("client.err", err);
	exit(1);
}

static void __attribute__((noreturn)) shell(void)
{
	int in = open(prog_path("sh.in"), O_RDWR);
	int out = open(prog_path("sh.out"), O_WRONLY | O_CREAT | O_APPEND, 0644);

	if (in < 0 || out < 0)
		prog_die("shell: open sh.in/sh.out");
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		prog_die("shell: dup2");
	close(in);
	close(out);
	execl("/bin/sh", "sh", (char *)NULL);
	prog_die("exec /bin/sh");
}

static pid_t spawn(void (*fn)(void))
{
	pid_t p = fork();

	if (p < 0)
		prog_die("fork");
	if (!p)
		fn();
	return p;
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv), lfd;
	char path[4096], buf[64];
	sigset_t all;

	if (argc <= first)
		prog_die("usage: container DIR CTR");
	snprintf(ctr, sizeof(ctr), "%s", argv[first]);
	if (getpid() != 1)
		prog_die("not the init of a pid namespace (pid %d)", getpid());
	/* the listener exists before the client connects */
	lfd = listener();
	if (!fork())
		server(lfd);
	close(lfd);
	spawn(counter);
	spawn(client);
	spawn(shell);
	snprintf(path, sizeof(path), "%s/pong", ctr);
	for (int i = 0; prog_read_file(path, buf, sizeof(buf)) <= 0; i++) {
		if (i > 500)
			prog_die("no answer from the server");
		msleep(10);
	}
	/* an init gets only the signals it handles: none, but SIGKILL from above */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	prog_ready();
	for (;;) {
		int st;
		pid_t p = wait(&st);
		FILE *f;

		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			prog_die("wait");
		f = fopen(prog_path("died"), "a");
		if (f) {
			fprintf(f, "pid %d status 0x%x\n", p, st);
			fclose(f);
		}
	}
}
