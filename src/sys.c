// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "sys.h"

#define FAULT_SHORT 0x10000 /* not an errno */
#define FAULT_KILL  0x20000 /* ptrace only: the tracee is SIGKILLed, then the call is made */
#define FAULT_DELAY 0x30000 /* 2 s pass, then the call is made: a machine stalled at that point */

static const char *const op_names[SYS__COUNT] = {
	[SYS_OPEN] = "open",	 [SYS_READ] = "read",	  [SYS_WRITE] = "write",
	[SYS_PREAD] = "pread",	 [SYS_FSYNC] = "fsync",	  [SYS_RENAME] = "rename",
	[SYS_PTRACE] = "ptrace", [SYS_WAIT] = "wait",	  [SYS_VM_READ] = "vm_read",
	[SYS_KCMP] = "kcmp",	 [SYS_CLONE3] = "clone3", [SYS_PIDFD_GETFD] = "pidfd_getfd",
	[SYS_MMAP] = "mmap",	 [SYS_SETID] = "setid",	  [SYS_SCHED] = "sched",
	[SYS_SPAWN] = "spawn",
};

struct fault {
	long nth;   /* 0: every call */
	pid_t pid;  /* NTH@PID: only the calls on this pid count (ptrace) */
	long calls; /* calls on pid so far */
	int err;
};

static struct fault faults[SYS__COUNT];
static long calls[SYS__COUNT];

static int parse_err(const char *s)
{
	static const struct {
		const char *name;
		int err;
	} tab[] = {{"EINTR", EINTR},	   {"ENOSPC", ENOSPC},	 {"EPERM", EPERM},
		   {"EIO", EIO},	   {"ENOMEM", ENOMEM},	 {"EACCES", EACCES},
		   {"ESRCH", ESRCH},	   {"EFAULT", EFAULT},	 {"EAGAIN", EAGAIN},
		   {"short", FAULT_SHORT}, {"kill", FAULT_KILL}, {"delay", FAULT_DELAY}};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (!strcmp(s, tab[i].name))
			return tab[i].err;
	return atoi(s);
}

void sys_fault_init(void)
{
	const char *env = getenv("AMBER_FAULT");
	char *copy, *tok, *save;

	if (!env || !*env)
		return;
	copy = strdup(env);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char op[32], nth[32], err[32];

		if (sscanf(tok, "%31[^:]:%31[^:]:%31s", op, nth, err) != 3) {
			pr_warn("AMBER_FAULT: ignoring malformed entry '%s' (want OP:NTH:ERR)",
				tok);
			continue;
		}
		for (int i = 0; i < SYS__COUNT; i++) {
			char *at = strchr(nth, '@');

			if (strcmp(op, op_names[i]))
				continue;
			if (parse_err(err) == FAULT_KILL && i != SYS_PTRACE) {
				pr_warn("AMBER_FAULT: 'kill' applies to ptrace only; ignoring '%s'",
					tok);
				continue;
			}
			faults[i].pid = at ? atoi(at + 1) : 0;
			if (at)
				*at = 0;
			faults[i].nth = strcmp(nth, "*") ? atol(nth) : 0;
			faults[i].err = parse_err(err);
		}
	}
	free(copy);
}

void sys_fault_reset(void)
{
	memset(faults, 0, sizeof(faults));
	memset(calls, 0, sizeof(calls));
}

/* The fault for this call of op on pid (0: a call on no pid in particular). */
static int fault_on(enum sys_op op, pid_t pid)
{
	/* atomic: the pages of a dump are written by a second thread (mem.c) */
	long n = __atomic_add_fetch(&calls[op], 1, __ATOMIC_RELAXED);

	if (!faults[op].err)
		return 0;
	if (faults[op].pid) {
		if (pid != faults[op].pid)
			return 0;
		n = __atomic_add_fetch(&faults[op].calls, 1, __ATOMIC_RELAXED);
	}
	if (faults[op].nth && faults[op].nth != n)
		return 0;
	if (faults[op].err == FAULT_DELAY) {
		pr_debug("fault injection: %s call %ld: 2 s late", op_names[op], n);
		usleep(2000 * 1000);
		return 0;
	}
	if (faults[op].err == FAULT_KILL)
		pr_debug("fault injection: %s call %ld on pid %d: killing it first", op_names[op],
			 n, pid);
	else
		pr_debug("fault injection: %s call %ld fails with %d", op_names[op], n,
			 faults[op].err);
	return faults[op].err;
}

