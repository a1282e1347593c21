// SPDX-License-Identifier: MIT
/*
 * mem: every kind of memory must come back with its contents, protections and flags.
 *
 *   private anonymous (sparsely touched), heap (brk), stack, anonymous shared,
 *   file-backed private with COW-modified pages, file-backed shared (still shared with
 *   the file after restore), read-only and PROT_NONE (must still fault), MAP_GROWSDOWN,
 *   mappings of deleted files, read-touched zero pages, vDSO (clock_gettime agrees with
 *   the syscall, AT_SYSINFO_EHDR is still the [vdso] mapping), a 256 MiB sparse
 *   mapping with three pages written, a file mapped from a non-zero offset, a region
 *   split by mprotect(), and madvise() flags (VmFlags dc wf dd hg nh rr sr).
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "prog.h"

#define PG 4096UL

#define SPARSE (256UL << 20)

enum { NANON = 256, NFILE = 8, NSHFILE = 4, NRO = 4, NNONE = 2, NGD = 4, NDEL = 4, NZERO = 16 };

static sigjmp_buf probe_jb;
static volatile sig_atomic_t probing;

static void segv(int sig)
{
	if (probing)
		siglongjmp(probe_jb, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* 1 if reading (write=0) or writing (write=1) *p faults. */
static int faults(volatile char *p, int write)
{
	int r = 0;

	probing = 1;
	if (sigsetjmp(probe_jb, 1))
		r = 1;
	else if (write)
		*p = *p; /* NOLINT: the access is the point */
	else
		(void)*p;
	probing = 0;
	return r;
}

/* The /proc/self/maps line for ADDR ("" if none), without the trailing newline. */
static const char *maps_line(void *addr)
{
	static char buf[1 << 16], line[512];
	unsigned long a = (unsigned long)addr, s, e;
	char *p;

	line[0] = 0;
	if (prog_read_file("/proc/self/maps", buf, sizeof(buf)) < 0)
		return line;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (sscanf(p, "%lx-%lx", &s, &e) == 2 && a >= s && a < e) {
			snprintf(line, sizeof(line), "%.*s", (int)(strchrnul(p, '\n') - p), p);
			break;
		}
	}
	return line;
}

static char maps_perms(void *addr, int i)
{
	const char *l = strchr(maps_line(addr), ' ');

	return l ? l[1 + i] : '?';
}

/* VmFlags of the smaps entry containing ADDR. */
static const char *vmflags(void *addr)
{
	static char buf[1 << 18], fl[256];
	unsigned long a = (unsigned long)addr, s, e;
	int in = 0;
	char *p;

	fl[0] = 0;
	if (prog_read_file("/proc/self/smaps", buf, sizeof(buf)) < 0)
		return fl;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (sscanf(p, "%lx-%lx ", &s, &e) == 2) /* a mapping's header line */
			in = a >= s && a < e;
		if (in && !strncmp(p, "VmFlags:", 8)) {
			snprintf(fl, sizeof(fl), " %.*s ", (int)(strchrnul(p, '\n') - p - 9),
				 p + 9);
			break;
		}
	}
	return fl;
}

static void *xmmap(size_t len, int prot, int flags, int fd)
{
	void *p = mmap(NULL, len, prot, flags, fd, 0);

	if (p == MAP_FAILED)
		prog_die("mmap %zu", len);
	return p;
}

static int make_file(const char *name, size_t len, uint64_t seed)
{
	char *buf = malloc(len);
	int fd = open(prog_path(name), O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || !buf)
		prog_die("create %s", name);
	prog_fill(buf, len, seed);
	if (write(fd, buf, len) != (ssize_t)len)
		prog_die("write %s", name);
	free(buf);
	return fd;
}

static int page_is_seed(const char *p, uint64_t seed)
{
	return prog_verify(p, PG, seed) < 0;
}

