// SPDX-License-Identifier: MIT
/*
 * amber check: probe every kernel interface amber relies on and say whether
 * dump and restore can work here.  Nothing is inferred from the kernel
 * version: each feature is exercised on amber itself or on a short-lived
 * child, because most of them are separate config options (see
 * kernel/patches) that any kernel may lack.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/sched.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "net/netlock.h"
#include "sys.h"
#include "uapi/amber_kernel.h"
#include "uapi/pagemap_scan.h"

enum state { ABSENT, PRESENT, UNKNOWN };

/* What a missing feature stops. */
enum {
	NEED_DUMP = 1 << 0,
	NEED_RESTORE = 1 << 1,
};

struct feature {
	const char *name;
	unsigned need;	   /* NEED_*: absent means that side cannot work */
	const char *limit; /* when absent: what amber does without it */
	enum state state;
	char detail[200];
};

enum {
	F_CHILDREN,
	F_KCMP,
	F_STAT_CR,
	F_MM_MAP,
	F_MM_ARGS,
	F_CLONE3_SET_TID,
	F_NS_LAST_PID,
	F_PIDFD,
	F_VM_READV,
	F_PTRACE,
	F_XSTATE,
	F_RSEQ,
	F_RSEQ_CONFIG,
	F_PAGEMAP_SCAN,
	F_UFFD,
	F_DEV_UFFD,
	F_SOFT_DIRTY,
	F_PROC_TIMERS,
	F_TIMER_IDS,
	F_TID_ADDRESS,
	F_KCMP_EPOLL,
	F_KCMP_URING,
	F_URING_FLAGS,
	F_TFD_TICKS,
	F_INOTIFY_WD,
	F_FHANDLE,
	F_NFT,
	F__COUNT,
};

/*
 * What amber needs, as dump.c, restore.c and the resource files use it:
 *  - children: dump.c finds the process tree through it;
 *  - kcmp: files.c tells shared open files apart with KCMP_FILE, dump.c
 *    sharing of fd tables and fs between processes;
 *  - PAGEMAP_SCAN: mem.c finds the pages to save with it;
 *  - PR_GET_TID_ADDRESS: regs.c saves each thread's clear_child_tid;
 *  - stat C/R fields: mm-PID.img records arg/env bounds from them;
 *  - PR_SET_MM_MAP: mem.c restores the mm bounds, auxv and exe with it;
 *  - clone3 set_tid: the restored process gets its original pid;
 *  - ptrace, XSAVE regset, process_vm_readv: freezing, registers, pages.
 * ptrace-rseq-config is needed only where rseq exists: see verdict().
 * The others are reported for information or limit what is saved.
 */
static struct feature features[F__COUNT] = {
	[F_CHILDREN] = {"proc-children", NEED_DUMP},
	[F_KCMP] = {"kcmp", NEED_DUMP},
	[F_STAT_CR] = {"proc-stat-cr-fields", NEED_DUMP},
	[F_MM_MAP] = {"prctl-set-mm-map", NEED_RESTORE},
	[F_MM_ARGS] = {"prctl-set-mm-args", 0},
	[F_CLONE3_SET_TID] = {"clone3-set-tid", NEED_RESTORE},
	[F_NS_LAST_PID] = {"ns-last-pid", 0},
	[F_PIDFD] = {"pidfd-getfd", 0},
	[F_VM_READV] = {"process-vm-readv", NEED_DUMP},
	[F_PTRACE] = {"ptrace-seize", NEED_DUMP | NEED_RESTORE},
	[F_XSTATE] = {"ptrace-xstate", NEED_DUMP | NEED_RESTORE},
	[F_RSEQ] = {"rseq", 0},
	[F_RSEQ_CONFIG] = {"ptrace-rseq-config", 0},
	[F_PAGEMAP_SCAN] = {"pagemap-scan", NEED_DUMP},
	[F_UFFD] = {"userfaultfd", 0},
	[F_DEV_UFFD] = {"dev-userfaultfd", 0},
	[F_SOFT_DIRTY] = {"soft-dirty", 0},
	[F_PROC_TIMERS] = {"proc-timers", 0, "dump: POSIX timers are not saved"},
	[F_TIMER_IDS] = {"timer-create-restore-ids", 0,
			 "restore: timer ids are reached by creating filler timers"},
	[F_TID_ADDRESS] = {"prctl-get-tid-address", NEED_DUMP},
	[F_KCMP_EPOLL] = {"kcmp-epoll-tfd", 0, "dump: processes with epoll fds are refused"},
	[F_KCMP_URING] = {"kcmp-iouring-file", 0,
			  "dump: io_uring files registered other than sockets are refused "
			  "(amber's kernel series, patch 0008)"},
	[F_URING_FLAGS] =
		{"iouring-setup-flags", 0,
		 "dump: io_uring setup flags no probe tells (SUBMIT_ALL, COOP_TASKRUN...) "
		 "are lost (amber's kernel series, patch 0007)"},
	[F_TFD_TICKS] = {"timerfd-set-ticks", 0,
			 "restore: processes with timerfds cannot be restored"},
	[F_INOTIFY_WD] = {"inotify-set-next-wd", 0,
			  "restore: processes with inotify watches cannot be restored"},
	[F_FHANDLE] = {"open-by-handle-at", 0,
		       "dump: inotify watches and fanotify inode marks cannot be resolved"},
	[F_NFT] = {"nft-network-lock", 0,
		   "--tcp-established needs --network-lock skip (peers may reset)"},
};

