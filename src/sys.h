/* SPDX-License-Identifier: MIT */
/*
 * The raw syscall layer.  Everything amber does to the outside world goes
 * through here so that tests can inject failures: set AMBER_FAULT to a
 * comma separated list of OP:NTH:ERR, e.g. "write:3:ENOSPC" fails the third
 * write with ENOSPC, "read:*:short" makes every read short, "ptrace:2:EPERM".
 * NTH@PID counts only the calls on that pid (ptrace), and ERR "kill" (ptrace
 * only) SIGKILLs the tracee before the call is made: "ptrace:5@1234:kill" is
 * pid 1234 dying in the middle of a dump, for real.
 * All functions return >= 0 on success and -errno on failure.
 */
#ifndef AMBER_SYS_H
#define AMBER_SYS_H

#include <dirent.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

enum sys_op {
	SYS_OPEN,
	SYS_READ,
	SYS_WRITE,
	SYS_PREAD,
	SYS_FSYNC,
	SYS_RENAME,
	SYS_PTRACE,
	SYS_WAIT,
	SYS_VM_READ,
	SYS_KCMP,
	SYS_CLONE3,
	SYS_PIDFD_GETFD,
	SYS_MMAP,
	SYS_SETID,
	SYS_SCHED,
	SYS_SPAWN, /* a run of a helper tool (nft, iptables): checked once it has exited */
	SYS__COUNT,
};

void sys_fault_init(void);
/* Forget the faults and the call counts (for tests); then sys_fault_init() again. */
void sys_fault_reset(void);
/*
 * Returns the errno to inject for this call of op (0x10000 for "short"), or
 * 0; "delay" returns 0 after 2 s.
 */
int sys_fault(enum sys_op op);

/*
 * amber's own /proc.  A path "/proc/..." given to the functions below is
 * resolved in the proc amber had when it started (sys_proc_init), wherever
 * its thread's mount namespace is then: the tree's mount namespace, which
 * amber enters, may have at /proc a proc of another pid namespace (a
 * container's), where amber's pids are not; other paths are resolved as
 * usual.  sys_proc_init (again once amber mounted a proc of a new pid
 * namespace): 0 or -errno, logged.
 */
int sys_proc_init(void);
int sys_open(const char *path, int flags, int mode);
/*
 * As open() (no fault injected, -1 and errno), stat(), lstat(), access(),
 * opendir(), fopen("re") and readlink() (-1 and errno, or NULL).
 */
int sys_open_raw(const char *path, int flags);
int sys_stat(const char *path, struct stat *st);
int sys_lstat(const char *path, struct stat *st);
int sys_access(const char *path, int mode);
DIR *sys_opendir(const char *path);
FILE *sys_fopen_read(const char *path);
ssize_t sys_readlink_raw(const char *path, char *buf, size_t size);
int sys_openat(int dirfd, const char *path, int flags, int mode);
/* openat2(2) with how.resolve = resolve (RESOLVE_*); the same fault op as open */
int sys_openat2(int dirfd, const char *path, int flags, int mode, uint64_t resolve);
int sys_close(int fd);
/* Full transfers: loop over EINTR and short counts; return bytes done or -errno. */
ssize_t sys_read_full(int fd, void *buf, size_t len);
ssize_t sys_write_full(int fd, const void *buf, size_t len);
ssize_t sys_pread_full(int fd, void *buf, size_t len, off_t off);
int sys_fsync(int fd);
/* The whole file system fd is on (a fault of fsync's kind). */
int sys_syncfs(int fd);
/* renameat2(): flags RENAME_NOREPLACE etc. */
int sys_renameat(int olddir, const char *old, int newdir, const char *new, unsigned flags);
long sys_ptrace(int req, pid_t pid, void *addr, void *data);
pid_t sys_waitpid(pid_t pid, int *status, int options);
ssize_t sys_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
		     const struct iovec *remote, unsigned long nremote);
ssize_t sys_vm_writev(pid_t pid, const struct iovec *local, unsigned long nlocal,
		      const struct iovec *remote, unsigned long nremote);
int sys_kcmp(pid_t pid1, pid_t pid2, int type, unsigned long idx1, unsigned long idx2);
long sys_clone3_set_tid(pid_t tid, int exit_signal, uint64_t flags);
/* The same with the pids of n levels of pid namespaces, innermost first. */
long sys_clone3_set_tids(const pid_t *tids, size_t n, int exit_signal, uint64_t flags);
/* A CLONE_VM child with pid tid on stack: blocks until a byte arrives on
 * go_fd, then runs fn(arg) (see sys.c).  Returns its pid or -errno. */
