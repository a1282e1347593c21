// SPDX-License-Identifier: MIT
/*
 * AIO contexts (io_setup): a context is its ring, a shared mapping of the
 * kernel's aio fs whose address is the context's id.  The ring's header says
 * where the kernel writes the next completion (tail) and where the program
 * reaps the next one (head); between them lie completed events not reaped yet.
 *
 * Dump: mem.c finds the ring's VMA and calls aio_dump_ring() for its header
 * and unreaped events.  Requests still in flight are in no kernel interface;
 * the ones that complete while the process is frozen move the tail, so the
 * tail is read again at the end of the dump and a change refuses it.
 *
 * Restore, injected in the process once its memory is in place: io_setup of a
 * ring of the same size, moved to the old address with mremap (the kernel
 * then takes that address as the context's id), its kernel tail brought to
 * the dumped one with requests that complete at once (an 8-byte read of an
 * empty non-blocking eventfd fails with EAGAIN at once: one event each), the
 * dumped head's worth reaped, and the unreaped events written back over the
 * placeholders.  The slots those events hold stay taken, as before the dump.
 */
#include <errno.h>
#include <linux/aio_abi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "amber.h"
#include "infect.h"
#include "log.h"
#include "mem.h"

#define AIO_RING_MAGIC 0xa10a10a1
#define AIO_BATCH      256	    /* requests per io_submit at restore */
#define AIO_MAX_LEN    (64UL << 20) /* io_setup's rings are far smaller */

/* The kernel's struct aio_ring header (fs/aio.c), io_events follow it. */
struct aio_ring {
	uint32_t id, nr, head, tail, magic, compat_features, incompat_features, header_length;
};

_Static_assert(sizeof(struct aio_ring) == 32 && sizeof(struct io_event) == 32,
	       "the ring's layout is the kernel's ABI");

static uint32_t ring_nr(uint64_t len)
{
	return (uint32_t)((len - sizeof(struct aio_ring)) / sizeof(struct io_event));
}

static uint32_t unreaped(uint32_t head, uint32_t tail, uint32_t nr)
{
	return (tail + nr - head) % nr;
}

/* Copies n events from ring slot `from` on (wrapping) into or out of buf. */
static int ring_events(struct infect *inf, uint64_t ring, uint32_t nr, uint32_t from, uint32_t n,
		       uint8_t *buf, bool write)
{
	while (n) {
		uint32_t k = from + n > nr ? nr - from : n;
		uint64_t at =
			ring + sizeof(struct aio_ring) + (uint64_t)from * sizeof(struct io_event);
		size_t len = (size_t)k * sizeof(struct io_event);
		int ret = write ? infect_write(inf, at, buf, len) : infect_read(inf, at, buf, len);

		if (ret)
			return ret;
		buf += len;
		n -= k;
		from = 0;
	}
	return 0;
}

static int read_header(struct infect *inf, const VmaEntry *e, struct aio_ring *h)
{
	int ret = infect_read(inf, e->start, h, sizeof(*h));

	if (ret)
		pr_err("pid %d: cannot read the AIO ring at %llx: %s", inf->pid,
		       (unsigned long long)e->start, strerror(-ret));
	return ret;
}

int aio_dump_ring(struct dump_ctx *ctx, VmaEntry *e)
{
	uint64_t len = e->end - e->start;
	struct aio_ring h;
	uint32_t n;
	int ret;

	ret = read_header(&ctx->inf, e, &h);
	if (ret)
		return ret;
	if (h.magic != AIO_RING_MAGIC || h.header_length != sizeof(h) || h.incompat_features ||
	    len > AIO_MAX_LEN || h.nr != ring_nr(len) || h.head >= h.nr || h.tail >= h.nr) {
		pr_err("pid %d: the AIO ring at %llx has a header amber does not know (magic "
		       "%#x, nr %u, head %u, tail %u, %llu bytes); it cannot be dumped",
		       ctx->pid, (unsigned long long)e->start, h.magic, h.nr, h.head, h.tail,
		       (unsigned long long)len);
		return -EOPNOTSUPP;
	}
	n = unreaped(h.head, h.tail, h.nr);
	e->aio_events.data = malloc(n ? (size_t)n * sizeof(struct io_event) : 1);
	if (!e->aio_events.data)
		return -ENOMEM;
	e->aio_events.len = (size_t)n * sizeof(struct io_event);
	e->has_aio_events = 1;
	ret = ring_events(&ctx->inf, e->start, h.nr, h.head, n, e->aio_events.data, false);
	if (ret) {
		pr_err("pid %d: cannot read the events of the AIO ring at %llx: %s", ctx->pid,
		       (unsigned long long)e->start, strerror(-ret));
		return ret;
	}
	e->has_aio_nr = e->has_aio_head = e->has_aio_tail = 1;
	e->aio_nr = h.nr;
	e->aio_head = h.head;
	e->aio_tail = h.tail;
	pr_info("pid %d: AIO context %llx: %u events, %u completed and not reaped", ctx->pid,
		(unsigned long long)e->start, h.nr, n);
	return 0;
}