int sys_fault(enum sys_op op)
{
	return fault_on(op, 0);
}

/*
 * AMBER_FAULT=ptrace:N@PID:kill: the process really dies, as one killed or
 * ending in the middle of a dump, and the call then meets it dead.  Waits
 * until the kernel shows it so (a tracee killed in a ptrace stop exits
 * asynchronously), at most 5 s.
 */
static void fault_kill(pid_t pid)
{
	char path[64], buf[512], *p;

	kill(pid, SIGKILL);
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	for (int i = 0; i < 500; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

		if (fd >= 0)
			close(fd);
		if (n <= 0)
			return; /* gone */
		buf[n] = 0;
		p = strrchr(buf, ')');
		if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
			return;
		usleep(10 * 1000);
	}
}

/* An injected error, or 0 to go on with the real call ("short" is handled by callers). */
static int injected(enum sys_op op)
{
	int f = sys_fault(op);

	return f == FAULT_SHORT ? 0 : f;
}

static int proc_fd = -1;

int sys_proc_init(void)
{
	int fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		pr_warn("cannot open /proc: %m; \"/proc/...\" is then resolved in the mount "
			"namespace amber is in");
		return -errno;
	}
	if (proc_fd >= 0)
		close(proc_fd);
	proc_fd = fd;
	return 0;
}

/* The directory a path is resolved from, and the path from it. */
static int at(const char **path)
{
	if (proc_fd < 0 || strncmp(*path, "/proc", 5) || ((*path)[5] && (*path)[5] != '/'))
		return AT_FDCWD;
	*path += (*path)[5] ? 6 : 5;
	if (!**path)
		*path = ".";
	return proc_fd;
}

int sys_open(const char *path, int flags, int mode)
{
	int dir = at(&path);

	return sys_openat(dir, path, flags, mode);
}

int sys_open_raw(const char *path, int flags)
{
	int dir = at(&path);

	return openat(dir, path, flags);
}

int sys_stat(const char *path, struct stat *st)
{
	int dir = at(&path);

	return fstatat(dir, path, st, 0);
}

int sys_lstat(const char *path, struct stat *st)
{
	int dir = at(&path);

	return fstatat(dir, path, st, AT_SYMLINK_NOFOLLOW);
}

int sys_access(const char *path, int mode)
{
	int dir = at(&path);

	return faccessat(dir, path, mode, 0);
}

DIR *sys_opendir(const char *path)
{
	int dir = at(&path), fd = openat(dir, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}

FILE *sys_fopen_read(const char *path)
{
	int dir = at(&path), fd = openat(dir, path, O_RDONLY | O_CLOEXEC);
	FILE *f;

	if (fd < 0)
		return NULL;
	f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

ssize_t sys_readlink_raw(const char *path, char *buf, size_t size)
{
	int dir = at(&path);

	return readlinkat(dir, path, buf, size);
}

int sys_openat(int dirfd, const char *path, int flags, int mode)
{
	int fd, f = injected(SYS_OPEN);

	if (f)
		return -f;
	fd = openat(dirfd, path, flags, mode);
	return fd < 0 ? -errno : fd;
}

int sys_openat2(int dirfd, const char *path, int flags, int mode, uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)flags, .mode = (uint64_t)mode, .resolve = resolve};
	int f = injected(SYS_OPEN);
	long fd;

	if (f)
		return -f;
	fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

int sys_close(int fd)
{
	return close(fd) ? -errno : 0;
}

/* One read/write step, with "short" and EINTR faults applied. */
static ssize_t rw_step(enum sys_op op, int fd, void *buf, size_t len, off_t off, int is_write)
{
	int f = sys_fault(op);
	ssize_t r;

	if (f && f != FAULT_SHORT)
		return -f;
	if (f == FAULT_SHORT && len > 1)
		len /= 2;
	if (is_write)
		r = write(fd, buf, len);
	else if (off >= 0)
		r = pread(fd, buf, len, off);
	else
		r = read(fd, buf, len);
	return r < 0 ? -errno : r;
}

static ssize_t xfer_full(enum sys_op op, int fd, void *buf, size_t len, off_t off, int is_write)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = rw_step(op, fd, (char *)buf + done, len - done,
				    off >= 0 ? off + (off_t)done : -1, is_write);

		if (r == -EINTR)
			continue;
		if (r < 0)
			return r;
		if (r == 0) {
			if (is_write)
				return -EIO;
			break; /* EOF: callers check the count */
		}
		done += r;
	}
	return done;
}

