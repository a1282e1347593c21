// SPDX-License-Identifier: MIT
/*
 * /proc parsers whose input this machine cannot produce: the x86 shadow stack
 * feature line of a CPU with user_shstk (refused at dump by regs.c); and
 * /proc/self/status and /proc/self/smaps read against what the kernel says
 * through syscalls.
 */
#include <linux/capability.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
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

static const struct vma *find_vma(const struct vma *v, size_t n, const void *addr)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].start == (unsigned long)addr)
			return &v[i];
	return NULL;
}

/* Mappings of every kind the header line can describe, parsed back. */
static void test_vmas_self(void **state)
{
	char path[] = "/tmp/amber unit (deleted) XXXXXX";
	long pg = sysconf(_SC_PAGESIZE);
	int fd = mkstemp(path);
	struct stat st;
	struct vma *v;
	size_t n;
	const struct vma *a, *f, *g, *h;
	char *anon, *file, *guard, *huge;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4 * pg), 0);
	assert_int_equal(fstat(fd, &st), 0);
	anon = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	file = mmap(NULL, 2 * pg, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 2 * pg);
	guard = mmap(NULL, pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	huge = mmap(NULL, 2 * pg, PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(anon != MAP_FAILED && file != MAP_FAILED && guard != MAP_FAILED &&
		    huge != MAP_FAILED);
	assert_int_equal(madvise(anon, 3 * pg, MADV_DONTFORK), 0);
	assert_int_equal(madvise(huge, 2 * pg, MADV_NOHUGEPAGE), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(proc_parse_vmas(getpid(), &v, &n), 0);
	a = find_vma(v, n, anon);
	f = find_vma(v, n, file);
	g = find_vma(v, n, guard);
	h = find_vma(v, n, huge);
	assert_non_null(a);
	assert_non_null(f);
	assert_non_null(g);
	assert_non_null(h);
	assert_int_equal(a->end, (unsigned long)anon + 3 * pg);
	assert_int_equal(a->prot, PROT_READ | PROT_WRITE);
	assert_false(a->shared);
	assert_null(a->path);
	assert_int_equal(a->ino, 0);
	assert_true(a->vmflags & VMF_DONTFORK);
	assert_false(a->vmflags & VMF_NOHUGEPAGE);
	assert_int_equal(f->end, (unsigned long)file + 2 * pg);
	assert_int_equal(f->prot, PROT_READ | PROT_EXEC);
	assert_true(f->shared);
	assert_int_equal(f->pgoff, 2 * pg);
	assert_int_equal(f->dev, st.st_dev);
	assert_int_equal(f->ino, st.st_ino);
	/* the name's own " (deleted)" stays; the kernel's suffix goes */
	assert_true(f->deleted);
	assert_string_equal(f->path, path);
	assert_true(f->vmflags & VMF_MAYWRITE);
	assert_false(f->vmflags & VMF_DONTFORK);
	assert_int_equal(g->prot, 0);
	assert_int_equal(h->prot, PROT_WRITE);
	assert_true(h->vmflags & VMF_NOHUGEPAGE);
	proc_free_vmas(v, n);
	munmap(anon, 3 * pg);
	munmap(file, 2 * pg);
	munmap(guard, pg);
	munmap(huge, 2 * pg);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shstk),
		cmocka_unit_test(test_shstk_self),
		cmocka_unit_test(test_status_self),
		cmocka_unit_test(test_vmas_self),
	};

	log_level = -1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
