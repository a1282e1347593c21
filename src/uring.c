// SPDX-License-Identifier: MIT
/*
 * io_uring: an idle ring (no request in flight, no file registered but sockets) comes
 * back with its sizes, the setup flags amber can tell, its positions and
 * what lies in its rings: CQEs not reaped yet, SQEs queued and not submitted.
 *
 * The kernel keeps two positions of its own, the next SQE it takes (its
 * cached SQ head) and the next CQE it posts (its cached CQ tail); the rest of
 * the ring is memory shared with the process (struct io_rings, the CQEs, the
 * SQ array and the SQEs), read at dump through amber's own mapping of the
 * ring.  Restore: the process, before its memory is replaced, sets up a ring
 * of the same sizes and flags, brings the kernel's positions to the dumped
 * ones with NOPs (each takes one SQE and posts one CQE; one with
 * IOSQE_CQE_SKIP_SUCCESS only takes the SQE; a MSG_RING from a helper ring
 * only posts a CQE) and writes the rings back; uring_ops then maps them
 * where they were.  A ring that posted fewer CQEs than it took SQEs (less
 * those dropped) is refused: amber cannot tell a request in flight from a
 * CQE skipped.  More CQEs (MSG_RING's, a multishot request's) are replayed.
 *
 * The kernel shows no ring's setup flags.  Probes tell some without changing
 * the ring: io_uring_enter with nothing to do fails EBADFD on a ring not
 * enabled yet (R_DISABLED); waiting for 0 events fails EEXIST for another
 * task than a DEFER_TASKRUN ring's; io_uring_register fails EEXIST for
 * another task than a SINGLE_ISSUER ring's.  fdinfo lists the CQEs between
 * the CQ head and tail and the SQEs between the SQ head and tail, their
 * extra words for CQE32 and SQE128 rings and no SQE at all for a ring without
 * an SQ array (NO_SQARRAY): with the process frozen, amber moves the
 * positions the kernel only reads from the shared memory so that one of each
 * is listed, and puts them back.  Without an SQ array, the size of the SQE
 * region tells SQE128 (the pages mincore sees in amber's mapping of it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "anonfd.h"
#include "mem.h"
#include "proc.h"
#include "uapi/amber_kernel.h"

#ifndef IORING_SETUP_NO_SQARRAY
#define IORING_SETUP_NO_SQARRAY (1U << 16)
#endif
#define URING_PBUF_STATUS 26 /* IORING_REGISTER_PBUF_STATUS (6.8) */
#ifndef IORING_ENTER_EXT_ARG_REG
#define IORING_ENTER_EXT_ARG_REG (1U << 6) /* 6.13 */
#endif
#define URING_REG_WAIT_SIZE 64 /* struct io_uring_reg_wait */
#ifndef IORING_SETUP_HYBRID_IOPOLL
#define IORING_SETUP_HYBRID_IOPOLL (1U << 17) /* 6.13 */
#endif

/*
 * What amber restores.  CLAMP to HYBRID_IOPOLL are known only where fdinfo
 * shows the ring's flags (SetupFlags, amber's kernel series): no probe tells
 * them.
 */
#define URING_FLAGS                                                                                \
	(IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |                \
	 IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_HYBRID_IOPOLL | IORING_SETUP_CQSIZE |            \
	 IORING_SETUP_SQE128 | IORING_SETUP_CQE32 | IORING_SETUP_SINGLE_ISSUER |                   \
	 IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_NO_SQARRAY | IORING_SETUP_IOPOLL)
#define URING_MAX_SQ	 32768	    /* IORING_MAX_ENTRIES */
#define URING_MAX_CQ	 65536	    /* IORING_MAX_CQ_ENTRIES */
#define URING_MAX_REPLAY (1U << 24) /* NOPs at restore: well under a minute */
#define URING_PAGE	 4096UL
#define URING_MAX_BUFS	 1024			    /* registered buffers amber restores */
#define URING_MAX_FILES	 65536			    /* slots of an empty registered-file table */
#define URING_MAX_BUF	 (1U << 30)		    /* the kernel's largest registered buffer */
#define URING_TOP	 ((1UL << 47) - URING_PAGE) /* mmap's window without a hint (x86-64) */

/* struct io_rings (the kernel's, the offsets io_uring_setup reports) */
enum {
	R_SQ_HEAD = 0,
	R_SQ_TAIL = 4,
	R_CQ_HEAD = 8,
	R_CQ_TAIL = 12,
	R_SQ_MASK = 16,
	R_CQ_MASK = 20,
	R_SQ_ENTRIES = 24,
	R_CQ_ENTRIES = 28,
	R_SQ_DROPPED = 32,
	R_SQ_FLAGS = 36,
	R_CQ_FLAGS = 40,
	R_CQ_OVERFLOW = 44,
};

static uint32_t *ring_u32(void *rings, size_t off)
{
	return (uint32_t *)((char *)rings + off);
}

static uint32_t rd(const void *rings, size_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)rings + off, sizeof(v));
	return v;
}

static size_t sqe_size(uint32_t flags)
{
	return flags & IORING_SETUP_SQE128 ? 128 : 64;
}

/* A wait with a registered argument at an offset no region has: changes nothing. */
static int reg_wait_probe(int fd)
{
	return sys_io_uring_enter_arg(
		fd, 0, 0, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG | IORING_ENTER_EXT_ARG_REG,
		(void *)(1UL << 40), URING_REG_WAIT_SIZE);
}

struct pbuf_status {
	uint32_t bgid, head, resv[8];
};

/*
 * What a ring of amber's own tells of this kernel, asked once: where the
 * CQEs start in struct io_rings (a cache line in, 64, on SMP kernels; right
 * after its 48 bytes of counters on uniprocessor ones); whether a ring
 * without IOPOLL fails a registered wait argument out of range EFAULT
 * (6.13: then the probe tells IOPOLL); whether buffer groups can be asked
 * (PBUF_STATUS, 6.8: ENOENT for a group that does not exist).
 */
struct own_ring {
	size_t cqes;
	bool tells_iopoll, tells_pbuf;
};

static const struct own_ring *own_ring(void)
{
	static struct own_ring o;
	struct io_uring_params p;
	struct pbuf_status st;
	int fd;

	if (o.cqes)
		return &o;
	memset(&p, 0, sizeof(p));
	memset(&st, 0, sizeof(st));
	fd = sys_io_uring_setup(1, &p);
	o.cqes = fd >= 0 && p.cq_off.cqes ? p.cq_off.cqes : 64;
	o.tells_iopoll = fd >= 0 && reg_wait_probe(fd) == -EFAULT;
	o.tells_pbuf = fd >= 0 && sys_io_uring_register(fd, URING_PBUF_STATUS, &st, 1) == -ENOENT;
	if (fd >= 0)
		close(fd);
	return &o;
}

static bool kernel_tells_iopoll(void)
{
	static bool warned;

	if (!own_ring()->tells_iopoll && !warned) {
		warned = true;
		pr_warn("this kernel does not tell io_uring rings set up with "
			"IORING_SETUP_IOPOLL (6.13 and later do): such a ring comes back "
			"without it");
	}
	return own_ring()->tells_iopoll;
}

/*
 * Where the SQ array starts: after the CQEs, cache-line aligned on SMP
 * kernels, whose CQEs start at one (the kernel's rings_size(), which doubles
 * the counters too for 32-byte CQEs).
 */
static size_t array_off(uint32_t flags, uint32_t cq)
{
	size_t off = (own_ring()->cqes + (size_t)cq * 16) << !!(flags & IORING_SETUP_CQE32);

	return own_ring()->cqes % 64 ? off : (off + 63) & ~(size_t)63;
}

static size_t rings_len(uint32_t flags, uint32_t sq, uint32_t cq)
{
	return array_off(flags, cq) + (flags & IORING_SETUP_NO_SQARRAY ? 0 : (size_t)sq * 4);
}

static size_t page_up(size_t n)
{
	return (n + URING_PAGE - 1) & ~(URING_PAGE - 1);
}

static bool pow2(uint32_t n)
{
	return n && !(n & (n - 1));
}

static bool uring_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:[io_uring]");
}

/* The counters of fdinfo (kernel 5.19+: CachedSqHead, CachedCqTail). */
struct uring_info {
	uint32_t sq_mask, sq_head, sq_tail, cached_sq_head;
	uint32_t cq_mask, cq_head, cq_tail, cached_cq_tail;
	long sq_thread;
	uint32_t user_files, user_bufs;
	bool personalities;
	bool has_setup; /* fdinfo shows the setup flags (amber's kernel series) */
	uint32_t setup;
	unsigned polls, overflows;
};