ssize_t sys_read_full(int fd, void *buf, size_t len)
{
	return xfer_full(SYS_READ, fd, buf, len, -1, 0);
}

ssize_t sys_write_full(int fd, const void *buf, size_t len)
{
	return xfer_full(SYS_WRITE, fd, (void *)buf, len, -1, 1);
}

ssize_t sys_pread_full(int fd, void *buf, size_t len, off_t off)
{
	return xfer_full(SYS_PREAD, fd, buf, len, off, 0);
}

int sys_fsync(int fd)
{
	int f = injected(SYS_FSYNC);

	if (f)
		return -f;
	return fsync(fd) ? -errno : 0;
}

int sys_syncfs(int fd)
{
	int f = injected(SYS_FSYNC);

	if (f)
		return -f;
	return syncfs(fd) ? -errno : 0;
}

int sys_renameat(int olddir, const char *old, int newdir, const char *new, unsigned flags)
{
	int f = injected(SYS_RENAME);

	if (f)
		return -f;
	return renameat2(olddir, old, newdir, new, flags) ? -errno : 0;
}

long sys_ptrace(int req, pid_t pid, void *addr, void *data)
{
	int f = fault_on(SYS_PTRACE, pid);
	long r;

	if (f == FAULT_KILL)
		fault_kill(pid);
	else if (f && f != FAULT_SHORT)
		return -f;
	errno = 0;
	r = syscall(SYS_ptrace, req, pid, addr, data);
	return r < 0 ? -errno : r;
}

pid_t sys_waitpid(pid_t pid, int *status, int options)
{
	int f = injected(SYS_WAIT);
	pid_t r;

	if (f && f != EINTR)
		return -f;
	do
		r = waitpid(pid, status, options);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

ssize_t sys_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
		     const struct iovec *remote, unsigned long nremote)
{
	int f = injected(SYS_VM_READ);
	ssize_t r;

	if (f)
		return -f;
	r = process_vm_readv(pid, local, nlocal, remote, nremote, 0);
	return r < 0 ? -errno : r;
}

ssize_t sys_vm_writev(pid_t pid, const struct iovec *local, unsigned long nlocal,
		      const struct iovec *remote, unsigned long nremote)
{
	ssize_t r = process_vm_writev(pid, local, nlocal, remote, nremote, 0);

	return r < 0 ? -errno : r;
}

int sys_kcmp(pid_t pid1, pid_t pid2, int type, unsigned long idx1, unsigned long idx2)
{
	int f = injected(SYS_KCMP);
	long r;

	if (f)
		return -f;
	r = syscall(SYS_kcmp, pid1, pid2, type, idx1, idx2);
	return r < 0 ? -errno : (int)r;
}

static int sched_call(long nr, long a1, long a2, long a3)
{
	int f = injected(SYS_SCHED);
	long r;

	if (f)
		return -f;
	r = syscall(nr, a1, a2, a3);
	return r < 0 ? -errno : (int)r;
}

