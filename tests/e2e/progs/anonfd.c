// SPDX-License-Identifier: MIT
/*
 * anonfd: eventfd, epoll, signalfd, timerfd and inotify.
 *
 *   fd 30  eventfd, counter 0x123456789 (more than 32 bits), O_NONBLOCK
 *   fd 31  eventfd, EFD_SEMAPHORE, counter 3
 *   fd 32  epoll watching fd 40 (eventfd, counter 7, ready), fd 41 (pipe with 5 bytes,
 *          ready) and fd 43 (empty pipe, not ready), each with its own data
 *   fd 33  signalfd for SIGUSR1 and SIGUSR2 (both blocked); SIGUSR1 pending, sent with
 *          sigqueue() and the value 4242
 *   fd 34  timerfd CLOCK_MONOTONIC, one-shot, 5 s
 *   fd 35  timerfd CLOCK_BOOTTIME, expired once (unread), then every hour
 *   fd 36  timerfd CLOCK_REALTIME, TFD_TIMER_ABSTIME, a wall-clock deadline 30 s ahead
 *   fd 37  inotify: wd 1 removed, wd 2 on the dir wdir (IN_CREATE), wd 3 on the file
 *          watched.txt (IN_MODIFY)
 *   fd 39  epoll watching fd 45, an eventfd that only the child (below) still has
 *
 * After restore: the counters read back (semaphore: one by one); epoll_wait reports
 * exactly the ready fds with their data, follows new readiness, and the items answer to
 * EPOLL_CTL_MOD/DEL under the original fd numbers; the pending signal is read from the
 * signalfd with its value, and the mask still covers SIGUSR2; the one-shot timer has no
 * more time left than before the dump (and not much less) and fires; the periodic one
 * has exactly its one unread expiration and an hour's interval; the absolute one keeps
 * its wall-clock deadline; a write and a create done after "go" come as inotify events
 * with wds 3 and 2, and the next watch gets wd 4.
 *
 * A child process shares all these descriptions, but has closed the fds of the epoll's
 * targets (40-44): the epoll's items must still come back, under the parent's fd numbers,
 * whichever of the two processes amber describes the epoll from.  The other way round,
 * epoll fd 39 (shared) watches fd 45, an eventfd that only the child still has.
 *
 * With the argument "stale", fd 38 is also an epoll watching a file through fd 46 that
 * was then closed (the file lives on as fd 40): it must come back watching it.
 */
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#include "prog.h"

#define EFD_BIG	    30
#define EFD_SEM	    31
#define EPFD	    32
#define SFD	    33
#define TFD_ONE	    34
#define TFD_PER	    35
#define TFD_ABS	    36
#define INFD	    37
#define EPFD_STALE  38
#define EPFD_CHILD  39 /* watches fd 45, which only the child has */
#define EP_CHILD    45
#define EP_EFD	    40
#define EP_PA	    41 /* pipe A read end (42: its write end) */
#define EP_PB	    43 /* pipe B read end (44: its write end) */
#define BIG	    0x123456789ull
#define D_EFD	    0xe7e7e7e7e7e7e7e7ull
#define D_PA	    0x5151ull
#define D_PB	    0x5252ull
#define D_MOD	    0x7777ull
#define D_CHILD	    0x4545ull
#define NSEC	    1000000000ll
#define ONE_SHOT_NS (5 * NSEC)

static void at(int fd, int want)
{
	if (fd < 0)
		prog_die("creating fd %d", want);
	if (fd != want) {
		if (dup3(fd, want, fcntl(fd, F_GETFD) & FD_CLOEXEC ? O_CLOEXEC : 0) != want)
			prog_die("dup3 %d -> %d", fd, want);
		close(fd);
	}
}

static long long ns_of(const struct timespec *ts)
{
	return ts->tv_sec * NSEC + ts->tv_nsec;
}

static long long now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ns_of(&ts);
}

