// SPDX-License-Identifier: MIT
/*
 * ghost: deleted files and files whose times must not change.
 *
 *   fd 20  DIR/sparse, deleted: 5 MiB long, data only at [0, 4096) and
 *          [3 MiB, 3 MiB + 4096), the rest holes; mode 0604, owner 1234:1235,
 *          atime 1000000000.123456789, mtime 1200000000.5; O_RDWR|O_APPEND,
 *          offset 5000
 *   fd 21  an O_TMPFILE file in DIR (never had a name): "tmpfile data", mode 0640,
 *          O_RDWR, offset 3
 *   fd 22  DIR/kept, not deleted, O_RDONLY, offset 2, also mapped MAP_SHARED
 *          PROT_READ; atime and mtime set far in the past (after the mmap), so any
 *          read or mmap of it by amber would move its atime
 *   fd 23  (argument "big") DIR/big, deleted, 2 MiB of data: above the default
 *          --ghost-limit of 1 MiB
 *
 * After restore: contents, offsets, F_GETFL, holes (SEEK_DATA/SEEK_HOLE), size, mode,
 * owner, times to the nanosecond, no links, "(deleted)" in /proc/self/fd; the kept
 * file's mapping and offset, and its atime, mtime and ctime from before the dump.
 */
#include <sys/mman.h>

#include "prog.h"

#define MIB	  (1 << 20)
#define FD_SPARSE 20
#define FD_TMP	  21
#define FD_KEPT	  22
#define FD_BIG	  23

static void at(int fd, int want)
{
	if (fd < 0)
		prog_die("open for fd %d", want);
	if (fd != want && (dup2(fd, want) != want || close(fd)))
		prog_die("dup2 %d", want);
}

static void fill(char *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)prog_pat(seed, i);
}