int sys_sched_getattr(pid_t tid, void *attr, unsigned size)
{
	int f = injected(SYS_SCHED);
	long r;

	if (f)
		return -f;
	r = syscall(SYS_sched_getattr, tid, attr, size, 0);
	return r < 0 ? -errno : 0;
}

int sys_sched_setattr(pid_t tid, const void *attr)
{
	return sched_call(SYS_sched_setattr, tid, (long)attr, 0);
}

int sys_sched_getaffinity(pid_t tid, void *mask, size_t len)
{
	return sched_call(SYS_sched_getaffinity, tid, (long)len, (long)mask);
}

int sys_sched_setaffinity(pid_t tid, const void *mask, size_t len)
{
	return sched_call(SYS_sched_setaffinity, tid, (long)len, (long)mask);
}

int sys_ioprio_get(pid_t tid)
{
	return sched_call(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, tid, 0);
}

int sys_ioprio_set(pid_t tid, int ioprio)
{
	return sched_call(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, tid, ioprio);
}

int sys_seccomp(unsigned op, unsigned flags, const void *args)
{
	long r = syscall(SYS_seccomp, op, flags, args);

	return r < 0 ? -errno : (int)r;
}

long sys_bpf(int cmd, void *attr, unsigned size)
{
	long r = syscall(SYS_bpf, cmd, attr, size);

	return r < 0 ? -errno : r;
}

int sys_io_uring_setup(unsigned entries, void *params)
{
	long r = syscall(SYS_io_uring_setup, entries, params);

	return r < 0 ? -errno : (int)r;
}

int sys_io_uring_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags)
{
	return sys_io_uring_enter_arg(fd, to_submit, min_complete, flags, NULL, 0);
}

int sys_io_uring_enter_arg(int fd, unsigned to_submit, unsigned min_complete, unsigned flags,
			   const void *arg, size_t argsz)
{
	long r = syscall(SYS_io_uring_enter, fd, to_submit, min_complete, flags, arg, argsz);

	return r < 0 ? -errno : (int)r;
}

int sys_io_uring_register(int fd, unsigned op, void *arg, unsigned nr_args)
{
	long r = syscall(SYS_io_uring_register, fd, op, arg, nr_args);

	return r < 0 ? -errno : (int)r;
}

int sys_membarrier(int cmd, unsigned flags)
{
	long r = syscall(SYS_membarrier, cmd, flags, 0);

	return r < 0 ? -errno : (int)r;
}

long sys_clone3_set_tid(pid_t tid, int exit_signal, uint64_t flags)
{
	return sys_clone3_set_tids(&tid, 1, exit_signal, flags);
}

long sys_clone3_set_tids(const pid_t *tids, size_t n, int exit_signal, uint64_t flags)
{
	struct clone_args args = {.flags = flags,
				  .exit_signal = (uint64_t)exit_signal,
				  .set_tid = (uintptr_t)tids,
				  .set_tid_size = n};
	int f = injected(SYS_CLONE3);
	long r;

	if (f)
		return -f;
	r = syscall(SYS_clone3, &args, sizeof(args));
	return r < 0 ? -errno : r;
}

/*
 * long amber_clone3_vm(struct clone_args *args, size_t size, int go_fd,
 *			void (*fn)(void *), void *arg, pid_t parent)
 * clone3() whose child starts on args->stack in the caller's address space.
 * The child shares the caller's TLS and libc state while the caller runs
 * on, so it touches neither: it waits for a byte on go_fd with a raw read
 * and only then calls fn(arg) (the caller is stopped by then); if the read
 * fails or fn returns, it exits (this task only).  It dies with its parent
 * (PR_SET_PDEATHSIG) from the start, and exits if the parent is already gone
 * (getppid() is no longer parent): an image pid must not stay taken.
 */
long amber_clone3_vm(struct clone_args *args, size_t size, int go_fd, void (*fn)(void *), void *arg,
		     pid_t parent);
