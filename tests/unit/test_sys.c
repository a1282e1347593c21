// SPDX-License-Identifier: MIT
/*
 * AMBER_FAULT parsing and the fault-injecting syscall wrappers: OP:NTH:ERR
 * fails exactly the NTH call of OP, "*" fails every call, "short" halves
 * transfers (which the *_full helpers must complete), EINTR is retried;
 * NTH@PID counts only the ptrace calls on PID, and "kill" makes that process
 * really die just before its call.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "sys.h"
#include "unit.h"

static int reset(void **state)
{
	set_faults(NULL);
	return 0;
}

static void test_no_faults(void **state)
{
	for (int op = 0; op < SYS__COUNT; op++)
		for (int i = 0; i < 5; i++)
			assert_int_equal(sys_fault(op), 0);
}

static void test_nth_call(void **state)
{
	set_faults("write:3:ENOSPC");
	assert_int_equal(sys_fault(SYS_WRITE), 0);
	assert_int_equal(sys_fault(SYS_WRITE), 0);
	assert_int_equal(sys_fault(SYS_WRITE), ENOSPC);
	for (int i = 0; i < 10; i++)
		assert_int_equal(sys_fault(SYS_WRITE), 0);
	/* other ops are not touched, and do not count for write */
	assert_int_equal(sys_fault(SYS_READ), 0);
}

static void test_counts_per_op(void **state)
{
	set_faults("read:2:EIO");
	assert_int_equal(sys_fault(SYS_WRITE), 0);
	assert_int_equal(sys_fault(SYS_WRITE), 0);
	assert_int_equal(sys_fault(SYS_READ), 0);
	assert_int_equal(sys_fault(SYS_WRITE), 0);
	assert_int_equal(sys_fault(SYS_READ), EIO);
	assert_int_equal(sys_fault(SYS_READ), 0);
}

static void test_every_call(void **state)
{
	set_faults("fsync:*:EIO");
	for (int i = 0; i < 20; i++)
		assert_int_equal(sys_fault(SYS_FSYNC), EIO);
}

static void test_several_entries(void **state)
{
	set_faults("open:1:EACCES,kcmp:*:ESRCH,pidfd_getfd:2:EAGAIN");
	assert_int_equal(sys_fault(SYS_OPEN), EACCES);
	assert_int_equal(sys_fault(SYS_OPEN), 0);
	assert_int_equal(sys_fault(SYS_KCMP), ESRCH);
	assert_int_equal(sys_fault(SYS_KCMP), ESRCH);
	assert_int_equal(sys_fault(SYS_PIDFD_GETFD), 0);
	assert_int_equal(sys_fault(SYS_PIDFD_GETFD), EAGAIN);
}

static void test_error_names(void **state)
{
	static const struct {
		const char *name;
		int err;
	} tab[] = {{"EINTR", EINTR},   {"ENOSPC", ENOSPC}, {"EIO", EIO},
		   {"ENOMEM", ENOMEM}, {"EACCES", EACCES}, {"ESRCH", ESRCH},
		   {"EFAULT", EFAULT}, {"EAGAIN", EAGAIN}, {"38", ENOSYS}};
	char spec[64];

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		snprintf(spec, sizeof(spec), "vm_read:1:%s", tab[i].name);
		set_faults(spec);
		assert_int_equal(sys_fault(SYS_VM_READ), tab[i].err);
	}
}

static void test_malformed_ignored(void **state)
{
	/* a bad entry is skipped with a warning, the good ones still apply */
	set_faults("garbage,nosuchop:1:EIO,write:2,read:1:EIO");
	assert_int_equal(sys_fault(SYS_WRITE), 0);
	assert_int_equal(sys_fault(SYS_WRITE), 0);
	assert_int_equal(sys_fault(SYS_READ), EIO);
	set_faults("");
	assert_int_equal(sys_fault(SYS_READ), 0);
}

static void test_reset(void **state)
{
	set_faults("rename:2:EIO");
	assert_int_equal(sys_fault(SYS_RENAME), 0);
	sys_fault_reset();
	unsetenv("AMBER_FAULT");
	assert_int_equal(sys_fault(SYS_RENAME), 0);
	assert_int_equal(sys_fault(SYS_RENAME), 0);
	/* counting starts again after a reset */
	set_faults("rename:2:EIO");
	assert_int_equal(sys_fault(SYS_RENAME), 0);
	assert_int_equal(sys_fault(SYS_RENAME), EIO);
}

