// SPDX-License-Identifier: MIT
/*
 * memfd: memfds with their names, sizes, seals, modes and contents, one of
 * them also mapped MAP_SHARED (in us and in a child: one object) and
 * MAP_PRIVATE with a page changed (that copy stays ours, the other pages
 * stay the file's), one only mapped (its fd closed) and shared with the
 * child.  After the restore the child writes through both shared mappings and
 * we must see it in ours and through the fd.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "prog.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif

#define PAGE	4096
#define M1_SIZE (3 * PAGE + 100)
#define FD_M1	20
#define FD_M2	21
#define FD_M3	22

static char byte_at(long off)
{
	return (char)('a' + off % 23);
}

static int mk(const char *name, unsigned int flags, int at)
{
	int fd = memfd_create(name, flags);

	if (fd < 0 || dup2(fd, at) != at)
		prog_die("memfd_create %s", name);
	close(fd);
	return at;
}

static int link_is(int fd, const char *want)
{
	char path[64], buf[512];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return 0;
	buf[n] = 0;
	return !strcmp(buf, want);
}

static volatile char *wait_for(volatile char *p, char v)
{
	for (int i = 0; i < 500 && *p != v; i++)
		usleep(10000);
	return *p == v ? p : NULL;
}

int main(int argc, char **argv)
{
	char *s1, *p1, buf[PAGE];
	volatile char *m4;
	const char *want1 = "/memfd:amber-m1 (deleted)";
	struct stat st;
	int ok, status;
	pid_t kid;

	prog_init(argc, argv);
	mk("amber-m1", MFD_ALLOW_SEALING, FD_M1);
	for (long off = 0; off < M1_SIZE; off += 1) {
		char c = byte_at(off);

		if (pwrite(FD_M1, &c, 1, off) != 1)
			prog_die("write m1");
	}
	if (fcntl(FD_M1, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW))
		prog_die("seal m1");
	s1 = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, FD_M1, 0);
	p1 = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, FD_M1, 0);
	if (s1 == MAP_FAILED || p1 == MAP_FAILED)
		prog_die("mmap m1");
	memset(p1 + PAGE, 'P', PAGE); /* our own copy of page 1 */

	mk("amber-noexec", MFD_NOEXEC_SEAL, FD_M2);
	if (write(FD_M2, "hello", 5) != 5 || fcntl(FD_M2, F_ADD_SEALS, F_SEAL_WRITE))
		prog_die("m2");
	mk("amber-exec", MFD_EXEC, FD_M3);
	if (fchmod(FD_M3, 0750))
		prog_die("fchmod m3");

	mk("amber-m4", 0, 30);
	if (ftruncate(30, PAGE))
		prog_die("ftruncate m4");
	m4 = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, 30, 0);
	if (m4 == MAP_FAILED)
		prog_die("mmap m4");
	close(30); /* now only mapped */

	kid = fork();
	if (kid < 0)
		prog_die("fork");
	if (kid == 0) {
		while (!prog_go_exists())
			usleep(10000);
		CHECK(link_is(FD_M1, want1), "child: fd %d is %s", FD_M1, want1);
		if (!wait_for(m4 + 8, 1))
			_exit(1);
		s1[200] = 'C';
		m4[16] = 2;
		_exit(prog_failures ? 1 : 0);
	}
	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		want1 = "/memfd:amber-m0 (deleted)";
	CHECK(link_is(FD_M1, want1), "fd %d is %s", FD_M1, want1);
	CHECK(link_is(FD_M2, "/memfd:amber-noexec (deleted)"), "fd %d is memfd:amber-noexec",
	      FD_M2);
	CHECK(link_is(FD_M3, "/memfd:amber-exec (deleted)"), "fd %d is memfd:amber-exec", FD_M3);
	CHECK(fcntl(FD_M1, F_GET_SEALS) == (F_SEAL_SHRINK | F_SEAL_GROW),
	      "m1 seals are SHRINK|GROW (%#x)", fcntl(FD_M1, F_GET_SEALS));
	CHECK(fcntl(FD_M2, F_GET_SEALS) == (F_SEAL_EXEC | F_SEAL_WRITE),
	      "m2 seals are EXEC|WRITE (%#x)", fcntl(FD_M2, F_GET_SEALS));
	CHECK(fcntl(FD_M3, F_GET_SEALS) == F_SEAL_SEAL, "m3 is not sealable (%#x)",
	      fcntl(FD_M3, F_GET_SEALS));
	CHECK(!fstat(FD_M1, &st) && st.st_size == M1_SIZE, "m1 is %d bytes (%lld)", M1_SIZE,
	      (long long)st.st_size);
	CHECK(!fstat(FD_M2, &st) && st.st_size == 5 && !(st.st_mode & 0111),
	      "m2 is 5 bytes, not executable (mode %o)", st.st_mode & 07777);
	CHECK(!fstat(FD_M3, &st) && (st.st_mode & 0777) == 0750, "m3 has mode 0750 (%o)",
	      st.st_mode & 07777);
	CHECK(pread(FD_M2, buf, 5, 0) == 5 && !memcmp(buf, "hello", 5), "m2 holds \"hello\"");
	errno = 0;
	CHECK(pwrite(FD_M2, "x", 1, 0) < 0 && errno == EPERM, "m2 is still write-sealed (%m)");
	errno = 0;
	CHECK(ftruncate(FD_M1, 10) < 0 && errno == EPERM, "m1 still refuses to shrink (%m)");

	ok = 1;
	for (long off = 0; off < M1_SIZE; off++) {
		char c;

		if (pread(FD_M1, &c, 1, off) != 1 || c != byte_at(off) ||
		    (off < 3 * PAGE && s1[off] != c))
			ok = 0;
	}
	CHECK(ok, "m1's content, through the fd and the shared mapping");
	ok = 1;
	for (long off = 0; off < PAGE; off++)
		ok &= p1[off] == byte_at(off) && p1[PAGE + off] == 'P';
	CHECK(ok, "the private mapping keeps its changed page 1 and the file's page 0");
	if (pwrite(FD_M1, "Z", 1, 2 * PAGE + 5) != 1)
		prog_die("pwrite m1");
	CHECK(p1[2 * PAGE + 5] == 'Z' && s1[2 * PAGE + 5] == 'Z',
	      "a write to m1 shows in its page 2 in both mappings");

	m4[8] = 1;
	CHECK(wait_for(m4 + 16, 2), "the child's write to the only-mapped memfd shows in ours");
	CHECK(s1[200] == 'C' && pread(FD_M1, buf, 1, 200) == 1 && buf[0] == 'C',
	      "the child's write to m1's shared mapping shows in ours and in the file");
	CHECK(waitpid(kid, &status, 0) == kid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "the child passed its checks (status %#x)", status);
	return prog_done();
}
