// SPDX-License-Identifier: MIT
/*
 * --link-remap: T/data is opened (offset 5) and mapped shared, hard-linked
 * as T/keep, then unlinked; T/renamed is opened, then replaced by another
 * file of that name.  After the restore the fd and the mapping must still
 * be the inode T/keep names (a write through one shows in the other), the
 * offset kept, and the fd on T/renamed the old inode, not the new file.
 */
#include <sys/mman.h>

#include "prog.h"

int main(int argc, char **argv)
{
	struct stat keep, fst, old;
	char buf[16] = {0};
	int fd, fd2, nfd;
	char *map;

	prog_init(argc, argv);
	fd = open(prog_path("data"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, "0123456789abcdef", 16) != 16 || lseek(fd, 5, SEEK_SET) != 5)
		prog_die("data");
	map = mmap(NULL, 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED || link(prog_path("data"), prog_path("keep")) ||
	    unlink(prog_path("data")))
		prog_die("map, link, unlink");
	fd2 = open(prog_path("renamed"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd2 < 0 || write(fd2, "old", 3) != 3 || link(prog_path("renamed"), prog_path("old")) ||
	    fstat(fd2, &old))
		prog_die("renamed");
	nfd = open(prog_path("new"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (nfd < 0 || write(nfd, "new", 3) != 3 || close(nfd) ||
	    rename(prog_path("new"), prog_path("renamed")))
		prog_die("replace");
	prog_ready();
	prog_wait_go();

	if (stat(prog_path("keep"), &keep) || fstat(fd, &fst))
		prog_die("stat");
	CHECK(keep.st_ino == fst.st_ino && keep.st_nlink == 1,
	      "fd is the inode keep names (ino %lu, keep %lu, nlink %lu)",
	      (unsigned long)fst.st_ino, (unsigned long)keep.st_ino, (unsigned long)keep.st_nlink);
	CHECK(lseek(fd, 0, SEEK_CUR) == 5, "offset 5 kept");
	map[0] = prog_sabotage() ? 'Y' : 'X';
	CHECK(pread(fd, buf, 1, 0) == 1 && buf[0] == 'X', "a write to the mapping reaches the fd");
	CHECK(pwrite(fd, "Z", 1, 1) == 1 && map[1] == 'Z', "a write to the fd reaches the mapping");
	memset(buf, 0, sizeof(buf));
	CHECK(pread(fd2, buf, 3, 0) == 3 && !strcmp(buf, "old"), "fd2 is the old file (%s)", buf);
	CHECK(!fstat(fd2, &fst) && fst.st_ino == old.st_ino, "fd2's inode is the one old names");
	return prog_done();
}
