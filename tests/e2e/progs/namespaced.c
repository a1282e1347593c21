// SPDX-License-Identifier: MIT
/*
 * UTS and IPC namespaces (src/ns/ns.c).  The root stays in amber's
 * namespaces.  A unshares a UTS namespace (hostname, domainname) and, with
 * "ipc", an IPC namespace, where it sets kernel.msgmnb and makes a keyed
 * segment (filled, attached), a semaphore set and a message queue with
 * messages; A1, A's child, inherits both and the attach; C, A's sibling,
 * setns()es into A's namespaces and attaches the segment by its key; B
 * unshares a UTS namespace of its own only.  After the restore each checks
 * uname(), and in A's IPC namespace the objects' ids, contents, values and
 * messages and the sysctl; B that the key is not in its IPC namespace; the
 * root that the host's names are unchanged.  DIR/nspids lists "NAME PID"
 * for the test, which compares /proc/PID/ns.
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "prog.h"

#define KEY    0x4e5a0001
#define SHM_SZ (2 * 4096 + 123)
#define SEED   0x4e5a
#define NSEMS  3
#define MSGMNB "12345"

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

struct msg {
	long type;
	char text[32];
};

static const char *const texts[] = {"one", "two, longer", "three"};
static const unsigned short vals[NSEMS] = {7, 0, 31000};
static int with_ipc;

static void check_uts(const char *who, const char *host, const char *dom)
{
	struct utsname u;

	uname(&u);
	CHECK(!strcmp(u.nodename, host), "%s: hostname %s (want %s)", who, u.nodename, host);
	CHECK(!strcmp(u.domainname, dom), "%s: domainname %s (want %s)", who, u.domainname, dom);
}

static void set_uts(const char *host, const char *dom)
{
	if (sethostname(host, strlen(host)) || setdomainname(dom, strlen(dom)))
		prog_die("sethostname %s", host);
}

/* In A's IPC namespace: every object as A made it. */
static void check_objects(const char *who, int shmid, const char *seg, bool all)
{
	unsigned short got[NSEMS];
	char buf[64];
	struct msg m;
	int semid, msqid;
	bool ok;

	CHECK(shmget(KEY, 0, 0) == shmid, "%s: segment of key %#x has id %d", who, KEY, shmid);
	CHECK(prog_verify(seg, SHM_SZ, SEED) < 0, "%s: segment contents", who);
	if (!all)
		return;
	semid = semget(KEY, 0, 0);
	memset(got, 0xff, sizeof(got));
	ok = semid >= 0 && !semctl(semid, 0, GETALL, (union semun){.array = got}) &&
	     !memcmp(got, vals, sizeof(got));
	CHECK(ok, "%s: semaphore values %u %u %u", who, got[0], got[1], got[2]);
	msqid = msgget(KEY, 0);
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		ssize_t n = msgrcv(msqid, &m, sizeof(m.text), 0, IPC_NOWAIT);

		CHECK(n == (ssize_t)strlen(texts[i]) + 1 && m.type == (long)i + 1 &&
			      !strcmp(m.text, texts[i]),
		      "%s: message %zu (%s)", who, i, n > 0 ? m.text : "none");
	}
	prog_read_file("/proc/sys/kernel/msgmnb", buf, sizeof(buf));
	buf[strcspn(buf, "\n")] = 0;
	CHECK(!strcmp(buf, MSGMNB), "%s: kernel.msgmnb %s (want %s)", who, buf, MSGMNB);
}