static void set(struct feature *f, enum state st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set(struct feature *f, enum state st, const char *fmt, ...)
{
	va_list ap;

	f->state = st;
	va_start(ap, fmt);
	vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
	va_end(ap);
}

/* ---- a child to probe on ---- */

#define CHILD_MAGIC 0x616d626572c0ffeeUL

static volatile unsigned long probe_word;

struct child {
	pid_t pid;
	int ctl;   /* closing it lets the child exit */
	int fd_in; /* an fd number valid in the child (its end of the ctl pipe) */
};

/* Fork a child that changes probe_word, says it is ready and waits. */
static int child_start(struct child *c)
{
	int ctl[2], ready[2];
	char b;

	if (pipe2(ctl, O_CLOEXEC))
		return -errno;
	if (pipe2(ready, O_CLOEXEC)) {
		int err = -errno;

		close(ctl[0]);
		close(ctl[1]);
		return err;
	}
	c->pid = fork();
	if (c->pid < 0) {
		int err = -errno;

		close(ctl[0]);
		close(ctl[1]);
		close(ready[0]);
		close(ready[1]);
		return err;
	}
	if (c->pid == 0) {
		close(ctl[1]);
		close(ready[0]);
		probe_word = CHILD_MAGIC;
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		while (read(ctl[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(ctl[0]);
	close(ready[1]);
	c->ctl = ctl[1];
	c->fd_in = ctl[0];
	while (read(ready[0], &b, 1) < 0 && errno == EINTR)
		;
	close(ready[0]);
	return 0;
}

static void child_stop(struct child *c)
{
	close(c->ctl);
	kill(c->pid, SIGKILL);
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* ---- helpers ---- */

/* Capability bit from CapEff of /proc/self/status. */
static int have_cap(int cap)
{
	char *buf, *p;
	unsigned long long eff;
	int ret;

	if (sys_read_file("/proc/self/status", &buf, NULL))
		return 0;
	p = strstr(buf, "\nCapEff:");
	ret = p && sscanf(p + 8, "%llx", &eff) == 1 && (eff >> cap) & 1;
	free(buf);
	return ret;
}

/* Fields of /proc/PID/stat, 1-based as in proc(5); returns how many there are. */
static int read_stat(pid_t pid, unsigned long long *v, int max)
{
	char path[64], *buf, *p;
	int n = 2;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (sys_read_file(path, &buf, NULL))
		return -1;
	p = strrchr(buf, ')');
	if (!p) {
		free(buf);
		return -1;
	}
	p++;
	while (*p) {
		char *end;

		while (*p == ' ' || *p == '\n')
			p++;
		if (!*p)
			break;
		n++;
		if (n <= max)
			v[n] = strtoull(p, &end, 10);
		while (*p && *p != ' ' && *p != '\n')
			p++;
	}
	free(buf);
	return n;
}

/* ---- probes ---- */

static void probe_children(struct feature *f)
{
	char path[64], *buf, pidstr[16];
	struct child c;
	int ret;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)syscall(SYS_gettid));
	ret = child_start(&c);
	if (ret) {
		set(f, UNKNOWN, "cannot fork a child to look for: %s", strerror(-ret));
		return;
	}
	ret = sys_read_file(path, &buf, NULL);
	if (ret == -ENOENT) {
		set(f, ABSENT, "no %s (kernel without CONFIG_PROC_CHILDREN)", path);
	} else if (ret) {
		set(f, UNKNOWN, "cannot read %s: %s", path, strerror(-ret));
	} else {
		char *p = buf;
		bool found = false;

		snprintf(pidstr, sizeof(pidstr), "%d", c.pid);
		while (*p && !found) {
			size_t len = strcspn(p, " \n");

			found = len == strlen(pidstr) && !strncmp(p, pidstr, len);
			p += len;
			p += strspn(p, " \n");
		}
		if (found)
			set(f, PRESENT, "lists a forked child");
		else
			set(f, ABSENT, "exists but does not list a forked child");
		free(buf);
	}
	child_stop(&c);
}

static void probe_kcmp(struct feature *f)
{
	int a, b, o, same, other;

	a = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (a < 0) {
		set(f, UNKNOWN, "cannot open /dev/null: %s", strerror(errno));
		return;
	}
	b = fcntl(a, F_DUPFD_CLOEXEC, 0);
	o = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (b < 0 || o < 0) {
		set(f, UNKNOWN, "cannot open descriptors to compare: %s", strerror(errno));
		goto close_fds;
	}
	same = sys_kcmp(getpid(), getpid(), KCMP_FILE, a, b);
	other = sys_kcmp(getpid(), getpid(), KCMP_FILE, a, o);
	if (same == -ENOSYS)
		set(f, ABSENT, "ENOSYS (kernel without CONFIG_KCMP)");
	else if (same < 0 || other < 0)
		set(f, UNKNOWN, "KCMP_FILE failed: %s", strerror(-(same < 0 ? same : other)));
	else if (same == 0 && other != 0)
		set(f, PRESENT, "KCMP_FILE: dup'd fds equal, separate opens differ");
	else
		set(f, ABSENT, "KCMP_FILE gives wrong answers (%d for a dup, %d for another open)",
		    same, other);
close_fds:
	if (o >= 0)
		close(o);
	if (b >= 0)
		close(b);
	close(a);
}

static void probe_stat_cr(struct feature *f)
{
	unsigned long long v[53];
	unsigned long want = (unsigned long)program_invocation_name;
	siginfo_t si;
	pid_t pid;
	int n, zn;

	n = read_stat(getpid(), v, 52);
	if (n < 0) {
		set(f, UNKNOWN, "cannot read /proc/self/stat");
		return;
	}
	if (n < 52) {
		set(f, ABSENT, "/proc/self/stat has %d fields, want 52", n);
		return;
	}
	if (!v[48] && !v[49] && !v[50] && !v[51]) {
		set(f, ABSENT,
		    "arg_start..env_end read as 0 (kernel without CONFIG_PROC_PID_STAT_CR)");
		return;
	}
	if (v[48] != want || v[49] <= v[48] || v[51] <= v[50] || v[50] < v[49]) {
		set(f, ABSENT,
		    "arg_start %#llx (argv[0] is at %#lx), arg_end %#llx, env %#llx-%#llx", v[48],
		    want, v[49], v[50], v[51]);
		return;
	}
	/* exit_code: a zombie that exited with 7 must show 7 << 8. */
	pid = fork();
	if (pid < 0) {
		set(f, UNKNOWN, "arg/env fields right; cannot fork to check exit_code: %s",
		    strerror(errno));
		return;
	}
	if (pid == 0)
		_exit(7);
	while (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	zn = read_stat(pid, v, 52);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (zn < 52)
		set(f, UNKNOWN, "arg/env fields right; cannot read a zombie's stat");
	else if (v[52] != 7 << 8)
		set(f, ABSENT, "arg/env fields right, but a zombie's exit_code reads %llu, not %d",
		    v[52], 7 << 8);
	else
		set(f, PRESENT, "52 fields; arg_start is argv[0]; a zombie's exit_code is right");
}

static void probe_mm_map(struct feature *f)
{
	struct prctl_mm_map map;
	unsigned long long v[53];
	unsigned int size = 0;

	if (prctl(PR_SET_MM, PR_SET_MM_MAP_SIZE, (unsigned long)&size, 0, 0)) {
		set(f, ABSENT, "PR_SET_MM_MAP_SIZE: %s (kernel without CONFIG_CHECKPOINT_RESTORE)",
		    strerror(errno));
		return;
	}
	if (size != sizeof(map)) {
		set(f, ABSENT, "PR_SET_MM_MAP_SIZE says %u bytes, amber knows %zu", size,
		    sizeof(map));
		return;
	}
	/* Set the map to what it is: only possible if stat tells all of it. */
	if (read_stat(getpid(), v, 52) < 52 || !v[48]) {
		set(f, PRESENT, "struct prctl_mm_map is %u bytes (not tried: stat lacks arg/env)",
		    size);
		return;
	}
	memset(&map, 0, sizeof(map));
	map.start_code = v[26];
	map.end_code = v[27];
	map.start_stack = v[28];
	map.start_data = v[45];
	map.end_data = v[46];
	map.start_brk = v[47];
	map.brk = (uintptr_t)sbrk(0);
	map.arg_start = v[48];
	map.arg_end = v[49];
	map.env_start = v[50];
	map.env_end = v[51];
	map.exe_fd = (__u32)-1;
	if (prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&map, sizeof(map), 0))
		set(f, ABSENT, "PR_SET_MM_MAP with the current values: %s", strerror(errno));
	else
		set(f, PRESENT, "PR_SET_MM_MAP accepted the current values (%u bytes)", size);
}

static void probe_mm_args(struct feature *f)
{
	unsigned long long v[53];
	unsigned long cur = (unsigned long)program_invocation_name;

	/* Setting arg_start to what it is changes nothing. */
	if (read_stat(getpid(), v, 52) >= 52 && v[48])
		cur = v[48];
	if (!prctl(PR_SET_MM, PR_SET_MM_ARG_START, cur, 0, 0))
		set(f, PRESENT, "PR_SET_MM_ARG_START accepted the current value");
	else if (errno == EPERM)
		set(f, UNKNOWN,
		    "EPERM: CAP_SYS_RESOURCE missing, so the kernel's answer is unknown");
	else if (errno == EINVAL)
		set(f, ABSENT,
		    "PR_SET_MM_ARG_START: EINVAL (kernel without "
		    "CONFIG_PRCTL_SET_MM_ARGS)");
	else
		set(f, ABSENT, "PR_SET_MM_ARG_START: %s", strerror(errno));
}

/* A pid that no process uses now (racy, but the probe retries on EEXIST). */
static pid_t free_pid(int i)
{
	char path[32];
	long max = 32768;
	char *buf;

	if (!sys_read_file("/proc/sys/kernel/pid_max", &buf, NULL)) {
		max = atol(buf);
		free(buf);
	}
	for (pid_t p = (getpid() + 7919 * (i + 1)) % max; p; p = (p + 1) % max) {
		if (p < 300)
			continue;
		snprintf(path, sizeof(path), "/proc/%d", p);
		if (access(path, F_OK))
			return p;
	}
	return 0;
}

static void probe_clone3_set_tid(struct feature *f)
{
	struct clone_args args;
	pid_t bad = -1;
	bool sys_admin = have_cap(CAP_SYS_ADMIN), cr = have_cap(CAP_CHECKPOINT_RESTORE);
	const char *caps = sys_admin && cr ? "CAP_SYS_ADMIN, CAP_CHECKPOINT_RESTORE"
			   : sys_admin	   ? "CAP_SYS_ADMIN"
			   : cr		   ? "CAP_CHECKPOINT_RESTORE"
					   : "neither CAP_SYS_ADMIN nor CAP_CHECKPOINT_RESTORE";
	long r;

	/* An invalid tid: EINVAL from the tid check, E2BIG if set_tid is unknown. */
	memset(&args, 0, sizeof(args));
	args.exit_signal = SIGCHLD;
	args.set_tid = (uintptr_t)&bad;
	args.set_tid_size = 1;
	r = syscall(SYS_clone3, &args, CLONE_ARGS_SIZE_VER1);
	if (r == 0)
		_exit(0); /* cannot happen: tid -1 is refused */
	if (r > 0) {
		waitpid(r, NULL, 0);
		set(f, ABSENT, "clone3 accepted set_tid -1");
		return;
	}
	if (errno == ENOSYS) {
		set(f, ABSENT, "clone3: ENOSYS");
		return;
	}
	if (errno == E2BIG) {
		set(f, ABSENT, "clone3 without set_tid (E2BIG)");
		return;
	}
	if (errno != EINVAL) {
		set(f, UNKNOWN, "clone3 probe: %s", strerror(errno));
		return;
	}
	if (!sys_admin && !cr) {
		set(f, UNKNOWN, "clone3 knows set_tid, but you have %s, which it needs", caps);
		return;
	}
	/* Now for real: create a child with a chosen free pid. */
	for (int i = 0; i < 5; i++) {
		pid_t want = free_pid(i), got;

		if (!want)
			break;
		got = sys_clone3_set_tid(want, SIGCHLD, 0);
		if (got == 0)
			_exit(0);
		if (got == -EEXIST)
			continue;
		if (got < 0) {
			set(f, ABSENT, "clone3 with set_tid %d: %s (have %s)", want,
			    strerror((int)-got), caps);
			return;
		}
		while (waitpid(got, NULL, 0) < 0 && errno == EINTR)
			;
		if (got == want)
			set(f, PRESENT, "created a child with a chosen pid; have %s", caps);
		else
			set(f, ABSENT, "asked for pid %d, got %d", want, got);
		return;
	}
	set(f, UNKNOWN, "clone3 knows set_tid, but no free pid could be tried (have %s)", caps);
}

static void probe_ns_last_pid(struct feature *f)
{
	const char *path = "/proc/sys/kernel/ns_last_pid";
	int fd;

	if (access(path, F_OK)) {
		set(f, ABSENT, "no %s (kernel without CONFIG_CHECKPOINT_RESTORE)", path);
		return;
	}
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		set(f, ABSENT, "exists but cannot be opened for writing: %s", strerror(errno));
		return;
	}
	close(fd);
	set(f, PRESENT, "writable (not used by amber: clone3 set_tid is)");
}

static void probe_pidfd(struct feature *f)
{
	struct child c;
	int pidfd, fd, ret = child_start(&c);

	if (ret) {
		set(f, UNKNOWN, "cannot fork a child: %s", strerror(-ret));
		return;
	}
	pidfd = sys_pidfd_open(c.pid);
	if (pidfd < 0) {
		set(f, ABSENT, "pidfd_open: %s", strerror(-pidfd));
		goto stop_child;
	}
	fd = sys_pidfd_getfd(pidfd, c.fd_in);
	if (fd < 0) {
		set(f, ABSENT, "pidfd_open works; pidfd_getfd: %s", strerror(-fd));
	} else {
		int same = sys_kcmp(getpid(), c.pid, KCMP_FILE, fd, c.fd_in);

		set(f, PRESENT, "pidfd_open and pidfd_getfd on a child%s",
		    same == 0 ? " (kcmp: same file)" : "");
		close(fd);
	}
	close(pidfd);
stop_child:
	child_stop(&c);
}

static void probe_vm_readv(struct feature *f)
{
	unsigned long word = 0;
	struct iovec local = {&word, sizeof(word)};
	struct iovec remote = {(void *)&probe_word, sizeof(word)};
	struct child c;
	ssize_t r;
	int ret = child_start(&c);

	if (ret) {
		set(f, UNKNOWN, "cannot fork a child: %s", strerror(-ret));
		return;
	}
	r = sys_vm_readv(c.pid, &local, 1, &remote, 1);
	if (r < 0)
		set(f, r == -ENOSYS ? ABSENT : UNKNOWN, "on a child: %s", strerror((int)-r));
	else if (r != sizeof(word) || word != CHILD_MAGIC)
		set(f, ABSENT, "read back %#lx from a child, want %#lx", word, CHILD_MAGIC);
	else
		set(f, PRESENT, "read a child's memory");
	child_stop(&c);
}

/* Seize a child and probe what needs a stopped tracee. */
static void probe_ptrace(struct feature *fp, struct feature *fx, struct feature *fr)
{
	static uint8_t xsave[64 << 10];
	struct iovec iov = {xsave, sizeof(xsave)};
	struct amber_rseq_configuration rc;
	struct child c;
	int status, ret = child_start(&c);
	long r;

	set(fx, UNKNOWN, "needs ptrace-seize");
	set(fr, UNKNOWN, "needs ptrace-seize");
	if (ret) {
		set(fp, UNKNOWN, "cannot fork a child: %s", strerror(-ret));
		return;
	}
	r = sys_ptrace(PTRACE_SEIZE, c.pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
	if (r) {
		set(fp, ABSENT, "PTRACE_SEIZE: %s", strerror((int)-r));
		goto stop_child;
	}
	r = sys_ptrace(PTRACE_INTERRUPT, c.pid, NULL, NULL);
	if (r) {
		set(fp, ABSENT, "PTRACE_SEIZE works; PTRACE_INTERRUPT: %s", strerror((int)-r));
		goto stop_child;
	}
	ret = sys_waitpid(c.pid, &status, __WALL);
	if (ret < 0 || !WIFSTOPPED(status) || status >> 16 != PTRACE_EVENT_STOP) {
		set(fp, ABSENT, "PTRACE_INTERRUPT did not give a PTRACE_EVENT_STOP (status %#x)",
		    ret < 0 ? 0 : status);
		goto stop_child;
	}
	set(fp, PRESENT, "PTRACE_SEIZE + PTRACE_INTERRUPT stopped a child");

	r = sys_ptrace(PTRACE_GETREGSET, c.pid, (void *)NT_X86_XSTATE, &iov);
	if (r)
		set(fx, ABSENT, "PTRACE_GETREGSET NT_X86_XSTATE: %s", strerror((int)-r));
	else
		set(fx, PRESENT, "%zu bytes of XSAVE state", iov.iov_len);

	memset(&rc, 0, sizeof(rc));
	r = sys_ptrace(PTRACE_GET_RSEQ_CONFIGURATION, c.pid, (void *)sizeof(rc), &rc);
	if (r < 0)
		set(fr, ABSENT, "PTRACE_GET_RSEQ_CONFIGURATION: %s", strerror((int)-r));
	else if (rc.rseq_abi_pointer)
		set(fr, PRESENT, "child's rseq area at %#llx, %u bytes, signature %#x",
		    (unsigned long long)rc.rseq_abi_pointer, rc.rseq_abi_size, rc.signature);
	else
		set(fr, PRESENT, "child has no rseq area registered");
stop_child:
	child_stop(&c);
}

static void probe_rseq(struct feature *f)
{
	/* All-invalid arguments: EINVAL or EBUSY if rseq exists, ENOSYS if not. */
	long r = syscall(SYS_rseq, NULL, 0, 0, 0);

	if (r < 0 && errno == ENOSYS)
		set(f, ABSENT, "ENOSYS (kernel without CONFIG_RSEQ)");
	else if (__rseq_size)
		set(f, PRESENT, "glibc registered rseq (%u bytes); targets use it", __rseq_size);
	else
		set(f, PRESENT, "syscall present; glibc did not register it here");
}

static void probe_pagemap_scan(struct feature *f)
{
	long psz = sysconf(_SC_PAGESIZE);
	struct page_region regs[4];
	struct pm_scan_arg arg;
	char *mem;
	int fd, r;

	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		set(f, UNKNOWN, "cannot open /proc/self/pagemap: %s", strerror(errno));
		return;
	}
	mem = mmap(NULL, 4 * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		set(f, UNKNOWN, "mmap: %s", strerror(errno));
		goto close_fd;
	}
	mem[psz] = 1;
	mem[2 * psz] = 1;
	memset(&arg, 0, sizeof(arg));
	arg.size = sizeof(arg);
	arg.start = (uintptr_t)mem;
	arg.end = (uintptr_t)mem + 4 * psz;
	arg.vec = (uintptr_t)regs;
	arg.vec_len = 4;
	arg.category_mask = PAGE_IS_PRESENT;
	arg.return_mask = PAGE_IS_PRESENT;
	r = ioctl(fd, PAGEMAP_SCAN, &arg);
	if (r < 0)
		set(f, ABSENT, "ioctl: %s", strerror(errno));
	else if (r == 1 && regs[0].start == (uintptr_t)mem + psz &&
		 regs[0].end == (uintptr_t)mem + 3 * psz)
		set(f, PRESENT, "found the 2 present pages of a 4-page mapping");
	else
		set(f, ABSENT, "wrong answer: %d regions for 2 present pages", r);
	munmap(mem, 4 * psz);
close_fd:
	close(fd);
}

static const struct {
	uint64_t bit;
	const char *name;
} uffd_names[] = {
	{UFFD_FEATURE_PAGEFAULT_FLAG_WP, "WP"},
	{UFFD_FEATURE_WP_ASYNC, "WP_ASYNC"},
	{UFFD_FEATURE_WP_UNPOPULATED, "WP_UNPOPULATED"},
	{UFFD_FEATURE_MISSING_SHMEM, "MISSING_SHMEM"},
	{UFFD_FEATURE_EVENT_FORK, "EVENT_FORK"},
	{UFFD_FEATURE_EVENT_REMAP, "EVENT_REMAP"},
	{UFFD_FEATURE_MOVE, "MOVE"},
};

/* UFFDIO_API handshake; fills names with the features amber cares about. */
static int uffd_api(int fd, char *names, size_t size)
{
	struct uffdio_api api = {.api = UFFD_API, .features = 0};
	size_t off = 0;

	if (ioctl(fd, UFFDIO_API, &api))
		return -errno;
	names[0] = 0;
	for (size_t i = 0; i < sizeof(uffd_names) / sizeof(uffd_names[0]); i++)
		if (api.features & uffd_names[i].bit && off < size)
			off += snprintf(names + off, size - off, "%s%s", off ? " " : "",
					uffd_names[i].name);
	if (!off)
		snprintf(names, size, "none of WP, WP_ASYNC, MOVE...");
	return 0;
}

static void probe_uffd(struct feature *f)
{
	char names[160];
	int fd, ret;

	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0) {
		if (errno == ENOSYS)
			set(f, ABSENT, "ENOSYS (kernel without CONFIG_USERFAULTFD)");
		else
			set(f, ABSENT, "userfaultfd(): %s%s", strerror(errno),
			    errno == EPERM ? " (vm.unprivileged_userfaultfd=0)" : "");
		return;
	}
	ret = uffd_api(fd, names, sizeof(names));
	if (ret)
		set(f, ABSENT, "UFFDIO_API: %s", strerror(-ret));
	else
		set(f, PRESENT, "features: %s", names);
	close(fd);
}

static void probe_dev_uffd(struct feature *f)
{
	char names[160];
	int dev, fd, ret;

	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		set(f, ABSENT, "/dev/userfaultfd: %s", strerror(errno));
		return;
	}
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		set(f, ABSENT, "USERFAULTFD_IOC_NEW: %s", strerror(errno));
		goto close_dev;
	}
	ret = uffd_api(fd, names, sizeof(names));
	if (ret)
		set(f, ABSENT, "UFFDIO_API: %s", strerror(-ret));
	else
		set(f, PRESENT, "USERFAULTFD_IOC_NEW works");
	close(fd);
close_dev:
	close(dev);
}