bool aio_ring_valid(const VmaEntry *e)
{
	uint64_t len = e->end - e->start;

	return e->has_aio_nr && e->has_aio_head && e->has_aio_tail && e->has_aio_events &&
	       len > sizeof(struct aio_ring) && len <= AIO_MAX_LEN && e->aio_nr == ring_nr(len) &&
	       e->aio_head < e->aio_nr && e->aio_tail < e->aio_nr && !e->pgoff &&
	       e->prot == (PROT_READ | PROT_WRITE) &&
	       e->aio_events.len == (size_t)unreaped(e->aio_head, e->aio_tail, e->aio_nr) *
					    sizeof(struct io_event);
}

/* A request still in flight at the freeze completes later and moves the tail. */
static int aio_dump_late(struct dump_ctx *ctx)
{
	for (size_t i = 0; !ctx->shares_vm && ctx->mm && i < ctx->mm->n_vmas; i++) {
		const VmaEntry *e = ctx->mm->vmas[i];
		struct aio_ring h;
		int ret;

		if (e->kind != VMA_KIND__VMA_AIO)
			continue;
		ret = read_header(&ctx->inf, e, &h);
		if (ret)
			return ret;
		if (h.tail != e->aio_tail) {
			pr_err("pid %d: AIO context %llx had requests in flight (%u completed "
			       "during the dump); amber cannot dump requests in flight: dump "
			       "again once the program's I/O is done",
			       ctx->pid, (unsigned long long)e->start,
			       unreaped(e->aio_tail, h.tail, h.nr));
			return -EBUSY;
		}
	}
	return 0;
}

/* n requests that complete at once (see above): 0, or -errno when not all went in. */
static long submit(struct restore_ctx *ctx, aio_context_t id, unsigned long ptrs, long n)
{
	long r = infect_call(&ctx->inf, SYS_io_submit, (long)id, n, (long)ptrs, 0, 0, 0);

	if (r != n)
		pr_err("pid %d: io_submit of %ld requests to place the AIO ring's tail: %s",
		       ctx->pid, n, r < 0 ? strerror((int)-r) : "fewer went in");
	return r == n ? 0 : r < 0 ? r : -EAGAIN;
}

static int reap(struct restore_ctx *ctx, aio_context_t id, unsigned long evs, long n)
{
	long r = infect_call(&ctx->inf, SYS_io_getevents, (long)id, n, n, (long)evs, 0, 0);

	if (r != n)
		pr_err("pid %d: io_getevents of %ld placeholder events: %s", ctx->pid, n,
		       r < 0 ? strerror((int)-r) : "fewer came");
	return r == n ? 0 : r < 0 ? (int)r : -EIO;
}