static int make_objects(char **seg)
{
	int fd = open("/proc/sys/kernel/msgmnb", O_WRONLY), shmid, semid, msqid;

	if (fd < 0 || write(fd, MSGMNB, strlen(MSGMNB)) < 0)
		prog_die("kernel.msgmnb");
	close(fd);
	shmid = shmget(KEY, SHM_SZ, IPC_CREAT | IPC_EXCL | 0600);
	semid = semget(KEY, NSEMS, IPC_CREAT | IPC_EXCL | 0600);
	msqid = msgget(KEY, IPC_CREAT | IPC_EXCL | 0600);
	if (shmid < 0 || semid < 0 || msqid < 0)
		prog_die("System V objects in the new IPC namespace");
	*seg = shmat(shmid, NULL, 0);
	if (*seg == (void *)-1)
		prog_die("shmat");
	prog_fill(*seg, SHM_SZ, SEED);
	if (semctl(semid, 0, SETALL, (union semun){.array = (unsigned short *)vals}))
		prog_die("SETALL");
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct msg m = {.type = (long)i + 1};

		snprintf(m.text, sizeof(m.text), "%s", texts[i]);
		if (msgsnd(msqid, &m, strlen(texts[i]) + 1, 0))
			prog_die("msgsnd");
	}
	return shmid;
}

/* A child: set up as its role says, tell the root, wait for go, check, exit 0 or 1. */
static void __attribute__((noreturn)) kid(char role, int ready, pid_t a)
{
	int flags = CLONE_NEWUTS | (with_ipc ? CLONE_NEWIPC : 0), shmid = -1;
	const char *host = "amber-ns-a", *dom = "dom-a";
	char *seg = NULL, who[] = {role, 0};
	pid_t a1 = -1;

	if (role == 'A') {
		if (unshare(flags))
			prog_die("unshare");
		set_uts(host, dom);
		if (with_ipc)
			shmid = make_objects(&seg);
		a1 = fork();
		if (a1 < 0)
			prog_die("fork");
		if (!a1) { /* A1: A's namespaces and attach, inherited */
			close(ready);
			prog_wait_go();
			check_uts("A1", host, dom);
			if (with_ipc)
				check_objects("A1", shmid, seg, false);
			_exit(prog_failures ? 1 : 0);
		}
		dprintf(ready, "A1 %d\n", a1);
	} else if (role == 'C') { /* A's namespaces, not through a parent */
		char path[64];
		int fd;

		snprintf(path, sizeof(path), "/proc/%d/ns/uts", a);
		fd = open(path, O_RDONLY);
		if (fd < 0 || setns(fd, CLONE_NEWUTS))
			prog_die("setns %s", path);
		close(fd);
		snprintf(path, sizeof(path), "/proc/%d/ns/ipc", a);
		fd = with_ipc ? open(path, O_RDONLY) : -1;
		if (with_ipc && (fd < 0 || setns(fd, CLONE_NEWIPC)))
			prog_die("setns %s", path);
		if (fd >= 0)
			close(fd);
		if (with_ipc) {
			shmid = shmget(KEY, 0, 0);
			seg = shmat(shmid, NULL, SHM_RDONLY);
			if (seg == (void *)-1)
				prog_die("shmat in A's namespace");
		}
	} else { /* B: a UTS namespace of its own */
		host = "amber-ns-b";
		dom = "dom-b";
		if (unshare(CLONE_NEWUTS))
			prog_die("unshare");
		set_uts(host, dom);
	}
	dprintf(ready, "%s %d\n", who, getpid());
	close(ready);
	prog_wait_go();
	if (role == 'A' && prog_sabotage())
		host = "sabotaged";
	check_uts(who, host, dom);
	if (with_ipc && role != 'B')
		check_objects(who, shmid, seg, role == 'A');
	if (with_ipc && role == 'B')
		CHECK(shmget(KEY, 0, 0) < 0 && errno == ENOENT,
		      "B: key %#x is not in its IPC namespace", KEY);
	if (a1 > 0) {
		int st = -1;
		pid_t w = waitpid(a1, &st, 0);

		CHECK(w == a1 && WIFEXITED(st) && !WEXITSTATUS(st),
		      "A1 passed its checks (status %#x)", st);
	}
	_exit(prog_failures ? 1 : 0);
}