static int pagemap_entry(int fd, void *addr, uint64_t *e)
{
	off_t off = (uintptr_t)addr / sysconf(_SC_PAGESIZE) * sizeof(*e);

	return pread(fd, e, sizeof(*e), off) == sizeof(*e) ? 0 : -EIO;
}

static void probe_soft_dirty(struct feature *f)
{
	long psz = sysconf(_SC_PAGESIZE);
	uint64_t before, after;
	int pm, cr;
	char *mem;

	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0) {
		set(f, UNKNOWN, "cannot open /proc/self/pagemap: %s", strerror(errno));
		return;
	}
	cr = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (cr < 0) {
		set(f, ABSENT, "cannot open /proc/self/clear_refs: %s", strerror(errno));
		goto close_pm;
	}
	mem = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		set(f, UNKNOWN, "mmap: %s", strerror(errno));
		goto close_cr;
	}
	mem[0] = 1;
	if (write(cr, "4", 1) != 1) {
		set(f, ABSENT, "writing 4 to clear_refs: %s", strerror(errno));
		goto unmap;
	}
	if (pagemap_entry(pm, mem, &before)) {
		set(f, UNKNOWN, "cannot read pagemap");
		goto unmap;
	}
	*(volatile char *)mem = 2;
	if (pagemap_entry(pm, mem, &after)) {
		set(f, UNKNOWN, "cannot read pagemap");
		goto unmap;
	}
	if (!(before & PM_SOFT_DIRTY) && (after & PM_SOFT_DIRTY))
		set(f, PRESENT, "pagemap bit 55 set by a write after clear_refs");
	else if (!(after & PM_SOFT_DIRTY))
		set(f, ABSENT,
		    "pagemap bit 55 not set by a write (kernel without "
		    "CONFIG_MEM_SOFT_DIRTY)");
	else
		set(f, ABSENT, "pagemap bit 55 not cleared by clear_refs");
