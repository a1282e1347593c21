// SPDX-License-Identifier: MIT
/*
 * POSIX message queues: queue A (named, mode 0640, maxmsg 8, msgsize 64)
 * with five messages of mixed priorities, held by two descriptions of ours
 * (O_RDWR, and O_WRONLY|O_NONBLOCK) and a third of a child's; queue B,
 * unlinked while open, with one message.  After the restore the attributes
 * (mq_getattr: flags, maxmsg, msgsize, curmsgs), modes and links must be as
 * before, mq_receive must give the messages in the same order with their
 * priorities, and a message sent through our O_WRONLY description must reach
 * the child through its own.  MQ_NOTIFY=1: B has an mq_notify registration
 * (which amber must refuse).  DIR/mq-names lists the names for the test.
 */
#include <mqueue.h>
#include <signal.h>
#include <sys/wait.h>

#include "prog.h"

#define MAXMSG	8
#define MSGSIZE 64

static const struct {
	unsigned prio;
	const char *text;
} sent[] = {{1, "one"}, {5, "five-a"}, {0, "zero"}, {5, "five-b"}, {3, "three"}};
/* what mq_receive gives: highest priority first, oldest first within one */
static const int order[] = {1, 3, 4, 0, 2};

static char name_a[64], name_b[64];

static int link_of(int fd, char *buf, size_t size)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, buf, size - 1);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return 0;
}

struct state {
	struct mq_attr a;
	struct stat st;
	char link[128];
};

static void state_of(int fd, struct state *s)
{
	memset(s, 0, sizeof(*s));
	if (mq_getattr(fd, &s->a) || fstat(fd, &s->st) || link_of(fd, s->link, sizeof(s->link)))
		prog_die("state of fd %d", fd);
}

static void check_same(const char *what, const struct state *b, const struct state *a)
{
	CHECK(a->a.mq_flags == b->a.mq_flags && a->a.mq_maxmsg == b->a.mq_maxmsg &&
		      a->a.mq_msgsize == b->a.mq_msgsize && a->a.mq_curmsgs == b->a.mq_curmsgs,
	      "%s: flags %#lx maxmsg %ld msgsize %ld curmsgs %ld (before %#lx %ld %ld %ld)", what,
	      a->a.mq_flags, a->a.mq_maxmsg, a->a.mq_msgsize, a->a.mq_curmsgs, b->a.mq_flags,
	      b->a.mq_maxmsg, b->a.mq_msgsize, b->a.mq_curmsgs);
	CHECK(a->st.st_mode == b->st.st_mode && a->st.st_uid == b->st.st_uid &&
		      a->st.st_gid == b->st.st_gid && a->st.st_nlink == b->st.st_nlink,
	      "%s: mode %o, owner %u/%u, %lu links as before", what, a->st.st_mode, a->st.st_uid,
	      a->st.st_gid, (unsigned long)a->st.st_nlink);
	CHECK(!strcmp(a->link, b->link), "%s: link %s (before %s)", what, a->link, b->link);
}

static int child(void)
{
	struct timespec ts;
	char buf[MSGSIZE + 1];
	unsigned prio = 0;
	ssize_t n;
	int fd = mq_open(name_a, O_RDONLY);

	if (fd < 0)
		return 2;
	if (write(10, "r", 1) != 1) /* ready: the parent may go on */
		return 2;
	/* until the parent has read its messages and sent ours (fd 11) */
	if (read(11, buf, 1) != 1)
		return 2;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	n = mq_timedreceive(fd, buf, sizeof(buf), &prio, &ts);
	return n == 6 && prio == 7 && !memcmp(buf, "later", 6) ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct mq_attr attr = {.mq_maxmsg = MAXMSG, .mq_msgsize = MSGSIZE};
	struct state before[3], after[3];
	int a_rw, a_wo, b, sync[2], go2[2], status;
	char buf[MSGSIZE + 1], c;
	unsigned prio;
	ssize_t n;
	pid_t kid;
	FILE *f;

	prog_init(argc, argv);
	snprintf(name_a, sizeof(name_a), "/amber-mq-%d-a", (int)getpid());
	snprintf(name_b, sizeof(name_b), "/amber-mq-%d-b", (int)getpid());
	f = fopen(prog_path("mq-names"), "w");
	if (!f)
		prog_die("mq-names");
	fprintf(f, "%s %s\n", name_a, name_b);
	fclose(f);
	umask(0);
	a_rw = mq_open(name_a, O_RDWR | O_CREAT | O_EXCL, 0640, &attr);
	a_wo = mq_open(name_a, O_WRONLY | O_NONBLOCK);
	attr.mq_maxmsg = 2;
	b = mq_open(name_b, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
	if (a_rw < 0 || a_wo < 0 || b < 0)
		prog_die("mq_open");
	for (size_t i = 0; i < sizeof(sent) / sizeof(sent[0]); i++)
		if (mq_send(a_rw, sent[i].text, strlen(sent[i].text) + 1, sent[i].prio))
			prog_die("mq_send");
	if (mq_send(b, "in the unlinked one", 20, 2) || mq_unlink(name_b))
		prog_die("mq_send/mq_unlink");
	if (getenv("MQ_NOTIFY")) {
		struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};

		signal(SIGUSR1, SIG_IGN);
		if (mq_receive(b, buf, sizeof(buf), &prio) < 0 || mq_notify(b, &sev))
			prog_die("mq_notify");
	}
	if (pipe(sync) || dup2(sync[1], 10) != 10 || pipe(go2) || dup2(go2[0], 11) != 11)
		prog_die("pipe");
	kid = fork();
	if (kid < 0)
		prog_die("fork");
	if (!kid)
		_exit(child());
	if (read(sync[0], &c, 1) != 1)
		prog_die("child not ready");
	state_of(a_rw, &before[0]);
	state_of(a_wo, &before[1]);
	state_of(b, &before[2]);
	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		mq_send(a_wo, "extra", 6, 9);
	state_of(a_rw, &after[0]);
	state_of(a_wo, &after[1]);
	state_of(b, &after[2]);
	check_same("A, O_RDWR", &before[0], &after[0]);
	check_same("A, O_WRONLY|O_NONBLOCK", &before[1], &after[1]);
	check_same("B (unlinked)", &before[2], &after[2]);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		int k = order[i];

		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 5;
		prio = 99;
		n = mq_timedreceive(a_rw, buf, sizeof(buf), &prio, &ts);
		CHECK(n == (ssize_t)strlen(sent[k].text) + 1 && prio == sent[k].prio &&
			      !strcmp(buf, sent[k].text),
		      "A: message %zu is \"%s\" of priority %u (got %zd bytes, priority %u)", i + 1,
		      sent[k].text, sent[k].prio, n, prio);
	}
	if (!getenv("MQ_NOTIFY")) {
		prio = 0;
		n = mq_receive(b, buf, sizeof(buf), &prio); /* (one is there: no wait) */
		CHECK(n == 20 && prio == 2 && !strcmp(buf, "in the unlinked one"),
		      "B: its message, priority %u", prio);
	}
	status = mq_send(a_wo, "later", 6, 7);
	CHECK(status == 0, "a message into A through the O_WRONLY fd");
	if (write(go2[1], "g", 1) != 1)
		prog_die("write");
	status = -1;
	waitpid(kid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child got it through its own description (status %#x)", status);
	mq_unlink(name_a);
	return prog_done();
}
