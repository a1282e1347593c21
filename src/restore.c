// SPDX-License-Identifier: MIT
/*
 * amber restore: check the whole image, create a child with the dumped PID
 * (clone3 set_tid), let it set up what needs libc (files, cwd, limits),
 * stop it, then rebuild its address space and kernel state by injecting
 * syscalls, load the registers and let it go.  Nothing of the target runs
 * until every step has succeeded; on any failure the child is killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "action.h"
#include "amber.h"
#include "progress.h"
#include "stats.h"
#include "files.h"
#include "log.h"
#include "mem.h"
#include "restore.h"
#include "net/netlock.h"
#include "ns/ns.h"
#include "sys.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; glibc 2.36 lacks it */
#endif

static bool pid_in_use(pid_t pid, char *comm, size_t len)
{
	char path[64], *buf;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	if (sys_read_file(path, &buf, NULL))
		return kill(pid, 0) == 0 || errno != ESRCH;
	snprintf(comm, len, "%s", buf);
	comm[strcspn(comm, "\n")] = 0;
	free(buf);
	return true;
}

/* A just-killed dump target may linger until its parent reaps it. */
static int wait_pid_free(pid_t pid)
{
	char comm[64] = "";

	for (int i = 0; i < 200; i++) {
		if (!pid_in_use(pid, comm, sizeof(comm)))
			return 0;
		usleep(50 * 1000);
	}
	pr_err("pid %d is in use by '%s'; amber restores a process with its original pid, so "
	       "stop that process (or restore on another machine / in a pid namespace)",
	       pid, comm);
	return -EBUSY;
}

/* Every fd >= fd_base in the child is amber's own (images, sync pipe), and so
 * is the scratch page: drop them before the registers are loaded. */
static int drop_internal(struct restore_ctx *ctx)
{
	return files_drop_amber(ctx) ?: infect_scratch_unmap(&ctx->inf);
}

static int inject_all(struct restore_ctx *ctx)
{
	int ret = 0;

	for (const struct resource_ops *const *r = resources; *r && !ret; r++) {
		if (!(*r)->restore_inject && !(*r)->restore_thread)
			continue;
		uint64_t t0 = stats_now();

		pr_info("restoring %s of pid %d", (*r)->name, ctx->pid);
		if ((*r)->restore_inject)
			ret = (*r)->restore_inject(ctx);
		for (size_t i = 0; !ret && (*r)->restore_thread && i < ctx->nr_threads; i++)
			ret = (*r)->restore_thread(ctx, &ctx->threads[i]);
		stats_resource((size_t)(r - resources), t0);
		if (ret)
			pr_err("pid %d: restoring %s failed", ctx->pid, (*r)->name);
	}
	return ret;
}

static int wait_child_stop(pid_t pid)
{
	int status;
	pid_t r = sys_waitpid(pid, &status, __WALL);

	if (r < 0)
		return (int)r;
	if (!WIFSTOPPED(status)) {
		pr_err("pid %d: the restore child died before it was ready (status 0x%x)", pid,
		       status);
		return -ESRCH;
	}
	if (WSTOPSIG(status) != SIGSTOP) {
		pr_err("pid %d: the restore child stopped with signal %d", pid, WSTOPSIG(status));
		return -EINVAL;
	}
	return 0;
}

int write_pidfile(const char *path, pid_t pid)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%d\n", pid);
	int fd = sys_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0) {
		pr_err("cannot write pidfile %s: %s", path, strerror(-fd));
		return fd;
	}
	if (sys_write_full(fd, buf, len) != len) {
		close(fd);
		pr_err("cannot write pidfile %s", path);
		return -EIO;
	}
	close(fd);
	return 0;
}

static int wait_restored(struct restore_ctx *ctx)
{
	int status;
	pid_t r;

	for (;;) {
		r = sys_waitpid(ctx->inf.pid, &status, 0);
		if (r < 0) {
			pr_err("waiting for pid %d: %s", ctx->inf.pid, strerror((int)-r));
			return 1;
		}
		if (WIFEXITED(status))
			return WEXITSTATUS(status);
		if (WIFSIGNALED(status))
			return 128 + WTERMSIG(status);
	}
}

/* Take the terminal back from a restored shell job (we are in the background). */
static void reclaim_terminal(void)
{
	sigset_t ttou, old;

	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &old);
	for (int fd = 0; fd < 3; fd++)
		if (isatty(fd) && tcgetpgrp(fd) != getpgrp() && !tcsetpgrp(fd, getpgrp()))
			break;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static int read_images(struct restore_ctx *ctx)
{
	int ret = img_read_one(ctx->img, IMG_CORE, &task_core__descriptor,
			       (ProtobufCMessage **)&ctx->core, "core-%d.img", ctx->pid);

	if (ret)
		return ret;
	if (ctx->core->pid != (uint32_t)ctx->pid) {
		pr_err("core-%d.img describes pid %u; the image is inconsistent", ctx->pid,
		       ctx->core->pid);
		return -EBADMSG;
	}
	for (const struct resource_ops *const *r = resources; *r; r++) {
		uint64_t t0 = stats_now();

		if (!(*r)->restore_read)
			continue;
		ret = (*r)->restore_read(ctx);
		stats_resource((size_t)(r - resources), t0);
		if (ret)
			return ret;
	}
	return 0;
}

static PstreeEntry *find_entry(struct tree *t, uint32_t pid, size_t before)
{
	for (size_t i = 0; i < before; i++)
		if (t->pstree[i]->pid == pid)
			return t->pstree[i];
	return NULL;
}

/* pstree.img: the root first, every parent before its children, pids unique. */
int read_pstree(struct tree *t)
{
	int ret = img_read_all(t->img, IMG_PSTREE, &pstree_entry__descriptor, &t->pstree,
			       &t->nr_pstree, "pstree.img");

	if (!ret && !t->nr_pstree) {
		pr_err("pstree.img is empty; the image is corrupt");
		return -EBADMSG;
	}
	for (size_t n = 0; !ret && n < t->nr_pstree; n++) {
		PstreeEntry *e = t->pstree[n];

		if (!e->pid || e->pid > (1U << 22) || find_entry(t, e->pid, n) ||
		    (n == 0 && (e->pid != t->inv->root_pid || e->zombie)) ||
		    (e->comm && strlen(e->comm) > 15) ||
		    (n > 0 && (!find_entry(t, e->ppid, n) || find_entry(t, e->ppid, n)->zombie))) {
			pr_err("pstree.img: bad entry for pid %u; the image is corrupt", e->pid);
			return -EBADMSG;
		}
	}
	if (!ret)
		ret = pidns_restore_read(t);
	if (!ret)
		ret = sessions_plan(t);
	return ret ? ret : pidns_restore_plan(t);
}