__asm__(".text\n"
	".globl amber_clone3_vm\n"
	".type amber_clone3_vm, @function\n"
	"amber_clone3_vm:\n"
	"	mov %rcx, %r10\n" /* fn: the syscall clobbers rcx */
	"	mov $435, %eax\n" /* __NR_clone3 */
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jz 1f\n"
	"	ret\n"
	"1:	xor %ebp, %ebp\n"
	"	and $-16, %rsp\n"
	"	sub $16, %rsp\n"
	"	mov %rdx, %r12\n" /* go_fd */
	"	mov %r8, %r13\n"  /* arg */
	"	mov %r10, %r14\n" /* fn */
	"	mov %r9, %r15\n"  /* parent */
	"	mov $157, %eax\n" /* prctl(PR_SET_PDEATHSIG, SIGKILL): dies with */
	"	mov $1, %edi\n"	  /* a parent whose restore failed, before go too */
	"	mov $9, %esi\n"
	"	syscall\n"
	"	mov $110, %eax\n" /* getppid */
	"	syscall\n"
	"	cmp %r15, %rax\n"
	"	jne 3f\n"
	"2:	xor %eax, %eax\n" /* __NR_read */
	"	mov %r12, %rdi\n"
	"	mov %rsp, %rsi\n"
	"	mov $1, %edx\n"
	"	syscall\n"
	"	cmp $-4, %rax\n" /* EINTR */
	"	je 2b\n"
	"	cmp $1, %rax\n"
	"	jne 3f\n"
	"	mov %r13, %rdi\n"
	"	call *%r14\n"
	"3:	mov $1, %edi\n"
	"	mov $60, %eax\n" /* __NR_exit */
	"	syscall\n"
	"	hlt\n"
	".size amber_clone3_vm, .-amber_clone3_vm\n");

long sys_clone3_vm(pid_t tid, uint64_t flags, void *stack, size_t stack_size, int go_fd,
		   void (*fn)(void *), void *arg)
{
	pid_t set_tid = tid;
	struct clone_args args = {.flags = flags | CLONE_VM,
				  .exit_signal = SIGCHLD,
				  .stack = (uintptr_t)stack,
				  .stack_size = stack_size,
				  .set_tid = (uintptr_t)&set_tid,
				  .set_tid_size = 1};
	int f = injected(SYS_CLONE3);

	if (f)
		return -f;
	return amber_clone3_vm(&args, sizeof(args), go_fd, fn, arg, getpid());
}

int sys_rt_sigaction(int sig, const void *act, void *old)
{
	long r = syscall(SYS_rt_sigaction, sig, act, old, 8);

	return r < 0 ? -errno : 0;
}

int sys_pidfd_open(pid_t pid)
{
	long r = syscall(SYS_pidfd_open, pid, 0);

	return r < 0 ? -errno : (int)r;
}

int sys_pidfd_getfd(int pidfd, int targetfd)
{
	int f = injected(SYS_PIDFD_GETFD);
	long r;

	if (f)
		return -f;
	r = syscall(SYS_pidfd_getfd, pidfd, targetfd, 0);
	return r < 0 ? -errno : (int)r;
}

int sys_read_fd(int fd, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = -errno;

			free(buf);
			return err;
		}
		if (r == 0)
			break;
		n += r;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);

			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
	}
	buf[n] = 0;
	*out = buf;
	if (len)
		*len = n;
	return 0;
}

int sys_read_file(const char *path, char **out, size_t *len)
{
	int fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0), ret;

	if (fd < 0)
		return fd;
	ret = sys_read_fd(fd, out, len);
	close(fd);
	return ret;
}

int sys_readlink(const char *path, char *buf, size_t size)
{
	ssize_t r = sys_readlink_raw(path, buf, size - 1);

	if (r < 0)
		return -errno;
	buf[r] = 0;
	return (int)r;
}

int sys_readlinkat(int dirfd, const char *name, char *buf, size_t size)
{
	ssize_t r = readlinkat(dirfd, name, buf, size - 1);

	if (r < 0)
		return -errno;
	buf[r] = 0;
	return (int)r;
}

