// SPDX-License-Identifier: MIT
/*
 * restore --new-pidns: the tree comes back in a new pid namespace, where its
 * pids are free even when the host has given them to other processes since
 * the dump (the clash CRIU's users meet most).  Each process keeps the pid
 * it had, as it sees it: clone3's set_tid names the pid of the innermost
 * level only, the host gives it another.
 *
 * amber forks itself into the namespace as its init (pid 1) and in a new
 * mount namespace (a slave of amber's, so mounts made on the host still
 * appear) with a /proc of its own, so that /proc/PID is the restored
 * process PID.  That child runs the whole restore, seeing the namespace's
 * pids like the restored processes, then stays as the namespace's init,
 * reaping, until no process is left in it: the namespace ends with its
 * init.  The parent waits for the child's word, writes the host pid of the
 * root to --pidfile, and exits as the restore would (with -d once the tree
 * runs, else with the root's exit status).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "proc.h"
#include "ns.h"
#include "restore.h"
#include "sys.h"

/* What the namespace's init tells amber: the tree runs, then how its root ended. */
struct pidns_word {
	int ret;    /* the restore's result: 0 or -errno */
	int status; /* without -d: the root's exit status (as do_restore gives it) */
};

static int send_word(int fd, int ret, int status)
{
	struct pidns_word w = {ret, status};

	return sys_write_full(fd, &w, sizeof(w)) == sizeof(w) ? 0 : -EPIPE;
}

/* In the child, pid 1 of the new namespace: its own mounts and /proc. */
static int pidns_mounts(void)
{
	if (unshare(CLONE_NEWNS)) {
		pr_err("--new-pidns: cannot make a mount namespace: %m");
		return -errno;
	}
	/* nothing mounted here propagates back to the host */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL)) {
		pr_err("--new-pidns: cannot make / a slave mount: %m");
		return -errno;
	}
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) {
		pr_err("--new-pidns: cannot mount /proc for the new pid namespace: %m");
		return -errno;
	}
	/* amber sees the namespace's pids from now on */
	return sys_proc_init();
}

/* The namespace's init: reap whatever ends in it until nothing is left. */
static void __attribute__((noreturn)) pidns_reap(pid_t root, int word_fd, bool wait_root)
{
	int st;
	pid_t p;

	for (;;) {
		p = waitpid(-1, &st, 0);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			_exit(0);
		if (p == root && wait_root && (WIFEXITED(st) || WIFSIGNALED(st))) {
			int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);

			send_word(word_fd, 0, status);
			close(word_fd);
			wait_root = false;
		}
	}
}

static void __attribute__((noreturn))
pidns_init(struct opts *o, int (*restore)(struct opts *o, uint32_t *root), int word_fd,
	   int alive_fd)
{
	bool wait_root = !o->detached;
	uint32_t root = 0;
	sigset_t all;
	int ret;

	struct pollfd alive = {.fd = alive_fd, .events = POLLIN};

	/* dies with amber until the tree runs; the tree then goes with it (an
	 * init's getppid() is 0: amber's end of the pipe tells it is there) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (poll(&alive, 1, 0) != 0)
		_exit(1);
	ret = pidns_mounts();
	if (!ret) {
		/* the root stays this process's child: it is waited for here */
		o->detached = true;
		o->pidfile = NULL;
		ret = restore(o, &root);
	}
	if (ret) {
		send_word(word_fd, ret, 0);
		_exit(1);
	}
	prctl(PR_SET_PDEATHSIG, 0);
	/* an init gets only the signals it handles: block them, reap in peace */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* the tree runs; without -d its root's status follows */
	send_word(word_fd, 0, 0);
	if (!wait_root)
		close(word_fd);
	pidns_reap((pid_t)root, word_fd, wait_root);
}

/* The host pid of the root: the init's one child that is not a zombie. */
static pid_t host_root(pid_t init)
{
	char path[64], *buf = NULL;
	long pid = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", init, init);
	if (!sys_read_file(path, &buf, NULL))
		pid = strtol(buf, NULL, 10);
	free(buf);
	return (pid_t)pid;
}