static int read_processes(struct tree *t)
{
	t->rprocs = calloc(t->nr_pstree, sizeof(*t->rprocs));
	if (!t->rprocs)
		return -ENOMEM;
	for (size_t i = 0; i < t->nr_pstree; i++) {
		struct restore_ctx *ctx;
		int ret;

		if (t->pstree[i]->zombie)
			continue;
		ctx = calloc(1, sizeof(*ctx));
		if (!ctx)
			return -ENOMEM;
		ctx->o = t->o;
		ctx->tree = t;
		ctx->img = t->img;
		ctx->inv = t->inv;
		ctx->pid = t->pstree[i]->pid;
		ctx->pages_fd = -1;
		ctx->shares_vm = t->pstree[i]->clone_vm;
		t->rprocs[t->nr_procs++] = ctx;
		ret = read_images(ctx);
		if (ret)
			return ret;
	}
	return pidns_restore_threads(t) ?: tree_index_build(t);
}

/* What read_processes() read whole (each process's files but its pages, which
 * it gets with its go): none of it goes into the forked tree, and its fds are
 * free for the descriptions (files.c). */
static void release_process_images(struct tree *t)
{
	for (int k = 0; k < IMG__COUNT; k++)
		if (k != IMG_PAGES && img_kind_per_process(k))
			img_dir_release(t->img, k);
}

/* Every fd at or above the highest fd of any process is free for amber's own. */
static void compute_fd_base(struct tree *t)
{
	t->fd_base = 3;
	for (size_t p = 0; p < t->nr_procs; p++)
		for (size_t i = 0; i < t->rprocs[p]->nr_fds; i++)
			if ((int)t->rprocs[p]->fds[i]->fd >= t->fd_base)
				t->fd_base = t->rprocs[p]->fds[i]->fd + 1;
}

/* Room for the processes' fds and amber's above them (rlimits.c sets the real limits). */
static void raise_nofile(struct tree *t)
{
	unsigned long want = t->fd_base + 2 * t->nr_pstree + t->nr_rfiles + t->img->nr_files + 64;
	int ret = sys_raise_nofile(want);

	if (ret)
		pr_warn("cannot raise RLIMIT_NOFILE to %lu for the restored fds: %s", want,
			strerror(-ret));
}

