// SPDX-License-Identifier: MIT
/*
 * /proc parsers whose input this machine cannot produce: the x86 shadow stack
 * feature line of a CPU with user_shstk (refused at dump by regs.c); and
 * /proc/self/status read against what the kernel says through syscalls.
 */
#include <linux/capability.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "proc.h"

static void test_shstk(void **state)
{
	/* as arch_proc_pid_thread_features() prints them */
	assert_true(proc_status_shstk("Name:\tx\nx86_Thread_features:\tshstk wrss \n"
				      "x86_Thread_features_locked:\t\nUid:\t0\n"));
	assert_true(proc_status_shstk("x\nx86_Thread_features:\twrss shstk\n"));
	assert_false(proc_status_shstk("Name:\tx\nx86_Thread_features:\t\n"
				       "x86_Thread_features_locked:\tshstk wrss \n"));
	assert_false(proc_status_shstk("Name:\tx\nx86_Thread_features:\twrss\n"));
	assert_false(proc_status_shstk("Name:\tx\nx86_Thread_features:\tshstkx\n"));
	assert_false(proc_status_shstk("Name:\tx\nSeccomp:\t0\n"));
}

static void test_shstk_self(void **state)
{
	char buf[8192];
	FILE *f = fopen("/proc/self/status", "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf + 1, 1, sizeof(buf) - 2, f);
	fclose(f);
	buf[0] = '\n';
	buf[n + 1] = 0;
	/* Debian 12's glibc never turns the shadow stack on */
	assert_false(proc_status_shstk(buf));
}

/* proc_parse_status against what the kernel says through syscalls. */
static void test_status_self(void **state)
{
	struct proc_status st;
	unsigned r, e, s, n;
	gid_t groups[256];
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	mode_t mask = umask(027);

	umask(027);
	assert_int_equal(proc_parse_status(getpid(), &st), 0);
	umask(mask);
	assert_int_equal(getresuid(&r, &e, &s), 0);
	assert_int_equal(st.uid[0], r);
	assert_int_equal(st.uid[1], e);
	assert_int_equal(st.uid[2], s);
	assert_int_equal(st.uid[3], (unsigned)setfsuid(-1));
	assert_int_equal(getresgid(&r, &e, &s), 0);
	assert_int_equal(st.gid[0], r);
	assert_int_equal(st.gid[1], e);
	assert_int_equal(st.gid[2], s);
	n = (unsigned)getgroups(256, groups);
	assert_int_equal((unsigned)st.nr_groups, n);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(st.groups[i], groups[i]);
	assert_int_equal(syscall(SYS_capget, &h, d), 0);
	assert_int_equal(st.cap_eff, d[0].effective | (uint64_t)d[1].effective << 32);
	assert_int_equal(st.cap_prm, d[0].permitted | (uint64_t)d[1].permitted << 32);
	assert_int_equal(st.cap_inh, d[0].inheritable | (uint64_t)d[1].inheritable << 32);
	assert_int_equal(st.no_new_privs, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	assert_int_equal(st.umask, 027);
	assert_int_equal(st.threads, 1);
	assert_int_equal(st.tracer_pid, 0);
	assert_int_equal(st.seccomp, prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shstk),
		cmocka_unit_test(test_shstk_self),
		cmocka_unit_test(test_status_self),
	};

	log_level = -1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