unmap:
	munmap(mem, psz);
close_cr:
	close(cr);
close_pm:
	close(pm);
}

static void probe_proc_timers(struct feature *f)
{
	struct sigevent sev;
	char *buf, want[32];
	int id = -1, ret;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_NONE;
	if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &sev, &id)) {
		set(f, UNKNOWN, "timer_create: %s (kernel without CONFIG_POSIX_TIMERS?)",
		    strerror(errno));
		return;
	}
	ret = sys_read_file("/proc/self/timers", &buf, NULL);
	if (ret == -ENOENT) {
		set(f, ABSENT,
		    "no /proc/self/timers (kernel without CONFIG_CHECKPOINT_RESTORE): "
		    "POSIX timers cannot be dumped");
	} else if (ret) {
		set(f, UNKNOWN, "cannot read /proc/self/timers: %s", strerror(-ret));
	} else {
		snprintf(want, sizeof(want), "ID: %d\n", id);
		if (strstr(buf, want))
			set(f, PRESENT, "lists a timer just created");
		else
			set(f, ABSENT, "does not list a timer just created");
		free(buf);
	}
	syscall(SYS_timer_delete, id);
}

static void probe_timer_ids(struct feature *f)
{
	int r = prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_GET, 0, 0, 0);

	if (r >= 0)
		set(f, PRESENT, "prctl(PR_TIMER_CREATE_RESTORE_IDS, GET) = %d", r);
	else
		set(f, ABSENT, "prctl %d: %s: restored POSIX timers get new ids",
		    PR_TIMER_CREATE_RESTORE_IDS, strerror(errno));
}