static int run_restore_tree(struct tree *t)
{
	for (const struct resource_ops *const *r = resources; *r; r++) {
		int ret;

		uint64_t t0 = stats_now();

		if (!(*r)->restore_tree)
			continue;
		ret = (*r)->restore_tree(t);
		stats_resource((size_t)(r - resources), t0);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Per process, one socketpair: amber -> child "go" (seized), child -> amber
 * report.  Every process inherits every pair (all exist before the first
 * fork), so two fds a process rather than two pipes' four: a tree of n
 * processes holds 2n of them, within the fd limit for thousands.
 */
struct sync {
	int amber; /* amber's end: writes go, reads the report */
	int child; /* the child's: reads go, writes the report */
	/* amber's: the entries it creates, in order, of which it was sent the
	 * channel ends of the first sent, and said it made the first made */
	uint32_t *kids;
	size_t nr_kids, sent, made;
};

static struct sync *syncs;
/* per pstree entry: created by amber or seized by it, so ours to kill on failure */
static bool *ours;
/* per pstree entry: seized and told to go (seize_and_go) */
static bool *seized;

struct child_report {
	int ok;
	int pages_fd; /* where it put its pages file (send_go), or -1 */
	int made;     /* not the report: 1 + the entry of a child it just made (early_go) */
	unsigned long scratch; /* the scratch area it mapped (mem_scratch_premap), or 0 */
	char msg[112];
};

static void report_to_amber(int fd, const char *msg, int pages_fd, unsigned long scratch)
{
	struct child_report rep = {.ok = !msg, .pages_fd = pages_fd, .scratch = scratch};

	snprintf(rep.msg, sizeof(rep.msg), "%s", msg ? msg : "");
	if (write(fd, &rep, sizeof(rep)) != sizeof(rep))
		_exit(1);
}

static void child_report(int fd, const char *msg)
{
	report_to_amber(fd, msg, -1, 0);
}

/*
 * Whether entry idx may go as soon as its creator made it (report_made),
 * before the creator finished setting up: nothing it does until its stop
 * depends on the creator's later steps.  Not a child that shares its
 * creator's memory, fd table or cwd (it would run beside it in them), a
 * zombie, or one whose host pid amber learns only once its creator stopped
 * (ns/pidns.c).
 */
static bool early_go(const struct tree *t, size_t idx)
{
	const PstreeEntry *c = t->pstree[idx];
	const PstreeEntry *cr = t->creator[idx] ? tree_entry(t, t->creator[idx]) : NULL;

	return cr && !cr->zombie && !t->own_pidns && !c->zombie && !c->clone_vm &&
	       !c->clone_files && !c->clone_fs && !c->nested_pid && !c->nested_init;
}

/*
 * In creator: it made entry idx, which amber may tell to go now (early_go);
 * amber sends the channel end of one more of its children for it (send_go).
 */
static void report_made(struct tree *t, uint32_t creator, size_t idx)
{
	struct child_report rep = {.ok = 1, .pages_fd = -1, .made = (int)idx + 1};
	size_t me = tree_pos(t, creator);

	if (write(syncs[me].child, &rep, sizeof(rep)) != sizeof(rep))
		_exit(1);
}

static int seize_and_go(struct tree *t, size_t idx);
static int send_ends(struct tree *t, size_t idx, size_t n);

/*
 * Its report; meanwhile, the children it says it made, which may go at once
 * (early_go), are seized and told to go while it makes the others.
 */
static int read_child_report(struct restore_ctx *ctx, int fd)
{
	struct tree *t = ctx->tree;
	size_t me = tree_pos(t, (uint32_t)ctx->pid), k;
	struct sync *s = &syncs[me];
	struct child_report rep;
	int ret;

	for (;;) {
		if (read(fd, &rep, sizeof(rep)) != sizeof(rep)) {
			pr_err("pid %d: the restore child died while setting up", ctx->pid);
			return -EIO;
		}
		if (!rep.ok || !rep.made)
			break;
		k = (size_t)rep.made - 1;
		if (s->made >= s->nr_kids || k != s->kids[s->made++]) {
			pr_err("pid %d: it says it made entry %d, which it does not make next",
			       ctx->pid, rep.made);
			return -EIO;
		}
		ret = send_ends(t, me, 1);
		if (!ret && early_go(t, k)) {
			ours[k] = true;
			ret = seize_and_go(t, k);
		}
		if (ret)
			return ret;
	}
	if (!rep.ok) {
		rep.msg[sizeof(rep.msg) - 1] = 0;
		pr_err("pid %d: %s", ctx->pid, rep.msg);
		return -EIO;
	}
	/* from now on the injected reads name its own fd */
	if (!ctx->shares_vm && ctx->pages_fd >= 0) {
		if (rep.pages_fd < ctx->tree->fd_base) {
			pr_err("pid %d: it did not get its pages file", ctx->pid);
			return -EIO;
		}
		ctx->pages_fd = rep.pages_fd;
	}
	ctx->scratch_premapped = rep.scratch;
	return 0;
}

static bool end_pulled(const struct tree *t, size_t idx);

/*
 * The processes amber forks (the root, helpers) would pass every fd amber
 * holds to the whole tree, and each process would copy them at fork and
 * close them at the end, O(n^2): they drop the channels' amber ends (but
 * for zombies', which their creators read), the child ends their creators
 * get with their go, and the pages files, which each process gets alone
 * with its go (send_go).
 */
static void drop_amber_fds(struct tree *t)
{
	for (size_t i = 0; i < t->nr_pstree; i++) {
		if (!t->pstree[i]->zombie)
			close(syncs[i].amber);
		if (end_pulled(t, i))
			close(syncs[i].child);
	}
	for (size_t p = 0; p < t->nr_procs; p++)
		if (!t->rprocs[p]->shares_vm && t->rprocs[p]->pages_fd >= 0)
			close(t->rprocs[p]->pages_fd);
}

/* One byte, tag, on a channel, with fd (SCM_RIGHTS) unless it is -1. */
static int send_fd(int sock, char tag, int fd)
{
	return sys_send_fds(sock, tag, &fd, fd >= 0, 0);
}

/* In the child: send_fd()'s byte, which must be tag; *fd: what came with it
 * (-1: nothing), moved above the image's fds, which it must not clobber. */
static int recv_fd(const struct tree *t, int sock, char tag, int *fd)
{
	ssize_t n;
	char c;
	int got;

	*fd = -1;
	n = sys_recv_fds(sock, &c, &got, 1);
	if (n < 0)
		return -1;
	if (n == 1) {
		*fd = got < tree_fd_floor(t) ? fcntl(got, F_DUPFD_CLOEXEC, tree_fd_floor(t)) : got;
		if (*fd != got)
			close(got);
		if (*fd < 0)
			return -1;
	}
	return c == tag ? 0 : -1;
}

/* In the child: go, with its pages file if it has one (send_go). */
static int recv_go(struct tree *t, size_t idx)
{
	struct restore_ctx *ctx =
		t->pstree[idx]->zombie ? NULL : tree_rproc(t, t->pstree[idx]->pid);
	bool pages = ctx && !ctx->shares_vm && ctx->pages_fd >= 0;
	int fd;

	if (recv_fd(t, syncs[idx].child, 'g', &fd) || (fd >= 0) != pages) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (pages)
		ctx->pages_fd = fd;
	/* its descriptions (files.c) */
	if (files_own_table(t->pstree[idx]) &&
	    files_recv_needed(t, t->pstree[idx]->pid, syncs[idx].child))
		return -1;
	return 0;
}

/* A zombie comes back by dying the same way once everything else is in place. */
static void __attribute__((noreturn)) become_zombie(PstreeEntry *e)
{
	int sig = e->exit_status & 0x7f;
	sigset_t set;

	if (e->comm)
		prctl(PR_SET_NAME, e->comm, 0, 0, 0);
	if (sig) {
		signal(sig, SIG_DFL);
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(sig);
	}
	_exit((e->exit_status >> 8) & 0xff);
}

static void __attribute__((noreturn)) child_main(struct tree *t, size_t idx);
static unsigned long heap_start;
static void __attribute__((noreturn)) child_setup(struct tree *t, size_t idx, bool vm);

/* The tree, for CLONE_VM children, which start with nothing but an index. */
static struct tree *vm_tree;
static pid_t amber_pid;	  /* the helpers' parent */
static pid_t root_parent; /* the root's: amber, or amber's own with rst_sibling */

/* The parent the root sees: root_parent, or none when it is its pid namespace's init. */
static pid_t root_ppid(const struct tree *t)
{
	return t->own_pidns ? 0 : root_parent;
}

/* The parent idx sees (getppid()): in a nested pid namespace, its pid there; 0 from outside. */
static pid_t seen_ppid(const struct tree *t, size_t idx)
{
	const PstreeEntry *e = t->pstree[idx], *p;

	if (!idx)
		return root_ppid(t);
	if (e->nested_init)
		return 0;
	if (!e->nested_pid)
		return (pid_t)e->ppid;
	/* (0 too for a later child of the process that unshare()d the namespace) */
	p = tree_entry(t, e->ppid);
	return p ? (pid_t)p->nested_pid : -1;
}

/*
 * Whether entry c is created in a second round, in the nested pid namespace
 * its creator unshare()d, once that namespace's init exists.
 */
static bool into_children_ns(const struct tree *t, const PstreeEntry *c)
{
	const PstreeEntry *p = tree_entry(t, c->ppid);

	return c->nested_pid && !c->nested_init && p && !p->nested_pid;
}

/*
 * Whether entry idx's channel goes to its creator with the creator's go
 * (send_go, pull_end) rather than down the whole tree: its creator is a
 * process amber tells to go (not amber, a helper or a zombie).
 */
static bool end_pulled(const struct tree *t, size_t idx)
{
	const PstreeEntry *c = t->creator[idx] ? tree_entry(t, t->creator[idx]) : NULL;

	return c && !c->zombie;
}

/* The next n of the channel ends entry idx takes (pull_end), as far as there are. */
static int send_ends(struct tree *t, size_t idx, size_t n)
{
	struct sync *s = &syncs[idx];
	int ret = 0;

	for (; !ret && n && s->sent < s->nr_kids; n--)
		ret = send_fd(s->amber, 'c', syncs[s->kids[s->sent++]].child);
	return ret;
}

/*
 * Go, with the process's pages file and its descriptions (files.c), then
 * the child ends of the channels of the processes it creates, one a
 * message in the order it creates them: it takes each just before it forks
 * that one (pull_end), so that none is in the fd table the others inherit.
 * A window of them: then one each time it says it made one (report_made),
 * so that amber never waits for it to take them and can tell its children
 * to go meanwhile (early_go).
 */
#define ENDS_AHEAD 32

static int send_go(struct tree *t, size_t idx)
{
	const PstreeEntry *e = t->pstree[idx];
	struct restore_ctx *ctx = e->zombie ? NULL : tree_rproc(t, e->pid);
	struct sync *s = &syncs[idx];
	const uint32_t *kids;
	size_t nk = tree_created(t, e->pid, &kids);
	int ret = send_fd(s->amber, 'g', ctx && !ctx->shares_vm ? ctx->pages_fd : -1);

	if (!ret && files_own_table(e))
		ret = files_send_needed(t, e->pid, s->amber);
	if (ret || !nk)
		return ret;
	free(s->kids);
	s->kids = malloc(nk * sizeof(*s->kids));
	if (!s->kids)
		return -ENOMEM;
	s->nr_kids = s->sent = s->made = 0;
	for (int nested = 0; nested < 2; nested++)
		for (size_t k = 0; k < nk; k++)
			if (into_children_ns(t, t->pstree[kids[k]]) == nested)
				s->kids[s->nr_kids++] = kids[k];
	return send_ends(t, idx, ENDS_AHEAD);
}

/* In creator, about to fork entry idx: its channel's child end (send_go). */
static int pull_end(struct tree *t, uint32_t creator, size_t idx)
{
	size_t me = tree_pos(t, creator);
	int fd;

	if (me == (size_t)-1 || recv_fd(t, syncs[me].child, 'c', &fd) || fd < 0) {
		pr_err("pid %u: did not get the channel of its child %u", creator,
		       t->pstree[idx]->pid);
		return -EIO;
	}
	syncs[idx].child = fd;
	return 0;
}

/* amber's handle on pstree entry idx: its host pid (ns/pidns.c), 0 until it exists. */
static pid_t host_pid(const struct tree *t, size_t idx)
{
	return t->own_pidns ? t->hpid[idx] : (pid_t)t->pstree[idx]->pid;
}
#define VM_CHILD_STACK (256 << 10)

static void vm_child_main(void *arg)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	child_setup(vm_tree, (size_t)arg, true);
}

/*
 * A child sharing the address space cannot run amber's code beside its
 * parent (one heap, one TLS): it waits without libc until amber tells it to
 * go, by which time its parent is stopped for good, and then sets up like
 * any child.  Its stack is amber's memory and goes with the rest when the
 * parent's memory is restored.
 */
static long clone_vm_child(struct tree *t, size_t idx, uint64_t flags)
{
	PstreeEntry *e = t->pstree[idx];
	void *stack = mmap(NULL, VM_CHILD_STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

	if (stack == MAP_FAILED)
		return -errno;
	if (e->clone_sighand)
		flags |= CLONE_SIGHAND;
	return sys_clone3_vm(e->pid, flags, stack, VM_CHILD_STACK, syncs[idx].child, vm_child_main,
			     (void *)idx);
}

static void __attribute__((noreturn)) helper_main(struct tree *t, struct tree_helper *h);

/*
 * nested: its pid in a pid namespace nested in the tree's (ns/pidns.c), 1
 * for that namespace's init (CLONE_NEWPID), 0 when not in one.
 */
static long clone_pid(uint32_t creator, uint32_t pid, uint32_t nested, uint64_t flags)
{
	pid_t tids[2] = {(pid_t)nested, (pid_t)pid};
	/* clone3 takes no exit signal with CLONE_PARENT: the child gets amber's own */
	int sig = (flags & CLONE_PARENT) ? 0 : SIGCHLD;
	long r;

	if (nested)
		r = sys_clone3_set_tids(tids, 2, sig, flags);
	else /* the init of a new pid namespace: pid 1 in it, any pid on the host */
		r = sys_clone3_set_tid((flags & CLONE_NEWPID) ? 1 : pid, sig, flags);

	if (r >= 0)
		return r;
	if (r == -EEXIST)
		pr_err("pid %u was taken by another process just now; try again", pid);
	else if (r == -EPERM)
		pr_err("cannot create a process with pid %u: need root (CAP_SYS_ADMIN or "
		       "CAP_CHECKPOINT_RESTORE)",
		       pid);
	else if (creator)
		pr_err("pid %u: cannot create its child %u: %s", creator, pid, strerror((int)-r));
	else
		pr_err("clone3 with pid %u failed: %s", pid, strerror((int)-r));
	return r;
}

/*
 * The helpers creator made have made their members and exited: reap them.
 * Their members are creator's children now (it is a child subreaper), as
 * they were at dump.  A restored process forgets the SIGCHLD (it is traced,
 * so it was queued although blocked or ignored).
 */
static int reap_helpers(struct tree *t, uint32_t creator)
{
	struct timespec zero = {0, 0};
	bool any = false;
	sigset_t chld;

	for (size_t i = 0; i < t->nr_helpers; i++) {
		struct tree_helper *h = &t->helpers[i];
		int st;

		if (h->creator != creator)
			continue;
		if (sys_waitpid((pid_t)h->pid, &st, __WALL) != (pid_t)h->pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			pr_err("the helper remaking %s %u failed", h->session ? "session" : "group",
			       h->pid);
			return -EIO;
		}
		any = true;
	}
	if (any && creator) {
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		sigtimedwait(&chld, NULL, &zero);
	}
	return 0;
}

/*
 * Zombie idx has made its session or group, and, if it leads members of its
 * session, made them and died (unreaped: its parent waits with WNOWAIT).
 */
static int zombie_made(struct tree *t, size_t idx)
{
	uint32_t pid = t->pstree[idx]->pid;
	struct child_report rep;
	siginfo_t si;

	if (read(syncs[idx].amber, &rep, sizeof(rep)) != sizeof(rep) || !rep.ok) {
		rep.msg[sizeof(rep.msg) - 1] = 0;
		pr_err("zombie %u: %s", pid, rep.ok ? "died while setting up" : rep.msg);
		return -EIO;
	}
	if (!sessions_zombie_leads(t, pid))
		return 0;
	while (waitid(P_PID, pid, &si, WEXITED | WNOWAIT))
		if (errno != EINTR) {
			pr_err("zombie %u: cannot wait for it: %m", pid);
			return -errno;
		}
	return 0;
}

/* Create pstree entry i, one of creator's (helpers: creator has made helpers). */
static int fork_child(struct tree *t, uint32_t creator, size_t i, bool helpers)
{
	PstreeEntry *c = t->pstree[i];
	/* what it shared with its parent (kcmp at dump), it shares again */
	uint64_t flags = (c->clone_files ? CLONE_FILES : 0) | (c->clone_fs ? CLONE_FS : 0);
	bool pulled = end_pulled(t, i);
	long pid;

	if (pulled && pull_end(t, creator, i))
		return -EIO;
	/* the members a zombie leader makes become ours when it dies */
	if (!helpers && creator && sessions_zombie_leads(t, c->pid) &&
	    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) {
		pr_err("pid %u: cannot become a child subreaper: %m", creator);
		return -errno;
	}
	if (c->clone_vm) {
		pid = clone_vm_child(t, i, flags);
		if (pid < 0)
			pr_err("pid %u: cannot create its child %u: %s", creator, c->pid,
			       strerror((int)-pid));
	} else {
		if ((!creator && t->own_pidns) || c->nested_init)
			flags |= CLONE_NEWPID;
		/* the RPC's rst_sibling: the client (runc) is the root's parent */
		if (!creator && t->o->rst_sibling)
			flags |= CLONE_PARENT;
		pid = clone_pid(creator, c->pid, c->nested_pid, flags);
		if (pid == 0)
			child_main(t, i);
		if (pid > 0 && !creator && t->own_pidns)
			t->hpid[i] = (pid_t)pid;
	}
	/* the child has it; in a table shared with it, it is the child's own */
	if (pulled && !(flags & CLONE_FILES))
		close(syncs[i].child);
	if (pid > 0 && pulled)
		report_made(t, creator, i);
	return pid < 0 ? (int)pid : 0;
}

/*
 * In a restored process (or amber, creator 0, or a helper): create the
 * processes it creates, each with its old pid: its children, and the
 * helpers of sessions and groups whose leader is gone, which make some of
 * its children in turn.
 */
static int fork_children(struct tree *t, uint32_t creator)
{
	PstreeEntry *me = creator ? tree_entry(t, creator) : NULL;
	const uint32_t *kids;
	bool helpers = false;
	size_t nk;

	for (size_t i = 0; i < t->nr_helpers; i++) {
		struct tree_helper *h = &t->helpers[i];
		long pid;

		if (h->creator != creator)
			continue;
		/* the members become ours when the helper exits */
		if (!helpers && creator && !sessions_is_helper(t, creator) &&
		    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) {
			pr_err("pid %u: cannot become a child subreaper: %m", creator);
			return -errno;
		}
		helpers = true;
		pid = clone_pid(creator, h->pid, 0, 0);
		if (pid == 0)
			helper_main(t, h);
		if (pid < 0)
			return (int)pid;
	}
	nk = tree_created(t, creator, &kids);
	/* children in the creator's namespace and nested inits, then those in the
	 * nested namespace it unshare()d (which it enters between) */
	for (int nested = 0; nested < 2; nested++) {
		if (nested && me && me->pid_ns_for_children) {
			int ret = pidns_enter_children(me);

			if (ret)
				return ret;
		}
		for (size_t k = 0; k < nk; k++) {
			int ret;

			if (into_children_ns(t, t->pstree[kids[k]]) != nested)
				continue;
			ret = fork_child(t, creator, kids[k], helpers);
			if (ret)
				return ret;
		}
	}
	for (size_t k = 0; k < nk; k++)
		if (t->pstree[kids[k]]->zombie && zombie_made(t, kids[k]))
			return -EIO;
	return helpers ? reap_helpers(t, creator) : 0;
}

/*
 * A helper: makes the session (or group) of its pid, creates the members
 * that came from it, and exits (they go to its creator, a subreaper).
 */
static void __attribute__((noreturn)) helper_main(struct tree *t, struct tree_helper *h)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != (h->creator ? (pid_t)h->creator : amber_pid))
		_exit(1);
	if (!h->creator)
		drop_amber_fds(t);
	files_drop_inherited(t, h->creator);
	if (h->session ? setsid() < 0 : setpgid(0, 0) < 0) {
		pr_err("helper %u: cannot make its %s: %m", h->pid,
		       h->session ? "session" : "process group");
		_exit(1);
	}
	_exit(fork_children(t, h->pid) ? 1 : 0);
}