int sys_thread_setid(uid_t euid, gid_t egid, const gid_t *groups, size_t n)
{
	int f = injected(SYS_SETID);

	if (f)
		return -f;
	/* to an unprivileged uid: groups and gid while CAP_SETGID is still there;
	 * back to 0: the uid first, which brings the capabilities back */
	if (euid) {
		if (syscall(SYS_setgroups, n, groups) || syscall(SYS_setresgid, -1, egid, -1) ||
		    syscall(SYS_setresuid, -1, euid, -1))
			return -errno;
		return 0;
	}
	if (syscall(SYS_setresuid, -1, euid, -1) || syscall(SYS_setresgid, -1, egid, -1) ||
	    syscall(SYS_setgroups, n, groups))
		return -errno;
	return 0;
}

int sys_raise_nofile(unsigned long want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	if (rl.rlim_cur >= want)
		return 0;
	rl.rlim_cur = want;
	if (rl.rlim_max < want)
		rl.rlim_max = want;
	return setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0;
}

struct thread_start {
	void *(*fn)(void *);
	void *arg;
	int unshare;
	sem_t *started; /* posted once it unshared (NULL: nobody waits) */
};

static void *thread_begin(void *p)
{
	struct thread_start s = *(struct thread_start *)p;

	free(p);
	/*
	 * Its own root and cwd: setns() into a mount (or user) namespace fails
	 * with EINVAL while another thread shares the caller's, and a joined
	 * thread still does for a moment (the kernel wakes pthread_join()
	 * before the exiting thread lets go of it).
	 */
	if (unshare(s.unshare))
		pr_err("amber's helper thread cannot take its own root and cwd%s: %m",
		       s.unshare & CLONE_FILES ? " and fd table" : "");
	if (s.started)
		sem_post(s.started);
	return s.fn(s.arg);
}

static int thread_start(pthread_t *thread, void *(*fn)(void *), void *arg, int flags,
			sem_t *started)
{
	struct thread_start *s = malloc(sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	*s = (struct thread_start){fn, arg, flags, started};
	err = pthread_create(thread, NULL, thread_begin, s);
	if (err)
		free(s);
	return -err;
}

int sys_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	return thread_start(thread, fn, arg, CLONE_FS, NULL);
}

int sys_thread_start_own_fds(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sem_t started;
	int ret;

	sem_init(&started, 0, 0);
	ret = thread_start(thread, fn, arg, CLONE_FS | CLONE_FILES, &started);
	/* until then it shares amber's table */
	while (!ret && sem_wait(&started) && errno == EINTR)
		;
	sem_destroy(&started);
	return ret;
}

int sys_send_fds(int sock, char tag, const int *fds, size_t n, int flags)
{
	char cbuf[CMSG_SPACE(SYS_MAX_FDS * sizeof(int))] = {0};
	struct iovec iov = {.iov_base = &tag, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	if (n > SYS_MAX_FDS)
		return -EINVAL;
	if (n) {
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	}
	return sendmsg(sock, &mh, flags) == 1 ? 0 : -EPIPE;
}

ssize_t sys_recv_fds(int sock, char *tag, int *fds, size_t max)
{
	char cbuf[CMSG_SPACE(SYS_MAX_FDS * sizeof(int))];
	struct iovec iov = {.iov_base = tag, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = CMSG_SPACE((max < SYS_MAX_FDS ? max : SYS_MAX_FDS) *
							 sizeof(int))};
	struct cmsghdr *cm;
	size_t n;

	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1)
		return -EPIPE;
	cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
		return 0;
	n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	memcpy(fds, CMSG_DATA(cm), n * sizeof(int));
	if (mh.msg_flags & MSG_CTRUNC) { /* more than max: the kernel dropped some */
		for (size_t i = 0; i < n; i++)
			close(fds[i]);
		return -EMSGSIZE;
	}
	return (ssize_t)n;
}
