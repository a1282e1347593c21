// SPDX-License-Identifier: MIT
/*
 * amber dump: freeze one task, let every resource write its part of the
 * image, mark the image complete, then kill or release the task.  Any
 * failure before the image is complete releases the task as it was.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "action.h"
#include "amber.h"
#include "progress.h"
#include "stats.h"
#include "uapi/amber_kernel.h"
#include "dump.h"
#include "freezer.h"
#include "log.h"
#include "proc.h"
#include "ns/ns.h"
#include "sys.h"

volatile sig_atomic_t amber_interrupted;

static void on_signal(int sig)
{
	amber_interrupted = sig;
}

/* Ctrl-C or a kill of amber during a dump must not harm the target. */
static void catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
}

int dump_check_interrupted(void)
{
	if (!amber_interrupted)
		return 0;
	pr_err("interrupted by signal %d; releasing the process unharmed", (int)amber_interrupted);
	return -EINTR;
}

/* amber's own namespace links, read once a dump (every process is compared
 * with them: 11 readlinks of /proc/self a process, the same each time). */
static struct {
	bool read;
	int user_len, len[10];
	char user[64], link[10][64];
} own_ns;

static void read_own_ns(const char *const *kinds, size_t n)
{
	char path[64];

	own_ns.user_len = sys_readlink("/proc/self/ns/user", own_ns.user, sizeof(own_ns.user));
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/proc/self/ns/%s", kinds[i]);
		own_ns.len[i] = sys_readlink(path, own_ns.link[i], sizeof(own_ns.link[i]));
	}
	own_ns.read = true;
}

/*
 * amber restores into its own namespaces, but for UTS, IPC, time, cgroup
 * (ns/ns.c), network (ns/net.c) and mount ones (ns/mnt.c), which restore
 * makes again (as root): a process in others (a container) would come back
 * somewhere else, so it is refused.
 */
static int check_namespaces(const struct tree *t, pid_t pid)
{
	/* *_for_children: a process that unshare()d them makes its children there */
	static const char *const kinds[] = {"pid",
					    "mnt",
					    "net",
					    "ipc",
					    "uts",
					    "user",
					    "cgroup",
					    "time",
					    "pid_for_children",
					    "time_for_children"};
	char user[64], upath[64];
	bool in_user;

	_Static_assert(sizeof(kinds) / sizeof(kinds[0]) <= 10, "own_ns.link");
	if (!own_ns.read)
		read_own_ns(kinds, sizeof(kinds) / sizeof(kinds[0]));
	/* with a user namespace, the kinds ns.c makes inside it are restored */
	snprintf(upath, sizeof(upath), "/proc/%d/ns/user", pid);
	in_user = own_ns.user_len >= 0 && sys_readlink(upath, user, sizeof(user)) >= 0 &&
		  strcmp(own_ns.user, user);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		bool kept = !strcmp(kinds[i], "uts") || !strcmp(kinds[i], "ipc") ||
			    !strcmp(kinds[i], "time") || !strcmp(kinds[i], "cgroup") ||
			    !strcmp(kinds[i], "net") || !strcmp(kinds[i], "mnt") ||
			    !strcmp(kinds[i], "user");
		bool in_kept = !strcmp(kinds[i], "uts") || !strcmp(kinds[i], "ipc") ||
			       !strcmp(kinds[i], "cgroup") || !strcmp(kinds[i], "user") ||
			       !strcmp(kinds[i], "net") || !strcmp(kinds[i], "time");
		const char *mine = own_ns.link[i];
		char theirs[64], path[64];
		int ret;

		if (own_ns.len[i] < 0)
			continue; /* a kernel without this namespace kind */
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, kinds[i]);
		ret = (int)sys_readlink(path, theirs, sizeof(theirs));
		if (ret < 0) {
			/* a pid namespace unshare()d for children none of which exists yet */
			if (ret == -ENOENT && !strcmp(kinds[i], "pid_for_children") &&
			    !kill(pid, 0)) {
				pr_err("pid %d unshare()d a pid namespace for its children "
				       "(pid_for_children) and has not made its first one yet; "
				       "amber cannot make that namespace: dump it before the "
				       "unshare or once its child runs",
				       pid);
				return -EOPNOTSUPP;
			}
			continue;
		}
		if (!strcmp(kinds[i], "time_for_children")) {
			char own[64];

			snprintf(path, sizeof(path), "/proc/%d/ns/time", pid);
			if (sys_readlink(path, own, sizeof(own)) < 0 || !strcmp(own, theirs))
				continue;
			/* setns() puts a process and its children in one namespace: the
			 * restore cannot make the two differ again */
			pr_err("pid %d unshare()d a time namespace for its children "
			       "(time_for_children %s, its own time %s); amber restores a process "
			       "and its children to come in one time namespace: dump its child in "
			       "that namespace, or let it setns() into it, before the dump",
			       pid, theirs, own);
			return -EOPNOTSUPP;
		}
		if (!strcmp(mine, theirs))
			continue;
		if (in_user && !in_kept) {
			pr_err("pid %d is in user namespace %s and in another %s namespace than "
			       "amber (%s, amber %s); in a user namespace amber restores UTS, IPC, "
			       "cgroup, network and time namespaces only yet",
			       pid, user, kinds[i], theirs, mine);
			return -EOPNOTSUPP;
		}
		/* the root's own pid namespace and those one level below (ns/pidns.c) */
		if (t->own_pidns && !strncmp(kinds[i], "pid", 3)) {
			if (!strcmp(theirs, t->pidns))
				continue;
			ret = pidns_check_nested(t, pid, kinds[i], theirs);
			if (ret)
				return ret;
			continue;
		}
		if (!kept) {
			pr_err("pid %d is in another %s namespace than amber (%s, amber %s); "
			       "%s namespaces are not dumped yet: run amber inside it (nsenter)",
			       pid, kinds[i], theirs, mine, kinds[i]);
			return -EOPNOTSUPP;
		}
		if (geteuid()) {
			pr_err("pid %d is in another %s namespace than amber (%s, amber %s); only "
			       "root dumps namespaces (the restore makes them again)",
			       pid, kinds[i], theirs, mine);
			return -EPERM;
		}
	}
	return 0;
}