/* Whether pid is one of the helpers, idx's zombie session leader, or idx's parent. */
static bool parent_expected(struct tree *t, size_t idx, pid_t ppid)
{
	pid_t real = seen_ppid(t, idx);

	return ppid == real || sessions_is_helper(t, (uint32_t)ppid) ||
	       (idx && (uint32_t)ppid == t->creator[idx]);
}

/*
 * A process a helper made waits for go without a parent-death signal (the
 * helper's exit would send it): it gives up when its parent is neither a
 * helper nor its own.  After go it is its own parent's, and dies with it.
 */
static int wait_go(struct tree *t, size_t idx)
{
	struct pollfd pfd = {.fd = syncs[idx].child, .events = POLLIN};
	pid_t real = seen_ppid(t, idx);

	if (t->creator[idx] == (idx ? t->pstree[idx]->ppid : 0))
		return recv_go(t, idx);
	while (poll(&pfd, 1, 100) == 0)
		if (!parent_expected(t, idx, getppid()))
			return -1;
	if (recv_go(t, idx))
		return -1;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	return getppid() == real ? 0 : -1;
}

/*
 * A zombie makes its session or group as any process does (they last until
 * it is reaped), and the members of its session it leads; it dies then, or
 * with the other zombies once everything else is in place.
 */
