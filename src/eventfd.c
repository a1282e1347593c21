// SPDX-License-Identifier: MIT
/*
 * eventfd: the 64-bit counter and EFD_SEMAPHORE, both from fdinfo
 * ("eventfd-count:" in hex, "eventfd-semaphore:"); O_NONBLOCK is in
 * RegFile.flags.  Restored as a new eventfd whose counter is written back
 * (eventfd()'s initial value is only 32 bits wide).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "anonfd.h"

static bool eventfd_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:[eventfd]");
}

static int eventfd_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	const char *count, *sem;
	char *buf;
	int ret;

	ret = anonfd_dump_start(ctx, fd, dup, "eventfd", &eventfd_entry__descriptor, &buf,
				(void **)&f->eventfd);
	if (ret)
		return ret;
	count = anonfd_field(buf, "eventfd-count:");
	if (!count) {
		pr_err("pid %d: fd %d: no eventfd-count in its fdinfo; this kernel does not "
		       "show the eventfd counter",
		       ctx->pid, fd);
		ret = -EOPNOTSUPP;
		goto free_buf;
	}
	f->eventfd->counter = strtoull(count, NULL, 16);
	sem = anonfd_field(buf, "eventfd-semaphore:");
	if (sem) {
		f->eventfd->has_semaphore = 1;
		f->eventfd->semaphore = strtoul(sem, NULL, 10) != 0;
	} else {
		pr_warn("pid %d: fd %d: this kernel does not show EFD_SEMAPHORE in fdinfo "
			"(eventfd-semaphore); the eventfd is restored in normal mode",
			ctx->pid, fd);
	}
	pr_debug("pid %d: fd %d: eventfd counter %llu%s", ctx->pid, fd,
		 (unsigned long long)f->eventfd->counter,
		 f->eventfd->semaphore ? ", semaphore" : "");
free_buf:
	free(buf);
	return ret;
}

static int eventfd_open(struct tree *t, RegFile *f)
{
	int flags = EFD_CLOEXEC, fd, ret;
	uint64_t counter;

	if (!f->eventfd) {
		pr_err("files.img: eventfd entry %u has no eventfd state; the image is corrupt",
		       f->id);
		return -EBADMSG;
	}
	counter = f->eventfd->counter;
	if (counter == UINT64_MAX) {
		pr_err("files.img: eventfd entry %u has counter 2^64-1, which no eventfd can "
		       "hold; the image is corrupt",
		       f->id);
		return -EBADMSG;
	}
	if (f->flags & O_NONBLOCK)
		flags |= EFD_NONBLOCK;
	if (f->eventfd->semaphore)
		flags |= EFD_SEMAPHORE;
	fd = eventfd(0, flags);
	if (fd < 0) {
		ret = -errno;
		pr_err("cannot create an eventfd (entry %u): %m", f->id);
		return ret;
	}
	if (counter && write(fd, &counter, sizeof(counter)) != sizeof(counter)) {
		ret = -errno;
		pr_err("cannot set the counter of eventfd (entry %u) to %llu: %m", f->id,
		       (unsigned long long)counter);
		goto close_fd;
	}
	return fd;
close_fd:
	close(fd);
	return ret;
}

const struct fd_type eventfd_type = {
	.name = "eventfd",
	.kind = FILE_KIND__FILE_EVENTFD,
	.match = eventfd_match,
	.dump = eventfd_dump,
	.open = eventfd_open,
};