/*
 * amber's own line of ancestors cannot be dumped: freezing them would freeze
 * the shell waiting for amber, and the tree would hold amber itself; pid 1
 * cannot be killed or stopped without the rest of the system.  Refused
 * before anything is frozen or created.
 */
static int check_not_ancestor(pid_t pid)
{
	static const char *const kin[] = {"amber itself", "amber's parent", "amber's grandparent"};
	struct proc_stat st;
	pid_t p = getpid();

	if (pid == 1) {
		if (proc_parse_stat(1, &st))
			snprintf(st.comm, sizeof(st.comm), "?");
		pr_err("pid 1 (%s) is init, the ancestor of every process: it cannot be frozen "
		       "or killed without the whole system; dump a process below it",
		       st.comm);
		return -EINVAL;
	}
	for (int depth = 0; p > 1; depth++) {
		char what[64];
		int ret = proc_parse_stat(p, &st);

		if (ret) {
			pr_err("cannot read /proc/%d/stat (an ancestor of amber): %s", p,
			       strerror(-ret));
			return ret;
		}
		if (p == pid) {
			if (depth < 3)
				snprintf(what, sizeof(what), "%s", kin[depth]);
			else
				snprintf(what, sizeof(what), "an ancestor of amber (%d levels up)",
					 depth);
			pr_err("pid %d (%s) is %s: its tree holds amber, which would freeze "
			       "itself; run amber from outside the tree of pid %d",
			       pid, st.comm, what, pid);
			return -EINVAL;
		}
		p = st.ppid;
	}
	return 0;
}

/* What amber cannot dump yet is refused before anything is touched. */
static int check_supported(const struct tree *t, pid_t pid)
{
	struct proc_status st;
	int ret;

	ret = proc_parse_status(pid, &st);
	if (ret) {
		if (ret == -ENOENT)
			pr_err("pid %d does not exist", pid);
		else
			pr_err("cannot read /proc/%d/status: %s", pid, strerror(-ret));
		return ret;
	}
	/* a second tracer would see our stops, and we its (gdb, strace) */
	if (st.tracer_pid && st.tracer_pid != getpid()) {
		struct proc_stat tr;

		pr_err("pid %d is already traced by pid %d (%s); amber cannot freeze it under "
		       "another tracer: detach that one (quit gdb or strace) and dump again",
		       pid, st.tracer_pid,
		       proc_parse_stat(st.tracer_pid, &tr) ? "gone meanwhile" : tr.comm);
		return -EBUSY;
	}
	return check_namespaces(t, pid);
}

/* The ids of a core as the image has them. */
static int core_ids(struct dump_ctx *ctx, TaskCore *core)
{
	bool leader = core->pid == (uint32_t)ctx->pid;

	/* a thread in a nested pid namespace: its tid there too (ns/pidns.c) */
	if (!leader && pidns_nested_pid(ctx->tree, (pid_t)core->pid)) {
		core->has_nested_tid = 1;
		core->nested_tid = pidns_nested_pid(ctx->tree, (pid_t)core->pid);
	}
	/* the image's ids are the namespace's when the tree is one (ns/pidns.c) */
	return pidns_dump_ids(ctx->tree, (pid_t)core->pid, &core->pid, leader ? &core->ppid : NULL,
			      leader ? &core->pgid : NULL, leader ? &core->sid : NULL);
}

/*
 * core-PID.img, the leader's, and threads-PID.img, the other threads' in the
 * order core->threads lists them: one file, not one per thread (creating
 * thousands of files is most of the dump of a process of thousands of threads).
 */
static int write_cores(struct dump_ctx *ctx)
{
	struct img *img = NULL;
	int ret = 0;

	ctx->core->n_threads = ctx->nr_threads - 1;
	ctx->core->threads = malloc(sizeof(uint32_t) * ctx->nr_threads);
	if (!ctx->core->threads)
		return -ENOMEM;
	if (ctx->nr_threads > 1)
		ret = img_create(ctx->imgs, IMG_THREADS, &img, "threads-%u.img",
				 dump_vpid(ctx->tree, ctx->pid));
	for (size_t i = 1; !ret && i < ctx->nr_threads; i++) {
		ret = core_ids(ctx, ctx->threads[i].core);
		if (!ret)
			ret = img_put(img, &ctx->threads[i].core->base);
		ctx->core->threads[i - 1] = ctx->threads[i].core->pid;
	}
	if (img)
		ret = ret ? (img_abort(img), ret) : img_finish(img);
	if (!ret)
		ret = core_ids(ctx, ctx->core);
	if (!ret)
		ret = img_create(ctx->imgs, IMG_CORE, &img, "core-%u.img", ctx->core->pid);
	if (ret)
		return ret;
	ret = img_put(img, &ctx->core->base);
	if (ret) {
		img_abort(img);
		return ret;
	}
	return img_finish(img);
}

static int cmp_tid(const void *a, const void *b)
{
	return (*(const pid_t *)a > *(const pid_t *)b) - (*(const pid_t *)a < *(const pid_t *)b);
}

/* The tids seized so far, sorted: a pass over /proc/PID/task looks each up. */
static pid_t *known_tids(struct dump_ctx *ctx)
{
	pid_t *v = malloc((ctx->nr_threads + 1) * sizeof(*v));

	if (!v)
		return NULL;
	for (size_t i = 0; i < ctx->nr_threads; i++)
		v[i] = ctx->threads[i].tid;
	qsort(v, ctx->nr_threads, sizeof(*v), cmp_tid);
	return v;
}