static void __attribute__((noreturn)) zombie_main(struct tree *t, size_t idx)
{
	PstreeEntry *e = t->pstree[idx];
	int report_fd = syncs[idx].child;
	bool leads = sessions_zombie_leads(t, e->pid);

	if (e->sid == e->pid && setsid() < 0) {
		pr_err("zombie %u: setsid failed: %m", e->pid);
		child_report(report_fd, "setsid failed");
		_exit(1);
	}
	if (e->pgid == e->pid && e->sid != e->pid && setpgid(0, 0)) {
		pr_err("zombie %u: setpgid failed: %m", e->pid);
		child_report(report_fd, "setpgid failed");
		_exit(1);
	}
	if (leads && fork_children(t, e->pid)) {
		child_report(report_fd, "cannot create the members of its session");
		_exit(1);
	}
	child_report(report_fd, NULL);
	if (!leads && wait_go(t, idx))
		_exit(1);
	become_zombie(e);
}

static void __attribute__((noreturn)) child_main(struct tree *t, size_t idx)
{
	sigset_t all;

	/* all but SIGTRAP, whose handler a blocked trap would reset (infect.c) */
	sigfillset(&all);
	sigdelset(&all, SIGTRAP);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* Dies with its parent if the restore fails midway (and if that was
	 * before the prctl: the pid is the image's and must not stay taken). */
	if (t->creator[idx] == (idx ? t->pstree[idx]->ppid : 0)) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != seen_ppid(t, idx))
			_exit(1);
	} else if (!parent_expected(t, idx, getppid())) {
		_exit(1); /* (its helper may have exited already) */
	}
	if (!t->creator[idx])
		drop_amber_fds(t);
	/* the descriptions it needs come with its go, the others it must not
	 * pass on to its children (files.c) */
	if (files_own_table(t->pstree[idx]) || t->pstree[idx]->zombie)
		files_drop_inherited(t, t->creator[idx]);
	if (t->pstree[idx]->zombie)
		zombie_main(t, idx);
	if (wait_go(t, idx))
		_exit(1);
	child_setup(t, idx, false);
}

/*
 * The restore_prefork (or restore_child) hooks, in the child; a failure ends
 * it.  They do what the image says with libc (paths, limits, nice), so with
 * the image owner's rights only.
 */
static void child_hooks(struct restore_ctx *ctx, int report_fd, bool prefork)
{
	if (owner_enter(ctx->tree)) {
		child_report(report_fd, "cannot take the image owner's rights");
		_exit(1);
	}
	for (const struct resource_ops *const *r = resources; *r; r++) {
		int (*fn)(struct restore_ctx *) =
			prefork ? (*r)->restore_prefork : (*r)->restore_child;
		char msg[64];

		if (!fn || !fn(ctx))
			continue;
		snprintf(msg, sizeof(msg), "restore of %s failed", (*r)->name);
		child_report(report_fd, msg);
		_exit(1);
	}
	owner_leave(ctx->tree);
}

/*
 * Its copy of amber's heap (every process's images), unmapped by the child
 * itself once it set up, while amber drives the others: when amber's
 * injection cleared the address space, that unmap was a third of each
 * process's memory restore.  Nothing after it may touch the heap; a process
 * that made CLONE_VM children (they run amber's code on it later) keeps it.
 */
static void drop_heap(struct tree *t, PstreeEntry *e, bool vm)
{
	const uint32_t *kids;
	size_t nk = tree_created(t, e->pid, &kids);
	char *end;

	if (vm || !heap_start)
		return;
	for (size_t k = 0; k < nk; k++)
		if (t->pstree[kids[k]]->clone_vm)
			return;
	end = sbrk(0);
	if (end > (char *)heap_start)
		munmap((void *)heap_start, end - (char *)heap_start);
}

