// SPDX-License-Identifier: MIT
/*
 * memfd: a file of the kernel's internal tmpfs, linked nowhere, whose
 * /proc link reads "/memfd:NAME (deleted)".  files.c saves its content as a
 * ghost (one per inode, so fds and MAP_SHARED mappings in several processes
 * stay one object); here, its name and seals at dump, and at restore a new
 * memfd of that name in place of the ghost's recreated file, its mode and
 * seals set once it is filled.  Private COW pages of a MAP_PRIVATE mapping
 * of it are anonymous pages of that VMA, saved by mem.c as such.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "files.h"
#include "log.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif

#define MEMFD_PREFIX   "/memfd:"
#define MEMFD_NAME_MAX 249 /* memfd_create's limit, less "memfd:" */
#define MEMFD_SEALS                                                                                \
	(F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_FUTURE_WRITE |          \
	 F_SEAL_EXEC)

int memfd_dump(struct dump_ctx *ctx, int fd, RegFile *f)
{
	struct statfs sfs;
	int seals;

	if (strncmp(f->path, MEMFD_PREFIX, strlen(MEMFD_PREFIX)))
		return 0;
	if (fstatfs(fd, &sfs)) {
		pr_err("pid %d: cannot statfs %s: %m", ctx->pid, f->path);
		return -errno;
	}
	if (sfs.f_type == HUGETLBFS_MAGIC) {
		pr_err("pid %d: %s is a hugetlb memfd (MFD_HUGETLB), which amber cannot dump yet",
		       ctx->pid, f->path);
		return -EOPNOTSUPP;
	}
	if (sfs.f_type != TMPFS_MAGIC)
		return 0; /* a deleted file that is only named like one */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0) {
		pr_err("pid %d: cannot read the seals of memfd %s: %m", ctx->pid, f->path);
		return -errno;
	}
	f->memfd = malloc(sizeof(*f->memfd));
	if (!f->memfd)
		return -ENOMEM;
	memfd_entry__init(f->memfd);
	f->memfd->name = strdup(f->path + strlen(MEMFD_PREFIX));
	if (!f->memfd->name)
		return -ENOMEM;
	f->memfd->seals = (uint32_t)seals;
	pr_debug("pid %d: memfd %s, %llu bytes, mode %o, seals %#x", ctx->pid, f->path,
		 (unsigned long long)f->size, f->mode & 07777, seals);
	return 0;
}

int memfd_open(RegFile *f)
{
	const MemfdEntry *m = f->memfd;
	unsigned int flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	int fd;

	if (!m->name || strlen(m->name) > MEMFD_NAME_MAX || (m->seals & ~MEMFD_SEALS) ||
	    strncmp(f->path, MEMFD_PREFIX, strlen(MEMFD_PREFIX)) ||
	    strcmp(f->path + strlen(MEMFD_PREFIX), m->name)) {
		pr_err("files.img: memfd entry %u (%s) has a bad name or seals %#x; the image is "
		       "corrupt",
		       f->id, f->path, m->seals);
		return -EBADMSG;
	}
	/* MFD_NOEXEC_SEAL gives F_SEAL_EXEC and no x bits; MFD_EXEC, whatever mode */
	flags |= (m->seals & F_SEAL_EXEC) ? MFD_NOEXEC_SEAL : MFD_EXEC;
	fd = memfd_create(m->name, flags);
	if (fd < 0 && errno == EINVAL) /* a kernel before 6.3: no MFD_EXEC */
		fd = memfd_create(m->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		pr_err("cannot create memfd %s (entry %u): %m%s", m->name, f->id,
		       errno == EACCES ? " (vm.memfd_noexec forbids an executable memfd?)" : "");
		return -errno;
	}
	return fd;
}

int memfd_finish(RegFile *f, int fd)
{
	/*
	 * Its size, data and times are the ghost's (files.c).  The mode again
	 * before the seals: F_SEAL_EXEC forbids changing the x bits.
	 */
	if (fchmod(fd, f->mode & 0777)) {
		pr_err("cannot set the mode of memfd %s to %o: %m", f->path, f->mode & 0777);
		return -errno;
	}
	if (f->memfd->seals && fcntl(fd, F_ADD_SEALS, f->memfd->seals)) {
		pr_err("cannot seal memfd %s with %#x: %m", f->path, f->memfd->seals);
		return -errno;
	}
	return 0;
}