/* Seized and interrupted; it stops on its own (seize_wait). */
static int seize_thread(struct dump_ctx *ctx, pid_t tid)
{
	struct thread *nt = realloc(ctx->threads, (ctx->nr_threads + 1) * sizeof(*nt));
	struct thread *t;
	int ret;

	if (!nt)
		return -ENOMEM;
	ctx->threads = nt;
	t = &nt[ctx->nr_threads];
	*t = (struct thread){.tid = tid};
	t->inf = calloc(1, sizeof(*t->inf));
	t->core = calloc(1, sizeof(*t->core));
	if (!t->inf || !t->core) {
		free(t->inf);
		free(t->core);
		return -ENOMEM;
	}
	task_core__init(t->core);
	t->core->pid = tid;
	ret = infect_seize_start(tid, t->inf);
	if (ret) {
		free(t->inf);
		free(t->core);
		return ret == -ESRCH ? 0 : ret; /* it exited meanwhile */
	}
	ctx->nr_threads++;
	/* --freeze-cgroup: they stop once the cgroup is thawed (finish_seizes) */
	return ctx->tree->freezer ? pidns_dump_add(ctx->tree, ctx->pid, tid) : 0;
}

/* The threads from first on, interrupted together, stopped; those gone meanwhile dropped. */
static int seize_wait(struct dump_ctx *ctx, size_t first)
{
	size_t k = first;
	int ret = 0;

	for (size_t i = first; i < ctx->nr_threads; i++) {
		struct thread *t = &ctx->threads[i];
		int stopsig, r = infect_seize_wait(t->inf, &stopsig);

		if (r) { /* exited meanwhile (-ESRCH), or let go (logged) */
			free(t->inf);
			free(t->core);
			if (r != -ESRCH && !ret)
				ret = r;
			continue;
		}
		/* every one stopped, also after an error: the failed dump lets them all go */
		ctx->threads[k++] = *t;
		r = pidns_dump_add(ctx->tree, ctx->pid, t->tid);
		if (r && !ret)
			ret = r;
	}
	ctx->nr_threads = k;
	return ret;
}

/* io_uring's workers run the kernel's code: not frozen, not restored (uring.c) */
static bool io_worker(pid_t pid, pid_t tid)
{
	struct proc_stat st;

	return !proc_parse_task_stat(pid, tid, &st) && (st.flags & PF_IO_WORKER);
}

/*
 * Freeze every thread: each pass interrupts every thread it finds, then
 * waits for them all (so that they stop together, not one after another).
 * Threads may be created while we go, so the list is read again until a
 * pass finds nothing new.
 */
static int seize_threads(struct dump_ctx *ctx)
{
	char path[64];
	bool found;

	ctx->threads = calloc(1, sizeof(*ctx->threads));
	if (!ctx->threads)
		return -ENOMEM;
	ctx->threads[0] = (struct thread){ctx->pid, &ctx->inf, ctx->core};
	ctx->nr_threads = 1;
	snprintf(path, sizeof(path), "/proc/%d/task", ctx->pid);
	do {
		size_t first = ctx->nr_threads, nr_known = ctx->nr_threads;
		pid_t *known = known_tids(ctx);
		struct dirent *de;
		DIR *d = sys_opendir(path);
		int ret = 0;

		if (!d || !known) {
			free(known);
			if (d)
				closedir(d);
			pr_err("cannot list %s: %m", path);
			return d ? -ENOMEM : -errno;
		}
		found = false;
		while (!ret && (de = readdir(d))) {
			pid_t tid = atoi(de->d_name);

			if (tid <= 0 || bsearch(&tid, known, nr_known, sizeof(tid), cmp_tid) ||
			    io_worker(ctx->pid, tid))
				continue;
			ret = seize_thread(ctx, tid);
			found = true;
		}
		closedir(d);
		free(known);
		if (!ctx->tree->freezer) {
			int r = seize_wait(ctx, first);

			ret = ret ? ret : r;
		}
		if (ret)
			return ret;
	} while (found);
	return 0;
}

static void for_threads_release(struct dump_ctx *ctx)
{
	for (size_t i = 1; i < ctx->nr_threads; i++)
		infect_detach(ctx->threads[i].inf);
}

static int dump_resources(struct dump_ctx *ctx);
static int dump_late(struct dump_ctx *ctx);

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static int commit_image(struct tree *t)
{
	Inventory inv = INVENTORY__INIT;
	struct utsname uts;
	struct timespec ts;

	uname(&uts);
	clock_gettime(CLOCK_REALTIME, &ts);
	inv.image_version = IMG_VERSION;
	inv.root_pid = dump_vpid(t, t->o->pid);
	inv.kernel = uts.release;
	inv.dump_time_ns = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	inv.shell_job = t->o->shell_job;
	inv.xsave_size = (uint32_t)t->dprocs[0]->core->xsave.len;
	inv.xfeatures = xgetbv0();
	inv.tool_version = AMBER_VERSION;
	/* a signal while the files are synced (seconds for big images) still stops it */
	t->imgs.go_on = dump_check_interrupted;
	return img_set_commit(&t->imgs, &inv);
}

static bool known_pid(struct tree *t, pid_t pid)
{
	return tree_entry(t, (uint32_t)pid) != NULL;
}

static PstreeEntry *add_pstree(struct tree *t, const struct proc_stat *st, pid_t pid)
{
	PstreeEntry *e = malloc(sizeof(*e)), **np;

	np = realloc(t->pstree, (t->nr_pstree + 1) * sizeof(*np));
	if (!e || !np) {
		free(e);
		if (np)
			t->pstree = np;
		return NULL;
	}
	t->pstree = np;
	pstree_entry__init(e);
	e->pid = pid;
	e->ppid = st->ppid;
	e->pgid = st->pgrp;
	e->sid = st->session;
	t->pstree[t->nr_pstree++] = e;
	return e;
}

static void free_ctx(struct dump_ctx *ctx)
{
	free(ctx->core);
	free(ctx->mm);
	free(ctx);
}

