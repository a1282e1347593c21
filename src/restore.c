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
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "restore.h"
#include "sys.h"

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "images-dir", required_argument, NULL, 'D' },
		{ "restore-detached", no_argument, NULL, 'd' },
		{ "shell-job", no_argument, NULL, 'j' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "D:djv", lopts, NULL)) != -1) {
		switch (c) {
		case 'D':
			o->dir = optarg;
			break;
		case 'd':
			o->detached = true;
			break;
		case 'j':
			o->shell_job = true;
			break;
		case 'p':
			o->pidfile = optarg;
			break;
		case 'v':
			log_level++;
			break;
		default:
			return -EINVAL;
		}
	}
	if (!o->dir) {
		pr_err("restore needs -D DIR (the image directory written by amber dump)");
		return -EINVAL;
	}
	if (optind < argc) {
		pr_err("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

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

static int read_images(struct restore_ctx *ctx)
{
	int ret = img_read_one(ctx->dirfd, IMG_CORE, &task_core__descriptor,
			       (ProtobufCMessage **)&ctx->core, "core-%d.img", ctx->pid);

	if (ret)
		return ret;
	if (ctx->core->pid != (uint32_t)ctx->pid) {
		pr_err("core-%d.img describes pid %u; the image is inconsistent", ctx->pid,
		       ctx->core->pid);
		return -EBADMSG;
	}
	for (const struct resource_ops *const *r = resources; *r; r++) {
		if (!(*r)->restore_read)
			continue;
		ret = (*r)->restore_read(ctx);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * What the child tells amber once set up: success or what failed, and the
 * fds it holds for amber's injected syscalls (pages image, mapped files).
 */
struct child_report {
	int ok;
	int pages_fd;
	char msg[120];
};

static void child_report(int fd, struct restore_ctx *ctx, const char *msg)
{
	struct child_report rep = { .ok = !msg, .pages_fd = ctx->pages_fd };
	size_t len = ctx->nr_files * sizeof(int);

	snprintf(rep.msg, sizeof(rep.msg), "%s", msg ? msg : "");
	if (write(fd, &rep, sizeof(rep)) != sizeof(rep) ||
	    (!msg && len && write(fd, ctx->map_fd, len) != (ssize_t)len))
		_exit(1);
}

static int read_child_report(struct restore_ctx *ctx, int fd)
{
	struct child_report rep;
	size_t len = ctx->nr_files * sizeof(int);

	if (read(fd, &rep, sizeof(rep)) != sizeof(rep)) {
		pr_err("pid %d: the restore child died while setting up", ctx->pid);
		return -EIO;
	}
	if (!rep.ok) {
		rep.msg[sizeof(rep.msg) - 1] = 0;
		pr_err("pid %d: %s", ctx->pid, rep.msg);
		return -EIO;
	}
	ctx->pages_fd = rep.pages_fd;
	ctx->map_fd = malloc(len + sizeof(int));
	if (!ctx->map_fd)
		return -ENOMEM;
	if (len && sys_read_full(fd, ctx->map_fd, len) != (ssize_t)len)
		return -EIO;
	return 0;
}

static int move_fd_up(int fd, int base)
{
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, base);

	if (nfd < 0)
		return -errno;
	close(fd);
	return nfd;
}

static void __attribute__((noreturn)) child_main(struct restore_ctx *ctx, int go_fd,
						   int report_fd)
{
	struct rlimit rl;
	sigset_t all;
	char c;
	int ret;

	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Wait until amber has seized us. */
	if (read(go_fd, &c, 1) != 1)
		_exit(1);
	close(go_fd);
	/* Room for the target's highest fd and amber's above it (rlimits.c sets the
	 * real limit at the end). */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)ctx->fd_base + 64) {
		rl.rlim_cur = ctx->fd_base + 64;
		if (rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			pr_warn("pid %d: cannot raise RLIMIT_NOFILE to %d for its fds: %m", ctx->pid,
				ctx->fd_base + 64);
	}
	log_fd = fcntl(2, F_DUPFD_CLOEXEC, ctx->fd_base);
	if (log_fd < 0)
		log_fd = 2;
	report_fd = move_fd_up(report_fd, ctx->fd_base);
	ctx->dirfd = move_fd_up(ctx->dirfd, ctx->fd_base);
	if (report_fd < 0 || ctx->dirfd < 0)
		_exit(1);
	for (const struct resource_ops *const *r = resources; *r; r++) {
		if (!(*r)->restore_child)
			continue;
		ret = (*r)->restore_child(ctx);
		if (ret) {
			char msg[64];

			snprintf(msg, sizeof(msg), "restore of %s failed", (*r)->name);
			child_report(report_fd, ctx, msg);
			_exit(1);
		}
	}
	child_report(report_fd, ctx, NULL);
	/* amber takes over from this stop. */
	raise(SIGSTOP);
	_exit(1);
}

static int child_fd_base(struct restore_ctx *ctx)
{
	int base = 3;

	for (size_t i = 0; i < ctx->nr_fds; i++)
		if ((int)ctx->fds[i]->fd >= base)
			base = ctx->fds[i]->fd + 1;
	return base;
}

/* Every fd >= fd_base in the child is amber's own (images, sync pipe), and so
 * is the scratch page: drop them before the registers are loaded. */
static int drop_internal(struct restore_ctx *ctx)
{
	long r = infect_call(&ctx->inf, SYS_close_range, ctx->fd_base, ~0U, 0, 0, 0, 0);

	if (r) {
		pr_err("pid %d: cannot close amber's fds: %s", ctx->pid, strerror((int)-r));
		return (int)r;
	}
	return infect_scratch_unmap(&ctx->inf);
}

static int inject_all(struct restore_ctx *ctx)
{
	int ret = 0;

	for (const struct resource_ops *const *r = resources; *r && !ret; r++) {
		if (!(*r)->restore_inject && !(*r)->restore_thread)
			continue;
		pr_info("restoring %s of pid %d", (*r)->name, ctx->pid);
		if ((*r)->restore_inject)
			ret = (*r)->restore_inject(ctx);
		for (size_t i = 0; !ret && (*r)->restore_thread && i < ctx->nr_threads; i++)
			ret = (*r)->restore_thread(ctx, &ctx->threads[i]);
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

static int write_pidfile(const char *path, pid_t pid)
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
		r = sys_waitpid(ctx->pid, &status, 0);
		if (r < 0) {
			pr_err("waiting for pid %d: %s", ctx->pid, strerror((int)-r));
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

static int do_restore(struct opts *o)
{
	struct restore_ctx ctx = { .o = o, .pages_fd = -1 };
	int go[2] = { -1, -1 }, report[2] = { -1, -1 }, ret;
	long pid;

	ctx.dirfd = sys_open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (ctx.dirfd < 0) {
		pr_err("cannot open image directory %s: %s", o->dir, strerror(-ctx.dirfd));
		return ctx.dirfd;
	}
	ret = img_verify_dir(ctx.dirfd, o->dir, &ctx.inv);
	if (ret)
		goto close_dir;
	if (ctx.inv->shell_job && !o->shell_job) {
		pr_err("%s was dumped with --shell-job; restore it with -j from a terminal", o->dir);
		ret = -EINVAL;
		goto close_dir;
	}
	ctx.pid = ctx.inv->root_pid;
	ret = read_images(&ctx);
	if (ret)
		goto close_dir;
	ret = wait_pid_free(ctx.pid);
	if (ret)
		goto close_dir;
	ctx.fd_base = child_fd_base(&ctx);
	if (pipe2(go, O_CLOEXEC) || pipe2(report, O_CLOEXEC)) {
		ret = -errno;
		goto close_pipes;
	}

	pid = sys_clone3_set_tid(ctx.pid, SIGCHLD);
	if (pid == 0) {
		close(go[1]);
		close(report[0]);
		child_main(&ctx, go[0], report[1]);
	}
	if (pid < 0) {
		ret = (int)pid;
		if (ret == -EEXIST)
			pr_err("pid %d was taken by another process just now; try again", ctx.pid);
		else if (ret == -EPERM)
			pr_err("cannot create a process with pid %d: need root (CAP_SYS_ADMIN or "
			       "CAP_CHECKPOINT_RESTORE)",
			       ctx.pid);
		else
			pr_err("clone3 with pid %d failed: %s", ctx.pid, strerror(-ret));
		goto close_pipes;
	}
	close(go[0]);
	close(report[1]);
	go[0] = report[1] = -1;
	ret = (int)sys_ptrace(PTRACE_SEIZE, ctx.pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
	if (ret) {
		pr_err("cannot trace the restore child %d: %s", ctx.pid, strerror(-ret));
		goto kill_child;
	}
	if (write(go[1], "g", 1) != 1) {
		ret = -EPIPE;
		goto kill_child;
	}
	ret = read_child_report(&ctx, report[0]);
	if (ret)
		goto kill_child;
	ret = wait_child_stop(ctx.pid);
	if (ret)
		goto kill_child;
	ret = infect_attach_stopped(ctx.pid, &ctx.inf);
	if (ret)
		goto kill_child;
	ret = infect_find_syscall(&ctx.inf);
	if (ret)
		goto kill_child;
	ret = regs_forget_rseq(&ctx);
	if (ret)
		goto kill_child;
	ret = inject_all(&ctx);
	if (ret)
		goto kill_child;
	ret = drop_internal(&ctx);
	if (ret)
		goto kill_child;
	ret = restore_finish(&ctx);
	if (ret)
		goto kill_child;
	if (ctx.core->has_stop_signal && ctx.core->stop_signal)
		kill(ctx.pid, ctx.core->stop_signal);
	for (size_t i = 1; i < ctx.nr_threads; i++)
		infect_detach(ctx.threads[i].inf);
	ret = infect_detach(&ctx.inf);
	if (ret)
		goto kill_child;
	pr_info("pid %d restored (%ld injected syscalls)", ctx.pid, ctx.inf.nr_syscalls);
	if (o->pidfile && write_pidfile(o->pidfile, ctx.pid))
		pr_warn("pid %d runs, but the pidfile was not written", ctx.pid);
	if (!o->detached)
		ret = wait_restored(&ctx) | RESTORE_WAITED;
	goto close_pipes;

kill_child:
	kill(ctx.pid, SIGKILL);
	while (sys_waitpid(ctx.pid, NULL, __WALL) > 0)
		;
	pr_err("restore of pid %d from %s failed; nothing was left running", ctx.pid, o->dir);
	if (!ret)
		ret = -EIO;
close_pipes:
	if (o->shell_job && !o->detached)
		reclaim_terminal();
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (report[i] >= 0)
			close(report[i]);
	}
close_dir:
	close(ctx.dirfd);
	return ret;
}

int cmd_restore(int argc, char **argv)
{
	struct opts o = { 0 };
	int ret;

	if (parse_opts(argc, argv, &o))
		return 2;
	ret = do_restore(&o);
	if (ret & RESTORE_WAITED)
		return ret & 0xff;
	return ret ? 1 : 0;
}