static void probe_tid_address(struct feature *f)
{
	unsigned long addr = 0;

	if (!prctl(40 /* PR_GET_TID_ADDRESS */, &addr, 0, 0, 0))
		set(f, PRESENT, "clear_child_tid at %#lx", addr);
	else
		set(f, ABSENT, "%s (kernel without CONFIG_CHECKPOINT_RESTORE)", strerror(errno));
}

static void probe_kcmp_epoll(struct feature *f)
{
	struct {
		uint32_t efd, tfd, toff;
	} slot;
	struct epoll_event ev = {.events = EPOLLIN};
	int ep = epoll_create1(EPOLL_CLOEXEC), efd = eventfd(0, EFD_CLOEXEC), r;

	if (ep < 0 || efd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev)) {
		set(f, UNKNOWN, "cannot set up an epoll watch: %s", strerror(errno));
		goto close;
	}
	slot = (typeof(slot)){(uint32_t)ep, (uint32_t)efd, 0};
	r = sys_kcmp(getpid(), getpid(), 7 /* KCMP_EPOLL_TFD */, efd, (unsigned long)&slot);
	if (r == 0)
		set(f, PRESENT, "finds an epoll target as the same file");
	else
		set(f, ABSENT, "kcmp(KCMP_EPOLL_TFD): %s", r < 0 ? strerror(-r) : "differs");
