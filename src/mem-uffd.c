// SPDX-License-Identifier: MIT
/*
 * Filling large private anonymous VMAs with UFFDIO_COPY instead of pread().
 *
 * pread() into fresh anonymous memory faults every page in, which zeroes
 * it, and then copies over the zeros.  UFFDIO_COPY allocates the page and
 * copies into it without zeroing: measured here ~25% faster per GiB.  The
 * userfaultfd must belong to the restored task's mm, so the task makes it
 * (one injected syscall) and amber takes a copy of the fd (pidfd_getfd);
 * the copies come from a page-aligned buffer of amber's that the pages file
 * is read into a MiB at a time.  (A mapping of the file was measured slower:
 * its page faults, and unmapping it, cost more than the read's copy into a
 * buffer that stays in the cache for UFFDIO_COPY.)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "mem.h"
#include "restore.h"
#include "stats.h"
#include "sys.h"

/* A userfaultfd of the task's mm, as an fd of amber's; -errno if unavailable. */
static int task_uffd(struct restore_ctx *ctx)
{
	long tfd = infect_call(&ctx->inf, SYS_userfaultfd, O_CLOEXEC, 0, 0, 0, 0, 0);
	int pidfd, fd;

	if (tfd < 0)
		return (int)tfd;
	pidfd = sys_pidfd_open(ctx->inf.pid);
	fd = pidfd < 0 ? pidfd : sys_pidfd_getfd(pidfd, (int)tfd);
	if (pidfd >= 0)
		close(pidfd);
	/* the task keeps no trace of it */
	infect_call(&ctx->inf, SYS_close, tfd, 0, 0, 0, 0, 0);
	return fd;
}

#define UFFD_BUF (1UL << 20)

/*
 * One thread's share of the copies.  Two threads copy at once on amber's two
 * CPUs where it has them (a copy is a page allocation and a memcpy, both
 * bound by one CPU), taking the selected runs' bytes a chunk at a time from
 * a common cursor: the other CPU is shared with the image checksum thread,
 * and fixed halves left the first thread waiting for the second.  The runs'
 * bytes follow each other in the file, so a chunk is one stretch of it, read
 * in order into the thread's own buffer.
 */
#define UFFD_CHUNK (4UL << 20) /* page-aligned: a run is copied in pages */

struct uffd_share {
	pid_t pid;
	int uffd, fd; /* fd: the pages file */
	const PagemapEntry **runs;
	size_t n;
	uint64_t total;
	_Atomic uint64_t *next; /* the next chunk to take, shared */
	_Atomic int *failed;	/* a thread failed: the others stop */
	cpu_set_t cpus;		/* the second thread's CPUs (count 0: stay) */
	char *buf;		/* file bytes [lo, hi) after PAGES_DATA_OFF */
	uint64_t lo, hi;
	int ret;
};

/* File bytes [off, off + len) in the buffer (len <= UFFD_BUF); where they start there. */
static char *share_read(struct uffd_share *s, uint64_t off, uint64_t len)
{
	ssize_t r;

	if (off >= s->lo && off + len <= s->hi)
		return s->buf + (off - s->lo);
	r = sys_pread_full(s->fd, s->buf, UFFD_BUF, (off_t)(PAGES_DATA_OFF + off));
	if (r < (ssize_t)len) {
		pr_err("pid %d: cannot read the pages file at %llu: %s", s->pid,
		       (unsigned long long)(PAGES_DATA_OFF + off),
		       r < 0 ? strerror((int)-r) : "short read");
		s->ret = r < 0 ? (int)r : -EIO;
		return NULL;
	}
	s->lo = off;
	s->hi = off + (uint64_t)r;
	return s->buf;
}

/* Bytes [off, off + len) of run pe, through the share's buffer. */
static int uffd_copy(struct uffd_share *s, const PagemapEntry *pe, uint64_t off, uint64_t len)
{
	uint64_t done = 0;

	while (done < len) {
		uint64_t part = len - done < UFFD_BUF ? len - done : UFFD_BUF;
		char *src = share_read(s, pe->offset + off + done, part);
		struct uffdio_copy c = {
			.dst = pe->vaddr + off + done,
			.src = (unsigned long)src,
			.len = part,
		};

		if (!src)
			return s->ret;
		if (!ioctl(s->uffd, UFFDIO_COPY, &c)) {
			done += part;
		} else if (errno == EAGAIN && c.copy > 0) {
			done += c.copy; /* partial: go on from there */
		} else {
			pr_err("pid %d: cannot load pages at %llx: UFFDIO_COPY: %m", s->pid,
			       (unsigned long long)(pe->vaddr + off + done));
			return -errno;
		}
	}
	return 0;
}