static pid_t start(char role, pid_t a, FILE *out)
{
	char line[64];
	int p[2];
	FILE *in;
	pid_t pid;

	if (pipe(p))
		prog_die("pipe");
	fflush(out);
	pid = fork();
	if (pid < 0)
		prog_die("fork");
	if (!pid) {
		close(p[0]);
		kid(role, p[1], a);
	}
	close(p[1]);
	in = fdopen(p[0], "r");
	while (fgets(line, sizeof(line), in))
		fputs(line, out);
	fclose(in);
	return pid;
}

/*
 * "thread": a thread alone in a UTS namespace of its own; "manythreads": the
 * same after 700 others (the dump checks a process's threads in two halves
 * from so many on, this one in the second); "pidchildren": the process
 * unshare()d a pid namespace for its children.  All refused at dump; after go
 * each still sees what it set up.
 */
static volatile int thread_ok = -1;

static void *uts_thread(void *arg)
{
	struct utsname u;

	if (unshare(CLONE_NEWUTS) || sethostname("amber-thread", 12)) {
		thread_ok = 0;
		return NULL;
	}
	thread_ok = 2;
	while (access(prog_path("go"), F_OK))
		usleep(10 * 1000);
	thread_ok = !uname(&u) && !strcmp(u.nodename, "amber-thread");
	return NULL;
}

static void *idle_thread(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static int refused_mode(const char *mode)
{
	char host[65];
	struct utsname u;
	pthread_attr_t small;
	pthread_t th;

	gethostname(host, sizeof(host));
	pthread_attr_init(&small);
	pthread_attr_setstacksize(&small, 64 << 10);
	for (int i = 0; !strcmp(mode, "manythreads") && i < 700; i++)
		if (pthread_create(&th, &small, idle_thread, NULL))
			prog_die("pthread_create");
	if (strcmp(mode, "pidchildren")) {
		if (pthread_create(&th, NULL, uts_thread, NULL))
			prog_die("pthread_create");
		while (thread_ok == -1)
			usleep(1000);
		if (!thread_ok)
			prog_die("the thread's namespace");
	} else if (unshare(CLONE_NEWPID)) {
		prog_die("unshare(CLONE_NEWPID)");
	}
	prog_ready();
	prog_wait_go();
	if (strcmp(mode, "pidchildren")) {
		pthread_join(th, NULL);
		CHECK(thread_ok == 1, "the thread still has its own hostname");
		CHECK(!uname(&u) && !strcmp(u.nodename, host), "the process has the host's (%s)",
		      u.nodename);
	} else {
		pid_t c = fork();
		int st = -1;

		if (c == 0)
			_exit(getpid() == 1 ? 0 : 1);
		CHECK(c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && !WEXITSTATUS(st),
		      "its first child is pid 1 of the pid namespace it unshared (status %#x)", st);
	}
	return prog_done();
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv), st = -1;
	char host[65], dom[65], path[4096];
	pid_t kids[3];
	FILE *out;

	if (argc > first &&
	    (!strcmp(argv[first], "thread") || !strcmp(argv[first], "manythreads") ||
	     !strcmp(argv[first], "pidchildren")))
		return refused_mode(argv[first]);
	with_ipc = argc > first && !strcmp(argv[first], "ipc");
	gethostname(host, sizeof(host));
	getdomainname(dom, sizeof(dom));
	snprintf(path, sizeof(path), "%s", prog_path("nspids"));
	out = fopen(path, "w");
	if (!out)
		prog_die("%s", path);
	fprintf(out, "root %d\n", getpid());
	kids[0] = start('A', 0, out);
	kids[1] = start('B', 0, out);
	kids[2] = start('C', kids[0], out);
	fclose(out);
	prog_ready();
	prog_wait_go();
	check_uts("root", host, dom);
	for (int i = 0; i < 3; i++) {
		pid_t w = waitpid(kids[i], &st, 0);

		CHECK(w == kids[i] && WIFEXITED(st) && !WEXITSTATUS(st),
		      "child %c passed its checks (status %#x)", "ABC"[i], st);
	}
	return prog_done();
}