close:
	if (ep >= 0)
		close(ep);
	if (efd >= 0)
		close(efd);
}

/*
 * The kernel series' io_uring patches: kcmp() compares an fd with a slot of
 * a ring's registered files (KCMP_IOURING_FILE, 8), fdinfo shows SetupFlags.
 */
static void probe_uring(struct feature *fk, struct feature *ff)
{
	struct io_uring_params p = {.flags = IORING_SETUP_SUBMIT_ALL};
	struct amber_kcmp_iouring_slot slot;
	char path[64], *buf = NULL;
	const char *flags;
	int ring = sys_io_uring_setup(1, &p), pp[2] = {-1, -1}, r;

	if (ring < 0 || pipe2(pp, O_CLOEXEC) ||
	    sys_io_uring_register(ring, IORING_REGISTER_FILES, &pp[0], 1)) {
		set(fk, UNKNOWN, "cannot set up an io_uring with a registered pipe: %s",
		    strerror(ring < 0 ? -ring : errno));
		set(ff, UNKNOWN, "%s", fk->detail);
		goto close;
	}
	slot.ring_fd = (uint32_t)ring;
	slot.index = 0;
	r = sys_kcmp(getpid(), getpid(), AMBER_KCMP_IOURING_FILE, pp[0], (unsigned long)&slot);
	if (r == 0)
		set(fk, PRESENT, "finds a ring's registered file as the same file");
	else
		set(fk, ABSENT, "kcmp(KCMP_IOURING_FILE): %s", r < 0 ? strerror(-r) : "differs");
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ring);
	flags = sys_read_file(path, &buf, NULL) ? NULL : strstr(buf, "\nSetupFlags:");
	if (flags && strtoul(flags + 12, NULL, 16) == IORING_SETUP_SUBMIT_ALL)
		set(ff, PRESENT, "a ring's fdinfo shows its SetupFlags");
	else
		set(ff, ABSENT, "a ring's fdinfo shows no SetupFlags");
	free(buf);