static int parse_info(const char *buf, struct uring_info *u)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{"SqMask:", offsetof(struct uring_info, sq_mask)},
		{"SqHead:", offsetof(struct uring_info, sq_head)},
		{"SqTail:", offsetof(struct uring_info, sq_tail)},
		{"CachedSqHead:", offsetof(struct uring_info, cached_sq_head)},
		{"CqMask:", offsetof(struct uring_info, cq_mask)},
		{"CqHead:", offsetof(struct uring_info, cq_head)},
		{"CqTail:", offsetof(struct uring_info, cq_tail)},
		{"CachedCqTail:", offsetof(struct uring_info, cached_cq_tail)},
		{"UserFiles:", offsetof(struct uring_info, user_files)},
		{"UserBufs:", offsetof(struct uring_info, user_bufs)},
	};
	const char *p, *poll, *ovf;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		p = anonfd_field(buf, keys[i].key);
		if (!p)
			return -ENOENT;
		*(uint32_t *)((char *)u + keys[i].off) = (uint32_t)strtoul(p, NULL, 0);
	}
	p = anonfd_field(buf, "SqThread:");
	poll = anonfd_field(buf, "PollList:");
	ovf = anonfd_field(buf, "CqOverflowList:");
	if (!p || !poll || !ovf)
		return -ENOENT;
	u->sq_thread = strtol(p, NULL, 10);
	u->personalities = anonfd_field(buf, "Personalities:") != NULL;
	p = anonfd_field(buf, "SetupFlags:");
	u->has_setup = p != NULL;
	u->setup = p ? (uint32_t)strtoul(p, NULL, 16) : 0;
	/* the lists' entries are the indented lines below their titles */
	u->polls = u->overflows = 0;
	for (p = strchr(poll, '\n'); p && p[1] == ' '; p = strchr(p + 1, '\n'))
		u->polls++;
	for (p = strchr(ovf, '\n'); p && p[1] == ' '; p = strchr(p + 1, '\n'))
		u->overflows++;
	return 0;
}

/* The first entry line below "title" in fdinfo (up to its end), or NULL. */
static char *first_entry(const char *buf, const char *title)
{
	const char *p = anonfd_field(buf, title), *end;

	p = p ? strchr(p, '\n') : NULL;
	if (!p || p[1] != ' ')
		return NULL;
	end = strchr(p + 1, '\n');
	return strndup(p + 1, end ? (size_t)(end - p - 1) : strlen(p + 1));
}

static int read_fdinfo(struct dump_ctx *ctx, int fd, int dup, char **buf)
{
	char path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", dup);
	ret = sys_read_file(path, buf, NULL);
	if (ret)
		pr_err("pid %d: cannot read the fdinfo of fd %d (io_uring): %s", ctx->pid, fd,
		       strerror(-ret));
	return ret;
}

/*
 * io_uring's workers (io-wq) are threads of the process that amber leaves
 * alone (dump.c); one that is not waiting for work (asleep in io_wq_worker)
 * may run a request: refused.  Idle ones are not restored: the kernel makes
 * workers when it needs them.
 */
static int uring_workers(struct dump_ctx *ctx, int fd)
{
	char path[300], *wchan;
	struct proc_stat st;
	struct dirent *d;
	DIR *dir;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", ctx->pid);
	dir = sys_opendir(path);
	if (!dir) {
		pr_err("pid %d: cannot list its threads: %m", ctx->pid);
		return -errno;
	}
	while (!ret && (d = readdir(dir))) {
		bool idle;

		if (d->d_name[0] == '.' || proc_parse_task_stat(ctx->pid, atoi(d->d_name), &st) ||
		    !(st.flags & PF_IO_WORKER))
			continue; /* or gone: an idle worker exiting */
		snprintf(path, sizeof(path), "/proc/%d/task/%s/wchan", ctx->pid, d->d_name);
		if (sys_read_file(path, &wchan, NULL))
			continue;
		idle = st.state == 'S' && !strcmp(wchan, "io_wq_worker");
		free(wchan);
		if (idle)
			continue;
		pr_err("pid %d: fd %d is an io_uring and thread %s is an io_uring worker at work "
		       "(%s, state %c): a request may be in flight there, which amber cannot "
		       "dump; dump again once the I/O is done",
		       ctx->pid, fd, d->d_name, st.comm, st.state);
		ret = -EBUSY;
	}
	closedir(dir);
	return ret;
}

/*
 * The flags the probes tell (see the top), 0 or -errno (refused, logged).
 * They run in amber, on its dup: none changes the ring.
 */
static int probe_flags(struct dump_ctx *ctx, int fd, int dup, bool told, uint32_t *flags)
{
	/* a probe of one op: the header and its op, zeroed (the kernel wants that) */
	uint64_t probe[(sizeof(struct io_uring_probe) + sizeof(struct io_uring_probe_op)) / 8 + 1];
	int r;

	r = sys_io_uring_enter(dup, 0, 0, 0);
	if (r == -EBADFD) {
		pr_err("pid %d: fd %d is an io_uring set up disabled (IORING_SETUP_R_DISABLED) "
		       "and not enabled yet; amber does not restore that: enable it "
		       "(IORING_REGISTER_ENABLE_RINGS) before the dump",
		       ctx->pid, fd);
		return -EOPNOTSUPP;
	}
	if (r < 0) {
		pr_err("pid %d: fd %d (io_uring): io_uring_enter with nothing to do: %s", ctx->pid,
		       fd, strerror(-r));
		return r;
	}
	r = sys_io_uring_enter(dup, 0, 0, IORING_ENTER_GETEVENTS);
	if (r == -EEXIST)
		*flags |= IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER;
	else if (r < 0) {
		pr_err("pid %d: fd %d (io_uring): io_uring_enter waiting for no event: %s",
		       ctx->pid, fd, strerror(-r));
		return r;
	}
	r = told ? 0 : reg_wait_probe(dup); /* fdinfo tells IOPOLL */
	if (r == -EINVAL && kernel_tells_iopoll())
		*flags |= IORING_SETUP_IOPOLL;
	memset(probe, 0, sizeof(probe));
	r = sys_io_uring_register(dup, IORING_REGISTER_PROBE, probe, 1);
	if (r == -EEXIST)
		*flags |= IORING_SETUP_SINGLE_ISSUER;
	else if (r == -EACCES) {
		pr_err("pid %d: fd %d is an io_uring with restrictions "
		       "(IORING_REGISTER_RESTRICTIONS), which amber does not restore",
		       ctx->pid, fd);
		return -EOPNOTSUPP;
	} else if (r < 0) {
		pr_err("pid %d: fd %d (io_uring): IORING_REGISTER_PROBE: %s", ctx->pid, fd,
		       strerror(-r));
		return r;
	}
	if ((*flags & IORING_SETUP_SINGLE_ISSUER) && ctx->nr_threads > 1) {
		pr_err("pid %d: fd %d is a SINGLE_ISSUER io_uring in a process of %zu threads; "
		       "amber cannot tell which thread is its issuer (restored, it would be "
		       "the main thread's)",
		       ctx->pid, fd, ctx->nr_threads);
		return -EOPNOTSUPP;
	}
	return 0;
}

/*
 * Where fdinfo shows the ring's setup flags (SetupFlags, amber's kernel
 * series): they are the ring's, and no probe of its layout is needed.
 */
static int setup_flags(struct dump_ctx *ctx, int fd, uint32_t setup, uint32_t *flags)
{
	uint32_t other = setup & ~URING_FLAGS;

	if (other) {
		pr_err("pid %d: fd %d is an io_uring set up with flags %#x%s, which amber does "
		       "not restore",
		       ctx->pid, fd, other,
		       other & IORING_SETUP_ATTACH_WQ ? " (ATTACH_WQ: it shares another "
							"ring's io-wq)"
						      : "");
		return -EOPNOTSUPP;
	}
	*flags = setup;
	return 0;
}

/* The first len bytes of the ring region, amber's mapping (of the dup). */
static void *map_rings(struct dump_ctx *ctx, int fd, int dup, size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, dup, IORING_OFF_SQ_RING);

	if (m == MAP_FAILED)
		pr_err("pid %d: fd %d (io_uring): cannot map its rings: %m", ctx->pid, fd);
	return m;
}

