// SPDX-License-Identifier: MIT
/*
 * signalfd: its signal mask ("sigmask:" in fdinfo).  The signals themselves
 * are the process's pending signals (signals.c); a signalfd reads the queue
 * of whichever process reads it, so one made by amber and inherited works.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "anonfd.h"

static bool signalfd_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:[signalfd]");
}

static int signalfd_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	const char *mask;
	char *buf;
	int ret;

	ret = anonfd_dump_start(ctx, fd, dup, "signalfd", &signalfd_entry__descriptor, &buf,
				(void **)&f->signalfd);
	if (ret)
		return ret;
	mask = anonfd_field(buf, "sigmask:");
	if (!mask) {
		pr_err("pid %d: fd %d: no sigmask in the fdinfo of its signalfd", ctx->pid, fd);
		ret = -EOPNOTSUPP;
		goto free_buf;
	}
	f->signalfd->mask = strtoull(mask, NULL, 16);
	pr_debug("pid %d: fd %d: signalfd mask %016llx", ctx->pid, fd,
		 (unsigned long long)f->signalfd->mask);
free_buf:
	free(buf);
	return ret;
}

static int signalfd_open(struct tree *t, RegFile *f)
{
	int flags = SFD_CLOEXEC, fd;
	uint64_t mask;

	if (!f->signalfd) {
		pr_err("files.img: signalfd entry %u has no signalfd state; the image is corrupt",
		       f->id);
		return -EBADMSG;
	}
	if (f->flags & O_NONBLOCK)
		flags |= SFD_NONBLOCK;
	/* The raw call: glibc's sigaddset() refuses its own signals 32 and 33. */
	mask = f->signalfd->mask;
	fd = (int)syscall(SYS_signalfd4, -1, &mask, sizeof(mask), flags);
	if (fd < 0) {
		fd = -errno;
		pr_err("cannot create a signalfd for mask %016llx (entry %u): %m",
		       (unsigned long long)mask, f->id);
	}
	return fd;
}

const struct fd_type signalfd_type = {
	.name = "signalfd",
	.kind = FILE_KIND__FILE_SIGNALFD,
	.match = signalfd_match,
	.dump = signalfd_dump,
	.open = signalfd_open,
};