close:
	if (ring >= 0)
		close(ring);
	if (pp[0] >= 0)
		close(pp[0]);
	if (pp[1] >= 0)
		close(pp[1]);
}

static void probe_tfd_ticks(struct feature *f)
{
	uint64_t ticks = 3, got = 0;
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);

	if (fd < 0) {
		set(f, UNKNOWN, "timerfd_create: %s", strerror(errno));
		return;
	}
	if (ioctl(fd, _IOW('T', 0, uint64_t) /* TFD_IOC_SET_TICKS */, &ticks))
		set(f, ABSENT, "TFD_IOC_SET_TICKS: %s (kernel without CONFIG_CHECKPOINT_RESTORE)",
		    strerror(errno));
	else if (read(fd, &got, sizeof(got)) != sizeof(got) || got != ticks)
		set(f, ABSENT, "TFD_IOC_SET_TICKS accepted but read gives %llu",
		    (unsigned long long)got);
	else
		set(f, PRESENT, "unread expirations can be set");
	close(fd);
}

static void probe_inotify_wd(struct feature *f)
{
	uint32_t next = 7;
	int fd = inotify_init1(IN_CLOEXEC), wd;

	if (fd < 0) {
		set(f, UNKNOWN, "inotify_init1: %s", strerror(errno));
		return;
	}
	if (ioctl(fd, _IOW('I', 0, uint32_t) /* INOTIFY_IOC_SETNEXTWD */, next))
		set(f, ABSENT,
		    "INOTIFY_IOC_SETNEXTWD: %s (kernel without CONFIG_CHECKPOINT_RESTORE)",
		    strerror(errno));
	else if ((wd = inotify_add_watch(fd, "/", IN_ATTRIB)) != (int)next)
		set(f, ABSENT, "the next watch got wd %d, not %u", wd, next);
	else
		set(f, PRESENT, "a watch gets the wd asked for");
	close(fd);
}

static void probe_fhandle(struct feature *f)
{
	struct {
		struct file_handle h;
		unsigned char buf[MAX_HANDLE_SZ];
	} fh;
	int mount_id, mfd, fd;

	fh.h.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, "/", &fh.h, &mount_id, 0)) {
		set(f, ABSENT, "name_to_handle_at: %s", strerror(errno));
		return;
	}
	mfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd = mfd < 0 ? -1 : open_by_handle_at(mfd, &fh.h, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		set(f, PRESENT, "resolves a file handle of /");
	else
		set(f, ABSENT, "open_by_handle_at: %s (needs CAP_DAC_READ_SEARCH)",
		    strerror(errno));
	if (fd >= 0)
		close(fd);
	if (mfd >= 0)
		close(mfd);
}

static void probe_nft(struct feature *f)
{
	char why[sizeof(f->detail)];

	set(f, netlock_probe(why, sizeof(why)) ? ABSENT : PRESENT, "%s", why);
}

/* ---- verdict and output ---- */

struct verdict {
	bool ok;
	char why[400];
};

