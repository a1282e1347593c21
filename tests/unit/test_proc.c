// SPDX-License-Identifier: MIT
/*
 * /proc parsers whose input this machine cannot produce: the x86 shadow stack
 * feature line of a CPU with user_shstk (refused at dump by regs.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shstk),
		cmocka_unit_test(test_shstk_self),
	};

	log_level = -1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