int main(int argc, char **argv)
{
	volatile char stackbuf[64 * 1024];
	char *sparse, *foff, *split, *adv[6];
	static const char *const adv_flag[6] = {" dc ", " wf ", " dd ", " hg ", " nh ", " rr "};
	static const int adv_advice[6] = {MADV_DONTFORK, MADV_WIPEONFORK, MADV_DONTDUMP,
					  MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_RANDOM};
	char *anon, *shanon, *fpriv, *fshared, *ro, *none, *gd, *del, *zero, *brk0, *brk_end,
		**small;
	struct timespec mono_before, t_vdso, t_sys;
	unsigned long vdso = getauxval(AT_SYSINFO_EHDR);
	char buf[PG];
	int i, fd, shfd, nsmall = 2000;
	long bad;

	prog_init(argc, argv);
	signal(SIGSEGV, segv);
	signal(SIGBUS, segv);

	/* private anonymous: 1 MiB, every third page written, the others never touched */
	anon = xmmap(NANON * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	for (i = 0; i < NANON; i += 3)
		prog_fill(anon + i * PG, PG, 100 + i);

	/* anonymous shared */
	shanon = xmmap(4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1);
	prog_fill(shanon, 4 * PG, 200);

	/* heap: brk area grown by hand, plus many small malloc()s */
	brk0 = sbrk(0);
	if (sbrk(16 * PG) == (void *)-1)
		prog_die("sbrk");
	prog_fill(brk0, 16 * PG, 300);
	small = malloc(nsmall * sizeof(*small));
	for (i = 0; i < nsmall; i++) {
		small[i] = malloc(40 + i % 200);
		snprintf(small[i], 40, "small block %d", i);
	}

	/* stack */
	prog_fill((char *)stackbuf, sizeof(stackbuf), 400);

	/* file-backed private, pages 1 and 5 modified (COW), the rest still the file's */
	fd = make_file("private.dat", NFILE * PG, 500);
	fpriv = xmmap(NFILE * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd);
	close(fd);
	prog_fill(fpriv + 1 * PG, PG, 501);
	prog_fill(fpriv + 5 * PG, PG, 505);

	/* file-backed shared; keep an fd to check it is still the same file after restore */
	shfd = make_file("shared.dat", NSHFILE * PG, 600);
	fshared = xmmap(NSHFILE * PG, PROT_READ | PROT_WRITE, MAP_SHARED, shfd);
	prog_fill(fshared + 2 * PG, PG, 602); /* written through the mapping */

	/* read-only and PROT_NONE */
	ro = xmmap(NRO * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	prog_fill(ro, NRO * PG, 700);
	mprotect(ro, NRO * PG, PROT_READ);
	none = xmmap(NNONE * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	prog_fill(none, NNONE * PG, 800);
	mprotect(none, NNONE * PG, PROT_NONE);

	/* MAP_GROWSDOWN */
	gd = xmmap(NGD * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN,
		   -1);
	prog_fill(gd, NGD * PG, 900);

	/* a shared mapping of a deleted file */
	fd = make_file("deleted.dat", NDEL * PG, 1000);
	del = xmmap(NDEL * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
	close(fd);
	prog_fill(del + 3 * PG, PG, 1003);
	unlink(prog_path("deleted.dat"));

	/* zero pages: read-touched, must stay zero */
	zero = xmmap(NZERO * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	for (i = 0; i < NZERO; i++)
		if (zero[i * PG])
			prog_die("zero page not zero");

	/* a big sparse mapping: three pages written */
	sparse = xmmap(SPARSE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1);
	prog_fill(sparse, PG, 1100);
	prog_fill(sparse + SPARSE / 2, PG, 1101);
	prog_fill(sparse + SPARSE - PG, PG, 1102);

	/* private.dat mapped from its page 2 */
	fd = open(prog_path("private.dat"), O_RDONLY);
	foff = mmap(NULL, 3 * PG, PROT_READ, MAP_PRIVATE, fd, 2 * PG);
	if (fd < 0 || foff == MAP_FAILED)
		prog_die("mmap private.dat at an offset");
	close(fd);

	/* one region, three VMAs: rw- r-- rw- */
	split = xmmap(3 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	prog_fill(split, 3 * PG, 1200);
	mprotect(split + PG, PG, PROT_READ);

	/* madvise() flags, one mapping each (separate so they do not merge) */
	for (i = 0; i < 6; i++) {
		adv[i] = xmmap(2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
		prog_fill(adv[i], 2 * PG, 1300 + i);
		if (madvise(adv[i], 2 * PG, adv_advice[i]))
			prog_die("madvise %d", adv_advice[i]);
	}

	brk_end = sbrk(0);
	clock_gettime(CLOCK_MONOTONIC, &mono_before);

	prog_ready();
	prog_wait_go();

	if (prog_sabotage())
		anon[3 * PG + 17] ^= 1;

	/* private anonymous */
	for (bad = 0, i = 0; i < NANON; i++)
		if (i % 3 == 0 ? !page_is_seed(anon + i * PG, 100 + i)
			       : !prog_all_zero(anon + i * PG, PG))
			bad++;
	CHECK(bad == 0, "private anonymous: %d pages as written/untouched (%ld bad)", NANON, bad);
	CHECK(maps_perms(anon, 0) == 'r' && maps_perms(anon, 1) == 'w' &&
		      maps_perms(anon, 3) == 'p',
	      "private anonymous is rw-p: %s", maps_line(anon));

	/* anonymous shared */
	CHECK(prog_verify(shanon, 4 * PG, 200) < 0, "anonymous shared contents");
	CHECK(maps_perms(shanon, 3) == 's', "anonymous shared is still shared: %s",
	      maps_line(shanon));

	/* heap */
	CHECK(sbrk(0) == brk_end, "program break at %p (expected %p)", sbrk(0), brk_end);
	CHECK(prog_verify(brk0, 16 * PG, 300) < 0, "brk area contents");
	for (bad = 0, i = 0; i < nsmall; i++) {
		char want[40];

		snprintf(want, sizeof(want), "small block %d", i);
		bad += strcmp(small[i], want) != 0;
	}
	CHECK(bad == 0, "%d malloc()ed blocks (%ld bad)", nsmall, bad);
	for (i = 0; i < nsmall; i++) /* the allocator still works on the restored heap */
		free(small[i]);
	small[0] = malloc(1 << 20);
	CHECK(small[0] != NULL, "malloc after restore");
	free(small[0]);

	/* stack */
	bad = prog_verify((char *)stackbuf, sizeof(stackbuf), 400);
	CHECK(bad < 0, "stack contents (first bad word %ld)", bad);

	/* file-backed private */
	CHECK(page_is_seed(fpriv + 1 * PG, 501) && page_is_seed(fpriv + 5 * PG, 505),
	      "private file mapping: COW-modified pages kept");
	bad = 0;
	{
		/* unmodified pages: the file's contents, i.e. the pattern at their file offset */
		char *file = malloc(NFILE * PG);

		prog_fill(file, NFILE * PG, 500);
		for (i = 0; i < NFILE; i++)
			if (i != 1 && i != 5 && memcmp(fpriv + i * PG, file + i * PG, PG))
				bad++;
		free(file);
	}
	CHECK(bad == 0, "private file mapping: %ld unmodified pages differ from the file", bad);
	CHECK(strstr(maps_line(fpriv), "/private.dat") && maps_perms(fpriv, 3) == 'p',
	      "private file mapping still maps the file: %s", maps_line(fpriv));
	fpriv[2 * PG] ^= 0xff; /* still private: writing must not reach the file */
	fd = open(prog_path("private.dat"), O_RDONLY);
	CHECK(fd >= 0 && pread(fd, buf, 1, 2 * PG) == 1 && buf[0] != fpriv[2 * PG],
	      "private file mapping: writes do not reach the file");
	if (fd >= 0)
		close(fd);

	/* file-backed shared */
	{
		char *file = malloc(NSHFILE * PG);

		prog_fill(file, NSHFILE * PG, 600);
		prog_fill(file + 2 * PG, PG, 602);
		CHECK(!memcmp(fshared, file, NSHFILE * PG), "shared file mapping contents");
		free(file);
	}
	CHECK(strstr(maps_line(fshared), "/shared.dat") && maps_perms(fshared, 3) == 's',
	      "shared file mapping: %s", maps_line(fshared));
	memcpy(fshared + PG, "through-the-mapping", 19);
	CHECK(pread(shfd, buf, 19, PG) == 19 && !memcmp(buf, "through-the-mapping", 19),
	      "shared file mapping: a store is visible in the file");
	CHECK(pwrite(shfd, "through-the-file", 16, 3 * PG) == 16 &&
		      !memcmp(fshared + 3 * PG, "through-the-file", 16),
	      "shared file mapping: a file write is visible in memory");

	/* read-only, PROT_NONE */
	CHECK(prog_verify(ro, NRO * PG, 700) < 0, "read-only mapping contents");
	CHECK(!strncmp(strchr(maps_line(ro), ' ') + 1, "r--p", 4), "read-only mapping: %s",
	      maps_line(ro));
	CHECK(faults(ro + PG, 1), "writing the read-only mapping faults");
	CHECK(!strncmp(strchr(maps_line(none), ' ') + 1, "---p", 4), "PROT_NONE mapping: %s",
	      maps_line(none));
	CHECK(faults(none, 0), "reading the PROT_NONE mapping faults");
	mprotect(none, NNONE * PG, PROT_READ);
	CHECK(prog_verify(none, NNONE * PG, 800) < 0, "PROT_NONE mapping contents (made readable)");

	/* MAP_GROWSDOWN */
	CHECK(prog_verify(gd, NGD * PG, 900) < 0, "MAP_GROWSDOWN mapping contents");
	CHECK(strstr(vmflags(gd), " gd "), "MAP_GROWSDOWN mapping has VmFlags gd:%s", vmflags(gd));

	/* deleted file */
	{
		char *file = malloc(NDEL * PG);

		prog_fill(file, NDEL * PG, 1000);
		prog_fill(file + 3 * PG, PG, 1003);
		CHECK(!memcmp(del, file, NDEL * PG), "deleted file mapping contents");
		free(file);
	}
	CHECK(strstr(maps_line(del), "/deleted.dat (deleted)") && maps_perms(del, 3) == 's',
	      "deleted file mapping: %s", maps_line(del));

	/* sparse */
	CHECK(page_is_seed(sparse, 1100) && page_is_seed(sparse + SPARSE / 2, 1101) &&
		      page_is_seed(sparse + SPARSE - PG, 1102),
	      "sparse 256 MiB mapping: the three written pages");
	CHECK(prog_all_zero(sparse + PG, PG) && prog_all_zero(sparse + SPARSE / 2 - PG, PG) &&
		      prog_all_zero(sparse + SPARSE - 2 * PG, PG),
	      "sparse 256 MiB mapping: pages around them are zero");

	/* file mapping at an offset */
	{
		char *file = malloc(NFILE * PG);

		prog_fill(file, NFILE * PG, 500);
		CHECK(!memcmp(foff, file + 2 * PG, 3 * PG),
		      "private.dat mapped from page 2: contents");
		free(file);
	}
	CHECK(strstr(maps_line(foff), " 00002000 ") && strstr(maps_line(foff), "/private.dat"),
	      "private.dat mapped from page 2: %s", maps_line(foff));

	/* split region */
	CHECK(prog_verify(split, 3 * PG, 1200) < 0, "mprotect-split region contents");
	CHECK(maps_perms(split, 1) == 'w' && maps_perms(split + PG, 1) == '-' &&
		      maps_perms(split + 2 * PG, 1) == 'w',
	      "mprotect-split region is rw-/r--/rw-");
	CHECK(faults(split + PG, 1) && !faults(split + 2 * PG, 1),
	      "only the middle page of the split region is read-only");

	/* madvise flags */
	for (i = 0; i < 6; i++) {
		CHECK(prog_verify(adv[i], 2 * PG, 1300 + i) < 0 &&
			      strstr(vmflags(adv[i]), adv_flag[i]),
		      "madvise(%d) mapping keeps its contents and VmFlags%s:%s", adv_advice[i],
		      adv_flag[i], vmflags(adv[i]));
	}

	/* zero pages */
	CHECK(prog_all_zero(zero, NZERO * PG), "read-touched zero pages are still zero");

	/* vDSO */
	CHECK(vdso && strstr(maps_line((void *)vdso), "[vdso]"),
	      "AT_SYSINFO_EHDR %#lx is the [vdso]: %s", vdso, maps_line((void *)vdso));
	clock_gettime(CLOCK_MONOTONIC, &t_vdso);
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t_sys);
	CHECK(t_vdso.tv_sec >= mono_before.tv_sec, "monotonic clock did not go back (%ld -> %ld)",
	      (long)mono_before.tv_sec, (long)t_vdso.tv_sec);
	CHECK(labs(t_sys.tv_sec - t_vdso.tv_sec) <= 1,
	      "vDSO CLOCK_MONOTONIC %ld agrees with the syscall %ld", (long)t_vdso.tv_sec,
	      (long)t_sys.tv_sec);
	clock_gettime(CLOCK_REALTIME, &t_vdso);
	syscall(SYS_clock_gettime, CLOCK_REALTIME, &t_sys);
	CHECK(labs(t_sys.tv_sec - t_vdso.tv_sec) <= 1,
	      "vDSO CLOCK_REALTIME %ld agrees with the syscall %ld", (long)t_vdso.tv_sec,
	      (long)t_sys.tv_sec);

	return prog_done();
}