/* Errors reach the callers of the wrappers as -errno. */
static void test_wrappers_fail(void **state)
{
	char path[] = "/tmp/amber-unit-sys-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	set_faults("fsync:1:EIO,open:1:EACCES,rename:1:ENOSPC");
	assert_int_equal(sys_fsync(fd), -EIO);
	assert_int_equal(sys_fsync(fd), 0);
	assert_int_equal(sys_open(path, O_RDONLY, 0), -EACCES);
	assert_int_equal(sys_renameat(AT_FDCWD, path, AT_FDCWD, path, 0), -ENOSPC);
	close(fd);
	unlink(path);
}

/*
 * EPERM is errno 1, the value sys_fault() uses for "short": an injected
 * EPERM must still be an EPERM (ptrace and clone3 tests need it).
 */
static void test_eperm_is_not_short(void **state)
{
	set_faults("open:1:EPERM");
	assert_int_equal(sys_open("/dev/null", O_RDONLY, 0), -EPERM);
}

static void test_short_write_completes(void **state)
{
	char buf[10000], back[10000];
	int p[2];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 13);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(fcntl(p[1], F_SETPIPE_SZ, 65536) >= 0, 1);
	set_faults("write:*:short");
	assert_int_equal(sys_write_full(p[1], buf, sizeof(buf)), sizeof(buf));
	close(p[1]);
	set_faults("read:*:short");
	assert_int_equal(sys_read_full(p[0], back, sizeof(back)), sizeof(back));
	assert_memory_equal(buf, back, sizeof(buf));
	/* EOF: the count says how much there was */
	assert_int_equal(sys_read_full(p[0], back, 10), 0);
	close(p[0]);
}

static void test_eintr_retried(void **state)
{
	char path[] = "/tmp/amber-unit-sys-XXXXXX";
	char back[6] = {0};
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	set_faults("write:1:EINTR");
	assert_int_equal(sys_write_full(fd, "amber", 5), 5);
	set_faults("pread:1:EINTR,read:1:EINTR");
	assert_int_equal(sys_pread_full(fd, back, 5, 0), 5);
	assert_string_equal(back, "amber");
	assert_int_equal(lseek(fd, 1, SEEK_SET), 1);
	memset(back, 0, sizeof(back));
	assert_int_equal(sys_read_full(fd, back, 4), 4);
	assert_string_equal(back, "mber");
	close(fd);
}

static void test_write_error(void **state)
{
	char path[] = "/tmp/amber-unit-sys-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	set_faults("write:2:ENOSPC");
	assert_int_equal(sys_write_full(fd, "0123456789", 10), 10);
	assert_int_equal(sys_write_full(fd, "0123456789", 10), -ENOSPC);
	close(fd);
}

static void test_read_file(void **state)
{
	char *buf;
	size_t len;

	assert_int_equal(sys_read_file("/proc/self/stat", &buf, &len), 0);
	assert_true(len > 0);
	assert_int_equal(strlen(buf), len);
	free(buf);
	assert_int_equal(sys_read_file("/nonexistent/amber", &buf, NULL), -ENOENT);
}