/*
 * Without an SQ array, the SQE region's size: the kernel maps as many of
 * its pages as it has, and mincore sees which are there.  A ring of up to
 * 32 SQEs has one page either way.
 */
static int probe_sqe_size(struct dump_ctx *ctx, int fd, int dup, uint32_t sq, uint32_t *flags)
{
	size_t big = page_up((size_t)sq * 128), small = page_up((size_t)sq * 64), n = 0;
	unsigned char vec[URING_MAX_SQ * 128 / URING_PAGE];
	void *m;

	if (big == small) {
		pr_err("pid %d: fd %d is an io_uring without an SQ array "
		       "(IORING_SETUP_NO_SQARRAY) of %u SQEs; amber cannot tell whether they "
		       "are 64 or 128 bytes (it can from 64 SQEs on)",
		       ctx->pid, fd, sq);
		return -EOPNOTSUPP;
	}
	m = mmap(NULL, big, PROT_READ, MAP_SHARED, dup, IORING_OFF_SQES);
	if (m == MAP_FAILED || mincore(m, big, vec)) {
		pr_err("pid %d: fd %d (io_uring): cannot see its SQEs' pages: %m", ctx->pid, fd);
		if (m != MAP_FAILED)
			munmap(m, big);
		return -errno;
	}
	munmap(m, big);
	while (n < big / URING_PAGE && (vec[n] & 1))
		n++;
	if (n * URING_PAGE == big)
		*flags |= IORING_SETUP_SQE128;
	else if (n * URING_PAGE != small) {
		pr_err("pid %d: fd %d (io_uring): its SQEs take %zu pages, not the %zu or %zu of "
		       "%u SQEs",
		       ctx->pid, fd, n, small / URING_PAGE, big / URING_PAGE, sq);
		return -EOPNOTSUPP;
	}
	return 0;
}

/*
 * CQE32, SQE128 and NO_SQARRAY from fdinfo with one CQE and one SQE listed
 * (see the top).  The SQ array's first word lies in the region's last page
 * even without an array (the CQEs end 64 bytes into a page).
 */
static int probe_layout(struct dump_ctx *ctx, int fd, int dup, uint32_t sq, uint32_t cq,
			uint32_t *flags)
{
	uint32_t cq_head, sq_head, sq_tail, a0;
	char *buf = NULL, *cqe, *sqe;
	size_t aoff, len = URING_PAGE;
	void *rings = map_rings(ctx, fd, dup, len);
	int ret;

	if (rings == MAP_FAILED)
		return -errno;
	cq_head = rd(rings, R_CQ_HEAD);
	*ring_u32(rings, R_CQ_HEAD) = rd(rings, R_CQ_TAIL) - 1;
	ret = read_fdinfo(ctx, fd, dup, &buf);
	*ring_u32(rings, R_CQ_HEAD) = cq_head;
	munmap(rings, len);
	if (ret)
		return ret;
	cqe = first_entry(buf, "CQEs:");
	free(buf);
	if (!cqe) {
		pr_err("pid %d: fd %d (io_uring): fdinfo lists no CQE (kernel?)", ctx->pid, fd);
		return -EOPNOTSUPP;
	}
	if (strstr(cqe, "extra1:"))
		*flags |= IORING_SETUP_CQE32;
	free(cqe);

	aoff = array_off(*flags, cq);
	len = page_up(aoff + 4);
	rings = map_rings(ctx, fd, dup, len);
	if (rings == MAP_FAILED)
		return -errno;
	sq_head = rd(rings, R_SQ_HEAD);
	sq_tail = rd(rings, R_SQ_TAIL);
	a0 = rd(rings, aoff);
	*ring_u32(rings, aoff) = 0;
	*ring_u32(rings, R_SQ_HEAD) = 0;
	*ring_u32(rings, R_SQ_TAIL) = 1;
	ret = read_fdinfo(ctx, fd, dup, &buf);
	*ring_u32(rings, R_SQ_TAIL) = sq_tail;
	*ring_u32(rings, R_SQ_HEAD) = sq_head;
	*ring_u32(rings, aoff) = a0;
	munmap(rings, len);
	if (ret)
		return ret;
	sqe = first_entry(buf, "SQEs:");
	free(buf);
	if (!sqe) { /* NO_SQARRAY: fdinfo lists no SQE */
		*flags |= IORING_SETUP_NO_SQARRAY;
		return probe_sqe_size(ctx, fd, dup, sq, flags);
	}
	if (strstr(sqe, ", e0:"))
		*flags |= IORING_SETUP_SQE128;
	free(sqe);
	return 0;
}

/* n bytes at IORING_OFF_* off of the ring, copied into *out (malloc'd). */
static int copy_region(struct dump_ctx *ctx, int fd, int dup, off_t off, size_t n,
		       ProtobufCBinaryData *out)
{
	void *m = mmap(NULL, page_up(n), PROT_READ, MAP_SHARED, dup, off);

	if (m == MAP_FAILED) {
		pr_err("pid %d: fd %d (io_uring): cannot map its region %#llx: %m", ctx->pid, fd,
		       (unsigned long long)off);
		return -errno;
	}
	out->data = malloc(n);
	if (out->data) {
		memcpy(out->data, m, n);
		out->len = n;
	}
	munmap(m, page_up(n));
	return out->data ? 0 : -ENOMEM;
}