/* After "go": vm says the process shares its parent's memory (and log_fd). */
static void __attribute__((noreturn)) child_setup(struct tree *t, size_t idx, bool vm)
{
	PstreeEntry *e = t->pstree[idx];
	struct restore_ctx *ctx = tree_rproc(t, e->pid);
	int report_fd = syncs[idx].child, pages_fd = vm ? -1 : ctx->pages_fd;
	bool init = (!idx && t->own_pidns) || e->nested_init;
	unsigned long gap;

	if (!vm) {
		log_fd = fcntl(log_fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
		if (log_fd < 0)
			log_fd = 2;
	}
	/* its UTS and IPC namespaces first: its children are created in them */
	if (ns_restore_process(t, e->pid) || netns_restore_process(t, e->pid)) {
		child_report(report_fd, "cannot enter its namespaces");
		_exit(1);
	}
	/* the root: the proc of its pid namespace and the sysfs of its network namespace,
	 * with what is on them, before anyone reads them (ns/mnt.c) */
	if (!idx && mnt_restore_proc(t)) {
		child_report(report_fd, "cannot make its proc or sysfs mounts");
		_exit(1);
	}
	/* Sessions first: children are created in their parent's session. */
	if (e->sid == e->pid && setsid() < 0) {
		pr_err("pid %u: setsid failed: %m", e->pid);
		child_report(report_fd, "setsid failed");
		_exit(1);
	}
	/* so are groups; joining another group waits until all exist (task.c) */
	if (e->pgid == e->pid && e->sid != e->pid && setpgid(0, 0)) {
		pr_err("pid %u: setpgid failed: %m", e->pid);
		child_report(report_fd, "setpgid failed");
		_exit(1);
	}
	/* what the children inherit (copy-on-write memory) exists before them */
	if (!vm)
		child_hooks(ctx, report_fd, true);
	if (fork_children(t, e->pid)) {
		child_report(report_fd, "cannot create its children");
		_exit(1);
	}
	child_hooks(ctx, report_fd, false);
	/* last: inside, it could not have chosen its children's pids */
	if (ns_restore_user(t, e->pid)) {
		child_report(report_fd, "cannot enter its user namespace");
		_exit(1);
	}
	gap = vm ? 0 : mem_scratch_gap(ctx);
	drop_heap(t, e, vm);
	report_to_amber(report_fd, NULL, pages_fd, mem_scratch_premap(gap));
	/* a pid namespace's init ignores SIGSTOP from inside it: amber sends it */
	if (init)
		for (;;)
			pause();
	/* amber takes over from this stop (not raise(): a CLONE_VM child has its
	 * parent's TLS, and with it the parent's cached tid) */
	kill(getpid(), SIGSTOP);
	_exit(1);
}

/* Logged with what to do: a big tree may need more fds than the limit lets amber have. */
static int syncs_error(const struct tree *t, int err)
{
	struct rlimit rl = {0};

	getrlimit(RLIMIT_NOFILE, &rl);
	pr_err("cannot make the channels to the %zu processes' restore: %s%s (amber holds the "
	       "image's pages files and the tree's descriptions, and two fds a process above "
	       "fd %d; RLIMIT_NOFILE is %llu)",
	       t->nr_pstree, strerror(err),
	       err == EMFILE ? ": raise the fd limit (ulimit -n; the hard limit needs "
			       "CAP_SYS_RESOURCE)"
			     : "",
	       t->fd_base, (unsigned long long)rl.rlim_cur);
	return -err;
}

static int make_syncs(struct tree *t)
{
	syncs = calloc(t->nr_pstree, sizeof(*syncs));
	ours = calloc(t->nr_pstree, sizeof(*ours));
	seized = calloc(t->nr_pstree, sizeof(*seized));
	if (!syncs || !ours || !seized)
		return -ENOMEM;
	for (size_t i = 0; i < t->nr_pstree; i++) {
		int fds[2];

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds))
			goto fail;
		/* above every fd a process will get, so that none clobbers them */
		for (int e = 0; e < 2; e++) {
			int nfd = fcntl(fds[e], F_DUPFD_CLOEXEC, t->fd_base);

			close(fds[e]);
			fds[e] = nfd;
		}
		syncs[i].amber = fds[0];
		syncs[i].child = fds[1];
		if (fds[0] < 0 || fds[1] < 0)
			goto fail;
	}
	return 0;
fail:
	return syncs_error(t, errno);
}

/* The root has namespaces of its own: setup-namespaces is a stage of this restore. */
static bool has_namespaces(const struct tree *t)
{
	const PstreeEntry *r = t->pstree[0];

	return t->own_pidns || r->uts_ns || r->ipc_ns || r->time_ns || r->cgroup_ns || r->net_ns ||
	       r->mnt_ns || r->user_ns;
}

static int seize_and_go(struct tree *t, size_t idx)
{
	pid_t pid = host_pid(t, idx);
	long r = sys_ptrace(PTRACE_SEIZE, pid, NULL,
			    (void *)(long)(PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD));

	if (r) {
		pr_err("cannot trace the restored process %d: %s", pid, strerror((int)-r));
		return (int)r;
	}
	ours[idx] = true;
	seized[idx] = true;
	return send_go(t, idx);
}

/*
 * Every restored process starts as a fork of amber, with a copy of amber's
 * heap (every process's images: 28 MB for 2000 processes), whose page table
 * each fork copies and each restore unmaps again: O(n^2) for a tree of n.
 * Collapsed into huge pages, a fork copies one entry per 2 MB instead of 512
 * (a tree of 2000 restored in half the time).  Collapsing copies each 2 MB
 * once, which only many forks repay (estimated, not measured: a few dozen),
 * so small trees keep their pages.  Best effort: a kernel without
 * MADV_COLLAPSE (6.1) forks the 4 KB pages as before.  Where the heap
 * starts is noted for every tree: each child unmaps its copy (drop_heap).
 */