static pid_t sleeper(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

/* A call on no pid in particular, or on another, does not count for NTH@PID. */
static void test_pid_filter(void **state)
{
	set_faults("ptrace:1@4242:EIO");
	assert_int_equal(sys_fault(SYS_PTRACE), 0);
	assert_int_equal(sys_fault(SYS_PTRACE), 0);
	/* kill is for ptrace only: elsewhere it is ignored (with a warning) */
	set_faults("write:1:kill");
	assert_int_equal(sys_fault(SYS_WRITE), 0);
}

/* ptrace:3@PID:kill: PID's own third request finds it SIGKILLed, the other's go on. */
static void test_ptrace_kill(void **state)
{
	pid_t other = sleeper(), victim = sleeper();
	struct user_regs_struct regs;
	char spec[64];
	int st;

	snprintf(spec, sizeof(spec), "ptrace:3@%d:kill", victim);
	set_faults(spec);
	for (int i = 0; i < 2; i++) {
		pid_t p = i ? victim : other;

		assert_int_equal(sys_ptrace(PTRACE_SEIZE, p, NULL, NULL), 0);
		assert_int_equal(sys_ptrace(PTRACE_INTERRUPT, p, NULL, NULL), 0);
		assert_int_equal(waitpid(p, &st, __WALL), p);
		assert_true(WIFSTOPPED(st));
	}
	assert_int_equal(sys_ptrace(PTRACE_GETREGS, other, NULL, &regs), 0);
	assert_int_equal(sys_ptrace(PTRACE_GETREGS, victim, NULL, &regs), -ESRCH);
	assert_int_equal(waitpid(victim, &st, __WALL), victim);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_int_equal(sys_ptrace(PTRACE_GETREGS, other, NULL, &regs), 0);
	kill(other, SIGKILL);
	assert_int_equal(waitpid(other, &st, __WALL), other);
}

/* a helper thread says it runs (up), then waits to be let go (go) */
static int up[2], go[2];

static void *parked(void *arg)
{
	char c = 0;

	if (write(up[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
		return (void *)1;
	return NULL;
}

/* In a child: setns() into its own mount namespace while a helper thread runs. */
static int setns_beside_thread(bool own_fs)
{
	pthread_t t;
	int ns, ret;
	char c = 0;

	if (pipe(up) || pipe(go))
		return -errno;
	ret = own_fs ? sys_thread_start(&t, parked, NULL) : -pthread_create(&t, NULL, parked, NULL);
	if (ret || read(up[0], &c, 1) != 1)
		return ret ? ret : -EIO;
	ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	ret = setns(ns, CLONE_NEWNS) ? -errno : 0;
	if (write(go[1], &c, 1) != 1)
		ret = -EIO;
	pthread_join(t, NULL);
	return ret;
}

/*
 * amber's main thread setns()es into a tree's mount namespace and back while
 * its helper threads (page writer, /proc/locks reader) run or have just been
 * joined: the kernel refuses (EINVAL) while another thread shares its root
 * and cwd, so sys_thread_start()'s threads take their own.
 */
static void test_thread_own_fs(void **state)
{
	int st;

	if (geteuid())
		skip();
	for (int own = 0; own < 2; own++) {
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (!pid)
			_exit(-setns_beside_thread(own));
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		/* a plain pthread shares them: the check itself can fail */
		assert_int_equal(WEXITSTATUS(st), own ? 0 : EINVAL);
	}
}

static int fds_before, fds_after;
static int fds_seen[2], fds_go[2];

static void *check_fds(void *arg)
{
	char c;

	(void)arg;
	if (read(fds_go[0], &c, 1) != 1)
		return NULL;
	fds_seen[0] = fcntl(fds_before, F_GETFD) >= 0;
	fds_seen[1] = fcntl(fds_after, F_GETFD) >= 0;
	return NULL;
}

/*
 * A thread of sys_thread_start_own_fds() has its own fd table from the
 * moment the call returns: it has amber's fds from before, not those amber
 * opens after (amber's table then grows without an RCU grace period).
 */
static void test_thread_own_fds(void **state)
{
	for (int own = 0; own < 2; own++) {
		pthread_t t;
		char c = 0;

		assert_int_equal(pipe(fds_go), 0);
		fds_before = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fds_before >= 0);
		assert_int_equal(own ? sys_thread_start_own_fds(&t, check_fds, NULL)
				     : sys_thread_start(&t, check_fds, NULL),
				 0);
		fds_after = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fds_after >= 0);
		assert_int_equal(write(fds_go[1], &c, 1), 1);
		pthread_join(t, NULL);
		assert_true(fds_seen[0]);
		/* a shared table has it: the check itself can fail */
		assert_int_equal(fds_seen[1], !own);
		close(fds_before);
		close(fds_after);
		close(fds_go[0]);
		close(fds_go[1]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_no_faults, reset),
		cmocka_unit_test_setup(test_nth_call, reset),
		cmocka_unit_test_setup(test_counts_per_op, reset),
		cmocka_unit_test_setup(test_every_call, reset),
		cmocka_unit_test_setup(test_several_entries, reset),
		cmocka_unit_test_setup(test_error_names, reset),
		cmocka_unit_test_setup(test_malformed_ignored, reset),
		cmocka_unit_test_setup(test_reset, reset),
		cmocka_unit_test_setup(test_wrappers_fail, reset),
		cmocka_unit_test_setup(test_eperm_is_not_short, reset),
		cmocka_unit_test_setup(test_short_write_completes, reset),
		cmocka_unit_test_setup(test_eintr_retried, reset),
		cmocka_unit_test_setup(test_write_error, reset),
		cmocka_unit_test_setup(test_read_file, reset),
		cmocka_unit_test_setup(test_pid_filter, reset),
		cmocka_unit_test_setup(test_ptrace_kill, reset),
		cmocka_unit_test_setup(test_thread_own_fs, reset),
		cmocka_unit_test_setup(test_thread_own_fds, reset),
	};

	log_level = getenv("AMBER_TEST_VERBOSE") ? LOG_DEBUG : -1;
	return cmocka_run_group_tests(tests, NULL, reset);
}