/* Refused unless idle (see the top); u is fdinfo's, rings the dumped region. */
static int check_idle(struct dump_ctx *ctx, int fd, const struct uring_info *u, const void *rings,
		      uint32_t sq, uint32_t cq)
{
	uint32_t dropped = rd(rings, R_SQ_DROPPED), sqf = rd(rings, R_SQ_FLAGS);
	uint32_t h = u->cached_sq_head, t = u->cached_cq_tail, extra;

	if (rd(rings, R_SQ_HEAD) != h || rd(rings, R_CQ_TAIL) != t || sqf ||
	    rd(rings, R_SQ_MASK) != sq - 1 || rd(rings, R_CQ_MASK) != cq - 1 ||
	    rd(rings, R_SQ_ENTRIES) != sq || rd(rings, R_CQ_ENTRIES) != cq) {
		pr_err("pid %d: fd %d is an io_uring with work pending in the kernel (SQ head "
		       "%u of %u, CQ tail %u of %u, SQ flags %#x); amber dumps idle rings only: "
		       "dump again once the program reaped its completions",
		       ctx->pid, fd, rd(rings, R_SQ_HEAD), h, rd(rings, R_CQ_TAIL), t, sqf);
		return -EBUSY;
	}
	if (rd(rings, R_SQ_TAIL) - h > sq || t - rd(rings, R_CQ_HEAD) > cq) {
		pr_err("pid %d: fd %d is an io_uring whose positions are not a ring's (SQ %u..%u "
		       "of %u, CQ %u..%u of %u)",
		       ctx->pid, fd, h, rd(rings, R_SQ_TAIL), sq, rd(rings, R_CQ_HEAD), t, cq);
		return -EOPNOTSUPP;
	}
	/* CQEs without an SQE: MSG_RING's from other rings, a multishot's that ended */
	extra = t - (h - dropped);
	if ((int32_t)extra < 0) {
		pr_err("pid %d: fd %d is an io_uring that took %u SQEs (%u dropped) and posted %u "
		       "CQEs: requests in flight (or CQEs skipped with IOSQE_CQE_SKIP_SUCCESS, "
		       "which amber cannot tell apart); dump again once every request completed",
		       ctx->pid, fd, h, dropped, t);
		return -EBUSY;
	}
	if ((uint64_t)h + extra > URING_MAX_REPLAY) {
		pr_err("pid %d: fd %d is an io_uring that took %u SQEs and posted %u CQEs; amber "
		       "brings a ring back to its positions one request at a time and does so "
		       "for up to %u (see README, Limits)",
		       ctx->pid, fd, h, t, URING_MAX_REPLAY);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Whether [addr, addr + len) is mapped in the process, without a hole. */
static bool mapped(const struct vma *v, size_t nv, uint64_t addr, uint64_t len)
{
	for (size_t i = 0; i < nv && len; i++) {
		if (v[i].end <= addr)
			continue;
		if (v[i].start > addr)
			return false;
		len -= v[i].end - addr < len ? v[i].end - addr : len;
		addr = v[i].end;
	}
	return !len;
}

/* Whether kcmp() here compares an fd with a ring's registered file (KCMP_IOURING_FILE). */
static bool kernel_tells_files(int dup)
{
	static int tells = -1;
	struct amber_kcmp_iouring_slot none = {INT32_MAX, 0};

	/* with the type: no ring at fd INT32_MAX (EBADF); without: an unknown type */
	if (tells < 0)
		tells = sys_kcmp(getpid(), getpid(), AMBER_KCMP_IOURING_FILE, (unsigned long)dup,
				 (uintptr_t)&none) == -EBADF;
	return tells;
}

/*
 * The fd of pid on the file in slot of its ring (fd ring), in *at (-1: no
 * fd holds it): the one kcmp() finds where the kernel tells (kernel), else
 * the one /proc names as the slot's name (a socket, one open file per name).
 */
static int slot_holder(pid_t pid, int ring, uint32_t slot, const char *name, bool kernel, int *at)
{
	struct amber_kcmp_iouring_slot s = {(uint32_t)ring, slot};
	char path[300], target[64];
	struct dirent *d;
	int ret = 0;
	DIR *dir;

	*at = -1;
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = sys_opendir(path);
	if (!dir)
		return -errno;
	while (!ret && *at < 0 && (d = readdir(dir))) {
		int fd = atoi(d->d_name);
		ssize_t n;

		if (d->d_name[0] == '.' || fd == ring)
			continue;
		if (kernel) {
			ret = sys_kcmp(pid, pid, AMBER_KCMP_IOURING_FILE, (unsigned long)fd,
				       (uintptr_t)&s);
			*at = ret ? -1 : fd;
			ret = ret < 0 && ret != -EBADF ? ret : 0; /* EBADF: the fd went meanwhile */
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/fd/%s", pid, d->d_name);
		n = sys_readlink(path, target, sizeof(target) - 1);
		if (n > 0 && (target[n] = 0, !strcmp(target, name)))
			*at = fd;
	}
	closedir(dir);
	return ret;
}

/* Is fd of pid on a file its restore makes after the rings (a /proc file, a pidfd...)? */
static bool made_late(pid_t pid, int fd, char *link, size_t len)
{
	char path[64];
	struct stat st;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = sys_readlink(path, link, len - 1);
	link[n > 0 ? n : 0] = 0;
	return n > 0 && !stat(path, &st) && files_made_late(link, &st);
}

/*
 * The registered files.  fdinfo names each slot's file only; which open file
 * it is, kcmp() tells where the kernel has KCMP_IOURING_FILE (amber's kernel
 * series).  Elsewhere a socket's name tells it (one open file per socket),
 * and other files are refused.  The restored ring registers the process's
 * fd on it again, so each must be held by an fd that is in place before the
 * ring is made.
 */
static int dump_files(struct dump_ctx *ctx, int fd, int dup, const char *buf,
		      const struct uring_info *u, IoUringEntry *e)
{
	const char *p = anonfd_field(buf, "UserFiles:");
	bool kernel = kernel_tells_files(dup);

	e->file_fds = malloc(u->user_files * sizeof(*e->file_fds));
	if (!e->file_fds)
		return -ENOMEM;
	e->n_file_fds = u->user_files;
	for (uint32_t i = 0; i < u->user_files; i++)
		e->file_fds[i] = -1;
	for (p = strchr(p, '\n'); p && p[1] == ' '; p = strchr(p + 1, '\n')) {
		char name[PATH_MAX], link[300];
		unsigned slot;
		int at, ret, len, off = 0;

		/* the whole name: a path may be long (seq_file_path escapes blanks) */
		len = 0;
		if (sscanf(p + 1, "%u: %n", &slot, &off) == 1 && off)
			len = (int)strcspn(p + 1 + off, "\n");
		if (len > 0 && len < (int)sizeof(name))
			snprintf(name, sizeof(name), "%.*s", len, p + 1 + off);
		if (len <= 0 || len >= (int)sizeof(name) || slot >= u->user_files) {
			pr_err("pid %d: fd %d: its io_uring fdinfo lists a registered file amber "
			       "does not read: %.40s",
			       ctx->pid, fd, p + 1);
			return -EOPNOTSUPP;
		}
		if (!strcmp(name, "<none>"))
			continue; /* an empty slot (listed before 6.13) */
		if (!kernel && strncmp(name, "socket:[", 8)) {
			pr_err("pid %d: fd %d is an io_uring with a file registered in slot %u "
			       "(%s); fdinfo names it only, which tells which open file it is "
			       "for a socket alone: unregister it before the dump, or use a "
			       "kernel whose kcmp() has KCMP_IOURING_FILE (amber's kernel series)",
			       ctx->pid, fd, slot, name);
			return -EOPNOTSUPP;
		}
		ret = slot_holder(ctx->pid, fd, slot, name, kernel, &at);
		if (ret) {
			pr_err("pid %d: fd %d (io_uring): cannot tell which fd holds the file in "
			       "slot %u (%s): %s%s",
			       ctx->pid, fd, slot, name, strerror(-ret),
			       ret == -EAGAIN ? " (the ring's lock is held: a request is being "
						"issued)"
					      : "");
			return ret == -EAGAIN ? -EBUSY : ret;
		}
		if (at < 0) {
			pr_err("pid %d: fd %d is an io_uring with %s registered in slot %u, which "
			       "no fd of the process holds; amber registers a file again "
			       "through the process's fd on it: keep one open during the dump",
			       ctx->pid, fd, name, slot);
			return -EOPNOTSUPP;
		}
		if (made_late(ctx->pid, at, link, sizeof(link))) {
			pr_err("pid %d: fd %d is an io_uring with fd %d (%s) registered in slot "
			       "%u; "
			       "amber makes such a file after the process's rings: unregister it "
			       "before the dump",
			       ctx->pid, fd, at, link, slot);
			return -EOPNOTSUPP;
		}
		e->file_fds[slot] = at;
	}
	return 0;
}

/*
 * What is registered: a file table (its sockets, dump_files), and buffers
 * (fdinfo gives each one's address and length, or none).
 */
static int dump_registered(struct dump_ctx *ctx, int fd, int dup, const char *buf,
			   const struct uring_info *u, IoUringEntry *e)
{
	char *file = first_entry(buf, "UserFiles:");
	bool listed = file; /* a slot that is not empty */
	const char *p = anonfd_field(buf, "UserBufs:");
	struct vma *v = NULL;
	size_t nv = 0;
	uint32_t n = 0;
	int ret;

	free(file);
	if (u->user_files > URING_MAX_FILES || u->user_bufs > URING_MAX_BUFS) {
		pr_err("pid %d: fd %d is an io_uring with %u file slots and %u buffers "
		       "registered; amber restores up to %u and %u",
		       ctx->pid, fd, u->user_files, u->user_bufs, URING_MAX_FILES, URING_MAX_BUFS);
		return -EOPNOTSUPP;
	}
	if (u->user_files)
		e->has_files = 1, e->files = u->user_files;
	if (listed) {
		ret = dump_files(ctx, fd, dup, buf, u, e);
		if (ret)
			return ret;
	}
	if (!u->user_bufs)
		return 0;
	e->buf_addr = calloc(u->user_bufs, sizeof(*e->buf_addr));
	e->buf_len = calloc(u->user_bufs, sizeof(*e->buf_len));
	if (!e->buf_addr || !e->buf_len)
		return -ENOMEM;
	e->n_buf_addr = e->n_buf_len = u->user_bufs;
	ret = proc_parse_maps(ctx->pid, &v, &nv);
	if (ret) {
		pr_err("pid %d: cannot read its mappings: %s", ctx->pid, strerror(-ret));
		return ret;
	}
	for (p = strchr(p, '\n'); !ret && p && p[1] == ' '; p = strchr(p + 1, '\n')) {
		unsigned long long addr;
		unsigned idx, len;
		char none[8];

		if (sscanf(p + 1, "%u: %7s", &idx, none) == 2 && !strcmp(none, "<none>") &&
		    idx == n) {
			n++; /* an empty slot: no address, length 0 */
			continue;
		}
		if (sscanf(p + 1, "%u: 0x%llx/%u", &idx, &addr, &len) != 3 || idx != n || !len ||
		    len > URING_MAX_BUF) {
			ret = -EOPNOTSUPP;
			break;
		}
		if (!mapped(v, nv, addr, len)) {
			pr_err("pid %d: fd %d is an io_uring with buffer %u (%#llx, %u bytes) "
			       "registered over memory no longer mapped; amber would register "
			       "what is mapped there now: unregister it before the dump",
			       ctx->pid, fd, idx, addr, len);
			ret = -EOPNOTSUPP;
			break;
		}
		e->buf_addr[n] = addr;
		e->buf_len[n++] = len;
	}
	proc_free_vmas(v, nv);
	if (!ret && n != u->user_bufs)
		ret = -EOPNOTSUPP;
	if (ret == -EOPNOTSUPP && n != u->user_bufs)
		pr_err("pid %d: fd %d: its io_uring fdinfo lists %u of its %u registered buffers "
		       "as amber knows them",
		       ctx->pid, fd, n, u->user_bufs);
	return ret;
}

/* The rings dumped, to be looked at again once the process's dump is done. */
static struct dumped {
	pid_t pid;
	int fd;
	uint32_t sq_head, cq_tail;
} * dumped;
static size_t nr_dumped;

static int uring_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	struct dumped *late;
	struct uring_info u;
	IoUringEntry *e;
	uint32_t flags = 0, sq, cq;
	char *buf;
	int ret;

	if (ctx->pid == getpid()) {
		pr_err("an io_uring is in flight in a unix socket's queue; amber restores a "
		       "ring in the process that holds it: let the receiver read it first");
		return -EOPNOTSUPP;
	}
	ret = anonfd_dump_start(ctx, fd, dup, "io_uring", &io_uring_entry__descriptor, &buf,
				(void **)&f->io_uring);
	if (ret)
		return ret;
	e = f->io_uring;
	if (parse_info(buf, &u)) {
		pr_err("pid %d: fd %d: this kernel's io_uring fdinfo lacks the positions amber "
		       "reads (CachedSqHead, CachedCqTail, lists: 5.19+)",
		       ctx->pid, fd);
		free(buf);
		return -EOPNOTSUPP;
	}
	sq = u.sq_mask + 1;
	cq = u.cq_mask + 1;
	if (u.sq_thread != -1) {
		pr_err("pid %d: fd %d is an io_uring with a polling thread (IORING_SETUP_SQPOLL, "
		       "thread %ld), which amber does not restore",
		       ctx->pid, fd, u.sq_thread);
		free(buf);
		return -EOPNOTSUPP;
	}
	ret = u.personalities ? -EOPNOTSUPP : dump_registered(ctx, fd, dup, buf, &u, e);
	free(buf);
	if (ret) {
		if (u.personalities)
			pr_err("pid %d: fd %d is an io_uring with personalities registered "
			       "(credentials), which amber does not restore: unregister them "
			       "before the dump",
			       ctx->pid, fd);
		return ret;
	}
	if (u.polls || u.overflows) {
		pr_err("pid %d: fd %d is an io_uring with %u request(s) waiting (its poll list) "
		       "and %u CQE(s) in its overflow list; amber cannot dump requests in "
		       "flight: dump again once they completed and the CQEs are reaped",
		       ctx->pid, fd, u.polls, u.overflows);
		return -EBUSY;
	}
	if (!pow2(sq) || !pow2(cq) || sq > URING_MAX_SQ || cq > URING_MAX_CQ || cq < sq) {
		pr_err("pid %d: fd %d: io_uring sizes %u/%u amber does not know", ctx->pid, fd, sq,
		       cq);
		return -EOPNOTSUPP;
	}
	ret = uring_workers(ctx, fd);
	if (!ret)
		ret = probe_flags(ctx, fd, dup, u.has_setup, &flags);
	if (ret)
		return ret;
	if (u.has_setup)
		ret = setup_flags(ctx, fd, u.setup, &flags);
	else
		ret = probe_layout(ctx, fd, dup, sq, cq, &flags);
	if (ret)
		return ret;
	if (cq != 2 * sq)
		flags |= IORING_SETUP_CQSIZE;
	ret = copy_region(ctx, fd, dup, IORING_OFF_SQ_RING, rings_len(flags, sq, cq), &e->rings);
	if (!ret)
		ret = copy_region(ctx, fd, dup, IORING_OFF_SQES, sq * sqe_size(flags), &e->sqes);
	if (!ret)
		ret = check_idle(ctx, fd, &u, e->rings.data, sq, cq);
	if (ret)
		return ret;
	e->sq_entries = sq;
	e->cq_entries = cq;
	e->flags = flags;
	e->sq_head = u.cached_sq_head;
	e->cq_tail = u.cached_cq_tail;
	/* amber's dup goes with this call: the late look is through /proc */
	late = realloc(dumped, (nr_dumped + 1) * sizeof(*late));
	if (!late)
		return -ENOMEM;
	dumped = late;
	dumped[nr_dumped++] = (struct dumped){ctx->pid, fd, e->sq_head, e->cq_tail};
	pr_info("pid %d: fd %d: io_uring %u/%u, flags %#x, SQ %u..%u, CQ %u..%u", ctx->pid, fd, sq,
		cq, flags, e->sq_head, rd(e->rings.data, R_SQ_TAIL), rd(e->rings.data, R_CQ_HEAD),
		e->cq_tail);
	return 0;
}

/* ---- restore ---- */

static int uring_check(struct tree *t, const RegFile *f)
{
	const IoUringEntry *e = f->io_uring;
	const void *r;
	uint32_t sq, cq, h, dropped;

	if (!e)
		goto corrupt;
	sq = e->sq_entries;
	cq = e->cq_entries;
	h = e->sq_head;
	if (!pow2(sq) || !pow2(cq) || sq > URING_MAX_SQ || cq > URING_MAX_CQ || cq < sq ||
	    (e->flags & ~URING_FLAGS) ||
	    ((e->flags & IORING_SETUP_DEFER_TASKRUN) && !(e->flags & IORING_SETUP_SINGLE_ISSUER)) ||
	    ((e->flags & IORING_SETUP_TASKRUN_FLAG) &&
	     !(e->flags & (IORING_SETUP_COOP_TASKRUN | IORING_SETUP_DEFER_TASKRUN))) ||
	    ((e->flags & IORING_SETUP_HYBRID_IOPOLL) && !(e->flags & IORING_SETUP_IOPOLL)) ||
	    ((cq != 2 * sq) && !(e->flags & IORING_SETUP_CQSIZE)) ||
	    e->rings.len != rings_len(e->flags, sq, cq) ||
	    e->sqes.len != (size_t)sq * sqe_size(e->flags) || h > URING_MAX_REPLAY ||
	    (e->has_files && (!e->files || e->files > URING_MAX_FILES)) ||
	    (e->n_file_fds && e->n_file_fds != e->files) || e->n_buf_addr != e->n_buf_len ||
	    e->n_buf_len > URING_MAX_BUFS || (f->flags & ~(O_ACCMODE | O_NONBLOCK)) != 0)
		goto corrupt;
	for (size_t i = 0; i < e->n_buf_len; i++)
		if (e->buf_len[i] > URING_MAX_BUF || !e->buf_len[i] != !e->buf_addr[i] ||
		    e->buf_addr[i] >= URING_TOP || e->buf_len[i] > URING_TOP - e->buf_addr[i])
			goto corrupt;
	r = e->rings.data;
	dropped = rd(r, R_SQ_DROPPED);
	if (rd(r, R_SQ_HEAD) != h || rd(r, R_CQ_TAIL) != e->cq_tail || rd(r, R_SQ_FLAGS) ||
	    rd(r, R_SQ_MASK) != sq - 1 || rd(r, R_CQ_MASK) != cq - 1 || rd(r, R_SQ_ENTRIES) != sq ||
	    rd(r, R_CQ_ENTRIES) != cq || dropped > h || (int32_t)(e->cq_tail - (h - dropped)) < 0 ||
	    (uint64_t)h + (e->cq_tail - (h - dropped)) > URING_MAX_REPLAY ||
	    rd(r, R_SQ_TAIL) - h > sq || e->cq_tail - rd(r, R_CQ_HEAD) > cq)
		goto corrupt;
	return 0;
corrupt:
	pr_err("files.img: io_uring entry %u is not a ring amber dumps; the image is corrupt",
	       f->id);
	return -EBADMSG;
}

/* n NOPs (skip: with IOSQE_CQE_SKIP_SUCCESS), submitted and their CQEs reaped. */
static int nops(int fd, void *rings, void *sqes, uint32_t flags, uint32_t n, bool skip)
{
	uint32_t tail = rd(rings, R_SQ_TAIL), mask = rd(rings, R_SQ_MASK);
	size_t aoff = array_off(flags, rd(rings, R_CQ_ENTRIES));
	int r;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t idx = (tail + i) & mask;
		struct io_uring_sqe *sqe = (void *)((char *)sqes + idx * sqe_size(flags));

		memset(sqe, 0, sqe_size(flags));
		sqe->opcode = IORING_OP_NOP;
		sqe->flags = skip ? IOSQE_CQE_SKIP_SUCCESS : 0;
		if (!(flags & IORING_SETUP_NO_SQARRAY))
			*ring_u32(rings, aoff + idx * 4) = idx;
	}
	__atomic_store_n(ring_u32(rings, R_SQ_TAIL), tail + n, __ATOMIC_RELEASE);
	r = sys_io_uring_enter(fd, n, skip ? 0 : n, IORING_ENTER_GETEVENTS);
	if (r != (int)n)
		return r < 0 ? r : -EIO;
	__atomic_store_n(ring_u32(rings, R_CQ_HEAD),
			 __atomic_load_n(ring_u32(rings, R_CQ_TAIL), __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	return 0;
}

/*
 * n CQEs without an SQE on the ring at fd (rings mapped): MSG_RINGs from a
 * helper ring of the process's, whose own CQEs are skipped, then reaped.
 */
static int msgs(int fd, void *rings, uint32_t n)
{
	struct io_uring_params p;
	size_t rlen, slen = 8 * 64;
	void *hr = MAP_FAILED, *hs = MAP_FAILED;
	uint32_t batch = rd(rings, R_CQ_ENTRIES) < 8 ? rd(rings, R_CQ_ENTRIES) : 8;
	int h, ret = 0;

	memset(&p, 0, sizeof(p));
	h = sys_io_uring_setup(8, &p);
	if (h < 0)
		return h;
	rlen = page_up(p.sq_off.array + 8 * 4);
	hr = mmap(NULL, rlen, PROT_READ | PROT_WRITE, MAP_SHARED, h, IORING_OFF_SQ_RING);
	hs = mmap(NULL, slen, PROT_READ | PROT_WRITE, MAP_SHARED, h, IORING_OFF_SQES);
	if (hr == MAP_FAILED || hs == MAP_FAILED)
		ret = -errno;
	for (uint32_t done = 0, k; !ret && done < n; done += k) {
		uint32_t tail = rd(hr, R_SQ_TAIL);
		int r;

		k = n - done < batch ? n - done : batch;
		for (uint32_t i = 0; i < k; i++) {
			uint32_t idx = (tail + i) & 7;
			struct io_uring_sqe *sqe = (struct io_uring_sqe *)hs + idx;

			memset(sqe, 0, sizeof(*sqe));
			sqe->opcode = IORING_OP_MSG_RING; /* IORING_MSG_DATA: addr 0 */
			sqe->fd = fd;
			sqe->flags = IOSQE_CQE_SKIP_SUCCESS;
			*ring_u32(hr, p.sq_off.array + idx * 4) = idx;
		}
		__atomic_store_n(ring_u32(hr, R_SQ_TAIL), tail + k, __ATOMIC_RELEASE);
		r = sys_io_uring_enter(h, k, 0, 0);
		/* the target's CQEs (posted by its own task's work if DEFER_TASKRUN) */
		if (r == (int)k)
			r = sys_io_uring_enter(fd, 0, k, IORING_ENTER_GETEVENTS);
		if (r < 0)
			ret = r;
		__atomic_store_n(ring_u32(rings, R_CQ_HEAD),
				 __atomic_load_n(ring_u32(rings, R_CQ_TAIL), __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
	}
	if (hr != MAP_FAILED)
		munmap(hr, rlen);
	if (hs != MAP_FAILED)
		munmap(hs, slen);
	close(h);
	return ret;
}

/*
 * In the restored process (its main thread: a SINGLE_ISSUER ring's issuer),
 * before its memory is replaced: the ring, at the dumped positions and with
 * the dumped rings' contents.  mem.c maps it where it was.
 */
static int uring_open_child(struct restore_ctx *ctx, RegFile *f)
{
	const IoUringEntry *e = f->io_uring;
	uint32_t posted = e->sq_head - rd(e->rings.data, R_SQ_DROPPED), batch = e->sq_entries;
	size_t rlen = page_up(e->rings.len), slen = page_up(e->sqes.len);
	struct io_uring_params p;
	void *rings = MAP_FAILED, *sqes = MAP_FAILED;
	int fd, ret = 0;

	memset(&p, 0, sizeof(p));
	p.flags = e->flags; /* CQSIZE as dumped: the new ring's flags are the dumped ones */
	p.cq_entries = e->cq_entries;
	fd = sys_io_uring_setup(e->sq_entries, &p);
	if (fd < 0) {
		pr_err("pid %d: io_uring_setup(%u, cq %u, flags %#x) for file %u: %s", ctx->pid,
		       e->sq_entries, e->cq_entries, p.flags, f->id, strerror(-fd));
		return fd;
	}
	if (p.sq_entries != e->sq_entries || p.cq_entries != e->cq_entries ||
	    p.sq_off.array != ((e->flags & IORING_SETUP_NO_SQARRAY)
				       ? 0
				       : array_off(e->flags, e->cq_entries)) ||
	    p.cq_off.cqes != own_ring()->cqes || p.sq_off.dropped != R_SQ_DROPPED) {
		pr_err("pid %d: io_uring_setup made a ring of %u/%u entries, SQ array at %u, for "
		       "file %u (%u/%u dumped): this kernel lays rings out otherwise",
		       ctx->pid, p.sq_entries, p.cq_entries, p.sq_off.array, f->id, e->sq_entries,
		       e->cq_entries);
		ret = -EOPNOTSUPP;
		goto close_fd;
	}
	if (e->has_files) {
		/* the files are at their fds already (made by amber, placed first) */
		struct io_uring_rsrc_register rr = {
			.nr = e->files,
			.flags = e->n_file_fds ? 0 : IORING_RSRC_REGISTER_SPARSE,
			.data = (uintptr_t)e->file_fds,
		};

		ret = sys_io_uring_register(fd, IORING_REGISTER_FILES2, &rr, sizeof(rr));
		if (ret) {
			pr_err("pid %d: cannot register a table of %u files (%zu slots) with "
			       "the io_uring of file %u: %s",
			       ctx->pid, e->files, e->n_file_fds, f->id, strerror(-ret));
			goto close_fd;
		}
	}
	rings = mmap(NULL, rlen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, IORING_OFF_SQ_RING);
	sqes = mmap(NULL, slen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, IORING_OFF_SQES);
	if (rings == MAP_FAILED || sqes == MAP_FAILED) {
		ret = -errno;
		pr_err("pid %d: cannot map the new io_uring of file %u: %m", ctx->pid, f->id);
		goto unmap;
	}
	if (batch > e->cq_entries)
		batch = e->cq_entries;
	/* the CQEs posted, then the SQEs dropped (taken without a CQE) */
	for (uint32_t done = 0; !ret && done < e->sq_head;) {
		bool skip = done >= posted;
		uint32_t n = (skip ? e->sq_head : posted) - done;

		n = n < batch ? n : batch;
		ret = nops(fd, rings, sqes, e->flags, n, skip);
		done += n;
	}
	if (!ret && e->cq_tail != posted)
		ret = msgs(fd, rings, e->cq_tail - posted);
	if (!ret && (rd(rings, R_SQ_HEAD) != e->sq_head || rd(rings, R_CQ_TAIL) != e->cq_tail))
		ret = -EIO;
	if (ret) {
		pr_err("pid %d: cannot bring the io_uring of file %u to SQ head %u, CQ tail %u "
		       "(now %u, %u): %s",
		       ctx->pid, f->id, e->sq_head, e->cq_tail, rd(rings, R_SQ_HEAD),
		       rd(rings, R_CQ_TAIL), strerror(-ret));
		goto unmap;
	}
	/* the kernel's own words are the dumped ones now: the rest goes back as it was */
	memcpy(sqes, e->sqes.data, e->sqes.len);
	memcpy(rings, e->rings.data, e->rings.len);
	if ((f->flags & O_NONBLOCK) && fcntl(fd, F_SETFL, O_NONBLOCK)) {
		ret = -errno;
		pr_err("pid %d: cannot make the io_uring of file %u non-blocking: %m", ctx->pid,
		       f->id);
	}
unmap:
	if (rings != MAP_FAILED)
		munmap(rings, rlen);
	if (sqes != MAP_FAILED)
		munmap(sqes, slen);
close_fd:
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

const struct fd_type uring_type = {
	.name = "io_uring",
	.kind = FILE_KIND__FILE_IO_URING,
	.match = uring_match,
	.dump = uring_dump,
	.open_child = uring_open_child,
	.check = uring_check,
	.single_process = true,
};

/* ---- the rings' mappings (mem.c) ---- */

static bool uring_off(uint64_t pgoff)
{
	return pgoff == IORING_OFF_SQ_RING || pgoff == IORING_OFF_CQ_RING ||
	       pgoff == IORING_OFF_SQES;
}

int uring_vma_file(struct dump_ctx *ctx, struct vma *v)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	if (!uring_off(v->pgoff)) {
		pr_err("pid %d: mapping %lx-%lx of an io_uring at offset %#lx is not one of its "
		       "rings (a provided-buffer ring?); amber does not restore it",
		       ctx->pid, v->start, v->end, v->pgoff);
		return -EOPNOTSUPP;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", ctx->pid);
	dir = sys_opendir(path);
	if (!dir) {
		pr_err("pid %d: cannot list its fds: %m", ctx->pid);
		return -errno;
	}
	while ((d = readdir(dir))) {
		char link[64], target[64];
		struct stat st;
		int fd = atoi(d->d_name);

		snprintf(link, sizeof(link), "/proc/%d/fd/%d", ctx->pid, fd);
		if (d->d_name[0] == '.' || sys_readlink(link, target, sizeof(target)) < 0 ||
		    !uring_match(target, NULL) || sys_stat(link, &st) || st.st_ino != v->ino)
			continue;
		/* its description is in the table (files come first): the same inode */
		for (size_t i = 0; i < ctx->files->n && v->file_id < 0; i++)
			if (ctx->files->f[i]->kind == FILE_KIND__FILE_IO_URING &&
			    ctx->files->f[i]->ino == st.st_ino)
				v->file_id = (int)i;
		break;
	}
	closedir(dir);
	if (v->file_id < 0) {
		pr_err("pid %d: mapping %lx-%lx is an io_uring's rings and the process has no fd "
		       "on that ring; amber restores a ring through its fd",
		       ctx->pid, v->start, v->end);
		return -EOPNOTSUPP;
	}
	return 0;
}

int uring_check_vmas(struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->mm->n_vmas; i++) {
		const VmaEntry *e = ctx->mm->vmas[i];

		if (e->kind != VMA_KIND__VMA_IO_URING)
			continue;
		if (!uring_off(e->pgoff) || !e->has_file_id || e->file_id >= ctx->nr_files ||
		    !ctx->files || ctx->files[e->file_id]->kind != FILE_KIND__FILE_IO_URING ||
		    mem_vma_fd(ctx, e) < 0 || e->prot & PROT_EXEC) {
			pr_err("mm-%d.img: mapping %llx-%llx is not an io_uring's of the process; "
			       "the image is corrupt",
			       ctx->pid, (unsigned long long)e->start, (unsigned long long)e->end);
			return -EBADMSG;
		}
	}
	return 0;
}

/*
 * At dump, in the process (a SINGLE_ISSUER ring refuses others' calls):
 * what its fdinfo does not show and amber does not restore, an eventfd
 * and provided buffers, found by calls that fail without changing the ring
 * when there are none (EFAULT reading the eventfd's number; ENOENT for a
 * buffer group that does not exist, EINVAL for one of buffers provided
 * with IORING_OP_PROVIDE_BUFFERS, not a ring).
 */
#define PBUF_BATCH 512

static int uring_refused_by_calls(struct dump_ctx *ctx, int fd)
{
	struct pbuf_status st[PBUF_BATCH];
	struct infect_sc sc[PBUF_BATCH];
	unsigned long arg = ctx->inf.scratch;
	long r;
	int ret;

	r = infect_call(&ctx->inf, SYS_io_uring_register, fd, IORING_REGISTER_EVENTFD, 0, 1, 0, 0);
	if (r == -EBUSY) {
		pr_err("pid %d: fd %d is an io_uring with an eventfd registered, which amber does "
		       "not restore: unregister it before the dump",
		       ctx->pid, fd);
		return -EOPNOTSUPP;
	}
	if (r != -EFAULT) {
		pr_err("pid %d: fd %d (io_uring): probing for a registered eventfd: %s", ctx->pid,
		       fd, r < 0 ? strerror((int)-r) : "it took none");
		return r < 0 ? (int)r : -EIO;
	}
	for (uint32_t g = 0; g < 65536; g += PBUF_BATCH) {
		memset(st, 0, sizeof(st));
		for (uint32_t i = 0; i < PBUF_BATCH; i++) {
			st[i].bgid = g + i;
			sc[i] = (struct infect_sc){
				.nr = SYS_io_uring_register,
				.a = {fd, URING_PBUF_STATUS, (long)(arg + i * sizeof(st[0])), 1}};
		}
		ret = infect_write(&ctx->inf, arg, st, sizeof(st));
		if (!ret)
			ret = infect_batch(&ctx->inf, sc, PBUF_BATCH);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < PBUF_BATCH; i++) {
			if (sc[i].ret == -ENOENT)
				continue;
			if (sc[i].ret == -EINVAL && g + i == 0 && !own_ring()->tells_pbuf)
				return 0; /* before 6.8: no status to ask, see README */
			if (sc[i].ret == -EINVAL)
				pr_err("pid %d: fd %d is an io_uring with buffers provided by "
				       "IORING_OP_PROVIDE_BUFFERS (group %u), which amber does not "
				       "restore: remove them (IORING_OP_REMOVE_BUFFERS) before the "
				       "dump",
				       ctx->pid, fd, g + i);
			else
				pr_err("pid %d: fd %d is an io_uring with a provided-buffer ring "
				       "(group %u)%s%s, which amber does not restore",
				       ctx->pid, fd, g + i, sc[i].ret ? ": " : "",
				       sc[i].ret ? strerror((int)-sc[i].ret) : "");
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

#define URING_RINGFD_MAX 16 /* IO_RINGFD_REG_MAX */

/*
 * Rings registered by index (IORING_REGISTER_RING_FDS, liburing's
 * io_uring_register_ring_fd()) are the registering thread's; amber does not
 * register them again.  io_uring_enter on an index with nothing to do fails
 * EBADF where no ring is registered and does nothing where one is.  Asked
 * in the main thread (see README).
 */
static int uring_ring_fds(struct dump_ctx *ctx)
{
	struct infect_sc sc[URING_RINGFD_MAX];
	int ret;

	for (int i = 0; i < URING_RINGFD_MAX; i++)
		sc[i] = (struct infect_sc){.nr = SYS_io_uring_enter,
					   .a = {i, 0, 0, IORING_ENTER_REGISTERED_RING, 0, 0}};
	ret = infect_batch(&ctx->inf, sc, URING_RINGFD_MAX);
	if (ret)
		return ret;
	for (int i = 0; i < URING_RINGFD_MAX; i++) {
		if (sc[i].ret == -EBADF || (sc[i].ret == -EINVAL && !i))
			continue; /* EINVAL: before 5.18, no ring is registered so */
		if (sc[i].ret == -EINVAL)
			break;
		pr_err("pid %d has an io_uring registered by index %d (IORING_REGISTER_RING_FDS, "
		       "liburing's io_uring_register_ring_fd()), which amber does not register "
		       "again: unregister it (io_uring_unregister_ring_fd()) before the dump",
		       ctx->pid, i);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int uring_dump_proc(struct dump_ctx *ctx)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	int ret = 0;
	bool any = false;

	/* files.c described every fd of the tree already: without a ring, no listing */
	for (size_t i = 0; i < nr_dumped && !any; i++)
		any = dumped[i].pid == ctx->pid;
	if (!any)
		return 0;
	ret = uring_ring_fds(ctx);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/proc/%d/fd", ctx->pid);
	dir = sys_opendir(path);
	if (!dir) {
		pr_err("pid %d: cannot list its fds: %m", ctx->pid);
		return -errno;
	}
	while (!ret && (d = readdir(dir))) {
		char link[300], target[64];

		snprintf(link, sizeof(link), "/proc/%d/fd/%s", ctx->pid, d->d_name);
		if (d->d_name[0] != '.' && sys_readlink(link, target, sizeof(target)) >= 0 &&
		    uring_match(target, NULL))
			ret = uring_refused_by_calls(ctx, atoi(d->d_name));
	}
	closedir(dir);
	return ret;
}

/*
 * A ring's mapping cannot be put at an address of one's choice (io_uring
 * refuses any, so that the kernel's pages are aliased safely): the kernel
 * places it where the only room left is, every other gap of the address
 * space taken meanwhile by an inaccessible placeholder.
 */

struct gaps {
	struct infect_sc *sc;
	size_t n;
};

static int fill_gaps(struct restore_ctx *ctx, const VmaEntry *e, struct gaps *g)
{
	unsigned long lo = URING_PAGE, min;
	struct vma *v;
	size_t nv;
	char *buf;
	int ret;

	if (!sys_read_file("/proc/sys/vm/mmap_min_addr", &buf, NULL)) {
		min = page_up(strtoul(buf, NULL, 10));
		lo = min > lo ? min : lo;
		free(buf);
	}
	ret = proc_parse_maps(ctx->pid, &v, &nv);
	if (ret) {
		pr_err("pid %d: cannot read its mappings: %s", ctx->pid, strerror(-ret));
		return ret;
	}
	g->sc = calloc(2 * nv + 2, sizeof(*g->sc));
	g->n = 0;
	for (size_t i = 0; g->sc && i <= nv && lo < URING_TOP; i++) {
		unsigned long hi = i < nv && v[i].start < URING_TOP ? v[i].start : URING_TOP;
		unsigned long cut[2][2] = {{lo, e->start < hi ? e->start : hi},
					   {e->end > lo ? e->end : lo, hi}};

		for (int k = 0; k < 2; k++)
			if (cut[k][0] < cut[k][1])
				g->sc[g->n++] = (struct infect_sc){
					.nr = SYS_mmap,
					.a = {(long)cut[k][0], (long)(cut[k][1] - cut[k][0]),
					      PROT_NONE,
					      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
						      MAP_FIXED_NOREPLACE,
					      -1, 0}};
		if (i < nv && v[i].end > lo)
			lo = v[i].end;
	}
	proc_free_vmas(v, nv);
	if (!g->sc)
		return -ENOMEM;
	ret = infect_batch(&ctx->inf, g->sc, g->n);
	for (size_t i = 0; !ret && i < g->n; i++)
		if (g->sc[i].ret != g->sc[i].a[0])
			ret = g->sc[i].ret < 0 ? (int)g->sc[i].ret : -EEXIST;
	if (ret)
		pr_err("pid %d: cannot fill its address space around %llx to map an io_uring "
		       "there: %s",
		       ctx->pid, (unsigned long long)e->start, strerror(-ret));
	return ret;
}

static void clear_gaps(struct restore_ctx *ctx, struct gaps *g)
{
	size_t k = 0;

	for (size_t i = 0; i < g->n; i++)
		if (g->sc[i].ret == g->sc[i].a[0])
			g->sc[k++] = (struct infect_sc){.nr = SYS_munmap,
							.a = {g->sc[i].a[0], g->sc[i].a[1]}};
	if (k && infect_batch(&ctx->inf, g->sc, k))
		pr_warn("pid %d: cannot remove the placeholders of an io_uring mapping", ctx->pid);
	free(g->sc);
}

static int place_ring(struct restore_ctx *ctx, const VmaEntry *e)
{
	long len = (long)(e->end - e->start), r;
	struct gaps g = {0};
	int ret = fill_gaps(ctx, e, &g);

	r = ret ? ret
		: infect_call(&ctx->inf, SYS_mmap, 0, len, e->prot, MAP_SHARED, mem_vma_fd(ctx, e),
			      (long)e->pgoff);
	clear_gaps(ctx, &g);
	return ret ? ret : mem_vma_placed(ctx, e, r, "io_uring mapping");
}

/* The buffers of the ring at fd, registered again over the restored memory. */
static int register_bufs(struct restore_ctx *ctx, int fd, const RegFile *f)
{
	const IoUringEntry *e = f->io_uring;
	struct iovec iov[URING_MAX_BUFS];
	long r;
	int ret;

	for (size_t i = 0; i < e->n_buf_len; i++)
		iov[i] = (struct iovec){(void *)(uintptr_t)e->buf_addr[i], e->buf_len[i]};
	ret = infect_write(&ctx->inf, ctx->inf.scratch, iov, e->n_buf_len * sizeof(iov[0]));
	if (ret)
		return ret;
	r = infect_call(&ctx->inf, SYS_io_uring_register, fd, IORING_REGISTER_BUFFERS,
			(long)ctx->inf.scratch, (long)e->n_buf_len, 0, 0);
	if (r) {
		pr_err("pid %d: cannot register the %zu buffers of the io_uring at fd %d again: %s",
		       ctx->pid, e->n_buf_len, fd, strerror((int)-r));
		return r < 0 ? (int)r : -EIO;
	}
	return 0;
}

static int uring_restore_inject(struct restore_ctx *ctx)
{
	int ret = 0;

	for (size_t i = 0; !ret && !ctx->shares_vm && ctx->mm && i < ctx->mm->n_vmas; i++)
		if (ctx->mm->vmas[i]->kind == VMA_KIND__VMA_IO_URING)
			ret = place_ring(ctx, ctx->mm->vmas[i]);
	/* once per ring: at its first fd (a table shared with the parent is the parent's) */
	for (size_t i = 0; !ret && i < ctx->nr_fds; i++) {
		const RegFile *f = ctx->files[ctx->fds[i]->file_id];
		bool first = true;

		if (f->kind != FILE_KIND__FILE_IO_URING || !f->io_uring->n_buf_len ||
		    tree_entry(ctx->tree, (uint32_t)ctx->pid)->clone_files)
			continue;
		for (size_t k = 0; k < i; k++)
			first = first && ctx->fds[k]->file_id != ctx->fds[i]->file_id;
		if (first)
			ret = register_bufs(ctx, (int)ctx->fds[i]->fd, f);
	}
	return ret;
}

/*
 * A request amber did not see in flight (none of the signs) that completed
 * while the process was frozen moved the kernel's CQ tail: refused, as for
 * AIO rings.  One still pending when the dump ends is not seen (README).
 */
static int uring_dump_late(struct dump_ctx *ctx)
{
	for (size_t i = 0; i < nr_dumped; i++) {
		struct uring_info u;
		char path[64], *buf;
		int ret;

		if (dumped[i].pid != ctx->pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", ctx->pid, dumped[i].fd);
		ret = sys_read_file(path, &buf, NULL);
		if (!ret) {
			ret = parse_info(buf, &u);
			free(buf);
		}
		if (ret) {
			pr_err("pid %d: cannot read the fdinfo of fd %d (io_uring) again: %s",
			       ctx->pid, dumped[i].fd, strerror(-ret));
			return ret;
		}
		if (u.cached_sq_head != dumped[i].sq_head ||
		    u.cached_cq_tail != dumped[i].cq_tail) {
			pr_err("pid %d: fd %d is an io_uring that had a request in flight (its CQ "
			       "tail went from %u to %u during the dump); amber cannot dump "
			       "requests in flight: dump again once the program's I/O is done",
			       ctx->pid, dumped[i].fd, dumped[i].cq_tail, u.cached_cq_tail);
			return -EBUSY;
		}
	}
	return 0;
}

/* The dump is over (or failed): the next one (amber swrk) starts afresh. */
static int uring_dump_done(struct tree *t)
{
	free(dumped);
	dumped = NULL;
	nr_dumped = 0;
	return 0;
}

static void uring_dump_undo(struct tree *t)
{
	uring_dump_done(t);
}

/* A ring's registered files: fds of its process on files placed before its rings. */
static int uring_restore_read(struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->nr_fds; i++) {
		const RegFile *f = ctx->files[ctx->fds[i]->file_id];

		for (size_t s = 0; f->io_uring && s < f->io_uring->n_file_fds; s++) {
			int32_t want = f->io_uring->file_fds[s];
			bool ok = want == -1;

			for (size_t k = 0; !ok && k < ctx->nr_fds; k++)
				ok = (int64_t)ctx->fds[k]->fd == want &&
				     files_placed_first(ctx->tree, (int)ctx->fds[k]->file_id);
			if (!ok) {
				pr_err("files.img: io_uring entry %u registers fd %d in slot %zu, "
				       "which is no fd of pid %d placed before its rings; the "
				       "image is corrupt",
				       f->id, want, s, ctx->pid);
				return -EBADMSG;
			}
		}
	}
	return 0;
}

const struct resource_ops uring_ops = {
	.name = "io_uring",
	.restore_read = uring_restore_read,
	.dump = uring_dump_proc,
	.dump_late = uring_dump_late,
	.dump_tree_late = uring_dump_done,
	.dump_undo = uring_dump_undo,
	.restore_inject = uring_restore_inject,
};