static int restore_ring(struct restore_ctx *ctx, const VmaEntry *e)
{
	/* in the scratch area's lower half (the upper half runs batches) */
	unsigned long idp = ctx->inf.scratch, cb = idp + 64, buf = cb + 64, ptrs = buf + 64;
	unsigned long evs = ptrs + AIO_BATCH * sizeof(long);
	uint64_t len = e->end - e->start;
	uint32_t keep = unreaped(e->aio_head, e->aio_tail, e->aio_nr);
	uint32_t step = (e->aio_nr - 2) / 2 < AIO_BATCH ? (e->aio_nr - 2) / 2 : AIO_BATCH;
	aio_context_t id = 0;
	struct aio_ring h;
	struct iocb iocb;
	unsigned long p[AIO_BATCH];
	long efd, r;
	int ret;

	if (!step) /* a page holds 127 events: not for a checked entry */
		return -EBADMSG;
	/* io_setup(n) makes a ring of 2 * max(n, 4 * CPUs) + 2 events, rounded
	 * up to whole pages; this n gives back the dumped size unless the
	 * machine has far more CPUs than the ring has events */
	ret = infect_write(&ctx->inf, idp, &id, sizeof(id));
	if (ret)
		return ret;
	r = infect_call(&ctx->inf, SYS_io_setup, (long)(e->aio_nr - 2) / 2, (long)idp, 0, 0, 0, 0);
	if (r) {
		pr_err("pid %d: io_setup(%u) for the AIO context %llx: %s%s", ctx->pid,
		       (e->aio_nr - 2) / 2, (unsigned long long)e->start, strerror((int)-r),
		       r == -EAGAIN ? " (fs.aio-max-nr reached, see /proc/sys/fs/aio-nr)" : "");
		return r < 0 ? (int)r : -EIO;
	}
	ret = infect_read(&ctx->inf, idp, &id, sizeof(id));
	if (!ret)
		ret = infect_read(&ctx->inf, id, &h, sizeof(h));
	if (ret)
		return ret;
	if (h.nr != e->aio_nr) {
		pr_err("pid %d: the AIO context %llx had %u events; io_setup makes %u here "
		       "(more CPUs?), and a ring cannot change its size",
		       ctx->pid, (unsigned long long)e->start, e->aio_nr, h.nr);
		infect_call(&ctx->inf, SYS_io_destroy, (long)id, 0, 0, 0, 0, 0);
		return -ERANGE;
	}
	/* the kernel follows the ring (aio_ring_mremap): the old address is the id again */
	r = infect_call(&ctx->inf, SYS_mremap, (long)id, (long)len, (long)len,
			MREMAP_MAYMOVE | MREMAP_FIXED, (long)e->start, 0);
	if (r != (long)e->start) {
		pr_err("pid %d: cannot move the new AIO ring to %llx: %s", ctx->pid,
		       (unsigned long long)e->start, r < 0 ? strerror((int)-r) : "moved elsewhere");
		infect_call(&ctx->inf, SYS_io_destroy, (long)id, 0, 0, 0, 0, 0);
		return r < 0 ? (int)r : -EIO;
	}
	id = e->start;

	efd = infect_call(&ctx->inf, SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC, 0, 0, 0, 0);
	if (efd < 0) {
		pr_err("pid %d: eventfd for the AIO ring's placeholders: %s", ctx->pid,
		       strerror((int)-efd));
		return (int)efd;
	}
	memset(&iocb, 0, sizeof(iocb));
	iocb.aio_lio_opcode = IOCB_CMD_PREAD;
	iocb.aio_fildes = (uint32_t)efd;
	iocb.aio_buf = buf;
	iocb.aio_nbytes = 8;
	for (size_t i = 0; i < AIO_BATCH; i++)
		p[i] = cb; /* io_submit copies each iocb in: one serves them all */
	ret = infect_write(&ctx->inf, cb, &iocb, sizeof(iocb));
	if (!ret)
		ret = infect_write(&ctx->inf, ptrs, p, sizeof(p));
	/* head events completed and reaped, then the unreaped ones completed; at
	 * most io_setup's n at once, which the kernel always takes whatever CPU
	 * its per-CPU slot caches are on */
	for (uint32_t done = 0; !ret && done < e->aio_head; done += step) {
		long n = e->aio_head - done < step ? e->aio_head - done : step;

		ret = submit(ctx, id, ptrs, n);
		if (!ret)
			ret = reap(ctx, id, evs, n);
	}
	for (uint32_t done = 0; !ret && done < keep; done += step)
		ret = submit(ctx, id, ptrs, keep - done < step ? keep - done : step);
	infect_call(&ctx->inf, SYS_close, efd, 0, 0, 0, 0, 0);
	if (!ret)
		ret = read_header(&ctx->inf, e, &h);
	if (ret)
		return ret;
	if (h.head != e->aio_head || h.tail != e->aio_tail) {
		pr_err("pid %d: the AIO ring at %llx came back at head %u, tail %u instead of "
		       "%u, %u",
		       ctx->pid, (unsigned long long)e->start, h.head, h.tail, e->aio_head,
		       e->aio_tail);
		return -EIO;
	}
	ret = ring_events(&ctx->inf, e->start, e->aio_nr, e->aio_head, keep, e->aio_events.data,
			  true);
	if (ret)
		return ret;
	if (e->mlock) {
		r = infect_call(&ctx->inf, SYS_mlock2, (long)e->start, (long)len,
				e->mlock & VMA_MLOCK_ONFAULT ? MLOCK_ONFAULT : 0, 0, 0, 0);
		if (r) {
			pr_err("pid %d: cannot lock the AIO ring at %llx: %s", ctx->pid,
			       (unsigned long long)e->start, strerror((int)-r));
			return r < 0 ? (int)r : -EIO;
		}
	}
	pr_info("pid %d: AIO context %llx restored (%u events not reaped)", ctx->pid,
		(unsigned long long)e->start, keep);
	return 0;
}

static int aio_restore_inject(struct restore_ctx *ctx)
{
	int ret = 0;

	for (size_t i = 0; !ret && !ctx->shares_vm && ctx->mm && i < ctx->mm->n_vmas; i++)
		if (ctx->mm->vmas[i]->kind == VMA_KIND__VMA_AIO)
			ret = restore_ring(ctx, ctx->mm->vmas[i]);
	return ret;
}

const struct resource_ops aio_ops = {
	.name = "aio",
	.dump_late = aio_dump_late,
	.restore_inject = aio_restore_inject,
};
