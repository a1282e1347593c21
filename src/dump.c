// SPDX-License-Identifier: MIT
/*
 * amber dump: freeze one task, let every resource write its part of the
 * image, mark the image complete, then kill or release the task.  Any
 * failure before the image is complete releases the task as it was.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "amber.h"
#include "dump.h"
#include "log.h"
#include "proc.h"
#include "sys.h"

volatile sig_atomic_t amber_interrupted;

static void on_signal(int sig)
{
	amber_interrupted = sig;
}

/* Ctrl-C or a kill of amber during a dump must not harm the target. */
static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

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

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "tree", required_argument, NULL, 't' },
		{ "images-dir", required_argument, NULL, 'D' },
		{ "leave-running", no_argument, NULL, 'R' },
		{ "shell-job", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "t:D:Rjv", lopts, NULL)) != -1) {
		switch (c) {
		case 't':
			o->pid = atoi(optarg);
			break;
		case 'D':
			o->dir = optarg;
			break;
		case 'R':
			o->leave_running = true;
			break;
		case 'j':
			o->shell_job = true;
			break;
		case 'v':
			log_level++;
			break;
		default:
			return -EINVAL;
		}
	}
	if (o->pid <= 0 || !o->dir) {
		pr_err("dump needs -t PID and -D DIR (e.g. amber dump -t 1234 -D /tmp/img)");
		return -EINVAL;
	}
	if (optind < argc) {
		pr_err("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

static int open_image_dir(const char *dir)
{
	int fd;

	if (mkdir(dir, 0700) && errno != EEXIST) {
		pr_err("cannot create image directory %s: %m", dir);
		return -errno;
	}
	fd = sys_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("cannot open image directory %s: %s", dir, strerror(-fd));
		return fd;
	}
	/* Whatever was here is no longer a complete image. */
	unlinkat(fd, "inventory.img", 0);
	unlinkat(fd, "inventory.img.tmp", 0);
	return fd;
}

/* What amber cannot dump yet is refused before anything is touched. */
static int check_supported(pid_t pid)
{
	struct proc_status st;
	pid_t kids[8];
	int ret, n;

	ret = proc_parse_status(pid, &st);
	if (ret) {
		if (ret == -ENOENT)
			pr_err("pid %d does not exist", pid);
		else
			pr_err("cannot read /proc/%d/status: %s", pid, strerror(-ret));
		return ret;
	}
	if (pid == getpid() || pid == getppid()) {
		pr_err("pid %d is amber itself or its parent; dump another process", pid);
		return -EINVAL;
	}
	if (st.seccomp) {
		pr_err("pid %d runs under seccomp mode %d, which amber cannot restore yet", pid,
		       st.seccomp);
		return -EOPNOTSUPP;
	}
	n = proc_children(pid, kids, 8);
	if (n > 0) {
		pr_err("pid %d has child processes (first: %d); process trees are not supported "
		       "yet (see README, Limits)",
		       pid, kids[0]);
		return -EOPNOTSUPP;
	}
	if (n < 0) {
		pr_err("cannot read /proc/%d/task/%d/children: %s%s", pid, pid, strerror(-n),
		       n == -ENOENT ? " (kernel without CONFIG_PROC_CHILDREN? see amber check)"
				    : "");
		return n;
	}
	return 0;
}

static int write_core(struct dump_ctx *ctx, TaskCore *core)
{
	struct img *img;
	int ret = img_create(&ctx->imgs, IMG_CORE, &img, "core-%u.img", core->pid);

	if (ret)
		return ret;
	ret = img_put(img, &core->base);
	if (ret) {
		img_abort(img);
		return ret;
	}
	return img_finish(img);
}

static int write_cores(struct dump_ctx *ctx)
{
	ctx->core->n_threads = ctx->nr_threads - 1;
	ctx->core->threads = malloc(sizeof(uint32_t) * ctx->nr_threads);
	if (!ctx->core->threads)
		return -ENOMEM;
	for (size_t i = 1; i < ctx->nr_threads; i++) {
		int ret = write_core(ctx, ctx->threads[i].core);

		if (ret)
			return ret;
		ctx->core->threads[i - 1] = ctx->threads[i].tid;
	}
	return write_core(ctx, ctx->core);
}

static bool have_thread(struct dump_ctx *ctx, pid_t tid)
{
	for (size_t i = 0; i < ctx->nr_threads; i++)
		if (ctx->threads[i].tid == tid)
			return true;
	return false;
}

static int seize_thread(struct dump_ctx *ctx, pid_t tid)
{
	struct thread *nt = realloc(ctx->threads, (ctx->nr_threads + 1) * sizeof(*nt));
	struct thread *t;
	int stopsig, ret;

	if (!nt)
		return -ENOMEM;
	ctx->threads = nt;
	t = &nt[ctx->nr_threads];
	t->tid = tid;
	t->inf = calloc(1, sizeof(*t->inf));
	t->core = calloc(1, sizeof(*t->core));
	if (!t->inf || !t->core) {
		free(t->inf);
		free(t->core);
		return -ENOMEM;
	}
	task_core__init(t->core);
	t->core->pid = tid;
	ret = infect_seize(tid, t->inf, &stopsig);
	if (ret) {
		free(t->inf);
		free(t->core);
		return ret == -ESRCH ? 0 : ret; /* it exited meanwhile */
	}
	ctx->nr_threads++;
	return 0;
}

/*
 * Freeze every thread.  Threads may be created while we go, so the list is
 * read again until a pass finds nothing new.
 */
static int seize_threads(struct dump_ctx *ctx)
{
	char path[64];
	bool found;

	ctx->threads = calloc(1, sizeof(*ctx->threads));
	if (!ctx->threads)
		return -ENOMEM;
	ctx->threads[0] = (struct thread){ ctx->pid, &ctx->inf, ctx->core };
	ctx->nr_threads = 1;
	snprintf(path, sizeof(path), "/proc/%d/task", ctx->pid);
	do {
		struct dirent *de;
		DIR *d = opendir(path);

		if (!d) {
			pr_err("cannot list %s: %m", path);
			return -errno;
		}
		found = false;
		while ((de = readdir(d))) {
			pid_t tid = atoi(de->d_name);
			int ret;

			if (tid <= 0 || have_thread(ctx, tid))
				continue;
			ret = seize_thread(ctx, tid);
			if (ret) {
				closedir(d);
				return ret;
			}
			found = true;
		}
		closedir(d);
	} while (found);
	return 0;
}

static void for_threads_release(struct dump_ctx *ctx)
{
	for (size_t i = 1; i < ctx->nr_threads; i++)
		infect_detach(ctx->threads[i].inf);
}

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static int commit_image(struct dump_ctx *ctx)
{
	Inventory inv = INVENTORY__INIT;
	struct utsname uts;
	struct timespec ts;

	uname(&uts);
	clock_gettime(CLOCK_REALTIME, &ts);
	inv.image_version = IMG_VERSION;
	inv.root_pid = ctx->pid;
	inv.kernel = uts.release;
	inv.dump_time_ns = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	inv.shell_job = ctx->o->shell_job;
	inv.xsave_size = (uint32_t)ctx->core->xsave.len;
	inv.xfeatures = xgetbv0();
	inv.tool_version = AMBER_VERSION;
	return img_set_commit(&ctx->imgs, &inv);
}

/* Run the injection-window part of every resource's dump. */
static int dump_hooks(struct dump_ctx *ctx)
{
	for (const struct resource_ops *const *r = resources; *r; r++) {
		int ret = dump_check_interrupted();

		if (ret)
			return ret;
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
	ret = infect_scratch_map(&ctx->inf, 0, 4 * 4096);
	if (ret)
		goto unblock;
	/* One address space: every thread uses the leader's syscall and scratch. */
	for (size_t i = 1; i < ctx->nr_threads; i++) {
		ctx->threads[i].inf->syscall_ip = ctx->inf.syscall_ip;
		ctx->threads[i].inf->scratch = ctx->inf.scratch;
	}
	ret = dump_hooks(ctx);
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
		int ret;

		if (!(*r)->dump_late)
			continue;
		ret = dump_check_interrupted();
		if (ret)
			return ret;
		ret = (*r)->dump_late(ctx);
		if (ret)
			return ret;
	}
	return 0;
}

static void kill_target(struct dump_ctx *ctx)
{
	int status;

	kill(ctx->pid, SIGKILL);
	/* As tracer we are told when it is dead (its parent reaps it). */
	for (size_t i = 1; i < ctx->nr_threads; i++)
		sys_waitpid(ctx->threads[i].tid, &status, __WALL);
	while (sys_waitpid(ctx->pid, &status, __WALL) > 0)
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
}

static int do_dump(struct opts *o)
{
	struct dump_ctx ctx = { .o = o, .pid = o->pid, .pidfd = -1 };
	int stopsig, ret, dirfd;

	ret = check_supported(o->pid);
	if (ret)
		return ret;
	dirfd = open_image_dir(o->dir);
	if (dirfd < 0)
		return dirfd;
	ctx.imgs.dirfd = dirfd;
	ctx.core = calloc(1, sizeof(*ctx.core));
	ctx.mm = calloc(1, sizeof(*ctx.mm));
	if (!ctx.core || !ctx.mm) {
		ret = -ENOMEM;
		goto free_ctx;
	}
	task_core__init(ctx.core);
	mm_entry__init(ctx.mm);
	catch_signals();

	ret = infect_seize(o->pid, &ctx.inf, &stopsig);
	if (ret)
		goto free_ctx;
	ctx.core->has_stop_signal = stopsig != 0;
	ctx.core->stop_signal = stopsig;
	/* It may have forked or spawned threads before it stopped. */
	ret = check_supported(o->pid);
	if (ret)
		goto release;
	ret = seize_threads(&ctx);
	if (ret)
		goto release;
	ctx.pidfd = sys_pidfd_open(o->pid);
	ret = proc_parse_vmas(o->pid, &ctx.vmas, &ctx.nr_vmas);
	if (ret)
		goto release;
	ret = dump_resources(&ctx);
	if (ret)
		goto release;
	ret = dump_late(&ctx);
	if (ret)
		goto release;
	ret = write_cores(&ctx);
	if (ret)
		goto release;
	ret = dump_check_interrupted();
	if (ret)
		goto release;
	ret = commit_image(&ctx);
	if (ret)
		goto release;
	pr_info("image of pid %d complete in %s (%ld injected syscalls)", o->pid, o->dir,
		ctx.inf.nr_syscalls);
	if (o->leave_running) {
		for_threads_release(&ctx);
		infect_detach(&ctx.inf);
	} else {
		kill_target(&ctx);
	}
	goto free_ctx;

release:
	/* Registers and mask are back (dump_resources); let it run on. */
	for_threads_release(&ctx);
	infect_detach(&ctx.inf);
	pr_err("dump of pid %d failed; the process was left running, %s holds no complete "
	       "image",
	       o->pid, o->dir);
free_ctx:
	if (ctx.pidfd >= 0)
		close(ctx.pidfd);
	proc_free_vmas(ctx.vmas, ctx.nr_vmas);
	img_set_free(&ctx.imgs);
	close(dirfd);
	return ret;
}

int cmd_dump(int argc, char **argv)
{
	struct opts o = { 0 };

	if (parse_opts(argc, argv, &o))
		return 2;
	return do_dump(&o) ? 1 : 0;
}
