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
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
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

/*
 * How many levels /proc shows above the tree's namespace: the index of its
 * value on an NS* line (amber's own NSpid has that many).
 */
static int ns1_at;

static int ns_levels(pid_t pid, int *levels)
{
	char path[64], *buf, *line, *save;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	*levels = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *v, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (v = line + 6;; v = end, ++*levels) {
			strtoul(v, &end, 10);
			if (end == v)
				break;
		}
	}
	free(buf);
	if (!*levels) {
		pr_err("%s has no NSpid line; amber needs it to dump a pid namespace", path);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int ns1_index(void)
{
	if (!ns1_at && ns_levels(getpid(), &ns1_at))
		return -EOPNOTSUPP;
	return 0;
}

/*
 * A task's ids in the tree's namespace (the level below amber's) and its pid
 * one level further down when it is in a nested namespace; levels: how
 * many NSpid shows.
 */
static int status_ns_ids(pid_t pid, pid_t tid, struct pid_pair *p, int *levels)
{
	static const char *const keys[] = {"NSpid:", "NSpgid:", "NSsid:"};
	uint32_t *vals[] = {&p->ns, &p->ns_pgid, &p->ns_sid};
	char path[64], *buf, *line, *save;
	int ret, found = 0;

	ret = ns1_index();
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	*levels = 0;
	p->ns = p->ns_pgid = p->ns_sid = p->nested = 0;
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
				if (n == ns1_at)
					*vals[k] = (uint32_t)x;
				if (k == 0 && n == ns1_at + 1)
					p->nested = (uint32_t)x;
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

/* dump: the nested namespaces' /proc/PID/ns/pid links, of their inits */
static char (*nested_ns)[64];
static size_t nr_nested_ns;

int pidns_dump_root(struct tree *t)
{
	pid_t pid = t->o->pid;
	struct pid_pair root;
	int levels, my_levels;
	char mine[64], path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	if (sys_readlink("/proc/self/ns/pid", mine, sizeof(mine)) < 0 ||
	    sys_readlink(path, t->pidns, sizeof(t->pidns)) < 0 || !strcmp(mine, t->pidns))
		return 0; /* amber's own (a missing pid is reported by the checks after) */
	ret = ns_levels(getpid(), &my_levels);
	if (!ret)
		ret = status_ns_ids(pid, pid, &root, &levels);
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
	nr_nested_ns = 0;
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

static bool is_nested_ns(const char *link)
{
	for (size_t i = 0; i < nr_nested_ns; i++)
		if (!strcmp(nested_ns[i], link))
			return true;
	return false;
}

static int add_nested_ns(pid_t pid)
{
	char path[64], (*n)[64];

	n = realloc(nested_ns, (nr_nested_ns + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	nested_ns = n;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	if (sys_readlink(path, nested_ns[nr_nested_ns], sizeof(*n)) < 0) {
		pr_err("cannot read %s: %m", path);
		return -errno;
	}
	nr_nested_ns++;
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
	if (levels > ns1_at + 2) {
		pr_err("pid %d (thread %d, pid %u in the tree's pid namespace) is in a pid "
		       "namespace %d levels below the tree's; amber dumps one level of nesting "
		       "only: dump the nested namespace's init by itself",
		       pid, tid, p.ns, levels - ns1_at - 1);
		return -EOPNOTSUPP;
	}
	if (p.nested == 1 && pid == tid && (ret = add_nested_ns(pid)))
		return ret;
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
		if (sys_readlink(path, link, sizeof(link)) < 0 ||
		    (strcmp(link, t->pidns) && !is_nested_ns(link)))
			continue;
		if (status_ns_ids(pid, pid, &p, &levels))
			p.ns = 0;
		pr_err("pid %d (pid %u in the namespace) is in the pid namespace %s of the tree's "
		       "root %d (or one nested in it) but not in its tree (it entered it with "
		       "setns); the namespace would lose it: end it, or dump without it",
		       pid, p.ns, link, t->o->pid);
		ret = -EOPNOTSUPP;
	}
	closedir(d);
	return ret;
}

/*
 * One level of nesting: a process of the tree that is the init of a further
 * pid namespace (unshare --fork --pid in the container) and its
 * descendants there.  The image keeps their pids in the tree's namespace
 * and adds each one's pid in the nested one (nested_pid, nested_tid); the
 * restore makes the init with CLONE_NEWPID and both pids, the others with
 * both pids (clone3 set_tid, innermost first).
 */
int pidns_check_nested(const struct tree *t, pid_t pid, const char *kind, const char *theirs)
{
	struct pid_pair p;
	int levels, ret;

	/* a process's own children namespace: pidns_dump_nested, once its children are known */
	if (!strcmp(kind, "pid_for_children"))
		return 0;
	ret = status_ns_ids(pid, pid, &p, &levels);
	if (ret)
		return ret;
	if (levels != ns1_at + 2) {
		pr_err("pid %d is in pid namespace %s, %d levels below the tree's %s; amber dumps "
		       "one level of nesting only: dump the nested namespace's init by itself",
		       pid, theirs, levels - ns1_at - 1, t->pidns);
		return -EOPNOTSUPP;
	}
	return 0;
}

uint32_t pidns_nested_pid(const struct tree *t, pid_t host)
{
	const struct pid_pair *p = t->own_pidns ? pair_of(t, host) : NULL;

	return p ? p->nested : 0;
}

bool pidns_has_nested(const struct tree *t)
{
	return t->own_pidns && nr_nested_ns;
}

static PstreeEntry *host_entry(const struct tree *t, pid_t host)
{
	for (size_t i = 0; i < t->nr_pstree; i++)
		if (t->pstree[i]->pid == (uint32_t)host)
			return t->pstree[i];
	return NULL;
}

/* The host pid of the nested namespace's init that host is in (0: none). */
static pid_t nested_init_of(const struct tree *t, pid_t host)
{
	const struct pid_pair *p = pair_of(t, host);
	PstreeEntry *e = host_entry(t, host);

	while (p && e && p->nested > 1) {
		PstreeEntry *parent = host_entry(t, (pid_t)e->ppid);
		const struct pid_pair *pp = pair_of(t, (pid_t)e->ppid);

		/* a later child of the process that unshare()d it: its init is a sibling */
		if (parent && pp && !pp->nested)
			return parent->has_pid_ns_for_children ? (pid_t)parent->pid_ns_for_children
							       : 0;
		host = (pid_t)e->ppid;
		p = pp;
		e = parent;
	}
	return p && e && p->nested == 1 ? host : 0;
}

/* Whether host's pid namespace is that of the nested init (host pids). */
static bool same_pidns(pid_t host, pid_t init)
{
	char path[64], a[64], b[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", host);
	if (sys_readlink(path, a, sizeof(a)) < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", init);
	return sys_readlink(path, b, sizeof(b)) >= 0 && !strcmp(a, b);
}

/*
 * A process of a nested namespace in a group or session led from outside it
 * cannot name that group (setpgid) from inside: it has it from its parent,
 * and the parent from its own, up to the leader.  which: 0 group, 1 session.
 */
static bool inherited(const struct tree *t, pid_t host, int which)
{
	const struct pid_pair *p = pair_of(t, host);
	uint32_t id = which ? p->ns_sid : p->ns_pgid;

	for (;;) {
		PstreeEntry *e = host_entry(t, host);

		if (!e || p->ns == id)
			return e != NULL;
		if (host == t->o->pid)
			return !id; /* amber's, which the root has at restore */
		host = (pid_t)e->ppid;
		p = pair_of(t, host);
		if (!p || (which ? p->ns_sid : p->ns_pgid) != id)
			return false;
	}
}

/* A process whose children go to a nested namespace it unshare()d: that of its child, the init. */
static int children_ns(struct tree *t, PstreeEntry *e)
{
	char path[64], own[64], theirs[64], link[64];
	pid_t host = (pid_t)e->pid;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", host);
	if (sys_readlink(path, own, sizeof(own)) < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid_for_children", host);
	if (sys_readlink(path, theirs, sizeof(theirs)) < 0 || !strcmp(own, theirs))
		return 0;
	for (size_t i = 0; i < t->nr_pstree; i++) {
		PstreeEntry *c = t->pstree[i];
		const struct pid_pair *p = pair_of(t, (pid_t)c->pid);

		if (c->ppid != (uint32_t)host || !p || p->nested != 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%u/ns/pid", c->pid);
		if (sys_readlink(path, link, sizeof(link)) < 0 || strcmp(link, theirs))
			continue;
		e->has_pid_ns_for_children = 1;
		e->pid_ns_for_children = c->pid;
		return 0;
	}
	pr_err("pid %d unshare()d pid namespace %s for its children (pid_for_children), whose "
	       "init is not its child in the tree (gone, or another's); amber makes a nested "
	       "pid namespace only with its init, from its parent: dump it before the unshare, "
	       "or once its first child runs",
	       host, theirs);
	return -EOPNOTSUPP;
}

/* The host pid of the tree's process of pid id in the tree's namespace (0: none). */
static pid_t leader_host(const struct tree *t, uint32_t id)
{
	for (size_t k = 0; id && k < t->nr_pstree; k++) {
		const struct pid_pair *l = pair_of(t, (pid_t)t->pstree[k]->pid);

		if (l && l->ns == id)
			return (pid_t)t->pstree[k]->pid;
	}
	return 0;
}

/* Whether the tree's process of id (a group or session) is in host's nested namespace. */
static bool leader_beside(const struct tree *t, pid_t host, uint32_t id)
{
	pid_t l = leader_host(t, id);

	return l && nested_init_of(t, l) == nested_init_of(t, host);
}

static int nested_entry_ok(const struct tree *t, const PstreeEntry *e, const struct pid_pair *p)
{
	const struct pid_pair *pp = pair_of(t, (pid_t)e->ppid);
	const PstreeEntry *parent = host_entry(t, (pid_t)e->ppid);
	const char *what = NULL;

	/* outside, its parent unshare()d the namespace: it sends its children there */
	if (p->nested > 1 && (!pp || !pp->nested) &&
	    (!parent || !parent->has_pid_ns_for_children ||
	     !same_pidns((pid_t)e->pid, (pid_t)parent->pid_ns_for_children))) {
		pr_err("pid %d (pid %u in the tree's namespace) is pid %u of a nested pid "
		       "namespace its parent %u is not in nor sends its children to (it entered "
		       "it with setns); amber makes a nested namespace's processes from its "
		       "init or from the process that unshare()d it only: end it, or dump "
		       "without it",
		       e->pid, p->ns, p->nested, pp ? pp->ns : 0);
		return -EOPNOTSUPP;
	}
	if (e->zombie && p->nested == 1)
		what = "a zombie init (its namespace is dead)";
	else if (e->clone_vm)
		what = "a process sharing its parent's memory (CLONE_VM)";
	else if (e->dead_sid_leader || e->dead_pgid_leader)
		what = "in a session or group whose leader is gone";
	else if (!leader_beside(t, (pid_t)e->pid, p->ns_sid) && !inherited(t, (pid_t)e->pid, 1))
		what = "in a session led outside its namespace that its parent is not in";
	if (what) {
		pr_err("pid %d (pid %u in the tree's namespace, %u in its nested pid namespace) "
		       "is %s; amber does not restore that in a nested pid namespace yet: "
		       "dump it after it changed, or without the nested namespace",
		       e->pid, p->ns, p->nested, what);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* The owner (user namespace) of pid's pid namespace; 0 or -errno, logged. */
static int pidns_owner(pid_t pid, struct stat *st)
{
	char path[64];
	int fd, ufd, ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("cannot open %s: %s", path, strerror(-fd));
		return fd;
	}
	ufd = ioctl(fd, NS_GET_USERNS);
	if (ufd < 0 || fstat(ufd, st)) {
		pr_err("cannot get the owner of the pid namespace of pid %d: %m", pid);
		ret = -errno;
	}
	if (ufd >= 0)
		close(ufd);
	close(fd);
	return ret;
}

/*
 * The restore makes a nested namespace from its init's parent before that
 * enters its user namespace (ns.c does it last): owned as the tree's is.
 */
static int same_owner(const struct tree *t, pid_t init)
{
	struct stat want, have;
	int ret = pidns_owner(t->o->pid, &want);

	if (!ret)
		ret = pidns_owner(init, &have);
	if (ret || (want.st_ino == have.st_ino && want.st_dev == have.st_dev))
		return ret;
	pr_err("pid %d is the init of a pid namespace nested in the tree's, owned by user "
	       "namespace %llu, not by the owner of the tree's (%llu); amber makes a nested pid "
	       "namespace owned as the tree's: unshare the user namespace after the pid "
	       "namespace, or dump without it",
	       init, (unsigned long long)have.st_ino, (unsigned long long)want.st_ino);
	return -EOPNOTSUPP;
}

int pidns_dump_nested(struct tree *t)
{
	int ret = 0;

	if (!t->own_pidns)
		return 0;
	/* the makers' pid_for_children, then the processes of the nested namespaces */
	for (size_t i = 0; !ret && i < t->nr_pstree; i++)
		ret = children_ns(t, t->pstree[i]);
	for (size_t i = 0; !ret && i < t->nr_pstree; i++) {
		PstreeEntry *e = t->pstree[i];
		const struct pid_pair *p = pair_of(t, (pid_t)e->pid);

		if (!p || !p->nested)
			continue;
		ret = nested_entry_ok(t, e, p);
		if (!ret && p->nested == 1)
			ret = same_owner(t, (pid_t)e->pid);
		/* a zombie session leader makes its members (sessions.c) from outside their view */
		if (!ret && t->creator && t->creator[i] != e->ppid) {
			pr_err("pid %d (pid %u in the tree's namespace, %u in its nested pid "
			       "namespace) is in a session led by a zombie, which makes it at "
			       "restore; amber does not do that in a nested pid namespace yet: "
			       "dump it once the zombie is reaped",
			       e->pid, p->ns, p->nested);
			ret = -EOPNOTSUPP;
		}
		if (ret)
			break;
		/* a group inside the namespace is joined by its pid there (task.c) */
		if (leader_beside(t, (pid_t)e->pid, p->ns_pgid))
			continue;
		if (!inherited(t, (pid_t)e->pid, 0)) {
			pr_err("pid %d (pid %u in the tree's namespace, %u in its nested pid "
			       "namespace) is in process group %u, led from outside its "
			       "namespace, which its parent is not in; it cannot join that group "
			       "from inside at restore: dump it after it changed group",
			       e->pid, p->ns, p->nested, p->ns_pgid);
			ret = -EOPNOTSUPP;
		}
	}
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
	uint32_t nested = pidns_nested_pid(t, (pid_t)e->pid);
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
	if (nested) {
		e->has_nested_pid = 1;
		e->nested_pid = nested;
		e->has_nested_init = e->nested_init = nested == 1;
	}
	if (e->has_pid_ns_for_children)
		e->pid_ns_for_children = dump_vpid(t, (pid_t)e->pid_ns_for_children);
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

uint32_t pidns_own_tid(const struct restore_ctx *ctx, uint32_t tid)
{
	const PstreeEntry *e = tree_entry(ctx->tree, (uint32_t)ctx->pid);

	if (!e || !e->nested_pid)
		return tid;
	if (tid == (uint32_t)ctx->pid)
		return e->nested_pid;
	for (size_t i = 1; i < ctx->nr_threads; i++)
		if ((uint32_t)ctx->threads[i].tid == tid)
			return ctx->threads[i].core->nested_tid;
	return 0; /* not its thread: the image checks say it is */
}

static long read_pid_max(void)
{
	char *buf = NULL;
	long pid_max = 1L << 22;

	if (!sys_read_file("/proc/sys/kernel/pid_max", &buf, NULL))
		pid_max = strtol(buf, NULL, 10);
	free(buf);
	return pid_max;
}

/* The nested namespace's init of entry e (NULL: e is not in one, or a chain without one). */
static const PstreeEntry *restore_init_of(const struct tree *t, const PstreeEntry *e)
{
	for (size_t n = 0; e && e->nested_pid && n <= t->nr_pstree; n++) {
		const PstreeEntry *p = tree_entry(t, e->ppid);

		if (e->nested_init)
			return e;
		/* a later child of the process that unshare()d it: its sibling is the init */
		if (p && !p->nested_pid)
			return p->pid_ns_for_children ? tree_entry(t, p->pid_ns_for_children)
						      : NULL;
		e = p;
	}
	return NULL;
}

static int nested_corrupt(const PstreeEntry *e, const char *why)
{
	pr_err("pstree.img: pid %u (pid %u in its nested pid namespace) %s; the image is "
	       "corrupt",
	       e->pid, e->nested_pid, why);
	return -EBADMSG;
}

/* The nested pid namespaces of pstree.img, checked before anything is made. */
static int restore_read_nested(const struct tree *t, long pid_max)
{
	for (size_t i = 0; i < t->nr_pstree; i++) {
		const PstreeEntry *e = t->pstree[i], *p = i ? tree_entry(t, e->ppid) : NULL;
		const PstreeEntry *c;

		if (e->pid_ns_for_children) {
			c = tree_entry(t, e->pid_ns_for_children);
			if (!c || c->ppid != e->pid || !c->nested_init)
				return nested_corrupt(e, "sends its children to a pid namespace "
							 "whose init is not its child");
		}
		if (!e->has_nested_pid && !e->nested_init)
			continue;
		if (!t->own_pidns)
			return nested_corrupt(e, "is in a nested pid namespace of a tree that "
						 "has no pid namespace of its own");
		if (!e->nested_pid)
			return nested_corrupt(e, "has pid 0 in its nested pid namespace");
		if (e->nested_pid >= (uint32_t)pid_max)
			return nested_corrupt(e, "has a nested pid above pid_max");
		if (e->nested_init != (e->nested_pid == 1))
			return nested_corrupt(e, "is pid 1 of its nested namespace but not its "
						 "init, or its init but not pid 1");
		if (!p || (e->nested_init ? p->nested_pid != 0
					  : !p->nested_pid && !p->pid_ns_for_children))
			return nested_corrupt(
				e, e->nested_init ? "is a nested namespace's init whose parent is "
						    "not in the tree's namespace"
						  : "is in a nested namespace its parent is not in "
						    "nor sends its children to");
		if ((e->zombie && e->nested_init) || e->clone_vm || e->dead_sid_leader ||
		    e->dead_pgid_leader)
			return nested_corrupt(e, "is a zombie init, shares memory, or is in a "
						 "leaderless session or group, which the dump "
						 "refuses in a nested namespace");
		for (size_t k = 0; k < i; k++)
			if (t->pstree[k]->nested_pid == e->nested_pid &&
			    restore_init_of(t, t->pstree[k]) == restore_init_of(t, e))
				return nested_corrupt(e, "has the nested pid of another process");
	}
	return 0;
}

/* After the sessions plan: each process of a nested namespace is made by its parent. */
int pidns_restore_plan(const struct tree *t)
{
	for (size_t i = 0; i < t->nr_pstree; i++)
		if (t->pstree[i]->nested_pid && t->creator[i] != t->pstree[i]->ppid) {
			pr_err("pid %u is in a nested pid namespace and in a session led by a "
			       "zombie; amber cannot make it from that zombie",
			       t->pstree[i]->pid);
			return -EOPNOTSUPP;
		}
	return 0;
}

/* The threads' nested tids: each thread of a nested process has one, unique there. */
int pidns_restore_threads(const struct tree *t)
{
	long pid_max = read_pid_max();

	for (size_t p = 0; p < t->nr_procs; p++) {
		const struct restore_ctx *ctx = t->rprocs[p];
		const PstreeEntry *e = tree_entry(t, (uint32_t)ctx->pid),
				  *init = restore_init_of(t, e);

		for (size_t k = 1; k < ctx->nr_threads; k++) {
			uint32_t tid = ctx->threads[k].core->nested_tid;
			bool dup = tid == e->nested_pid;

			if (!e->nested_pid != !ctx->threads[k].core->has_nested_tid ||
			    (e->nested_pid && (!tid || tid >= (uint32_t)pid_max))) {
				pr_err("core-%d.img: thread of pid %u %s a nested tid (%u) it "
				       "cannot have; the image is corrupt",
				       ctx->threads[k].tid, e->pid,
				       e->nested_pid ? "has" : "has not", tid);
				return -EBADMSG;
			}
			if (!e->nested_pid)
				continue;
			for (size_t q = 0; !dup && q < t->nr_pstree; q++)
				dup = t->pstree[q]->nested_pid == tid &&
				      restore_init_of(t, t->pstree[q]) == init;
			for (size_t o = 0; !dup && o < t->nr_procs; o++) {
				const struct restore_ctx *oc = t->rprocs[o];

				if (restore_init_of(t, tree_entry(t, (uint32_t)oc->pid)) != init)
					continue;
				for (size_t j = 1; !dup && j < oc->nr_threads; j++)
					dup = (oc != ctx || j != k) &&
					      oc->threads[j].core->nested_tid == tid;
			}
			if (dup) {
				pr_err("core-%d.img: thread of pid %u has nested tid %u, which "
				       "another task of its namespace has; the image is corrupt",
				       ctx->threads[k].tid, e->pid, tid);
				return -EBADMSG;
			}
		}
	}
	return 0;
}

pid_t pidns_restore_pgid(pid_t host)
{
	struct pid_pair p;
	int levels;

	return status_ns_ids(host, host, &p, &levels) ? -1 : (pid_t)p.ns_pgid;
}

uint32_t pidns_seen_pid(const struct tree *t, const PstreeEntry *e, const PstreeEntry *l)
{
	const PstreeEntry *init = restore_init_of(t, e);

	return init && restore_init_of(t, l) == init ? l->nested_pid : 0;
}

/* In the restored process that unshare()d it: the pid namespace of its child pid. */
int pidns_enter_children(const PstreeEntry *e)
{
	int fd = sys_pidfd_open((pid_t)e->pid_ns_for_children), ret = 0;

	if (fd < 0) {
		pr_err("pid %u: cannot open its child %u: %s", e->pid, e->pid_ns_for_children,
		       strerror(-fd));
		return fd;
	}
	if (setns(fd, CLONE_NEWPID)) {
		pr_err("pid %u: cannot make the pid namespace of its child %u its children's: %m",
		       e->pid, e->pid_ns_for_children);
		ret = -errno;
	}
	close(fd);
	return ret;
}

int pidns_restore_read(struct tree *t)
{
	long pid_max;
	int ret;

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
	pid_max = read_pid_max();
	ret = restore_read_nested(t, pid_max);
	if (ret || !t->own_pidns)
		return ret;
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