static void heap_to_huge_pages(const struct tree *t)
{
	const unsigned long huge = 2UL << 20;
	unsigned long start, end;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	f = fopen("/proc/self/maps", "re");
	if (!f)
		return;
	while (getline(&line, &cap, f) > 0) {
		if (!strstr(line, " [heap]") || sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		heap_start = start;
		if (t->nr_pstree < 32)
			break;
		start = (start + huge - 1) & ~(huge - 1);
		end &= ~(huge - 1);
		if (start < end && madvise((void *)start, end - start, MADV_COLLAPSE))
			pr_debug("amber's heap stays in small pages: %m");
		break;
	}
	free(line);
	fclose(f);
}

/*
 * Create the tree.  Each process, once seized and told to go, creates its
 * children, sets up what needs libc and stops; amber follows in pstree
 * order (parents first), seizing each child as soon as its parent made it.
 */
static int create_tree(struct tree *t)
{
	const uint32_t *kids;
	size_t nk;
	int ret;

	vm_tree = t;
	amber_pid = getpid();
	root_parent = t->o->rst_sibling ? getppid() : amber_pid;
	if (t->o->rst_sibling && t->creator[0]) {
		pr_err("option rst_sibling: the root %u is made by a helper (its session or group "
		       "leader is gone), which cannot make it the client's child",
		       t->pstree[0]->pid);
		return -EOPNOTSUPP;
	}
	/* the root, made by a helper, comes back to amber when that exits */
	if (t->creator[0] && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) {
		pr_err("cannot become a child subreaper: %m");
		return -errno;
	}
	heap_to_huge_pages(t);
	ret = fork_children(t, 0);
	if (t->creator[0])
		prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
	if (ret)
		return ret;
	ours[0] = true;
	ret = seize_and_go(t, 0);
	for (size_t i = 0; !ret && i < t->nr_pstree; i++) {
		PstreeEntry *e = t->pstree[i];
		struct restore_ctx *ctx = tree_rproc(t, e->pid);

		if (e->zombie)
			continue;
		ret = read_child_report(ctx, syncs[i].amber);
		if (!ret && ((!i && t->own_pidns) || e->nested_init) &&
		    kill(host_pid(t, i), SIGSTOP))
			ret = -errno;
		if (!ret)
			ret = wait_child_stop(host_pid(t, i));
		/* the host pids of the children it made (ns/pidns.c) */
		if (!ret)
			ret = pidns_find_children(t, i);
		/* all its children exist now, also those its helpers made (the root
		 * is entry 0: no child is listed before its parent) */
		nk = tree_children(t, e->pid, &kids);
		for (size_t k = 0; !ret && k < nk; k++)
			if (kids[k] > i)
				ours[kids[k]] = true;
		for (size_t k = 0; !ret && k < nk; k++)
			if (kids[k] > i && !t->pstree[kids[k]]->zombie && !seized[kids[k]])
				ret = seize_and_go(t, kids[k]);
	}
	return ret;
}

/*
 * amber and the process it drives share one CPU while it injects: a ptrace
 * round trip between two CPUs waits for the other one to wake up (three
 * times slower, measured in a VM).  The process's own affinity comes back
 * after amber's last syscall in it (sched_restore_affinity), so a process
 * whose image lacks it for a thread is left where it is.
 */
static cpu_set_t amber_cpus, pin_set;
static bool pinned;

static void pin_start(void)
{
	int cpu = sched_getcpu();

	if (cpu < 0 || cpu >= CPU_SETSIZE ||
	    sys_sched_getaffinity(0, &amber_cpus, sizeof(amber_cpus)) < 0)
		return;
	CPU_ZERO(&pin_set);
	CPU_SET(cpu, &pin_set);
	pinned = !sys_sched_setaffinity(0, &pin_set, sizeof(pin_set));
}

/* Whether sched.c gives it back its own affinity (else amber leaves it alone). */
static bool may_pin(const struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_threads; i++)
		if (!ctx->threads[i].core->has_sched_policy ||
		    !ctx->threads[i].core->cpu_affinity.len)
			return false;
	return pinned;
}

static void pin_process(const struct restore_ctx *ctx)
{
	if (may_pin(ctx)) /* best effort: its cpuset may not have amber's CPU */
		sys_sched_setaffinity(ctx->inf.pid, &pin_set, sizeof(pin_set));
}

/* The next process, clearing ahead: on amber's other CPUs (false: it has none). */
static bool pin_elsewhere(const struct restore_ctx *ctx)
{
	cpu_set_t other;

	if (!pinned)
		return false;
	CPU_XOR(&other, &amber_cpus, &pin_set);
	if (!CPU_COUNT(&other))
		return false;
	if (may_pin(ctx))
		sys_sched_setaffinity(ctx->inf.pid, &other, sizeof(other));
	return true;
}

int restore_cpus_free(cpu_set_t *set)
{
	CPU_ZERO(set);
	if (!pinned)
		return 0;
	CPU_XOR(set, &amber_cpus, &pin_set);
	return CPU_COUNT(set);
}

static void pin_end(void)
{
	if (pinned)
		sys_sched_setaffinity(0, &amber_cpus, sizeof(amber_cpus));
	pinned = false;
}

static unsigned long fork_syscall_ip;

static int attach_process(struct restore_ctx *ctx)
{
	int ret;

	if (ctx->attached)
		return 0;
	ret = infect_attach_stopped(tree_hpid(ctx->tree, (uint32_t)ctx->pid), &ctx->inf);
	/* a fork of amber's has amber's vDSO, and in it the same syscall instruction */
	if (!ret && !ctx->shares_vm && fork_syscall_ip) {
		ctx->inf.syscall_ip = fork_syscall_ip;
	} else if (!ret) {
		ret = infect_find_syscall(&ctx->inf);
		if (!ret && !ctx->shares_vm)
			fork_syscall_ip = ctx->inf.syscall_ip;
	}
	ctx->attached = !ret;
	return ret;
}

/*
 * How many of the next processes clear their address spaces meanwhile
 * (mem.c).  With one, amber waited for its batch a third of each turn; with
 * two the CPU that runs them never waits for amber to start the next (a
 * tree of 500: 0.71 -> 0.55 s; three gained nothing more).
 */
#define CLEAR_AHEAD 2

static int restore_process(struct tree *t, size_t p)
{
	struct restore_ctx *ctx = t->rprocs[p];
	int ret = attach_process(ctx);

	/* (pinned before its batch ended, it would finish that on amber's CPU) */
	if (!ret)
		ret = mem_clear_done(ctx);
	if (!ret)
		pin_process(ctx);
	for (size_t k = p + 1; !ret && k <= p + CLEAR_AHEAD && k < t->nr_procs; k++) {
		struct restore_ctx *next = t->rprocs[k];

		if (next->shares_vm || next->clear)
			continue;
		ret = attach_process(next);
		if (!ret && pin_elsewhere(next))
			ret = mem_clear_ahead(next);
	}
	if (!ret)
		ret = inject_all(ctx);
	return ret;
}

/* Second pass: every process exists and has its credentials (restore_late). */
static int late_process(struct restore_ctx *ctx)
{
	int ret = 0;

	for (const struct resource_ops *const *r = resources; *r && !ret; r++) {
		uint64_t t0 = stats_now();

		if ((*r)->restore_late)
			ret = (*r)->restore_late(ctx);
		stats_resource((size_t)(r - resources), t0);
	}
	return ret;
}

/* Third pass: an fd table may be shared, so amber's fds go only once all are done. */
static int finish_process(struct restore_ctx *ctx)
{
	return drop_internal(ctx) ?: sched_restore_affinity(ctx) ?: restore_finish(ctx);
}