int pidns_restore(struct opts *o, int (*restore)(struct opts *o, uint32_t *root))
{
	bool detached = o->detached;
	int fds[2], alive[2], st, ret;
	struct pidns_word w;
	pid_t child;
	ssize_t n;

	if (o->shell_job) {
		pr_err("--new-pidns with --shell-job is not supported yet: restore the job "
		       "without one of them");
		return -EOPNOTSUPP;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		pr_err("--new-pidns: pipe: %m");
		return -errno;
	}
	/* amber holds the write end until it exits */
	if (pipe2(alive, O_CLOEXEC)) {
		pr_err("--new-pidns: pipe: %m");
		ret = -errno;
		goto close_word;
	}
	/* amber's next child is the namespace's first process, its init */
	if (unshare(CLONE_NEWPID)) {
		pr_err("--new-pidns: cannot make a pid namespace: %m (needs CAP_SYS_ADMIN)");
		ret = -errno;
		goto close_alive;
	}
	child = fork();
	if (child < 0) {
		pr_err("--new-pidns: cannot create the namespace's init: %m");
		ret = -errno;
		goto close_alive;
	}
	if (!child) {
		close(fds[0]);
		close(alive[1]);
		pidns_init(o, restore, fds[1], alive[0]);
	}
	close(fds[1]);
	fds[1] = -1;
	n = sys_read_full(fds[0], &w, sizeof(w));
	if (n != sizeof(w) || w.ret) {
		/* it said why; if it died without a word, nothing runs either */
		waitpid(child, &st, 0);
		if (n != sizeof(w))
			pr_err("--new-pidns: the namespace's init died during the restore");
		ret = n == sizeof(w) ? w.ret : -EIO;
		goto close_alive;
	}
	if (o->pidfile && write_pidfile(o->pidfile, host_root(child)))
		pr_warn("the tree runs, but the pidfile was not written");
	ret = 0;
	if (!detached) {
		n = sys_read_full(fds[0], &w, sizeof(w));
		if (n != sizeof(w))
			pr_err("--new-pidns: the namespace's init died before the root");
		ret = (n == sizeof(w) ? w.status : 1) | RESTORE_WAITED;
	}
close_alive:
	close(alive[0]);
	close(alive[1]);
close_word:
	close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	return ret;
}

/*
 * A tree that is its own pid namespace (its root is that namespace's init,
 * as `unshare --fork --pid` or a container makes): amber dumps and makes it
 * from the parent namespace, tracing with host pids, while the image holds
 * the namespace's, the pids the processes see and keep.  At dump each task's
 * host pid is paired with its namespace ids (NSpid, NSpgid, NSsid of
 * /proc/PID/status); at restore the root is made with CLONE_NEWPID and each
 * process's host pid is found as it appears (the children file of its
 * parent, then its NSpid).
 */

/* The innermost value of each NS* line of a task's status, and the levels of NSpid. */
static int status_ns_ids(pid_t pid, pid_t tid, struct pid_pair *p, int *levels)
{
	static const char *const keys[] = {"NSpid:", "NSpgid:", "NSsid:"};
	uint32_t *vals[] = {&p->ns, &p->ns_pgid, &p->ns_sid};
	char path[64], *buf, *line, *save;
	int ret, found = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	*levels = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		for (size_t k = 0; k < 3; k++) {
			char *v, *end;
			int n = 0;

			if (strncmp(line, keys[k], strlen(keys[k])))
				continue;
			found |= 1 << k;
			for (v = line + strlen(keys[k]);; v = end, n++) {
				unsigned long x = strtoul(v, &end, 10);

				if (end == v)
					break;
				*vals[k] = (uint32_t)x;
			}
			if (k == 0)
				*levels = n;
		}
	}
	free(buf);
	if (found != 7) {
		pr_err("%s has no NSpid/NSpgid/NSsid lines; amber needs them to dump a pid "
		       "namespace",
		       path);
		return -EOPNOTSUPP;
	}
	p->host = tid;
	return 0;
}