static int same_time(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv);
	int big = argc > first && !strcmp(argv[first], "big");
	struct timespec ts[2] = {{1000000000, 123456789}, {1200000000, 500000000}};
	struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
	char buf[4096], want[4096], link[4200], path[64];
	struct stat st, kept;
	char *map;
	off_t d, h;

	/* fd 20: sparse, deleted */
	at(open(prog_path("sparse"), O_RDWR | O_CREAT | O_TRUNC, 0600), FD_SPARSE);
	fill(buf, sizeof(buf), 1);
	if (pwrite(FD_SPARSE, buf, sizeof(buf), 0) != sizeof(buf))
		prog_die("write sparse");
	fill(buf, sizeof(buf), 2);
	if (pwrite(FD_SPARSE, buf, sizeof(buf), 3 * MIB) != sizeof(buf) ||
	    ftruncate(FD_SPARSE, 5 * MIB) || fchown(FD_SPARSE, 1234, 1235) ||
	    fchmod(FD_SPARSE, 0604) || futimens(FD_SPARSE, ts) || unlink(prog_path("sparse")))
		prog_die("set up sparse");
	if (fcntl(FD_SPARSE, F_SETFL, O_APPEND) || lseek(FD_SPARSE, 5000, SEEK_SET) != 5000)
		prog_die("sparse flags");
	/* fd 21: O_TMPFILE */
	at(open(prog_dir, O_TMPFILE | O_RDWR, 0640), FD_TMP);
	if (write(FD_TMP, "tmpfile data", 12) != 12 || fchmod(FD_TMP, 0640) ||
	    lseek(FD_TMP, 3, SEEK_SET) != 3)
		prog_die("tmpfile");
	/* fd 22: kept, times in the past */
	at(open(prog_path("kept"), O_RDWR | O_CREAT | O_TRUNC, 0644), FD_KEPT);
	if (write(FD_KEPT, "kept file", 9) != 9 || close(FD_KEPT))
		prog_die("kept");
	at(open(prog_path("kept"), O_RDONLY), FD_KEPT);
	map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, FD_KEPT, 0);
	if (map == MAP_FAILED || lseek(FD_KEPT, 2, SEEK_SET) != 2 || futimens(FD_KEPT, old) ||
	    fstat(FD_KEPT, &kept))
		prog_die("kept times");
	if (big) {
		char *b = malloc(2 * MIB);

		at(open(prog_path("big"), O_RDWR | O_CREAT | O_TRUNC, 0600), FD_BIG);
		if (!b || (fill(b, 2 * MIB, 3), write(FD_BIG, b, 2 * MIB)) != 2 * MIB ||
		    unlink(prog_path("big")))
			prog_die("big");
		free(b);
	}

	prog_ready();
	prog_wait_go();
	if (prog_sabotage() && pwrite(FD_SPARSE, "x", 1, 2 * MIB) != 1) /* fills a hole */
		prog_die("sabotage");

	/* fd 20 (its offset first: SEEK_HOLE/SEEK_DATA move it) */
	CHECK(lseek(FD_SPARSE, 0, SEEK_CUR) == 5000, "sparse offset 5000");
	CHECK(fstat(FD_SPARSE, &st) == 0 && st.st_size == 5 * MIB, "sparse is 5 MiB long");
	CHECK(st.st_nlink == 0, "sparse has no links (nlink %lu)", (unsigned long)st.st_nlink);
	CHECK((st.st_mode & 07777) == 0604 && S_ISREG(st.st_mode), "sparse has mode 0604 (%o)",
	      st.st_mode);
	CHECK(st.st_uid == 1234 && st.st_gid == 1235, "sparse is owned by 1234:1235 (%u:%u)",
	      st.st_uid, st.st_gid);
	CHECK(same_time(st.st_atim, ts[0]) && same_time(st.st_mtim, ts[1]),
	      "sparse keeps its atime and mtime to the ns (%ld.%09ld, %ld.%09ld)",
	      (long)st.st_atim.tv_sec, st.st_atim.tv_nsec, (long)st.st_mtim.tv_sec,
	      st.st_mtim.tv_nsec);
	h = lseek(FD_SPARSE, 0, SEEK_HOLE);
	d = lseek(FD_SPARSE, 4096, SEEK_DATA);
	CHECK(h == 4096 && d == 3 * MIB, "sparse: hole at 4096 (%lld), data again at 3 MiB (%lld)",
	      (long long)h, (long long)d);
	h = lseek(FD_SPARSE, 3 * MIB, SEEK_HOLE);
	CHECK(h == 3 * MIB + 4096 && lseek(FD_SPARSE, 3 * MIB + 4096, SEEK_DATA) < 0,
	      "sparse: the last 2 MiB are a hole (%lld)", (long long)h);
	CHECK(st.st_blocks * 512 <= 64 * 1024, "sparse takes %lld bytes of disk",
	      (long long)st.st_blocks * 512);
	fill(want, sizeof(want), 1);
	CHECK(pread(FD_SPARSE, buf, sizeof(buf), 0) == sizeof(buf) && !memcmp(buf, want, 4096),
	      "sparse: first extent");
	fill(want, sizeof(want), 2);
	CHECK(pread(FD_SPARSE, buf, sizeof(buf), 3 * MIB) == sizeof(buf) &&
		      !memcmp(buf, want, 4096),
	      "sparse: second extent");
	memset(want, 0, sizeof(want));
	CHECK(pread(FD_SPARSE, buf, sizeof(buf), MIB) == sizeof(buf) && !memcmp(buf, want, 4096),
	      "sparse: zeros in the hole");
	CHECK((fcntl(FD_SPARSE, F_GETFL) & (O_ACCMODE | O_APPEND)) == (O_RDWR | O_APPEND),
	      "sparse is O_RDWR|O_APPEND (%#x)", fcntl(FD_SPARSE, F_GETFL));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", FD_SPARSE);
	snprintf(want, sizeof(want), "%s (deleted)", prog_path("sparse"));
	memset(link, 0, sizeof(link));
	CHECK(readlink(path, link, sizeof(link) - 1) > 0 && !strcmp(link, want), "fd 20 -> %s",
	      link);

	/* fd 21 */
	CHECK(fstat(FD_TMP, &st) == 0 && st.st_size == 12 && st.st_nlink == 0 &&
		      (st.st_mode & 07777) == 0640,
	      "tmpfile: 12 bytes, no links, mode 0640 (%lld, %lu, %o)", (long long)st.st_size,
	      (unsigned long)st.st_nlink, st.st_mode & 07777);
	CHECK(pread(FD_TMP, buf, 12, 0) == 12 && !memcmp(buf, "tmpfile data", 12), "tmpfile data");
	CHECK(lseek(FD_TMP, 0, SEEK_CUR) == 3 && (fcntl(FD_TMP, F_GETFL) & O_ACCMODE) == O_RDWR,
	      "tmpfile offset 3, O_RDWR");

	/* fd 22 */
	CHECK(fstat(FD_KEPT, &st) == 0 && same_time(st.st_atim, kept.st_atim) &&
		      same_time(st.st_mtim, kept.st_mtim) && same_time(st.st_ctim, kept.st_ctim),
	      "kept: atime, mtime, ctime unchanged (atime %ld -> %ld, ctime %ld.%09ld -> "
	      "%ld.%09ld)",
	      (long)kept.st_atim.tv_sec, (long)st.st_atim.tv_sec, (long)kept.st_ctim.tv_sec,
	      kept.st_ctim.tv_nsec, (long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
	CHECK(!memcmp(map, "kept file", 9) && lseek(FD_KEPT, 0, SEEK_CUR) == 2,
	      "kept: mapped contents, offset 2");

	if (big) {
		char *b = malloc(2 * MIB), *w = malloc(2 * MIB);

		if (!b || !w)
			prog_die("malloc");
		fill(w, 2 * MIB, 3);
		CHECK(pread(FD_BIG, b, 2 * MIB, 0) == 2 * MIB && !memcmp(b, w, 2 * MIB),
		      "big: its 2 MiB");
	}
	return prog_done();
}