/*
 * A process seize_process() interrupted and the dump will not take: let go
 * once stopped.  Frozen (--freeze-cgroup) it stops only once thawed, and
 * amber's exit after the failed dump lets it go.
 */
static void release_seized(struct tree *t, struct dump_ctx *ctx)
{
	int stopsig;

	if (!t->freezer && !infect_seize_wait(&ctx->inf, &stopsig))
		infect_detach(&ctx->inf);
	free_ctx(ctx);
}

/* A context for pid, which is seized and interrupted: it stops on its own (add_seized). */
static int seize_process(struct tree *t, pid_t pid, struct dump_ctx **out)
{
	struct dump_ctx *ctx;
	int ret;

	ret = check_supported(t, pid);
	if (ret)
		return ret;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->o = t->o;
	ctx->tree = t;
	ctx->pid = pid;
	ctx->pidfd = -1;
	ctx->imgs = &t->imgs;
	ctx->files = &t->files;
	ctx->ghosts = &t->ghosts;
	ctx->core = calloc(1, sizeof(*ctx->core));
	ctx->mm = calloc(1, sizeof(*ctx->mm));
	if (!ctx->core || !ctx->mm) {
		free(ctx->core);
		free(ctx->mm);
		free(ctx);
		return -ENOMEM;
	}
	task_core__init(ctx->core);
	mm_entry__init(ctx->mm);
	ret = infect_seize_start(pid, &ctx->inf);
	if (ret) {
		free_ctx(ctx);
		return ret;
	}
	*out = ctx;
	return 0;
}

/*
 * A process seize_process() interrupted, once it stopped (with
 * --freeze-cgroup it stops when thawed: finish_seizes): all its threads
 * frozen, and it is one of the tree's.
 */
static int add_seized(struct tree *t, struct dump_ctx *ctx, int *stopsig)
{
	struct dump_ctx **np = realloc(t->dprocs, (t->nr_procs + 1) * sizeof(*np));
	pid_t pid = ctx->pid;
	struct proc_stat st;
	int ret;

	*stopsig = 0;
	if (!np) {
		release_seized(t, ctx);
		return -ENOMEM;
	}
	t->dprocs = np;
	/* (a wait that fails lets it go itself) */
	ret = t->freezer ? 0 : infect_seize_wait(&ctx->inf, stopsig);
	if (ret) {
		free_ctx(ctx);
		return ret;
	}
	t->dprocs[t->nr_procs++] = ctx;
	ctx->core->has_stop_signal = *stopsig != 0;
	ctx->core->stop_signal = *stopsig;
	ret = pidns_dump_add(t, pid, pid);
	if (!ret)
		ret = seize_threads(ctx);
	if (!ret)
		ret = proc_parse_stat(pid, &st);
	if (!ret && !add_pstree(t, &st, pid))
		ret = -ENOMEM;
	return ret;
}

/* Freeze one process (all its threads) and give it a context. */
static int add_process(struct tree *t, pid_t pid, int *stopsig)
{
	struct dump_ctx *ctx;
	int ret = seize_process(t, pid, &ctx);

	return ret ? ret : add_seized(t, ctx, stopsig);
}

/* A dead child nobody reaped yet: its wait status is the C/R exit_code field. */
static int add_zombie(struct tree *t, pid_t pid)
{
	struct proc_stat st;
	PstreeEntry *e;
	int ret = proc_parse_stat(pid, &st);

	if (!ret)
		ret = pidns_dump_add(t, pid, pid);
	if (ret)
		return ret;
	e = add_pstree(t, &st, pid);
	if (!e)
		return -ENOMEM;
	e->has_zombie = e->has_exit_status = 1;
	e->zombie = true;
	e->exit_status = (uint32_t)st.exit_code;
	e->comm = strdup(st.comm);
	return e->comm ? 0 : -ENOMEM;
}

/*
 * The n children a thread's children file lists, those not in the tree yet:
 * every live one interrupted first, so that they all stop together (not each
 * in turn while amber waits), then each taken in the file's order.
 */
static int add_children(struct tree *t, const pid_t *kids, int n, bool *found)
{
	struct dump_ctx **seized = calloc((size_t)n + 1, sizeof(*seized));
	bool *zombie = calloc((size_t)n + 1, sizeof(*zombie));
	int stopsig, k, ret = seized && zombie ? 0 : -ENOMEM;

	for (k = 0; !ret && k < n; k++) {
		struct proc_stat st;

		if (known_pid(t, kids[k]))
			continue;
		*found = true;
		zombie[k] = !proc_parse_stat(kids[k], &st) && st.state == 'Z';
		if (!zombie[k])
			ret = seize_process(t, kids[k], &seized[k]);
	}
	for (k = 0; !ret && k < n; k++) {
		if (zombie[k])
			ret = add_zombie(t, kids[k]);
		else if (seized[k])
			ret = add_seized(t, seized[k], &stopsig);
		seized[k] = NULL;
	}
	/* after a failure, those interrupted and not taken go on as they were */
	for (k = 0; seized && k < n; k++)
		if (seized[k])
			release_seized(t, seized[k]);
	free(seized);
	free(zombie);
	return ret;
}

/*
 * Walk the tree through the children files of every thread, freezing each
 * process found.  A process may fork while we go, so the walk is repeated
 * until a pass finds nothing new (each frozen process can no longer fork).
 */
static int collect_tree(struct tree *t)
{
	bool found;
	int stopsig, ret;

	ret = add_process(t, t->o->pid, &stopsig);
	if (ret)
		return ret;
	do {
		found = false;
		for (size_t p = 0; p < t->nr_procs; p++) {
			struct dump_ctx *ctx = t->dprocs[p];

			for (size_t i = 0; i < ctx->nr_threads; i++) {
				pid_t *kids;
				int n = proc_children(ctx->threads[i].tid, &kids);

				if (n < 0) {
					pr_err("cannot read /proc/%d/task/%d/children: %s%s",
					       ctx->pid, ctx->threads[i].tid, strerror(-n),
					       n == -ENOENT
						       ? " (kernel without CONFIG_PROC_CHILDREN? "
							 "see amber check)"
						       : "");
					return n;
				}
				ret = add_children(t, kids, n, &found);
				free(kids);
				if (ret)
					return ret;
			}
		}
	} while (found);
	return 0;
}