int pidns_dump_root(struct tree *t)
{
	pid_t pid = t->o->pid;
	struct pid_pair root, me;
	int levels, my_levels;
	char mine[64], path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	if (sys_readlink("/proc/self/ns/pid", mine, sizeof(mine)) < 0 ||
	    sys_readlink(path, t->pidns, sizeof(t->pidns)) < 0 || !strcmp(mine, t->pidns))
		return 0; /* amber's own (a missing pid is reported by the checks after) */
	ret = status_ns_ids(pid, pid, &root, &levels);
	if (!ret)
		ret = status_ns_ids(getpid(), getpid(), &me, &my_levels);
	if (ret)
		return ret;
	if (levels != my_levels + 1) {
		pr_err("pid %d is in pid namespace %s, %d levels below amber's (%s); amber dumps a "
		       "pid namespace only from the one right above it: run amber there",
		       pid, t->pidns, levels - my_levels, mine);
		return -EOPNOTSUPP;
	}
	if (root.ns != 1) {
		pr_err("pid %d is pid %u of its pid namespace %s, not its init (pid 1): amber "
		       "dumps a pid namespace whole, from its init; dump that one",
		       pid, root.ns, t->pidns);
		return -EOPNOTSUPP;
	}
	if (geteuid()) {
		pr_err("pid %d is the init of pid namespace %s; only root dumps namespaces (the "
		       "restore makes it again)",
		       pid, t->pidns);
		return -EPERM;
	}
	t->own_pidns = true;
	return 0;
}

/*
 * host -> index in t->pidmap + 1, open addressing: every pid the image
 * stores is translated, so a big tree must not scan the map each time.
 */
static uint32_t *hslot;
static size_t hcap; /* a power of two, at least twice the pairs */

static size_t hash_of(pid_t host)
{
	return ((uint32_t)host * 2654435761u) & (hcap - 1);
}

static const struct pid_pair *pair_of(const struct tree *t, pid_t host)
{
	if (!hcap)
		return NULL;
	for (size_t h = hash_of(host); hslot[h]; h = (h + 1) & (hcap - 1))
		if (t->pidmap[hslot[h] - 1].host == host)
			return &t->pidmap[hslot[h] - 1];
	return NULL;
}