static void ep_add(int ep, int fd, unsigned events, uint64_t data)
{
	struct epoll_event ev = {.events = events, .data.u64 = data};

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		prog_die("EPOLL_CTL_ADD fd %d", fd);
}

/* Bit mask of which of the datas (up to 8) epoll_wait reported, with EPOLLIN; -1 if odd. */
static int ep_ready(const uint64_t *datas, int n)
{
	struct epoll_event ev[16];
	int got, mask = 0;

	got = epoll_wait(EPFD, ev, 16, 0);
	if (got < 0)
		return -1;
	for (int i = 0; i < got; i++) {
		int k;

		for (k = 0; k < n && datas[k] != ev[i].data.u64; k++)
			;
		if (k == n || !(ev[i].events & EPOLLIN) || (mask & (1 << k))) {
			fprintf(stderr, "  epoll_wait: unexpected event 0x%x data 0x%llx\n",
				ev[i].events, (unsigned long long)ev[i].data.u64);
			return -1;
		}
		mask |= 1 << k;
	}
	return mask;
}

/* "tfd" numbers listed in the fdinfo of the epoll fd, as a bit mask of fd - 40 */
static unsigned ep_tfds(void)
{
	char buf[4096], path[64];
	unsigned mask = 0;
	char *p;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", EPFD);
	if (prog_read_file(path, buf, sizeof(buf)) < 0)
		return 0;
	for (p = strstr(buf, "tfd:"); p; p = strstr(p + 1, "tfd:")) {
		int tfd = atoi(p + 4);

		mask |= (tfd >= 40 && tfd < 72) ? 1u << (tfd - 40) : 1u << 31;
	}
	return mask;
}

static int read_u64(int fd, uint64_t *v)
{
	return read(fd, v, sizeof(*v)) == sizeof(*v) ? 0 : -1;
}