long sys_clone3_vm(pid_t tid, uint64_t flags, void *stack, size_t stack_size, int go_fd,
		   void (*fn)(void *), void *arg);
/* The kernel's struct sigaction (8-byte mask), not glibc's. */
int sys_rt_sigaction(int sig, const void *act, void *old);
int sys_pidfd_open(pid_t pid);
int sys_pidfd_getfd(int pidfd, int targetfd);
/* Read a whole small file (proc files) into a malloc'd NUL-terminated buffer. */
int sys_read_file(const char *path, char **out, size_t *len);
/* The same for an open fd, read to its end (not closed). */
int sys_read_fd(int fd, char **out, size_t *len);
int sys_readlink(const char *path, char *buf, size_t size);
/* The same for name in dirfd (no walk from /: many links of one /proc directory). */
int sys_readlinkat(int dirfd, const char *name, char *buf, size_t size);
/*
 * The calling thread's effective uid and gid and its supplementary groups
 * (raw syscalls: glibc's wrappers would change every thread).  Real and
 * saved ids stay, so that a thread of root's can switch back (owner.c).
 */
/*
 * pthread_create() for amber's helper threads: the thread takes a root and
 * cwd of its own first (unshare(CLONE_FS)), so that amber's main thread can
 * setns() into a mount namespace while it runs or just after it is joined.
 * 0 or -errno.
 */
int sys_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);
/*
 * The same with an fd table of its own (unshare(CLONE_FILES)), for a thread
 * that uses only fds opened before it starts and that runs while amber opens
 * many: the kernel grows a shared table only after an RCU grace period
 * (synchronize_rcu in expand_files, 10-15 ms measured here), each time.  Its
 * copies of amber's fds are closed when it exits.
 */
int sys_thread_start_own_fds(pthread_t *thread, void *(*fn)(void *), void *arg);
/*
 * One byte, tag, on a unix socket, with n fds (SCM_RIGHTS; none if n is 0,
 * at most SYS_MAX_FDS); 0 or -errno.  The receive: the byte into *tag and
 * up to max fds (close-on-exec) into fds; how many came, or -errno.
 */
#define SYS_MAX_FDS 253 /* the kernel's SCM_MAX_FD */
int sys_send_fds(int sock, char tag, const int *fds, size_t n, int flags);
ssize_t sys_recv_fds(int sock, char *tag, int *fds, size_t max);
/* Raise RLIMIT_NOFILE (soft, and hard if needed) to at least want; 0 or -errno. */
int sys_raise_nofile(unsigned long want);
/* Scheduling of thread tid (sched.c); fault op "sched".  attr is a struct
 * sched_attr of size bytes; ioprio calls use IOPRIO_WHO_PROCESS. */
int sys_sched_getattr(pid_t tid, void *attr, unsigned size);
int sys_sched_setattr(pid_t tid, const void *attr);
int sys_sched_getaffinity(pid_t tid, void *mask, size_t len);
int sys_sched_setaffinity(pid_t tid, const void *mask, size_t len);
int sys_ioprio_get(pid_t tid);
int sys_ioprio_set(pid_t tid, int ioprio);
int sys_thread_setid(uid_t euid, gid_t egid, const gid_t *groups, size_t n);
/* seccomp(2) in the calling thread: 0 or -errno. */
int sys_seccomp(unsigned op, unsigned flags, const void *args);
int sys_membarrier(int cmd, unsigned flags);
/* bpf(2): the result (an fd, 0) or -errno. */
long sys_bpf(int cmd, void *attr, unsigned size);
/* io_uring (uring.c): the result (an fd, a count, 0) or -errno.  params is
 * a struct io_uring_params; enter passes no signal mask. */
int sys_io_uring_setup(unsigned entries, void *params);
int sys_io_uring_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags);
/* ... with an argument (IORING_ENTER_EXT_ARG: a wait argument, or its offset) */
int sys_io_uring_enter_arg(int fd, unsigned to_submit, unsigned min_complete, unsigned flags,
			   const void *arg, size_t argsz);
int sys_io_uring_register(int fd, unsigned op, void *arg, unsigned nr_args);

#endif