/* The index with room for one more pair (rebuilt bigger when half full). */
static int hash_room(const struct tree *t)
{
	size_t cap = hcap ? hcap : 256;
	uint32_t *ns;

	if (2 * (t->nr_pidmap + 1) <= hcap)
		return 0;
	while (2 * (t->nr_pidmap + 1) > cap)
		cap *= 2;
	ns = calloc(cap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	free(hslot);
	hslot = ns;
	hcap = cap;
	for (size_t i = 0; i < t->nr_pidmap; i++) {
		size_t h = hash_of(t->pidmap[i].host);

		while (hslot[h])
			h = (h + 1) & (hcap - 1);
		hslot[h] = (uint32_t)i + 1;
	}
	return 0;
}

int pidns_dump_add(struct tree *t, pid_t pid, pid_t tid)
{
	struct pid_pair p, *np;
	int levels, ret;

	if (!t->own_pidns || pair_of(t, tid))
		return 0;
	ret = status_ns_ids(pid, tid, &p, &levels);
	if (ret)
		return ret;
	if (!p.ns) {
		pr_err("pid %d (thread %d) is not in the pid namespace %s of the tree's root", pid,
		       tid, t->pidns);
		return -EOPNOTSUPP;
	}
	ret = hash_room(t);
	if (ret)
		return ret;
	/* doubling: a tree of thousands of tasks is added one by one */
	if (!(t->nr_pidmap & (t->nr_pidmap - 1))) {
		np = realloc(t->pidmap, (t->nr_pidmap ? 2 * t->nr_pidmap : 1) * sizeof(*np));
		if (!np)
			return -ENOMEM;
		t->pidmap = np;
	}
	t->pidmap[t->nr_pidmap] = p;
	{
		size_t h = hash_of(p.host);

		while (hslot[h])
			h = (h + 1) & (hcap - 1);
		hslot[h] = (uint32_t)++t->nr_pidmap;
	}
	return 0;
}

uint32_t dump_vpid(const struct tree *t, pid_t host)
{
	const struct pid_pair *p;

	if (!t->own_pidns)
		return (uint32_t)host;
	p = pair_of(t, host);
	return p ? p->ns : 0;
}

/* The namespace would lose a process the tree does not hold: refused, naming it. */
int pidns_dump_alone(const struct tree *t)
{
	struct dirent *de;
	int ret = 0;
	DIR *d;

	if (!t->own_pidns)
		return 0;
	d = sys_opendir("/proc");
	if (!d) {
		pr_err("cannot list /proc: %m");
		return -errno;
	}
	while (!ret && (de = readdir(d))) {
		pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
		char path[64], link[64];
		struct pid_pair p;
		int levels;

		if (pid <= 0 || pair_of(t, pid))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
		if (sys_readlink(path, link, sizeof(link)) < 0 || strcmp(link, t->pidns))
			continue;
		if (status_ns_ids(pid, pid, &p, &levels))
			p.ns = 0;
		pr_err("pid %d (pid %u in the namespace) is in the pid namespace %s of the tree's "
		       "root %d but not in its tree (it entered it with setns); the namespace "
		       "would lose it: end it, or dump without it",
		       pid, p.ns, t->pidns, t->o->pid);
		ret = -EOPNOTSUPP;
	}
	closedir(d);
	return ret;
}

/*
 * A task's ids as the image holds them: the namespace's.  ppid is the
 * host's parent, 0 for the root (its parent is outside, getppid() is 0 in
 * it); sessions and groups outside the namespace are 0 (the root's, which
 * it gets from amber at restore).
 */
int pidns_dump_ids(const struct tree *t, pid_t host, uint32_t *pid, uint32_t *ppid, uint32_t *pgid,
		   uint32_t *sid)
{
	const struct pid_pair *p = pair_of(t, host), *pp;

	if (!t->own_pidns)
		return 0;
	if (!p) {
		pr_err("pid %d: no namespace pid is known for it", host);
		return -ESRCH;
	}
	*pid = p->ns;
	if (pgid)
		*pgid = p->ns_pgid;
	if (sid)
		*sid = p->ns_sid;
	if (!ppid)
		return 0;
	if (host == t->o->pid) {
		*ppid = 0;
		return 0;
	}
	pp = pair_of(t, (pid_t)*ppid);
	if (!pp) {
		pr_err("pid %d: its parent %u is not in the tree", host, *ppid);
		return -ESRCH;
	}
	*ppid = pp->ns;
	return 0;
}

int pidns_dump_entry(const struct tree *t, PstreeEntry *e)
{
	bool root = e->pid == (uint32_t)t->o->pid;
	int ret = pidns_dump_ids(t, (pid_t)e->pid, &e->pid, &e->ppid, &e->pgid, &e->sid);

	if (ret || !t->own_pidns)
		return ret;
	/* a session or group from outside is amber's at restore, not a helper's */
	if (!e->sid)
		e->dead_sid_leader = e->has_dead_sid_leader = 0;
	if (!e->pgid)
		e->dead_pgid_leader = e->has_dead_pgid_leader = 0;
	if (root)
		e->pid_ns_init = e->has_pid_ns_init = 1;
	return 0;
}

pid_t tree_hpid(const struct tree *t, uint32_t pid)
{
	size_t i = tree_pos(t, pid);

	if (!t->own_pidns)
		return (pid_t)pid;
	if (i != (size_t)-1)
		return t->hpid ? t->hpid[i] : 0;
	/* a thread: its host tid is its tracer's handle once it exists */
	for (size_t p = 0; p < t->nr_procs; p++)
		for (size_t k = 0; k < t->rprocs[p]->nr_threads; k++)
			if (t->rprocs[p]->threads[k].core->pid == pid)
				return t->rprocs[p]->threads[k].inf->pid;
	return 0;
}

int pidns_find_children(struct tree *t, size_t idx)
{
	uint32_t parent = t->pstree[idx]->pid;
	pid_t *kids;
	int n, ret = 0;

	if (!t->own_pidns)
		return 0;
	n = proc_children(t->hpid[idx], &kids);
	if (n < 0) {
		pr_err("pid %u (host pid %d): cannot list its children: %s", parent, t->hpid[idx],
		       strerror(-n));
		return n;
	}
	for (int c = 0; c < n; c++) {
		struct pid_pair p;
		int levels;
		size_t k;

		if (status_ns_ids(kids[c], kids[c], &p, &levels))
			continue; /* gone: missed below */
		k = tree_pos(t, p.ns);
		if (k != (size_t)-1 && t->pstree[k]->ppid == parent)
			t->hpid[k] = kids[c];
	}
	free(kids);
	for (size_t k = idx + 1; !ret && k < t->nr_pstree; k++)
		if (t->pstree[k]->ppid == parent && !t->hpid[k]) {
			pr_err("pid %u: its child %u is not there after it made its children",
			       parent, t->pstree[k]->pid);
			ret = -ESRCH;
		}
	return ret;
}

pid_t pidns_host_tid(pid_t pid, uint32_t tid)
{
	char path[64];
	struct dirent *de;
	pid_t found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = sys_opendir(path);
	if (!d) {
		pr_err("cannot list %s: %m", path);
		return 0;
	}
	while (!found && (de = readdir(d))) {
		pid_t host = (pid_t)strtol(de->d_name, NULL, 10);
		struct pid_pair p;
		int levels;

		if (host > 0 && !status_ns_ids(pid, host, &p, &levels) && p.ns == tid)
			found = host;
	}
	closedir(d);
	if (!found)
		pr_err("pid %d: its thread %u is not in %s", pid, tid, path);
	return found;
}

int pidns_restore_read(struct tree *t)
{
	char *buf = NULL;
	long pid_max = 1L << 22;

	for (size_t i = 0; i < t->nr_pstree; i++) {
		PstreeEntry *e = t->pstree[i];

		if (e->pid_ns_init && (i || e->pid != 1 || e->ppid)) {
			pr_err("pstree.img: pid %u says it is the init of the tree's pid "
			       "namespace, "
			       "which only the root, pid 1, can be; the image is corrupt",
			       e->pid);
			return -EBADMSG;
		}
	}
	t->own_pidns = t->pstree[0]->pid_ns_init;
	if (!t->own_pidns)
		return 0;
	if (!sys_read_file("/proc/sys/kernel/pid_max", &buf, NULL))
		pid_max = strtol(buf, NULL, 10);
	free(buf);
	for (size_t i = 0; i < t->nr_pstree; i++)
		if (t->pstree[i]->pid >= (uint32_t)pid_max) {
			pr_err("pstree.img: pid %u is above pid_max (%ld); the image is corrupt",
			       t->pstree[i]->pid, pid_max);
			return -EBADMSG;
		}
	if (!t->owner.unbounded) {
		pr_err("the image's root is the init of a pid namespace, made new at restore, "
		       "which needs CAP_SYS_ADMIN; uid %u's image may not make namespaces: "
		       "refusing",
		       t->owner.uid);
		return -EPERM;
	}
	if (t->o->new_pidns) {
		pr_err("the image's root is the init of a pid namespace of its own, which the "
		       "restore makes again with the image's pids: restore it without "
		       "--new-pidns");
		return -EINVAL;
	}
	t->hpid = calloc(t->nr_pstree, sizeof(*t->hpid));
	return t->hpid ? 0 : -ENOMEM;
}