static void *uffd_share_run(void *arg)
{
	struct uffd_share *s = arg;
	uint64_t at = 0; /* where runs[k]'s bytes start */
	size_t k = 0;

	if (CPU_COUNT(&s->cpus))
		sys_sched_setaffinity(0, &s->cpus, sizeof(s->cpus));
	s->buf = aligned_alloc(PAGE_SIZE, UFFD_BUF);
	if (!s->buf)
		s->ret = -ENOMEM;
	while (!s->ret && !atomic_load(s->failed)) {
		uint64_t from = atomic_fetch_add(s->next, 1) * UFFD_CHUNK;
		uint64_t to = from + UFFD_CHUNK < s->total ? from + UFFD_CHUNK : s->total;
		uint64_t j_at;

		if (from >= s->total)
			break;
		/* this thread's chunks come in order: its cursor only moves on */
		while (k < s->n && at + s->runs[k]->nr_pages * PAGE_SIZE <= from)
			at += s->runs[k++]->nr_pages * PAGE_SIZE;
		j_at = at;
		for (size_t j = k; !s->ret && j < s->n && j_at < to; j++) {
			uint64_t len = s->runs[j]->nr_pages * PAGE_SIZE;
			uint64_t lo = from > j_at ? from - j_at : 0;
			uint64_t hi = to - j_at < len ? to - j_at : len;

			s->ret = uffd_copy(s, s->runs[j], lo, hi - lo);
			j_at += len;
		}
	}
	if (s->ret)
		atomic_store(s->failed, 1);
	free(s->buf);
	return NULL;
}

/* fewer bytes: one thread (starting the second costs ~0.1 ms; 8 MiB take ~4) */
#define UFFD_SPLIT_MIN (8UL << 20)

/* Copies runs[0..n) (total bytes), by two threads when worth it. */
static int uffd_copy_all(struct restore_ctx *ctx, int uffd, int fd, const PagemapEntry **runs,
			 size_t n, uint64_t total)
{
	_Atomic uint64_t next = 0;
	_Atomic int failed = 0;
	struct uffd_share a = {.pid = ctx->pid,
			       .uffd = uffd,
			       .fd = fd,
			       .runs = runs,
			       .n = n,
			       .total = total,
			       .next = &next,
			       .failed = &failed},
			  b = a;
	sigset_t all, old;
	pthread_t th;
	bool split = total >= UFFD_SPLIT_MIN && restore_cpus_free(&b.cpus) > 0;

	if (split) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		split = !sys_thread_start(&th, uffd_share_run, &b);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	CPU_ZERO(&a.cpus);
	uffd_share_run(&a);
	if (split) {
		pthread_join(th, NULL);
		pr_info("pid %d: %llu bytes copied in by two threads", ctx->pid,
			(unsigned long long)total);
	}
	return a.ret ?: b.ret;
}

int uffd_open(struct restore_ctx *ctx)
{
	struct uffdio_api api = {.api = UFFD_API};
	int uffd = task_uffd(ctx);

	if (uffd < 0) {
		pr_info("pid %d: no userfaultfd (%s): pages are read in with pread", ctx->pid,
			strerror(-uffd));
		return uffd;
	}
	if (ioctl(uffd, UFFDIO_API, &api)) {
		int err = -errno;

		pr_info("pid %d: UFFDIO_API: %s: pages are read in with pread", ctx->pid,
			strerror(-err));
		close(uffd);
		return err;
	}
	return uffd;
}

int uffd_fill(struct restore_ctx *ctx, int uffd, const bool *sel)
{
	const struct img_file *pages;
	const PagemapEntry **runs;
	size_t pm = 0, nr = 0, n = 0;
	uint64_t total = 0;
	int ret;

	/* the checked file's own fd (amber's; the processes got a copy) */
	ret = img_dir_raw(ctx->img, IMG_PAGES, &pages, "pages-%d.img", ctx->pid);
	if (ret)
		return ret;
	runs = malloc((ctx->nr_pm + 1) * sizeof(*runs));
	if (!runs)
		return -ENOMEM;
	/* every selected VMA registered first, then all their runs copied */
	for (size_t i = 0; !ret && i < ctx->mm->n_vmas; i++) {
		VmaEntry *e = ctx->mm->vmas[i];
		struct uffdio_register reg = {
			.range = {e->start, e->end - e->start},
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};

		while (pm < ctx->nr_pm && ctx->pm[pm]->vaddr < e->start)
			pm++;
		if (!sel[i])
			continue;
		if (ioctl(uffd, UFFDIO_REGISTER, &reg)) {
			pr_err("pid %d: cannot register %llx-%llx with userfaultfd: %m", ctx->pid,
			       (unsigned long long)e->start, (unsigned long long)e->end);
			ret = -errno;
			break;
		}
		nr++;
		for (; pm < ctx->nr_pm && ctx->pm[pm]->vaddr < e->end; pm++) {
			runs[n++] = ctx->pm[pm];
			total += ctx->pm[pm]->nr_pages * PAGE_SIZE;
		}
	}
	if (!ret)
		ret = uffd_copy_all(ctx, uffd, pages->fd, runs, n, total);
	if (!ret)
		stats_add(SC_PAGES_RESTORED, total / PAGE_SIZE);
	/* unregistered again (all of them: a failure leaves the task unused) */
	for (size_t i = 0; i < ctx->mm->n_vmas; i++) {
		VmaEntry *e = ctx->mm->vmas[i];
		struct uffdio_range r = {e->start, e->end - e->start};

		if (sel[i])
			ioctl(uffd, UFFDIO_UNREGISTER, &r);
	}
	free(runs);
	if (!ret)
		pr_info("pid %d: pages of %zu mapping(s) copied in with userfaultfd", ctx->pid, nr);
	return ret;
}