/* --freeze-cgroup: the tasks seized and interrupted while frozen stop once thawed. */
static int finish_seizes(struct tree *t)
{
	int ret = 0;

	for (size_t p = 0; p < t->nr_procs; p++) {
		struct dump_ctx *ctx = t->dprocs[p];
		/* a process whose threads were not listed yet: its leader alone */
		size_t n = ctx->nr_threads ? ctx->nr_threads : 1;

		for (size_t i = 0; i < n; i++) {
			struct infect *inf = ctx->nr_threads ? ctx->threads[i].inf : &ctx->inf;
			int stopsig, r = infect_seize_wait(inf, &stopsig);

			if (!r && inf == &ctx->inf) {
				ctx->core->has_stop_signal = stopsig != 0;
				ctx->core->stop_signal = stopsig;
			}
			if (r && !ret)
				ret = r;
		}
	}
	return ret;
}

/*
 * --freeze-cgroup: one write freezes the whole tree, so the walk of
 * collect_tree() meets no fork or exit; every thread is seized and
 * interrupted while frozen, and stops in its ptrace stop when thawed, before
 * it runs an instruction of its own (freezer.c).  The cgroup is thawed
 * whatever happened: the dump's injected syscalls need the tasks to run.
 */
static int collect_frozen(struct tree *t)
{
	int ret = freezer_freeze(t->freezer), thawed;

	if (ret)
		return ret;
	/* again: the processes could fork or exit until the freeze */
	ret = freezer_check_members(t->freezer, t->o->pid);
	if (!ret)
		ret = collect_tree(t);
	thawed = freezer_thaw(t->freezer);
	/* still frozen, a v1 task would never stop: amber's exit lets it go */
	if (thawed)
		return ret ? ret : thawed;
	thawed = finish_seizes(t);
	return ret ? ret : thawed;
}

static int kcmp_type;
static int kcmp_err;

static int kcmp_procs(const void *a, const void *b)
{
	const struct dump_ctx *x = *(struct dump_ctx *const *)a, *y = *(struct dump_ctx *const *)b;
	int r = sys_kcmp(x->pid, y->pid, kcmp_type, 0, 0);

	if (r < 0) {
		kcmp_err = r;
		return x->pid - y->pid;
	}
	return r == 0 ? 0 : r == 1 ? -1 : 1;
}

/* The pstree flag that records "shares this with its parent". */
static protobuf_c_boolean *share_flag(PstreeEntry *e, int type, protobuf_c_boolean **has)
{
	switch (type) {
	case KCMP_FILES:
		*has = &e->has_clone_files;
		return &e->clone_files;
	case KCMP_FS:
		*has = &e->has_clone_fs;
		return &e->clone_fs;
	case KCMP_VM:
		*has = &e->has_clone_vm;
		return &e->clone_vm;
	default:
		*has = &e->has_clone_sighand;
		return &e->clone_sighand;
	}
}

/*
 * What processes (not threads) share through clone() flags: sorted by kcmp
 * order, sharers are adjacent.  Whatever a process shares with its parent is
 * recreated with the same clone flag, so in every group of sharers all but
 * the topmost must share with their parent.
 */
static int check_sharing(struct tree *t)
{
	static const struct {
		int type;
		const char *what;
	} kinds[] = {{KCMP_FILES, "fd table"},
		     {KCMP_FS, "cwd/root/umask"},
		     {KCMP_VM, "address space"},
		     {KCMP_SIGHAND, "signal handlers"}};
	struct dump_ctx **v = malloc(t->nr_procs * sizeof(*v));
	int ret = 0;

	if (!v)
		return -ENOMEM;
	for (size_t k = 0; !ret && k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		memcpy(v, t->dprocs, t->nr_procs * sizeof(*v));
		kcmp_type = kinds[k].type;
		kcmp_err = 0;
		qsort(v, t->nr_procs, sizeof(*v), kcmp_procs);
		for (size_t i = 0; !kcmp_err && i < t->nr_procs; i++) {
			bool with_prev =
				i > 0 && !sys_kcmp(v[i - 1]->pid, v[i]->pid, kcmp_type, 0, 0);
			bool with_next = i + 1 < t->nr_procs &&
					 !sys_kcmp(v[i]->pid, v[i + 1]->pid, kcmp_type, 0, 0);
			PstreeEntry *e = tree_entry(t, v[i]->pid);
			protobuf_c_boolean *flag, *has;

			if (!with_prev && !with_next)
				continue;
			flag = share_flag(e, kcmp_type, &has);
			if (tree_entry(t, e->ppid) && !tree_entry(t, e->ppid)->zombie &&
			    !sys_kcmp(e->ppid, v[i]->pid, kcmp_type, 0, 0))
				*has = *flag = 1;
		}
		if (kcmp_err) {
			pr_err("kcmp(%s) failed: %s (see amber check)", kinds[k].what,
			       strerror(-kcmp_err));
			ret = kcmp_err;
			break;
		}
		for (size_t i = 0; i + 1 < t->nr_procs; i++) {
			size_t j = i;
			int tops = 0;

			while (j + 1 < t->nr_procs &&
			       !sys_kcmp(v[j]->pid, v[j + 1]->pid, kcmp_type, 0, 0))
				j++;
			for (size_t m = i; j > i && m <= j; m++) {
				protobuf_c_boolean *has;

				tops += !*share_flag(tree_entry(t, v[m]->pid), kcmp_type, &has);
			}
			if (tops > 1) {
				pr_err("pid %d and others share their %s, but not through their "
				       "parents (the process that cloned them exec'd or exited); "
				       "amber recreates sharing only as clone() flags from parent "
				       "to child",
				       v[i]->pid, kinds[k].what);
				ret = -EOPNOTSUPP;
				break;
			}
			i = j;
		}
	}
	/* memory another process changes while we read it cannot be dumped */
	if (!ret && t->pstree[0]->ppid &&
	    !sys_kcmp((pid_t)t->pstree[0]->ppid, t->pstree[0]->pid, KCMP_VM, 0, 0)) {
		pr_err("pid %u shares its address space with its parent %u, which is outside the "
		       "tree; dump from pid %u instead",
		       t->pstree[0]->pid, t->pstree[0]->ppid, t->pstree[0]->ppid);
		ret = -EOPNOTSUPP;
	}
	/* CLONE_SIGHAND needs CLONE_VM (and exec unshares both) */
	for (size_t i = 0; !ret && i < t->nr_pstree; i++)
		if (t->pstree[i]->clone_sighand && !t->pstree[i]->clone_vm) {
			pr_err("pid %u shares its parent's signal handlers but not its address "
			       "space; clone() cannot recreate that",
			       t->pstree[i]->pid);
			ret = -EOPNOTSUPP;
		}
	for (size_t p = 0; !ret && p < t->nr_procs; p++)
		t->dprocs[p]->shares_vm = tree_entry(t, t->dprocs[p]->pid)->clone_vm;
	free(v);
	return ret;
}