static void add_reason(struct verdict *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add_reason(struct verdict *v, const char *fmt, ...)
{
	size_t len = strlen(v->why);
	va_list ap;

	v->ok = false;
	if (len && len < sizeof(v->why) - 2) {
		strcat(v->why, "; ");
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(v->why + len, sizeof(v->why) - len, fmt, ap);
	va_end(ap);
}

static const char *state_name(enum state s)
{
	return s == PRESENT ? "present" : s == ABSENT ? "absent" : "unknown";
}

static void verdict(struct verdict *dump, struct verdict *restore)
{
	dump->ok = restore->ok = true;
	dump->why[0] = restore->why[0] = 0;
	for (int i = 0; i < F__COUNT; i++) {
		struct feature *f = &features[i];

		if (f->state == PRESENT)
			continue;
		if (f->need & NEED_DUMP)
			add_reason(dump, "%s is %s", f->name, state_name(f->state));
		if (f->need & NEED_RESTORE)
			add_reason(restore, "%s is %s", f->name, state_name(f->state));
	}
	/* A target that uses rseq cannot be dumped without reading its rseq area. */
	if (features[F_RSEQ].state == PRESENT && features[F_RSEQ_CONFIG].state != PRESENT)
		add_reason(dump, "rseq is present but ptrace-rseq-config is %s",
			   state_name(features[F_RSEQ_CONFIG].state));
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void print_json(FILE *out, const char *kernel, struct verdict *d, struct verdict *r)
{
	fputs("{\n  \"kernel\": ", out);
	json_str(out, kernel);
	fputs(",\n  \"features\": {\n", out);
	for (int i = 0; i < F__COUNT; i++) {
		struct feature *f = &features[i];

		fputs("    ", out);
		json_str(out, f->name);
		fprintf(out, ": {\"present\": %s, \"state\": \"%s\", \"detail\": ",
			f->state == PRESENT ? "true" : "false", state_name(f->state));
		json_str(out, f->detail);
		fprintf(out, ", \"needed_by\": [%s%s%s]}%s\n",
			f->need & NEED_DUMP ? "\"dump\"" : "",
			f->need == (NEED_DUMP | NEED_RESTORE) ? ", " : "",
			f->need & NEED_RESTORE ? "\"restore\"" : "", i + 1 < F__COUNT ? "," : "");
	}
	fprintf(out, "  },\n  \"dump\": {\"can_work\": %s, \"reason\": ", d->ok ? "true" : "false");
	json_str(out, d->why);
	fprintf(out,
		"},\n  \"restore\": {\"can_work\": %s, \"reason\": ", r->ok ? "true" : "false");
	json_str(out, r->why);
	fputs("},\n  \"limits\": [", out);
	for (int i = 0, n = 0; i < F__COUNT; i++) {
		if (features[i].state == PRESENT || !features[i].limit)
			continue;
		fputs(n++ ? ", " : "", out);
		json_str(out, features[i].limit);
	}
	fputs("]\n}\n", out);
}

static void print_text(FILE *out, const char *kernel, struct verdict *d, struct verdict *r)
{
	fprintf(out, "amber %s on Linux %s (every feature probed, not guessed from the version)\n",
		AMBER_VERSION, kernel);
	for (int i = 0; i < F__COUNT; i++) {
		struct feature *f = &features[i];
		int dots = 28 - (int)strlen(f->name);

		fprintf(out, "  %s %.*s %-7s  (%s)\n", f->name, dots > 2 ? dots : 2,
			"..............................", state_name(f->state), f->detail);
	}
	fprintf(out, "dump: %s%s\n", d->ok ? "can work" : "cannot work because ", d->why);
	fprintf(out, "restore: %s%s\n", r->ok ? "can work" : "cannot work because ", r->why);
	for (int i = 0; i < F__COUNT; i++)
		if (features[i].state != PRESENT && features[i].limit)
			fprintf(out, "limit: %s (%s is %s)\n", features[i].limit, features[i].name,
				state_name(features[i].state));
}

int cmd_check(int argc, char **argv)
{
	struct verdict dump, restore;
	struct utsname u;
	struct opts o = {0};
	bool json;

	if (opts_parse(argc, argv, &o, CMD_CHECK))
		return 2;
	if (o.help) {
		opts_usage(stdout, CMD_CHECK);
		return 0;
	}
	json = o.json;
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "?");
	/* Output goes to a pipe maybe: nothing buffered may be duplicated by fork. */
	fflush(NULL);

	probe_children(&features[F_CHILDREN]);
	probe_kcmp(&features[F_KCMP]);
	probe_stat_cr(&features[F_STAT_CR]);
	probe_mm_map(&features[F_MM_MAP]);
	probe_mm_args(&features[F_MM_ARGS]);
	probe_clone3_set_tid(&features[F_CLONE3_SET_TID]);
	probe_ns_last_pid(&features[F_NS_LAST_PID]);
	probe_pidfd(&features[F_PIDFD]);
	probe_vm_readv(&features[F_VM_READV]);
	probe_ptrace(&features[F_PTRACE], &features[F_XSTATE], &features[F_RSEQ_CONFIG]);
	probe_rseq(&features[F_RSEQ]);
	probe_pagemap_scan(&features[F_PAGEMAP_SCAN]);
	probe_uffd(&features[F_UFFD]);
	probe_dev_uffd(&features[F_DEV_UFFD]);
	probe_soft_dirty(&features[F_SOFT_DIRTY]);
	probe_proc_timers(&features[F_PROC_TIMERS]);
	probe_timer_ids(&features[F_TIMER_IDS]);
	probe_tid_address(&features[F_TID_ADDRESS]);
	probe_kcmp_epoll(&features[F_KCMP_EPOLL]);
	probe_uring(&features[F_KCMP_URING], &features[F_URING_FLAGS]);
	probe_tfd_ticks(&features[F_TFD_TICKS]);
	probe_inotify_wd(&features[F_INOTIFY_WD]);
	probe_fhandle(&features[F_FHANDLE]);
	probe_nft(&features[F_NFT]);

	verdict(&dump, &restore);
	if (json)
		print_json(stdout, u.release, &dump, &restore);
	else
		print_text(stdout, u.release, &dump, &restore);
	fflush(stdout);
	return dump.ok && restore.ok ? 0 : 1;
}