/* The next inotify event within ms; its name in name (may be empty). */
static int next_event(struct inotify_event *out, char *name, size_t len, int ms)
{
	static char buf[4096] __attribute__((aligned(8)));
	static ssize_t have, off;
	struct pollfd pfd = {.fd = INFD, .events = POLLIN};
	struct inotify_event *e;

	if (off >= have) {
		if (poll(&pfd, 1, ms) != 1)
			return -1;
		have = read(INFD, buf, sizeof(buf));
		off = 0;
		if (have <= 0)
			return -1;
	}
	e = (struct inotify_event *)(buf + off);
	*out = *e;
	snprintf(name, len, "%s", e->len ? e->name : "");
	off += sizeof(*e) + e->len;
	return 0;
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	int stale = argc > first && !strcmp(argv[first], "stale");
	struct itimerspec its = {0};
	long long r0, t_ready, deadline;
	struct signalfd_siginfo si;
	struct inotify_event ev;
	struct pollfd pfd;
	char name[64];
	uint64_t v = 0;
	sigset_t ss;
	int p[2], wd, n, fd;
	pid_t child;

	syscall(SYS_close_range, 3, ~0U, 0);
	if (chdir(prog_dir))
		prog_die("chdir %s", prog_dir);

	/* eventfds */
	at(eventfd(0, EFD_NONBLOCK), EFD_BIG);
	v = BIG;
	if (write(EFD_BIG, &v, sizeof(v)) != sizeof(v))
		prog_die("write eventfd");
	at(eventfd(3, EFD_NONBLOCK | EFD_SEMAPHORE), EFD_SEM);

	/* epoll and its targets */
	at(epoll_create1(EPOLL_CLOEXEC), EPFD);
	at(eventfd(7, EFD_NONBLOCK), EP_EFD);
	if (pipe2(p, O_NONBLOCK))
		prog_die("pipe A");
	at(p[0], EP_PA);
	at(p[1], EP_PA + 1);
	if (write(EP_PA + 1, "hello", 5) != 5)
		prog_die("write pipe A");
	if (pipe2(p, O_NONBLOCK))
		prog_die("pipe B");
	at(p[0], EP_PB);
	at(p[1], EP_PB + 1);
	ep_add(EPFD, EP_EFD, EPOLLIN, D_EFD);
	ep_add(EPFD, EP_PA, EPOLLIN, D_PA);
	ep_add(EPFD, EP_PB, EPOLLIN, D_PB);
	if (stale) {
		at(epoll_create1(0), EPFD_STALE);
		at(dup(EP_EFD), 46);
		ep_add(EPFD_STALE, 46, EPOLLIN, 1);
		close(46);
	}

	/* signalfd with a pending, queued signal */
	sigemptyset(&ss);
	sigaddset(&ss, SIGUSR1);
	sigaddset(&ss, SIGUSR2);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	at(signalfd(-1, &ss, SFD_NONBLOCK), SFD);
	if (sigqueue(getpid(), SIGUSR1, (union sigval){.sival_int = 4242}))
		prog_die("sigqueue");

	/* timerfds */
	at(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK), TFD_ONE);
	its.it_value.tv_sec = ONE_SHOT_NS / NSEC;
	if (timerfd_settime(TFD_ONE, 0, &its, NULL))
		prog_die("timerfd_settime one-shot");
	at(timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK), TFD_PER);
	its.it_value = (struct timespec){0, 10 * 1000 * 1000};
	its.it_interval = (struct timespec){3600, 0};
	if (timerfd_settime(TFD_PER, 0, &its, NULL))
		prog_die("timerfd_settime periodic");
	pfd = (struct pollfd){.fd = TFD_PER, .events = POLLIN};
	if (poll(&pfd, 1, 2000) != 1)
		prog_die("the periodic timerfd did not expire");
	at(timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK), TFD_ABS);
	deadline = now_ns(CLOCK_REALTIME) + 30 * NSEC;
	its.it_value = (struct timespec){deadline / NSEC, deadline % NSEC};
	its.it_interval = (struct timespec){0, 0};
	if (timerfd_settime(TFD_ABS, TFD_TIMER_ABSTIME, &its, NULL))
		prog_die("timerfd_settime absolute");

	/* inotify: wd 1 gone, 2 on a dir, 3 on a file; its queue drained */
	if (mkdir("wdir", 0755))
		prog_die("mkdir wdir");
	prog_write_atomic("gone.txt", "x");
	prog_write_atomic("watched.txt", "before\n");
	at(inotify_init1(IN_NONBLOCK), INFD);
	if (inotify_add_watch(INFD, "gone.txt", IN_MODIFY) != 1 ||
	    inotify_add_watch(INFD, "wdir", IN_CREATE) != 2 ||
	    inotify_add_watch(INFD, "watched.txt", IN_MODIFY) != 3 || inotify_rm_watch(INFD, 1))
		prog_die("inotify watches");
	while (next_event(&ev, name, sizeof(name), 0) == 0)
		;

	/* A child shares all of these, but not the fds of the epoll's targets. */
	at(epoll_create1(0), EPFD_CHILD);
	at(eventfd(1, EFD_NONBLOCK), EP_CHILD);
	ep_add(EPFD_CHILD, EP_CHILD, EPOLLIN, D_CHILD);
	child = fork();
	if (child < 0)
		prog_die("fork");
	if (child == 0) {
		char info[4096];

		for (fd = EP_EFD; fd <= EP_PB + 1; fd++)
			close(fd);
		prog_wait_go();
		snprintf(name, sizeof(name), "/proc/self/fdinfo/%d", EPFD_CHILD);
		n = fcntl(EPFD, F_GETFD) >= 0 && fcntl(INFD, F_GETFD) >= 0 &&
		    fcntl(EP_EFD, F_GETFD) < 0 && fcntl(EP_CHILD, F_GETFD) >= 0 &&
		    prog_read_file(name, info, sizeof(info)) > 0 && strstr(info, "tfd:       45 ");
		/* fd 45 keeps the item alive until the parent has seen it */
		for (fd = 0; fd < 3000 && access(prog_path("seen45"), F_OK); fd++)
			usleep(10000);
		_exit(n ? 0 : 1);
	}
	close(EP_CHILD);

	if (timerfd_gettime(TFD_ONE, &its))
		prog_die("timerfd_gettime");
	r0 = ns_of(&its.it_value);
	t_ready = now_ns(CLOCK_MONOTONIC);
	prog_ready();
	prog_wait_go();

	if (prog_sabotage()) {
		v = 1;
		if (write(EFD_BIG, &v, sizeof(v)) != sizeof(v))
			prog_die("sabotage");
	}

	if (stale) {
		struct epoll_event e[4];

		n = epoll_wait(EPFD_STALE, e, 4, 0);
		CHECK(n == 1 && e[0].events == EPOLLIN && e[0].data.u64 == 1,
		      "epoll fd 38: its item added as fd 46 (closed; the file is fd 40) reports "
		      "the eventfd ready (%d events)",
		      n);
	}

	/* eventfd */
	v = 0;
	n = read_u64(EFD_BIG, &v);
	CHECK(n == 0 && v == BIG, "eventfd counter 0x%llx (want 0x%llx)", (unsigned long long)v,
	      BIG);
	CHECK(read_u64(EFD_BIG, &v) < 0 && errno == EAGAIN,
	      "eventfd empty after the read, and non-blocking");
	for (n = 0; n < 5 && read_u64(EFD_SEM, &v) == 0 && v == 1; n++)
		;
	CHECK(n == 3, "semaphore eventfd: %d reads of 1 (want 3, then EAGAIN)", n);

	/* epoll */
	{
		const uint64_t datas[] = {D_EFD, D_PA, D_PB, D_MOD};
		struct epoll_event e = {.events = EPOLLIN, .data.u64 = D_MOD};
		unsigned tfds = ep_tfds();
		int m = ep_ready(datas, 4);

		CHECK(tfds == (1u << 0 | 1u << 1 | 1u << 3),
		      "epoll fdinfo lists tfd 40, 41, 43 (mask 0x%x, want 0xb)", tfds);
		CHECK(m == 3, "epoll_wait: eventfd and pipe A ready with their data (got 0x%x)", m);
		if (write(EP_PB + 1, "y", 1) != 1)
			prog_die("write pipe B");
		m = ep_ready(datas, 4);
		CHECK(m == 7, "epoll_wait: pipe B ready once written (got 0x%x, want 0x7)", m);
		n = epoll_ctl(EPFD, EPOLL_CTL_DEL, EP_PB, NULL) ? errno : 0;
		CHECK(n == 0, "EPOLL_CTL_DEL of fd 43 (the item has its fd number): %s",
		      strerror(n));
		n = epoll_ctl(EPFD, EPOLL_CTL_MOD, EP_EFD, &e) ? errno : 0;
		CHECK(n == 0, "EPOLL_CTL_MOD of fd 40: %s", strerror(n));
		m = ep_ready(datas, 4);
		CHECK(m == (1 << 1 | 1 << 3), "epoll_wait after DEL/MOD: pipe A, new data (0x%x)",
		      m);
	}

	/* signalfd */
	n = read(SFD, &si, sizeof(si));
	CHECK(n == sizeof(si) && si.ssi_signo == SIGUSR1 && si.ssi_int == 4242 &&
		      si.ssi_code == SI_QUEUE,
	      "signalfd: SIGUSR1 with value 4242 (got signo %u, int %d, code %d)",
	      n == sizeof(si) ? si.ssi_signo : 0, n == sizeof(si) ? si.ssi_int : 0,
	      n == sizeof(si) ? si.ssi_code : 0);
	CHECK(read(SFD, &si, sizeof(si)) < 0 && errno == EAGAIN, "signalfd: nothing else pending");
	raise(SIGUSR2);
	n = read(SFD, &si, sizeof(si));
	CHECK(n == sizeof(si) && si.ssi_signo == SIGUSR2, "signalfd mask still has SIGUSR2");

	/* timerfds */
	{
		long long elapsed = now_ns(CLOCK_MONOTONIC) - t_ready, r1, r3, want3;

		timerfd_gettime(TFD_ONE, &its);
		r1 = ns_of(&its.it_value);
		/* a loaded machine may take longer than the timer: it fired, or is due */
		CHECK(r1 <= r0 && r1 >= r0 - elapsed - NSEC / 100 && (r1 > 0 || elapsed >= r0),
		      "one-shot timerfd: %lld ms left, had %lld ms %lld ms ago", r1 / 1000000,
		      r0 / 1000000, elapsed / 1000000);
		pfd = (struct pollfd){.fd = TFD_ONE, .events = POLLIN};
		v = 0;
		n = poll(&pfd, 1, (int)(r1 / 1000000) + 2000) == 1 ? read_u64(TFD_ONE, &v) : -1;
		CHECK(n == 0 && v == 1, "one-shot timerfd fired once (%llu)",
		      (unsigned long long)v);

		v = 0;
		n = read_u64(TFD_PER, &v);
		CHECK(n == 0 && v == 1, "periodic timerfd: its 1 unread expiration (got %llu)",
		      (unsigned long long)v);
		timerfd_gettime(TFD_PER, &its);
		CHECK(its.it_interval.tv_sec == 3600 && its.it_interval.tv_nsec == 0 &&
			      ns_of(&its.it_value) <= 3600 * NSEC &&
			      ns_of(&its.it_value) > 3500 * NSEC,
		      "periodic timerfd: interval %lld s, %lld s left",
		      (long long)its.it_interval.tv_sec, (long long)its.it_value.tv_sec);

		timerfd_gettime(TFD_ABS, &its);
		r3 = ns_of(&its.it_value);
		want3 = deadline - now_ns(CLOCK_REALTIME);
		CHECK(r3 > 0 && r3 <= want3 + NSEC / 20 && r3 >= want3 - NSEC / 20,
		      "absolute timerfd: %lld ms left, deadline in %lld ms", r3 / 1000000,
		      want3 / 1000000);
	}

	/* inotify */
	CHECK(next_event(&ev, name, sizeof(name), 0) < 0, "inotify: no stray events");
	fd = open("watched.txt", O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, "after\n", 6) != 6)
		prog_die("write watched.txt");
	close(fd);
	n = next_event(&ev, name, sizeof(name), 2000);
	CHECK(n == 0 && ev.wd == 3 && (ev.mask & IN_MODIFY),
	      "inotify: IN_MODIFY with wd 3 (%d, 0x%x)", n ? -1 : ev.wd, n ? 0 : ev.mask);
	fd = open("wdir/new", O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		prog_die("create wdir/new");
	close(fd);
	n = next_event(&ev, name, sizeof(name), 2000);
	CHECK(n == 0 && ev.wd == 2 && (ev.mask & IN_CREATE) && !strcmp(name, "new"),
	      "inotify: IN_CREATE 'new' with wd 2 (%d, 0x%x, '%s')", n ? -1 : ev.wd,
	      n ? 0 : ev.mask, n ? "" : name);
	wd = inotify_add_watch(INFD, "gone.txt", IN_MODIFY);
	CHECK(wd == 4, "inotify: the next watch gets wd 4 (got %d)", wd);

	{
		struct epoll_event e[4];

		n = epoll_wait(EPFD_CHILD, e, 4, 0);
		CHECK(n == 1 && e[0].data.u64 == D_CHILD,
		      "epoll fd 39: the child's fd 45 ready, with its data (%d events)", n);
		prog_write_atomic("seen45", "");
	}
	wd = waitpid(child, &n, 0);
	CHECK(wd == child && n == 0,
	      "the child (epoll fd 32 without its targets' fds, fd 45 in epoll fd 39 under its "
	      "number): status 0x%x",
	      n);

	return prog_done();
}