/* Zombies die now; their parents are still stopped, so nobody reaps them yet. */
static int make_zombies(struct tree *t)
{
	for (size_t i = 0; i < t->nr_pstree; i++) {
		PstreeEntry *e = t->pstree[i];
		struct restore_ctx *parent;
		char path[64], *buf;
		bool dead = false;
		int ret;

		if (!e->zombie)
			continue;
		parent = tree_rproc(t, e->ppid);
		ret = parent ? signals_zombie_dies(parent, false) : 0;
		if (ret)
			return ret;
		if (send_fd(syncs[i].amber, 'g', -1))
			return -EPIPE;
		snprintf(path, sizeof(path), "/proc/%d/stat", host_pid(t, i));
		for (int n = 0; n < 500 && !dead; n++) {
			if (!sys_read_file(path, &buf, NULL)) {
				char *p = strrchr(buf, ')');

				dead = p && p[1] && p[2] == 'Z';
				free(buf);
			}
			if (!dead)
				usleep(10 * 1000);
		}
		if (!dead) {
			pr_err("pid %u did not become a zombie again", e->pid);
			return -ETIMEDOUT;
		}
		ret = parent ? signals_zombie_dies(parent, true) : 0;
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Only what amber made: a pid of the image may be held by an unrelated
 * process (the EEXIST case).  Processes created but not yet seized die with
 * their parent (PR_SET_PDEATHSIG), seized ones also when amber exits.
 */
static void kill_tree(struct tree *t)
{
	/* the root of its own pid namespace takes the whole namespace with it */
	for (size_t i = 0; ours && i < t->nr_pstree; i++)
		if (ours[i] && host_pid(t, i))
			kill(host_pid(t, i), SIGKILL);
	while (sys_waitpid(-1, NULL, __WALL) > 0)
		;
}

static int do_restore(struct opts *o, uint32_t *root)
{
	struct tree t = {.o = o};
	int ret, vret;

	stats_start(ST_TOTAL);
	ret = opts_open_log(o);
	if (ret)
		return ret;
	t.dirfd = sys_open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (t.dirfd < 0) {
		pr_err("cannot open image directory %s: %s", o->dir, strerror(-t.dirfd));
		return t.dirfd;
	}
	/* the pages files are hashed meanwhile: nothing runs before they matched */
	ret = img_dir_open(t.dirfd, o->dir, &t.img);
	if (ret)
		goto close_dir;
	t.inv = t.img->inv;
	/* the directory's owner, checked to own every file: the fds hold what it vouched for */
	t.image_uid = t.img->uid;
	t.image_gid = t.img->gid;
	ret = owner_init(&t);
	if (ret)
		goto close_dir;
	if (t.inv->shell_job && !o->shell_job) {
		pr_err("%s was dumped with --shell-job; restore it with -j from a terminal",
		       o->dir);
		ret = -EINVAL;
		goto close_dir;
	}
	ret = read_pstree(&t);
	if (!ret)
		ret = ns_restore_read(&t);
	if (!ret)
		ret = netns_restore_read(&t);
	if (!ret)
		ret = mnt_restore_read(&t);
	if (!ret)
		ret = read_processes(&t);
	if (!ret)
		release_process_images(&t);
	/* a new pid namespace has every pid free */
	for (size_t i = 0; !ret && !t.own_pidns && i < t.nr_pstree; i++)
		ret = wait_pid_free(t.pstree[i]->pid);
	for (size_t i = 0; !ret && !t.own_pidns && i < t.nr_helpers; i++)
		ret = wait_pid_free(t.helpers[i].pid);
	if (ret)
		goto close_dir;
	ret = action_run(o, "pre-restore", 0);
	if (ret)
		goto close_dir;
	compute_fd_base(&t);
	raise_nofile(&t);
	/* the descriptions first, at the lowest fds: the channels are amber's,
	 * and each fork copies the fd table up to the highest fd left open */
	ret = run_restore_tree(&t);
	if (!ret)
		ret = make_syncs(&t);
	if (ret)
		goto close_dir;

	stats_start(ST_FORKING);
	ret = create_tree(&t);
	/* amber keeps no end of the restored pipes and files open */
	files_close_descs();
	/* CRIU's stage for the runtime (runc's prestart hooks fill an empty netns) */
	if (!ret && has_namespaces(&t))
		ret = action_run(o, "setup-namespaces", host_pid(&t, 0));
	stats_stop(ST_FORKING);
	stats_start(ST_RESTORE);
	stats_add(SC_PROCESSES, t.nr_procs);
	progress_start(true);
	pin_start();
	for (size_t p = 0; !ret && p < t.nr_procs; p++) {
		ret = restore_process(&t, p);
		if (!ret)
			stats_add(SC_DONE, 1);
	}
	for (size_t p = 0; !ret && p < t.nr_procs; p++)
		ret = late_process(t.rprocs[p]);
	/* before the parents' masks and registers are theirs (signals_zombie_dies) */
	if (!ret)
		ret = make_zombies(&t);
	for (size_t p = 0; !ret && p < t.nr_procs; p++)
		ret = finish_process(t.rprocs[p]);
	pin_end();
	progress_stop();
	/* a corrupt pages file explains any failure above best */
	vret = img_dir_wait(t.img);
	ret = vret ? vret : ret;
	/* built, not yet running: the scripts see them as they will run */
	if (!ret)
		ret = action_run(o, "post-restore", host_pid(&t, 0));
	if (!ret && o->tcp_established)
		ret = action_run(o, "network-unlock", host_pid(&t, 0));
	if (!ret)
		ret = action_run(o, "pre-resume", host_pid(&t, 0));
	if (ret)
		goto kill_tree;
	for (size_t p = 0; p < t.nr_procs; p++) {
		struct restore_ctx *ctx = t.rprocs[p];

		if (ctx->core->has_stop_signal && ctx->core->stop_signal)
			kill(ctx->inf.pid, ctx->core->stop_signal);
		else if (o->leave_stopped) /* -s: taken as soon as it is let go */
			kill(ctx->inf.pid, SIGSTOP);
		for (size_t i = 1; i < ctx->nr_threads; i++)
			infect_detach(ctx->threads[i].inf);
		ret = infect_detach(&ctx->inf);
		if (ret)
			goto kill_tree;
	}
	for (const struct resource_ops *const *r = resources; *r; r++)
		if ((*r)->restore_done)
			(*r)->restore_done(&t);
	stats_stop(ST_RESTORE);
	stats_stop(ST_TOTAL);
	stats_write_restore(&t);
	if (o->display_stats)
		stats_print(true);
	pr_info("%zu process(es) restored from %s", t.nr_procs, o->dir);
	/* they run: a failing script cannot undo that, only say so */
	if (action_run(o, "post-resume", host_pid(&t, 0)))
		pr_warn("the processes run, but the post-resume script failed");
	if (root)
		*root = (uint32_t)host_pid(&t, 0);
	if (o->pidfile && write_pidfile(o->pidfile, host_pid(&t, 0)))
		pr_warn("pid %d runs, but the pidfile was not written", host_pid(&t, 0));
	if (!o->detached)
		ret = wait_restored(t.rprocs[0]) | RESTORE_WAITED;
	goto close_dir;

kill_tree:
	kill_tree(&t);
	pr_err("restore from %s failed; nothing was left running", o->dir);
	if (!ret)
		ret = -EIO;
close_dir:
	/* a failure (the wait's status is positive) */
	for (const struct resource_ops *const *r = resources; ret < 0 && *r; r++)
		if ((*r)->restore_undo)
			(*r)->restore_undo(&t);
	if (ret < 0)
		netlock_restore_failed(&t);
	/* after an early failure this still joins the hashing (and says if it failed) */
	img_dir_close(t.img);
	if (o->shell_job && !o->detached)
		reclaim_terminal();
	owner_free(&t);
	close(t.dirfd);
	return ret;
}

int restore_run(struct opts *o, uint32_t *root)
{
	return do_restore(o, root);
}

int cmd_restore(int argc, char **argv)
{
	struct opts o = {0};
	int ret;

	if (opts_parse(argc, argv, &o, CMD_RESTORE))
		return 2;
	if (o.help) {
		opts_usage(stdout, CMD_RESTORE);
		return 0;
	}
	ret = o.new_pidns ? pidns_restore(&o, do_restore) : do_restore(&o, NULL);
	if (ret > 0 && (ret & RESTORE_WAITED)) /* -errno has that bit set too */
		return ret & 0xff;
	return ret ? 1 : 0;
}