static int write_pstree(struct tree *t)
{
	struct img *img = NULL;
	int ret = img_create(&t->imgs, IMG_PSTREE, &img, "pstree.img");

	for (size_t i = 0; !ret && i < t->nr_pstree; i++) {
		/* a copy: the dump goes on with host pids (release, kill) */
		PstreeEntry e = *t->pstree[i];

		ret = pidns_dump_entry(t, &e);
		if (!ret)
			ret = img_put(img, &e.base);
	}
	if (ret) {
		if (img)
			img_abort(img);
		return ret;
	}
	return img_finish(img);
}

static int run_tree_hooks(struct tree *t, bool late)
{
	for (const struct resource_ops *const *r = resources; *r; r++) {
		int (*fn)(struct tree *) = late ? (*r)->dump_tree_late : (*r)->dump_tree;
		int ret;

		if (!fn)
			continue;
		ret = dump_check_interrupted();
		if (!ret) {
			uint64_t t0 = stats_now();

			ret = fn(t);
			stats_resource((size_t)(r - resources), t0);
		}
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * What a dump reads per thread in /proc costs most in the kernel's making
 * of a proc inode for each file (~8 us), 0.8 s for a process of 10,000
 * threads: the threads are shared out between amber's CPU and another.
 */
#define EACH_SPLIT_MIN 512

struct each_half {
	struct dump_ctx *ctx;
	int (*fn)(struct dump_ctx *, pid_t, void *);
	void *arg;
	size_t from, to;
	_Atomic int *failed; /* a half failed: the other stops */
	int ret;
};

static void *each_run(void *p)
{
	struct each_half *h = p;

	for (size_t i = h->from; i < h->to && !h->ret && !atomic_load(h->failed); i++)
		h->ret = h->fn(h->ctx, h->ctx->threads[i].tid, h->arg);
	if (h->ret)
		atomic_store(h->failed, 1);
	return NULL;
}

int dump_each_thread(struct dump_ctx *ctx, int (*fn)(struct dump_ctx *, pid_t, void *), void *arg)
{
	_Atomic int failed = 0;
	struct each_half a = {ctx, fn, arg, 1, ctx->nr_threads, &failed, 0}, b = a;
	bool split = ctx->nr_threads > EACH_SPLIT_MIN && sysconf(_SC_NPROCESSORS_ONLN) > 1;
	pthread_t th;

	if (ctx->nr_threads < 2)
		return 0;
	if (split) {
		b.from = a.to = 1 + (ctx->nr_threads - 1) / 2;
		split = !sys_thread_start(&th, each_run, &b);
		if (!split)
			a.to = ctx->nr_threads;
	}
	each_run(&a);
	if (split)
		pthread_join(th, NULL);
	return a.ret ?: b.ret;
}

/*
 * The tree is killed and left to die: each process frees its memory and
 * closes its files as it exits (70-110 ms for 1 GiB here), after amber is
 * gone.  SIGKILL is fatal at once: none of them runs another
 * instruction of its own.  amber's exit detaches them, so their parents reap
 * them; amber restore waits for a pid still in use (wait_pid_free()).  amber
 * waits when an exit handler acts for processes that are dead (the network
 * lock and the sockets' repair mode stay then: netlock.c and sk-inet.c set
 * kill_waits) and when a runtime drives it over RPC.  A cgroup its user had
 * frozen is frozen again at once: the freezer (v1 and v2) holds no dying
 * process (freezecg_*user_frozen_killed).
 */
static void kill_tree(struct tree *t)
{
	int status;

	for (size_t p = 0; p < t->nr_procs; p++)
		kill(t->dprocs[p]->pid, SIGKILL);
	/* a runtime (RPC) takes the dump's return for the processes' end: CRIU
	 * waits, and runc removes the container's cgroup and state then */
	if (!t->kill_waits && t->o->rpc_sk <= 0)
		return;
	/* As tracer we are told when each is dead (their parents reap them).
	 * Children first: a pid namespace's init ends only once every other
	 * process of it is reaped, which its tracer's wait comes before. */
	for (size_t n = 0; n < t->nr_procs; n++) {
		struct dump_ctx *ctx = t->dprocs[t->own_pidns ? t->nr_procs - 1 - n : n];

		for (size_t i = 1; i < ctx->nr_threads; i++)
			sys_waitpid(ctx->threads[i].tid, &status, __WALL);
		while (sys_waitpid(ctx->pid, &status, __WALL) > 0)
			if (WIFEXITED(status) || WIFSIGNALED(status))
				break;
	}
}

/* Let the processes run on, after the resources undid what they must not see. */
static void release_tree(struct tree *t)
{
	for (const struct resource_ops *const *r = resources; *r; r++)
		if ((*r)->dump_undo)
			(*r)->dump_undo(t);
	for (size_t p = 0; p < t->nr_procs; p++) {
		for_threads_release(t->dprocs[p]);
		infect_detach(&t->dprocs[p]->inf);
	}
}

/* Let them run on (-R, a failed dump) or stopped (-s), with the network
 * unlocked, and their cgroup frozen again if its user had frozen it. */
static void release_processes(struct tree *t, bool stop)
{
	/* queued while traced: taken as soon as they are let go */
	if (stop)
		for (size_t p = 0; p < t->nr_procs; p++)
			kill(t->dprocs[p]->pid, SIGSTOP);
	if (t->freezer)
		freezer_restore(t->freezer);
	release_tree(t);
	if (t->freezer)
		freezer_wait_restored(t->freezer);
	if (t->o->tcp_established)
		action_run(t->o, "network-unlock", t->o->pid);
}

int dump_stat(struct dump_ctx *ctx, struct proc_stat *st)
{
	int ret;

	if (!ctx->stat) {
		struct proc_stat *c = malloc(sizeof(*c));

		if (!c)
			return -ENOMEM;
		ret = proc_parse_stat(ctx->pid, c);
		if (ret) {
			free(c);
			return ret;
		}
		ctx->stat = c;
	}
	*st = *ctx->stat;
	return 0;
}

int dump_status(struct dump_ctx *ctx, struct proc_status *st)
{
	int ret;

	if (!ctx->status) {
		struct proc_status *c = malloc(sizeof(*c));

		if (!c)
			return -ENOMEM;
		/* as read when it stopped */
		ret = proc_parse_status_of(infect_status(&ctx->inf), ctx->pid, c);
		if (ret) {
			free(c);
			return ret;
		}
		ctx->status = c;
	}
	*st = *ctx->status;
	return 0;
}

static void free_tree(struct tree *t)
{
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct dump_ctx *ctx = t->dprocs[p];

		free(ctx->stat);
		free(ctx->status);
		if (ctx->pidfd >= 0)
			close(ctx->pidfd);
		proc_free_vmas(ctx->vmas, ctx->nr_vmas);
	}
	img_set_free(&t->imgs);
}

/*
 * Every thread out of the SIGTRAP stops injection leaves (infect_park): the
 * rest of the dump, a post-dump script or a runtime's answer may take long,
 * and a killed amber must leave the processes running.
 */
static int park_process(struct dump_ctx *ctx)
{
	int ret = 0;

	for (size_t i = 0; i < ctx->nr_threads; i++)
		if (infect_park(ctx->threads[i].inf) && !ret)
			ret = -EIO;
	return ret;
}

static int park_tree(struct tree *t)
{
	int ret = 0;

	for (size_t p = 0; p < t->nr_procs; p++)
		if (park_process(t->dprocs[p]) && !ret)
			ret = -EIO;
	return ret;
}

static int dump_processes(struct tree *t)
{
	int ret = run_tree_hooks(t, false);

	for (size_t p = 0; !ret && p < t->nr_procs; p++) {
		ret = dump_resources(t->dprocs[p]);
		if (!ret)
			ret = dump_late(t->dprocs[p]);
		if (park_process(t->dprocs[p]) && !ret)
			ret = -EIO;
		if (!ret)
			ret = write_cores(t->dprocs[p]);
		if (!ret)
			stats_add(SC_DONE, 1);
	}
	if (!ret)
		ret = run_tree_hooks(t, true);
	if (park_tree(t) && !ret)
		ret = -EIO;
	if (!ret)
		ret = write_pstree(t);
	if (!ret)
		ret = dump_check_interrupted();
	return ret;
}

/* After a failure: name the processes that died while amber held them. */
static void report_gone(struct tree *t)
{
	for (size_t p = 0; p < t->nr_procs; p++) {
		pid_t pid = t->dprocs[p]->pid;
		struct proc_stat st;

		if (proc_parse_stat(pid, &st) || st.state == 'Z' || st.state == 'X')
			pr_err("pid %d exited during the dump (killed, or it ended): the image "
			       "would miss it; dump again",
			       pid);
	}
}

static int do_dump(struct opts *o)
{
	struct tree t = {.o = o};
	struct freezer fz;
	bool created;
	int ret;

	stats_start(ST_TOTAL);
	own_ns.read = false;
	ret = check_not_ancestor(o->pid);
	if (!ret)
		ret = pidns_dump_root(&t);
	if (!ret)
		ret = check_supported(&t, o->pid);
	/* strangers in the cgroup, or members outside it: refused before any freeze */
	if (!ret && o->freeze_cgroup) {
		ret = freezer_open(&fz, o->freeze_cgroup);
		if (!ret)
			ret = freezer_check_members(&fz, o->pid);
		if (!ret)
			t.freezer = &fz;
	}
	if (ret)
		return ret;
	ret = action_run(o, "pre-dump", o->pid);
	if (ret)
		return ret;
	created = false;
	if (o->dir_fd > 0) /* amber swrk: opened by the client */
		t.dirfd = img_dir_adopt(o->dir_fd, o->dir);
	else
		t.dirfd = img_dir_create(o->dir, &created);
	if (t.dirfd < 0)
		return t.dirfd;
	t.imgs.dirfd = t.dirfd;
	ret = opts_open_log(o);
	if (ret) {
		if (created)
			unlinkat(AT_FDCWD, o->dir, AT_REMOVEDIR);
		close(t.dirfd);
		return ret;
	}
	catch_signals();

	stats_start(ST_FREEZING);
	ret = t.freezer ? collect_frozen(&t) : collect_tree(&t);
	if (!ret)
		ret = pidns_dump_alone(&t);
	stats_stop(ST_FREEZING);
	stats_start(ST_FROZEN);
	stats_add(SC_PROCESSES, t.nr_procs);
	if (!ret)
		ret = sessions_dump(&t);
	if (!ret)
		ret = check_sharing(&t);
	if (!ret)
		ret = pidns_dump_nested(&t);
	if (!ret && o->tcp_established)
		ret = action_run(o, "network-lock", o->pid);
	for (size_t p = 0; !ret && p < t.nr_procs; p++) {
		struct dump_ctx *ctx = t.dprocs[p];

		ctx->pidfd = sys_pidfd_open(ctx->pid);
		ret = proc_parse_vmas(ctx->pid, &ctx->vmas, &ctx->nr_vmas);
	}
	progress_start(false);
	if (!ret)
		ret = dump_processes(&t);
	progress_stop();
	if (!ret)
		ret = stats_write_dump(&t.imgs);
	if (!ret)
		ret = commit_image(&t);
	/* the image is complete: a failing post-dump script leaves it, and the processes */
	if (!ret && action_run(o, "post-dump", o->pid)) {
		release_processes(&t, false);
		pr_err("dump of pid %d: the image in %s is complete, but the post-dump script "
		       "failed: the processes were left running",
		       o->pid, o->dir);
		ret = -ECANCELED;
		goto free_tree;
	}
	if (ret) {
		report_gone(&t);
		/* Registers and masks are back (dump_resources); let them run on. */
		release_processes(&t, false);
		/* nothing of a failed dump is left: the directory is ready for another */
		img_set_discard(&t.imgs);
		if (created && unlinkat(AT_FDCWD, o->dir, AT_REMOVEDIR))
			created = false;
		if (created)
			pr_err("dump of pid %d failed; the processes were left running and the "
			       "image directory %s that amber made was removed",
			       o->pid, o->dir);
		else
			pr_err("dump of pid %d failed; the processes were left running and %s "
			       "holds nothing of this dump",
			       o->pid, o->dir);
		goto free_tree;
	}
	pr_info("image of %zu process(es) from pid %d complete in %s", t.nr_procs, o->pid, o->dir);
	if (o->leave_running || o->leave_stopped)
		release_processes(&t, o->leave_stopped);
	else
		kill_tree(&t);
	if (t.freezer && !o->leave_running && !o->leave_stopped && !freezer_restore(t.freezer))
		freezer_wait_restored(t.freezer);
	for (const struct resource_ops *const *r = resources; *r; r++)
		if (!o->leave_running && !o->leave_stopped && (*r)->dump_killed)
			(*r)->dump_killed(&t);
	stats_stop(ST_FROZEN);
	stats_stop(ST_TOTAL);
	if (o->display_stats)
		stats_print(false);
free_tree:
	free_tree(&t);
	close(t.dirfd);
	return ret;
}

static int dump_hooks(struct dump_ctx *ctx)
{
	for (const struct resource_ops *const *r = resources; *r; r++) {
		int ret = dump_check_interrupted();

		if (ret)
			return ret;
		uint64_t t0 = stats_now();

		pr_info("dumping %s of pid %d", (*r)->name, ctx->pid);
		if ((*r)->dump) {
			ret = (*r)->dump(ctx);
			if (ret)
				return ret;
		}
		for (size_t i = 0; (*r)->dump_thread && i < ctx->nr_threads; i++) {
			ret = (*r)->dump_thread(ctx, &ctx->threads[i]);
			if (ret)
				return ret;
		}
		stats_resource((size_t)(r - resources), t0);
	}
	return 0;
}

static int dump_resources(struct dump_ctx *ctx)
{
	size_t blocked = 0;
	int ret = infect_find_syscall(&ctx->inf);

	if (ret)
		return ret;
	for (; blocked < ctx->nr_threads; blocked++) {
		ret = infect_block_signals(ctx->threads[blocked].inf);
		if (ret)
			goto unblock;
	}
	ret = infect_scratch_map(&ctx->inf, 0, 64 * 4096);
	if (ret)
		goto unblock;
	/* One address space: every thread uses the leader's syscall and scratch. */
	for (size_t i = 1; i < ctx->nr_threads; i++) {
		ctx->threads[i].inf->syscall_ip = ctx->inf.syscall_ip;
		ctx->threads[i].inf->scratch = ctx->inf.scratch;
		ctx->threads[i].inf->scratch_size = ctx->inf.scratch_size;
	}
	ret = threads_probe(ctx) ?: dump_hooks(ctx);
	/* Close the window even on error: the task must get its own state back. */
	if (infect_scratch_unmap(&ctx->inf) && !ret)
		ret = -EIO;
unblock:
	for (size_t i = 0; i < blocked; i++) {
		if (infect_unblock_signals(ctx->threads[i].inf) && !ret)
			ret = -EIO;
		if (infect_restore_regs(ctx->threads[i].inf) && !ret)
			ret = -EIO;
	}
	return ret;
}

static int dump_late(struct dump_ctx *ctx)
{
	for (const struct resource_ops *const *r = resources; *r; r++) {
		uint64_t t0;
		int ret;

		if (!(*r)->dump_late)
			continue;
		ret = dump_check_interrupted();
		if (ret)
			return ret;
		t0 = stats_now();
		ret = (*r)->dump_late(ctx);
		stats_resource((size_t)(r - resources), t0);
		if (ret)
			return ret;
	}
	return 0;
}

int dump_run(struct opts *o)
{
	return do_dump(o);
}

int cmd_dump(int argc, char **argv)
{
	struct opts o = {0};

	if (opts_parse(argc, argv, &o, CMD_DUMP))
		return 2;
	if (o.help) {
		opts_usage(stdout, CMD_DUMP);
		return 0;
	}
	return do_dump(&o) ? 1 : 0;
}
