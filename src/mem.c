// SPDX-License-Identifier: MIT
/*
 * Memory: every VMA with its protection, flags and backing; the pages that
 * only the process holds (anonymous, copy-on-write copies of file pages,
 * shared anonymous memory); the mm fields that ps and /proc show (code/data
 * bounds, brk, arg/env, auxv, exe); and the vDSO, which is moved, not copied.
 *
 * Pages unchanged from a file are not saved: the mapping is recreated from
 * the file.  Zero pages (read but never written) are not saved either:
 * PAGEMAP_SCAN tells present, swapped, file-backed and zero-page runs apart.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/prctl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amber.h"
#include "dump.h"
#include "log.h"
#include "ns/ns.h"
#include "mem.h"
#include "stats.h"
#include "proc.h"
#include "restore.h"
#include "sys.h"
#include "uapi/amber_kernel.h"
#include "uapi/pagemap_scan.h"

#define TASK_SIZE_MAX (1UL << 56)
#define SCRATCH_SIZE  (1UL << 20)
#define IO_CHUNK      (1UL << 20) /* fits in L2: read, write and hash hit the cache */
#define IO_BATCH      256	  /* runs per write of the pages file */
#define PME_SPAN      2048	  /* pagemap entries read at once for the queued runs */
#define VM_IOV	      1024	  /* pieces per process_vm_readv (IOV_MAX) */
#define MAX_AUXV      (2 * 64)

/* The madv bits of vma_entry: hints reapplied with madvise() on restore. */
static const struct {
	unsigned vmf;
	int advice;
} madv_map[] = {
	{VMF_DONTFORK, MADV_DONTFORK},	   {VMF_WIPEONFORK, MADV_WIPEONFORK},
	{VMF_DONTDUMP, MADV_DONTDUMP},	   {VMF_HUGEPAGE, MADV_HUGEPAGE},
	{VMF_NOHUGEPAGE, MADV_NOHUGEPAGE}, {VMF_MERGEABLE, MADV_MERGEABLE},
	{VMF_SEQ_READ, MADV_SEQUENTIAL},   {VMF_RAND_READ, MADV_RANDOM},
};

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

static bool has_pages(int kind)
{
	return kind == VMA_KIND__VMA_ANON_PRIVATE || kind == VMA_KIND__VMA_FILE_PRIVATE ||
	       kind == VMA_KIND__VMA_ANON_SHARED;
}

/* [off, off + size) lies inside len bytes (computed without wraparound). */
static bool in_bounds(uint64_t off, uint64_t size, uint64_t len)
{
	return off <= len && size <= len - off;
}

static bool is_vdso_part(int kind)
{
	return kind == VMA_KIND__VMA_VDSO || kind == VMA_KIND__VMA_VVAR ||
	       kind == VMA_KIND__VMA_VVAR_VCLOCK;
}

/* Sets v->kind; -1 for what amber leaves alone ([vsyscall]). */
static int classify(struct dump_ctx *ctx, struct vma *v)
{
	const char *p = v->path;
	int ret;

	if (p && !strcmp(p, "[vsyscall]")) {
		v->kind = -1;
	} else if (p && !strcmp(p, "[vdso]")) {
		v->kind = VMA_KIND__VMA_VDSO;
	} else if (p && !strcmp(p, "[vvar]")) {
		v->kind = VMA_KIND__VMA_VVAR;
	} else if (p && !strcmp(p, "[vvar_vclock]")) {
		v->kind = VMA_KIND__VMA_VVAR_VCLOCK;
	} else if (!p || p[0] == '[' || (v->shared && !strcmp(p, "/dev/zero") && v->deleted)) {
		/* [heap], [stack], [anon:name], and MAP_SHARED|MAP_ANONYMOUS */
		if (p && p[0] == '[' && strcmp(p, "[heap]") && strcmp(p, "[stack]") &&
		    strncmp(p, "[anon:", 6) && strncmp(p, "[anon_shmem:", 12)) {
			pr_err("pid %d: mapping %lx-%lx is %s, which amber cannot dump yet",
			       ctx->pid, v->start, v->end, p);
			return -EOPNOTSUPP;
		}
		v->kind = v->shared ? VMA_KIND__VMA_ANON_SHARED : VMA_KIND__VMA_ANON_PRIVATE;
	} else if (!v->shared && v->deleted && !strcmp(p, "/anon_hugepage")) {
		/* private MAP_HUGETLB memory (shared is refused as a hugetlbfs file) */
		char procpath[96];
		struct statfs sf;

		snprintf(procpath, sizeof(procpath), "/proc/%d/map_files/%lx-%lx", ctx->pid,
			 v->start, v->end);
		if (statfs(procpath, &sf) || sf.f_type != 0x958458f6 /* HUGETLBFS_MAGIC */) {
			pr_err("pid %d: cannot tell the huge page size of mapping %lx-%lx: %s",
			       ctx->pid, v->start, v->end, strerror(errno ? errno : EINVAL));
			return errno ? -errno : -EINVAL;
		}
		v->kind = VMA_KIND__VMA_ANON_PRIVATE;
		v->hugetlb_kib = (unsigned)(sf.f_bsize >> 10);
	} else if (v->shared && !strncmp(p, "socket:[", 8) &&
		   (ret = packet_vma_file(ctx, v)) <= 0) {
		return ret; /* a packet ring: packet-ring.c makes it again */
	} else if (v->shared && !strcmp(p, "anon_inode:[io_uring]")) {
		v->kind = VMA_KIND__VMA_IO_URING; /* its rings: uring.c makes them again */
		return uring_vma_file(ctx, v);
	} else if (v->deleted && v->shared && !strcmp(p, "/[aio]")) {
		v->kind = VMA_KIND__VMA_AIO; /* an io_setup ring: aio.c makes it again */
	} else if (!strncmp(p, "/SYSV", 5)) {
		v->kind = VMA_KIND__VMA_SYSV_SHM; /* an attach: the segment is ipc/sysv.c's */
	} else {
		v->kind = v->shared ? VMA_KIND__VMA_FILE_SHARED : VMA_KIND__VMA_FILE_PRIVATE;
	}
	return 0;
}

static int vma_file(struct dump_ctx *ctx, struct vma *v)
{
	char procpath[96];
	int flags = O_RDONLY;

	if (v->kind == VMA_KIND__VMA_FILE_SHARED && (v->vmflags & VMF_MAYWRITE))
		flags = O_RDWR;
	if (v->ino && (v->file_id = files_known(ctx, v->dev, v->ino, v->path, flags)) >= 0)
		return 0;
	snprintf(procpath, sizeof(procpath), "/proc/%d/map_files/%lx-%lx", ctx->pid, v->start,
		 v->end);
	return files_dump_path(ctx, procpath, v->path, flags, 0, &v->file_id);
}

static int dump_auxv(struct dump_ctx *ctx, MmEntry *mm)
{
	char path[64], *buf;
	size_t len;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/auxv", ctx->pid);
	ret = sys_read_file(path, &buf, &len);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	mm->n_auxv = len / sizeof(uint64_t);
	if (mm->n_auxv > MAX_AUXV)
		mm->n_auxv = MAX_AUXV;
	mm->auxv = malloc((mm->n_auxv + 1) * sizeof(uint64_t));
	if (!mm->auxv) {
		free(buf);
		return -ENOMEM;
	}
	memcpy(mm->auxv, buf, mm->n_auxv * sizeof(uint64_t));
	free(buf);
	return 0;
}

static unsigned mlock_bits(unsigned vmflags)
{
	if (!(vmflags & VMF_LOCKED))
		return 0;
	return VMA_MLOCK_LOCKED | (vmflags & VMF_LOCKONFAULT ? VMA_MLOCK_ONFAULT : 0);
}

/*
 * MADV_GUARD_INSTALL pages are PTE markers, neither present nor swapped:
 * only PAGEMAP_SCAN's PAGE_IS_GUARD (6.14+) shows them.  A kernel without it
 * (EINVAL) has no guard pages to show, except 6.13: see README Limits.
 */
static bool scan_knows_guards; /* PAGEMAP_SCAN took PAGE_IS_GUARD */

/*
 * The regions one PAGEMAP_SCAN finds over many VMAs, handed out VMA by VMA
 * in address order: one ioctl for a run of like VMAs instead of one each
 * (10,000 mappings, or a thread stack and its guard per thread).
 */
#define USER_SPACE_END (1ULL << 56) /* above any user address, five-level paging too */

struct scan_cursor {
	int fd;
	struct pm_scan_arg arg;
	struct page_region regs[512];
	long n, i; /* regs[i..n) not handed out yet */
	bool done; /* no ioctl left to make */
	int err;   /* the ioctl's errno */
};

static void cursor_init(struct scan_cursor *c, int fd, uint64_t start, uint64_t end)
{
	c->fd = fd;
	c->arg = (struct pm_scan_arg){
		.size = sizeof(c->arg),
		.start = start,
		.end = end,
		.vec = (uintptr_t)c->regs,
		.vec_len = sizeof(c->regs) / sizeof(c->regs[0]),
	};
	c->n = c->i = 0;
	c->done = start >= end;
	c->err = 0;
}

/*
 * The next region within start..end (clipped to it: a region may span
 * adjacent VMAs): 0 with *r, 1 when none is left there, -errno.  Regions
 * before start (in a VMA not asked for) are passed over.
 */
static int cursor_next(struct scan_cursor *c, uint64_t start, uint64_t end, struct page_region *r)
{
	for (;;) {
		struct page_region *g;

		if (c->i == c->n) {
			long n;

			if (c->done)
				return 1;
			n = ioctl(c->fd, PAGEMAP_SCAN, &c->arg);
			if (n < 0) {
				c->err = errno;
				c->done = true;
				return -c->err;
			}
			c->n = n, c->i = 0;
			c->done = n == 0 || c->arg.walk_end >= c->arg.end;
			c->arg.start = c->arg.walk_end;
			continue;
		}
		g = &c->regs[c->i];
		if (g->start >= end)
			return 1;
		if (g->end <= start) {
			c->i++;
			continue;
		}
		*r = *g;
		r->start = g->start > start ? g->start : start;
		r->end = g->end < end ? g->end : end;
		if (g->end <= end)
			c->i++;
		else
			g->start = end; /* the rest is the next VMA's */
		return 0;
	}
}

static int dump_guards(pid_t pid, struct scan_cursor *c, VmaEntry *e, size_t *total, size_t max)
{
	struct page_region r;
	int ret;

	while (!(ret = cursor_next(c, e->start, e->end, &r))) {
		VmaGuard *g, **gs;

		if (e->n_guards && e->guards[e->n_guards - 1]->end == r.start) {
			e->guards[e->n_guards - 1]->end = r.end;
			continue;
		}
		/* what the image's record size limit allows (image.c) */
		if (++*total > max) {
			pr_err("pid %d: more than vm.max_map_count (%zu) ranges of guard "
			       "pages; amber cannot save them",
			       pid, max);
			return -E2BIG;
		}
		gs = realloc(e->guards, (e->n_guards + 1) * sizeof(*gs));
		if (!gs)
			return -ENOMEM;
		e->guards = gs;
		g = malloc(sizeof(*g));
		if (!g)
			return -ENOMEM;
		vma_guard__init(g);
		g->start = r.start;
		g->end = r.end;
		e->guards[e->n_guards++] = g;
	}
	if (ret == -EINVAL && !scan_knows_guards)
		return 0; /* a kernel before PAGE_IS_GUARD: there are none (nor in later VMAs) */
	if (ret < 0) {
		pr_err("pid %d: PAGEMAP_SCAN for guard pages in %llx-%llx failed: %s", pid,
		       (unsigned long long)c->arg.start, (unsigned long long)c->arg.end,
		       strerror(-ret));
		return ret;
	}
	if (!c->err)
		scan_knows_guards = true;
	return 0;
}

/*
 * mlockall(MCL_FUTURE) is in no /proc file: it locks every new mapping, so
 * amber's scratch area (mapped for this dump) shows it.  smaps is read again
 * only when VmLck says more is locked than the process's own VMAs.
 */
static int dump_mlock_future(struct dump_ctx *ctx, MmEntry *mm)
{
	unsigned long long vmlck = 0, own = 0;
	struct vma *vmas;
	size_t nr;
	char path[64], *buf, *p;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/status", ctx->pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	p = strstr(buf, "\nVmLck:");
	if (p)
		vmlck = strtoull(p + 7, NULL, 10) * 1024;
	free(buf);
	for (size_t i = 0; i < ctx->nr_vmas; i++)
		if (ctx->vmas[i].vmflags & VMF_LOCKED)
			own += ctx->vmas[i].end - ctx->vmas[i].start;
	if (vmlck <= own || !ctx->inf.scratch)
		return 0;
	ret = proc_parse_vmas(ctx->pid, &vmas, &nr);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr; i++)
		if (vmas[i].start <= ctx->inf.scratch && ctx->inf.scratch < vmas[i].end &&
		    mlock_bits(vmas[i].vmflags)) {
			mm->has_mlock_future = 1;
			mm->mlock_future = mlock_bits(vmas[i].vmflags);
		}
	proc_free_vmas(vmas, nr);
	return 0;
}

static size_t max_map_count = 65530; /* the system's, read once a dump */

static int mem_dump_tree(struct tree *t)
{
	char *buf;

	max_map_count = 65530;
	if (!sys_read_file("/proc/sys/vm/max_map_count", &buf, NULL)) {
		max_map_count = strtoul(buf, NULL, 10);
		free(buf);
	}
	return 0;
}

/* One VMA amber restores (kind < 0: one it leaves), with its flags, locks and guard pages. */
static int mem_dump_vma(struct dump_ctx *ctx, MmEntry *mm, struct vma *v, struct scan_cursor *gc,
			size_t *guards, size_t max, unsigned *vdso_parts)
{
	VmaEntry *e;
	int ret = classify(ctx, v);

	if (ret)
		return ret;
	if (v->kind < 0)
		return 0;
	if (v->kind == VMA_KIND__VMA_FILE_PRIVATE || v->kind == VMA_KIND__VMA_FILE_SHARED) {
		ret = vma_file(ctx, v);
		if (ret)
			return ret;
	}
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	vma_entry__init(e);
	e->start = v->start;
	e->end = v->end;
	e->prot = v->prot;
	e->kind = v->kind;
	e->pgoff = v->pgoff;
	e->growsdown = !!(v->vmflags & VMF_GROWSDOWN);
	if (v->hugetlb_kib)
		e->has_hugetlb_kib = 1, e->hugetlb_kib = v->hugetlb_kib;
	if (v->vmflags & VMF_NORESERVE)
		e->has_noreserve = e->noreserve = 1;
	for (size_t m = 0; m < sizeof(madv_map) / sizeof(madv_map[0]); m++)
		if (v->vmflags & madv_map[m].vmf)
			e->madv |= 1u << m;
	if (mlock_bits(v->vmflags)) {
		e->has_mlock = 1;
		e->mlock = mlock_bits(v->vmflags);
	}
	if (v->file_id >= 0) {
		e->has_file_id = 1;
		e->file_id = v->file_id;
	}
	if (v->kind == VMA_KIND__VMA_ANON_SHARED) {
		e->has_shmem_id = 1;
		e->shmem_id = v->ino;
	}
	if (v->kind == VMA_KIND__VMA_SYSV_SHM) { /* the inode is the segment's id */
		e->has_sysv_shmid = e->has_sysv_rdonly = 1;
		e->sysv_shmid = (int32_t)v->ino;
		e->sysv_rdonly = !(v->vmflags & VMF_MAYWRITE);
	}
	mm->vmas[mm->n_vmas++] = e;
	if (v->kind == VMA_KIND__VMA_AIO) {
		ret = aio_dump_ring(ctx, e);
		if (ret)
			return ret;
	}
	if (is_vdso_part(v->kind))
		*vdso_parts |= 1u << v->kind;
	else
		ret = dump_guards(ctx->pid, gc, e, guards, max);
	return ret;
}

/* Every VMA amber restores, with its flags, locks and guard pages. */
static int mem_dump_vmas(struct dump_ctx *ctx, MmEntry *mm, int pagemap_fd)
{
	size_t guards = 0, max = max_map_count;
	unsigned vdso_parts = 0;
	struct scan_cursor *gc = malloc(sizeof(*gc));
	int ret = gc ? 0 : -ENOMEM;

	/* every VMA's guard pages from one scan of the user address space ([vsyscall] is above) */
	if (gc) {
		uint64_t end = 0;

		for (size_t i = 0; i < ctx->nr_vmas; i++)
			if (ctx->vmas[i].end <= USER_SPACE_END && ctx->vmas[i].end > end)
				end = ctx->vmas[i].end;
		cursor_init(gc, pagemap_fd, ctx->nr_vmas ? ctx->vmas[0].start : 0, end);
		gc->arg.category_mask = gc->arg.return_mask = PAGE_IS_GUARD;
	}
	for (size_t i = 0; !ret && i < ctx->nr_vmas; i++)
		ret = mem_dump_vma(ctx, mm, &ctx->vmas[i], gc, &guards, max, &vdso_parts);
	free(gc);
	if (ret)
		return ret;

	/* restore brings back all of the vDSO block or none of it */
	if ((vdso_parts & (1u << VMA_KIND__VMA_VVAR | 1u << VMA_KIND__VMA_VVAR_VCLOCK)) &&
	    !(vdso_parts & 1u << VMA_KIND__VMA_VDSO)) {
		pr_err("pid %d unmapped its [vdso] but kept [vvar]; amber restores the vDSO "
		       "whole or not at all (unmap [vvar] and [vvar_vclock] too)",
		       ctx->pid);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int mem_dump(struct dump_ctx *ctx)
{
	MmEntry *mm = ctx->mm;
	struct proc_stat st;
	char exe[96];
	struct img *img;
	long r;
	int pagemap_fd, ret;

	if (ctx->shares_vm) /* the parent's images hold this address space */
		return 0;
	mm->vmas = calloc(ctx->nr_vmas + 1, sizeof(*mm->vmas));
	if (!mm->vmas)
		return -ENOMEM;
	snprintf(exe, sizeof(exe), "/proc/%d/pagemap", ctx->pid);
	pagemap_fd = sys_open(exe, O_RDONLY | O_CLOEXEC, 0);
	if (pagemap_fd < 0) {
		pr_err("cannot open %s: %s", exe, strerror(-pagemap_fd));
		return pagemap_fd;
	}
	ret = mem_dump_vmas(ctx, mm, pagemap_fd);
	close(pagemap_fd);
	if (ret)
		return ret;
	ret = dump_mlock_future(ctx, mm);
	if (ret)
		return ret;

	ret = dump_stat(ctx, &st);
	if (ret)
		return ret;
	mm->start_code = st.start_code, mm->end_code = st.end_code;
	mm->start_data = st.start_data, mm->end_data = st.end_data;
	mm->start_brk = st.start_brk, mm->start_stack = st.start_stack;
	mm->arg_start = st.arg_start, mm->arg_end = st.arg_end;
	mm->env_start = st.env_start, mm->env_end = st.env_end;
	/* the current brk is in no /proc file: brk(0) asks the task (proc_probe) */
	ret = proc_probe(ctx);
	if (ret)
		return ret;
	r = ctx->probe.ret[PP_BRK];
	mm->brk = r > 0 ? (uint64_t)r : st.start_brk;
	if (!mm->arg_start || !mm->env_end) {
		pr_err("/proc/%d/stat shows no arg/env bounds; amber needs a kernel with the "
		       "C/R stat fields (and ptrace read access)",
		       ctx->pid);
		return -EPERM;
	}
	ret = dump_auxv(ctx, mm);
	if (ret)
		return ret;
	snprintf(exe, sizeof(exe), "/proc/%d/exe", ctx->pid);
	{
		char path[4096];
		int id;

		if (sys_readlink(exe, path, sizeof(path)) > 0) {
			size_t len = strlen(path);

			if (len > 10 && !strcmp(path + len - 10, " (deleted)"))
				path[len - 10] = 0;
			ret = files_dump_path(ctx, exe, path, O_RDONLY, 0, &id);
			if (ret)
				return ret;
			mm->has_exe_file_id = 1;
			mm->exe_file_id = id;
		}
	}
	ret = img_create(ctx->imgs, IMG_MM, &img, "mm-%u.img", dump_vpid(ctx->tree, ctx->pid));
	if (ret)
		return ret;
	ret = img_put(img, &mm->base);
	if (ret) {
		img_abort(img);
		return ret;
	}
	return img_finish(img);
}

/* ---- pages ---- */

/*
 * Reading the pages and writing them overlap: a thread writes the buffers
 * the dump has filled while it fills the next ones.  The writing is the
 * bound (the file system's page allocation and copy; the machine's limit):
 * the reader hashes each buffer while it is still in its cache, so that the
 * writer does nothing else.  A process whose pages fit in one buffer (most of
 * a tree's) is written at once, without the thread: starting and joining it
 * cost more than its write.  The buffers serve every process of the dump.
 */
#define NR_BUFS 4
static char *out_pool[NR_BUFS];

struct pages_out {
	struct img *img;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t len[NR_BUFS];	  /* of out_pool's buffers */
	unsigned long head, tail; /* filled up to head, written up to tail */
	bool done, started;
	int err;
};

/* A filled buffer into the pages file; counted as written (the progress line's count). */
static int write_buf(struct img *img, const char *b, size_t len)
{
	int err = img_write_raw(img, b, len);

	if (!err)
		stats_add(SC_PAGES_WRITTEN, len / PAGE_SIZE);
	return err;
}

static void *pages_out_run(void *arg)
{
	struct pages_out *o = arg;

	pthread_mutex_lock(&o->lock);
	for (;;) {
		while (o->tail == o->head && !o->done)
			pthread_cond_wait(&o->cond, &o->lock);
		if (o->tail == o->head)
			break;
		pthread_mutex_unlock(&o->lock);
		if (!o->err) {
			int err = write_buf(o->img, out_pool[o->tail % NR_BUFS],
					    o->len[o->tail % NR_BUFS]);

			pthread_mutex_lock(&o->lock);
			o->err = err;
		} else {
			pthread_mutex_lock(&o->lock);
		}
		o->tail++;
		pthread_cond_broadcast(&o->cond);
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

static int pages_out_start(struct pages_out *o, struct img *img)
{
	o->img = img;
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	return 0;
}

/* A free buffer to fill (waits for the writer if all are queued); NULL: no memory. */
static char *pages_out_buf(struct pages_out *o)
{
	unsigned long i;

	pthread_mutex_lock(&o->lock);
	while (o->head - o->tail == NR_BUFS)
		pthread_cond_wait(&o->cond, &o->lock);
	i = o->head % NR_BUFS;
	pthread_mutex_unlock(&o->lock);
	/* page-aligned: process_vm_readv() into a misaligned buffer copies 3x slower */
	if (!out_pool[i])
		out_pool[i] = aligned_alloc(PAGE_SIZE, IO_CHUNK);
	return out_pool[i];
}

/* last: no buffer follows (written here if the thread never started). */
static int pages_out_submit(struct pages_out *o, size_t len, bool last)
{
	const char *b = out_pool[o->head % NR_BUFS];
	int err;

	img_account(o->img, b, len);
	if (!o->started && last) {
		err = write_buf(o->img, b, len);
		o->err = o->err ? o->err : err;
		o->head++, o->tail++;
		return o->err;
	}
	if (!o->started) {
		if (sys_thread_start(&o->thread, pages_out_run, o))
			return -EAGAIN;
		o->started = true;
	}
	pthread_mutex_lock(&o->lock);
	o->len[o->head % NR_BUFS] = len;
	o->head++;
	err = o->err;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
	return err;
}

/* Everything written (or the first error); the thread is gone after it. */
static int pages_out_finish(struct pages_out *o)
{
	if (o->started) {
		pthread_mutex_lock(&o->lock);
		o->done = true;
		pthread_cond_broadcast(&o->cond);
		pthread_mutex_unlock(&o->lock);
		pthread_join(o->thread, NULL);
		o->started = false;
	}
	return o->err;
}

struct page_writer {
	struct dump_ctx *ctx;
	struct img *pagemap, *pages;
	uint64_t offset; /* in pages-PID.img, after the header */
	struct pages_out out;
	int memfd; /* /proc/PID/mem: the pages are read through it */
	int pagemap_fd;
	bool direct; /* the VMA being scanned may be read with process_vm_readv() */
	uint64_t nr_pages, nr_inherited;
	struct cow_dump cow;
	/* queued runs, read into buf one by one and written together once it is full */
	struct iovec riov[IO_BATCH];
	bool rdirect[IO_BATCH];
	unsigned long nr_iov;
	size_t fill;
	uint64_t pme[PME_SPAN]; /* the queued runs' /proc/PID/pagemap entries */
	/* pieces for one process_vm_readv: buffer and process addresses */
	struct iovec vl[VM_IOV], vr[VM_IOV];
	size_t nv;
};

static int read_mem(struct page_writer *w, char *p, uint64_t addr, size_t len)
{
	ssize_t n = sys_pread_full(w->memfd, p, len, (off_t)addr);

	if (n != (ssize_t)len) {
		pr_err("pid %d: cannot read memory at %#llx (%zu bytes): %s", w->ctx->pid,
		       (unsigned long long)addr, len, n < 0 ? strerror((int)-n) : "short read");
		return n < 0 ? (int)n : -EIO;
	}
	return 0;
}

/* The pieces queued for process_vm_readv; what it could not read, through /proc/PID/mem. */
static int vm_flush(struct page_writer *w)
{
	ssize_t r = w->nv ? sys_vm_readv(w->ctx->pid, w->vl, w->nv, w->vr, w->nv) : 0;
	size_t done = r > 0 ? (size_t)r : 0;
	int ret = 0;

	/* what it read is a prefix of the pieces, in order */
	for (size_t i = 0; !ret && i < w->nv; i++) {
		size_t len = w->vl[i].iov_len, got = done < len ? done : len;

		done -= got;
		if (got < len)
			ret = read_mem(w, (char *)w->vl[i].iov_base + got,
				       (uintptr_t)w->vr[i].iov_base + got, len - got);
	}
	w->nv = 0;
	return ret;
}

static int vm_add(struct page_writer *w, char *p, uint64_t addr, size_t len)
{
	w->vl[w->nv] = (struct iovec){p, len};
	w->vr[w->nv++] = (struct iovec){(void *)addr, len};
	return w->nv == VM_IOV ? vm_flush(w) : 0;
}

/*
 * The /proc/PID/pagemap entries of the n pages at page pg, read with those
 * of the queued direct runs after run i that lie within PME_SPAN pages (one
 * read for many small runs); NULL if pagemap cannot be read there.
 */
static const uint64_t *run_pme(struct page_writer *w, unsigned long i, uint64_t pg, size_t n,
			       uint64_t *lo, size_t *nr)
{
	uint64_t end = pg + n;
	ssize_t r;

	if (*nr && pg >= *lo && pg + n <= *lo + *nr)
		return w->pme + (pg - *lo);
	for (unsigned long k = i + 1; k < w->nr_iov; k++) {
		uint64_t kend = ((uintptr_t)w->riov[k].iov_base + w->riov[k].iov_len) / PAGE_SIZE;

		if (kend - pg > PME_SPAN)
			break;
		if (w->rdirect[k] && kend > end)
			end = kend;
	}
	r = sys_pread_full(w->pagemap_fd, w->pme, (end - pg) * sizeof(w->pme[0]),
			   (off_t)(pg * sizeof(w->pme[0])));
	*lo = pg;
	*nr = r == (ssize_t)((end - pg) * sizeof(w->pme[0])) ? end - pg : 0;
	return *nr ? w->pme : NULL;
}

/*
 * process_vm_readv() copies once, where /proc/PID/mem copies twice (through
 * a page of its own) and looks each page up alone.  But its read-only pin
 * unshares a page the process shares copy-on-write (with a child, say): a
 * dump would cost the tree memory and lose the sharing.  So it reads only
 * the pages the process alone maps (PM_MMAP_EXCLUSIVE in /proc/PID/pagemap;
 * the tree is frozen, nothing maps them meanwhile), in mappings it can read;
 * the others, and what it could not read, go through /proc/PID/mem.  The
 * queued runs' pieces go in as few process_vm_readv calls as they fit in
 * (sparse memory has a run per page).
 */
static int read_runs(struct page_writer *w, char *p)
{
	uint64_t lo = 0;
	size_t nr = 0;
	int ret = 0;

	for (unsigned long i = 0; !ret && i < w->nr_iov; p += w->riov[i++].iov_len) {
		uint64_t addr = (uintptr_t)w->riov[i].iov_base;
		size_t len = w->riov[i].iov_len, n = len / PAGE_SIZE;
		const uint64_t *pme =
			w->rdirect[i] ? run_pme(w, i, addr / PAGE_SIZE, n, &lo, &nr) : NULL;

		if (!pme) {
			ret = read_mem(w, p, addr, len);
			continue;
		}
		for (size_t k = 0, j; !ret && k < n; k = j) {
			bool excl = pme[k] & PM_MMAP_EXCLUSIVE;
			size_t off = k * PAGE_SIZE;

			for (j = k + 1; j < n && !(pme[j] & PM_MMAP_EXCLUSIVE) == !excl;)
				j++;
			ret = excl ? vm_add(w, p + off, addr + off, (j - k) * PAGE_SIZE)
				   : read_mem(w, p + off, addr + off, (j - k) * PAGE_SIZE);
		}
	}
	return ret ? ret : vm_flush(w);
}

/* Reads the queued runs into a buffer and hands it to the writer (last: the process's last). */
static int flush_pages(struct page_writer *w, bool last)
{
	char *p;
	int ret;

	if (!w->fill)
		return 0;
	p = pages_out_buf(&w->out);
	if (!p)
		return -ENOMEM;
	ret = read_runs(w, p);
	if (ret) {
		w->nv = 0;
		return ret;
	}
	ret = pages_out_submit(&w->out, w->fill, last);
	if (ret)
		return ret;
	w->fill = 0;
	w->nr_iov = 0;
	return dump_check_interrupted();
}

/*
 * Queues start..end to be read; small runs share one write.  The pagemap entry is written now: its
 * offset only depends on the runs before it.
 */
static int copy_run(struct page_writer *w, uint64_t start, uint64_t end)
{
	PagemapEntry pe = PAGEMAP_ENTRY__INIT;
	int ret;

	pe.vaddr = start;
	pe.nr_pages = (end - start) / PAGE_SIZE;
	pe.offset = w->offset;
	ret = img_put(w->pagemap, &pe.base);
	if (ret)
		return ret;
	w->offset += end - start;
	w->nr_pages += pe.nr_pages;
	while (start < end) {
		size_t len = end - start < IO_CHUNK - w->fill ? end - start : IO_CHUNK - w->fill;

		w->rdirect[w->nr_iov] = w->direct;
		w->riov[w->nr_iov++] = (struct iovec){(void *)start, len};
		w->fill += len;
		start += len;
		if (w->fill == IO_CHUNK || w->nr_iov == IO_BATCH) {
			ret = flush_pages(w, false);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* Pages still the parent's (copy-on-write) are only noted; the others copied. */
static int inherit_run(struct page_writer *w, uint64_t start, uint64_t end)
{
	PagemapEntry pe = PAGEMAP_ENTRY__INIT;

	pe.vaddr = start;
	pe.nr_pages = (end - start) / PAGE_SIZE;
	pe.has_in_parent = pe.in_parent = 1;
	w->nr_inherited += pe.nr_pages;
	stats_add(SC_PAGES_SKIPPED_PARENT, pe.nr_pages);
	return img_put(w->pagemap, &pe.base);
}

static int emit_run(struct page_writer *w, uint64_t start, uint64_t end)
{
	while (start < end) {
		bool shared;
		uint64_t n = cow_dump_prefix(&w->cow, start, end, &shared);
		int ret = shared ? inherit_run(w, start, start + n) : copy_run(w, start, start + n);

		if (ret)
			return ret;
		start += n;
	}
	return 0;
}

/* The categories a page scan of VMA v asks for. */
static void scan_masks(struct pm_scan_arg *arg, const VmaEntry *v)
{
	arg->category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	arg->return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	/* never the shared zero page; for file mappings only pages no longer the file's */
	arg->category_inverted = PAGE_IS_PFNZERO;
	arg->category_mask = PAGE_IS_PFNZERO;
	/* guard markers count as swapped; they are saved as guards (dump_guards) */
	if (scan_knows_guards) {
		arg->category_inverted |= PAGE_IS_GUARD;
		arg->category_mask |= PAGE_IS_GUARD;
	}
	if (v->kind == VMA_KIND__VMA_FILE_PRIVATE) {
		arg->category_inverted |= PAGE_IS_FILE;
		arg->category_mask |= PAGE_IS_FILE;
	}
}

/* Whether VMA i's pages come from a page scan (one for a run of them: scan_span). */
static bool scanned(const MmEntry *mm, size_t i)
{
	int kind = mm->vmas[i]->kind;

	return has_pages(kind) && kind != VMA_KIND__VMA_ANON_SHARED;
}

/* VMAs from i on that one scan serves: scanned, with the same categories. */
static size_t scan_span(const MmEntry *mm, size_t i)
{
	bool file = mm->vmas[i]->kind == VMA_KIND__VMA_FILE_PRIVATE;
	size_t j = i + 1;

	while (j < mm->n_vmas && scanned(mm, j) &&
	       (mm->vmas[j]->kind == VMA_KIND__VMA_FILE_PRIVATE) == file)
		j++;
	return j;
}

static int scan_vma(struct page_writer *w, struct scan_cursor *c, const VmaEntry *v)
{
	uint64_t run_start = 0, run_end = 0;
	struct page_region r;
	int ret;

	cow_dump_vma(&w->cow, v);
	w->direct = v->prot & PROT_READ;
	/* regions differ by category (present/swapped): adjacent ones make one run */
	while (!(ret = cursor_next(c, v->start, v->end, &r))) {
		if (run_end == r.start) {
			run_end = r.end;
			continue;
		}
		if (run_end) {
			ret = emit_run(w, run_start, run_end);
			if (ret)
				return ret;
		}
		run_start = r.start;
		run_end = r.end;
	}
	if (ret < 0) {
		pr_err("pid %d: PAGEMAP_SCAN of %llx-%llx failed: %s%s", w->ctx->pid,
		       (unsigned long long)c->arg.start, (unsigned long long)c->arg.end,
		       strerror(-ret),
		       ret == -ENOTTY || ret == -EINVAL ? " (amber needs Linux 6.7+)" : "");
		return ret;
	}
	return run_end ? emit_run(w, run_start, run_end) : 0;
}

/*
 * MAP_SHARED|MAP_ANONYMOUS memory: the pages of the shmem object, not of the
 * process's page table, which lacks those only others touched (a process
 * that exited since, like a PostgreSQL backend reading into shared buffers).
 */
static int scan_shmem(struct page_writer *w, const VmaEntry *v)
{
	uint64_t off = v->pgoff, end = v->pgoff + (v->end - v->start);
	char path[96];
	int fd, ret = 0;

	cow_dump_vma(&w->cow, v); /* (not a private VMA: nothing from the parent) */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", w->ctx->pid,
		 (unsigned long long)v->start, (unsigned long long)v->end);
	fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("pid %d: cannot open %s to find its shared memory's pages: %s", w->ctx->pid,
		       path, strerror(-fd));
		return fd;
	}
	while (!ret && off < end) {
		off_t d = lseek(fd, (off_t)off, SEEK_DATA), h;

		if (d < 0 && errno == ENXIO)
			break;
		h = d < 0 ? -1 : lseek(fd, d, SEEK_HOLE);
		if (h < 0) {
			ret = -errno;
			pr_err("pid %d: cannot find the pages of %s: %m", w->ctx->pid, path);
			break;
		}
		d &= ~(off_t)(PAGE_SIZE - 1);
		h = (h + (off_t)PAGE_SIZE - 1) & ~(off_t)(PAGE_SIZE - 1);
		if ((uint64_t)d >= end)
			break;
		if ((uint64_t)h > end)
			h = (off_t)end;
		ret = emit_run(w, v->start + ((uint64_t)d - v->pgoff),
			       v->start + ((uint64_t)h - v->pgoff));
		off = (uint64_t)h;
	}
	close(fd);
	return ret;
}

static int mem_dump_pages(struct dump_ctx *ctx)
{
	static const char zero_pad[PAGES_DATA_OFF - IMG_HDR_SIZE];
	struct page_writer w = {.ctx = ctx, .cow = {.parent_pagemap_fd = -1}};
	struct scan_cursor *sc;
	char path[64];
	int pagemap_fd, ret;

	if (ctx->shares_vm)
		return 0;
	sc = malloc(sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", ctx->pid);
	pagemap_fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (pagemap_fd < 0) {
		pr_err("cannot open %s: %s", path, strerror(-pagemap_fd));
		free(sc);
		return pagemap_fd;
	}
	w.pagemap_fd = pagemap_fd;
	snprintf(path, sizeof(path), "/proc/%d/mem", ctx->pid);
	w.memfd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (w.memfd < 0) {
		ret = w.memfd;
		goto close_fds;
	}
	ret = img_create(ctx->imgs, IMG_PAGEMAP, &w.pagemap, "pagemap-%u.img",
			 dump_vpid(ctx->tree, ctx->pid));
	if (ret)
		goto close_fds;
	ret = img_create(ctx->imgs, IMG_PAGES, &w.pages, "pages-%u.img",
			 dump_vpid(ctx->tree, ctx->pid));
	if (ret)
		goto abort_pagemap;
	ret = img_write(w.pages, zero_pad, PAGES_DATA_OFF - IMG_HDR_SIZE);
	if (!ret)
		ret = pages_out_start(&w.out, w.pages);
	if (ret)
		goto abort_pages;
	cow_dump_open(ctx, &w.cow, pagemap_fd);
	stats_start(ST_MEMDUMP);
	for (size_t i = 0, span = 0; i < ctx->mm->n_vmas && !ret; i++) {
		VmaEntry *e = ctx->mm->vmas[i];

		if (scanned(ctx->mm, i) && i >= span) { /* a scan for the VMAs up to span */
			span = scan_span(ctx->mm, i);
			cursor_init(sc, pagemap_fd, e->start, ctx->mm->vmas[span - 1]->end);
			scan_masks(&sc->arg, e);
		}
		if (has_pages(e->kind)) {
			stats_add(SC_PAGES_SCANNED, (e->end - e->start) / PAGE_SIZE);
			w.direct = false;
			ret = e->kind == VMA_KIND__VMA_ANON_SHARED ? scan_shmem(&w, e)
								   : scan_vma(&w, sc, e);
		} else if (e->kind == VMA_KIND__VMA_VDSO) { /* for a kernel with another vDSO */
			w.direct = false;
			ret = copy_run(&w, e->start, e->end);
		}
	}
	if (!ret)
		ret = flush_pages(&w, true);
	stats_stop(ST_MEMDUMP);
	stats_start(ST_MEMWRITE);
	if (pages_out_finish(&w.out) && !ret)
		ret = w.out.err;
	if (ret)
		goto abort_pages;
	pr_info("pid %d: %llu pages saved, %llu shared with its parent", ctx->pid,
		(unsigned long long)w.nr_pages, (unsigned long long)w.nr_inherited);
	ret = img_finish(w.pages);
	stats_stop(ST_MEMWRITE);
	if (ret)
		goto abort_pagemap;
	ret = img_finish(w.pagemap);
	goto close_fds;
abort_pages:
	pages_out_finish(&w.out);
	img_abort(w.pages);
abort_pagemap:
	img_abort(w.pagemap);
close_fds:
	cow_dump_close(&w.cow);
	if (w.memfd >= 0)
		close(w.memfd);
	close(pagemap_fd);
	free(sc);
	return ret;
}

/* ---- restore ---- */

int mem_vma_fd(struct restore_ctx *ctx, const VmaEntry *e)
{
	for (size_t k = 0; k < ctx->nr_fds; k++)
		if (ctx->fds[k]->file_id == e->file_id)
			return (int)ctx->fds[k]->fd;
	return -1;
}

int mem_vma_placed(struct restore_ctx *ctx, const VmaEntry *e, long r, const char *what)
{
	long len = (long)(e->end - e->start);

	if (r != (long)e->start) {
		pr_err("pid %d: the kernel put the %s %llx-%llx (fd %d, offset %#llx) at %lx%s%s",
		       ctx->pid, what, (unsigned long long)e->start, (unsigned long long)e->end,
		       mem_vma_fd(ctx, e), (unsigned long long)e->pgoff, r < 0 ? 0 : r,
		       r < 0 ? ": " : "", r < 0 ? strerror((int)-r) : "");
		if (r > 0)
			infect_call(&ctx->inf, SYS_munmap, r, len, 0, 0, 0, 0);
		return r < 0 ? (int)r : -EADDRNOTAVAIL;
	}
	/* its hints, as plan_advice() gives every other mapping */
	for (size_t m = 0; m < sizeof(madv_map) / sizeof(madv_map[0]); m++) {
		if (!(e->madv & (1u << m)))
			continue;
		r = infect_call(&ctx->inf, SYS_madvise, (long)e->start, len, madv_map[m].advice, 0,
				0, 0);
		if (r) {
			pr_err("pid %d: cannot give the %s at %llx its advice %d again: %s",
			       ctx->pid, what, (unsigned long long)e->start, madv_map[m].advice,
			       strerror((int)-r));
			return r < 0 ? (int)r : -EIO;
		}
	}
	if (e->mlock) {
		r = infect_call(&ctx->inf, SYS_mlock2, (long)e->start, len,
				e->mlock & VMA_MLOCK_ONFAULT ? MLOCK_ONFAULT : 0, 0, 0, 0);
		if (r) {
			pr_err("pid %d: cannot lock the %s at %llx: %s", ctx->pid, what,
			       (unsigned long long)e->start, strerror((int)-r));
			return r < 0 ? (int)r : -EIO;
		}
	}
	return 0;
}

/*
 * Below vm.mmap_min_addr only CAP_SYS_RAWIO maps (a NULL-dereference
 * exploit's first step): amber maps as root, so only a root owner's image
 * may have a mapping there.
 */
static int check_low_vmas(struct restore_ctx *ctx)
{
	unsigned long min = 65536;
	char *buf;

	if (ctx->tree->owner.unbounded || !ctx->mm->n_vmas)
		return 0;
	if (!sys_read_file("/proc/sys/vm/mmap_min_addr", &buf, NULL)) {
		min = strtoul(buf, NULL, 10);
		free(buf);
	}
	if (ctx->mm->vmas[0]->start >= min)
		return 0;
	pr_err("mm-%d.img: a mapping at %#llx lies below vm.mmap_min_addr (%#lx), where only "
	       "CAP_SYS_RAWIO maps; uid %u's image may not have one; refusing",
	       ctx->pid, (unsigned long long)ctx->mm->vmas[0]->start, min, ctx->tree->owner.uid);
	return -EPERM;
}

static bool mlock_valid(unsigned m)
{
	return m == 0 || m == VMA_MLOCK_LOCKED || m == (VMA_MLOCK_LOCKED | VMA_MLOCK_ONFAULT);
}

/* Page aligned, in order, not touching each other, inside the VMA; none on the vDSO. */
static bool guards_valid(const VmaEntry *e)
{
	uint64_t prev_end = e->start;

	if (e->n_guards && (is_vdso_part(e->kind) || e->mlock))
		return false;
	for (size_t g = 0; g < e->n_guards; g++) {
		const VmaGuard *r = e->guards[g];

		if ((r->start | r->end) % PAGE_SIZE || r->start < prev_end ||
		    (g && r->start == prev_end) || r->end <= r->start || r->end > e->end)
			return false;
		prev_end = r->end;
	}
	return true;
}

/* huge pages: private anonymous ones of x86's sizes, on their boundaries */
static bool hugetlb_valid(const VmaEntry *e)
{
	uint64_t size = (uint64_t)e->hugetlb_kib << 10;

	if (!e->has_hugetlb_kib)
		return true;
	return (e->hugetlb_kib == 2048 || e->hugetlb_kib == 1048576) &&
	       e->kind == VMA_KIND__VMA_ANON_PRIVATE && !((e->start | e->end) & (size - 1)) &&
	       !e->n_guards && !e->growsdown;
}

int mem_check_mm(pid_t pid, const MmEntry *mm, size_t nr_files)
{
	uint64_t prev_end = 0;

	for (size_t i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *e = mm->vmas[i];

		if (e->start < prev_end || e->end <= e->start || (e->start | e->end) % PAGE_SIZE ||
		    e->end > TASK_SIZE_MAX || e->pgoff % PAGE_SIZE ||
		    e->pgoff > UINT64_MAX - (e->end - e->start) ||
		    (e->kind > VMA_KIND__VMA_VVAR_VCLOCK && e->kind != VMA_KIND__VMA_SYSV_SHM &&
		     e->kind != VMA_KIND__VMA_AIO && e->kind != VMA_KIND__VMA_IO_URING &&
		     e->kind != VMA_KIND__VMA_PACKET_RING) ||
		    (e->kind == VMA_KIND__VMA_SYSV_SHM && !e->has_sysv_shmid) ||
		    (e->kind == VMA_KIND__VMA_AIO && !aio_ring_valid(e)) ||
		    (e->has_file_id && e->file_id >= nr_files) ||
		    ((e->kind == VMA_KIND__VMA_FILE_PRIVATE ||
		      e->kind == VMA_KIND__VMA_FILE_SHARED || e->kind == VMA_KIND__VMA_IO_URING ||
		      e->kind == VMA_KIND__VMA_PACKET_RING) &&
		     !e->has_file_id) ||
		    (e->kind == VMA_KIND__VMA_ANON_SHARED && !e->has_shmem_id) ||
		    !mlock_valid(e->mlock) || !guards_valid(e) || !hugetlb_valid(e))
			goto corrupt;
		prev_end = e->end;
	}
	if (mm->n_auxv > MAX_AUXV || (mm->has_exe_file_id && mm->exe_file_id >= nr_files) ||
	    !mlock_valid(mm->mlock_future))
		goto corrupt;
	return 0;
corrupt:
	pr_err("mm-%d.img: bad mapping table; the image is corrupt", pid);
	return -EBADMSG;
}

int mem_check_pagemap(pid_t pid, const MmEntry *mm, PagemapEntry *const *pm, size_t nr_pm,
		      uint64_t psize)
{
	/* the pages start at PAGES_DATA_OFF, at page-aligned offsets from there */
	uint64_t data = psize > PAGES_DATA_OFF ? psize - PAGES_DATA_OFF : 0, prev_end = 0;
	size_t v = 0;

	for (size_t i = 0; i < nr_pm; i++) {
		const PagemapEntry *pe = pm[i];
		const VmaEntry *e;

		/* In address order, not overlapping, each inside one page-holding VMA. */
		while (v < mm->n_vmas && mm->vmas[v]->end <= pe->vaddr)
			v++;
		e = v < mm->n_vmas ? mm->vmas[v] : NULL;
		/* nr_pages is bounded by the VMA before it is multiplied: nothing wraps */
		if (!e || pe->vaddr < e->start || pe->vaddr < prev_end || pe->vaddr % PAGE_SIZE ||
		    !pe->nr_pages || pe->nr_pages > (e->end - pe->vaddr) / PAGE_SIZE ||
		    !(has_pages(e->kind) || e->kind == VMA_KIND__VMA_VDSO) ||
		    (!pe->in_parent && (pe->offset % PAGE_SIZE ||
					!in_bounds(pe->offset, pe->nr_pages * PAGE_SIZE, data)))) {
			pr_err("pagemap-%d.img: run at %llx does not fit the image; it is corrupt",
			       pid, (unsigned long long)pe->vaddr);
			return -EBADMSG;
		}
		prev_end = pe->vaddr + pe->nr_pages * PAGE_SIZE;
	}
	return 0;
}

static int mem_restore_read(struct restore_ctx *ctx)
{
	const struct img_file *pages;
	MmEntry *mm;
	int ret;

	if (ctx->shares_vm) /* restored with its parent's */
		return 0;
	ret = img_dir_raw(ctx->img, IMG_PAGES, &pages, "pages-%d.img", ctx->pid);
	if (ret)
		return ret;
	ret = img_read_one(ctx->img, IMG_MM, &mm_entry__descriptor, (ProtobufCMessage **)&mm,
			   "mm-%d.img", ctx->pid);
	if (ret)
		return ret;
	ctx->mm = mm;
	ret = mem_check_mm(ctx->pid, mm, ctx->nr_files);
	if (!ret)
		ret = uring_check_vmas(ctx);
	if (!ret)
		ret = check_low_vmas(ctx);
	if (ret)
		return ret;
	ret = img_read_all(ctx->img, IMG_PAGEMAP, &pagemap_entry__descriptor, &ctx->pm, &ctx->nr_pm,
			   "pagemap-%d.img", ctx->pid);
	if (ret)
		return ret;
	return mem_check_pagemap(ctx->pid, mm, ctx->pm, ctx->nr_pm, pages->size);
}

/*
 * MAP_SHARED|MAP_ANONYMOUS memory is one shmem object, whoever maps it: amber
 * makes one per object of the dump and every process maps it through the
 * same fd, so a store in one is seen by the others, as before.
 */
static struct {
	uint64_t id;
	uint64_t size;
	int fd;
} * shm;
static size_t nr_shm;

static int shm_index(uint64_t id)
{
	for (size_t i = 0; i < nr_shm; i++)
		if (shm[i].id == id)
			return (int)i;
	return -1;
}

static int make_shm(struct tree *t, size_t i)
{
	char path[64];
	void *p =
		mmap(NULL, shm[i].size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int fd;

	if (p == MAP_FAILED) {
		pr_err("cannot create shared memory of %llu bytes: %m",
		       (unsigned long long)shm[i].size);
		return -errno;
	}
	/* The mapping's own file ("/dev/zero (deleted)"), as an fd to hand on. */
	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)p,
		 (unsigned long)p + (unsigned long)shm[i].size);
	fd = sys_open_raw(path, O_RDWR | O_CLOEXEC);
	munmap(p, shm[i].size);
	if (fd < 0) {
		pr_err("cannot open %s: %m (amber needs CAP_SYS_ADMIN for it)", path);
		return -errno;
	}
	shm[i].fd = fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
	close(fd);
	return shm[i].fd < 0 ? -errno : 0;
}

static int collect_shm(struct tree *t)
{
	for (size_t p = 0; p < t->nr_procs; p++) {
		MmEntry *mm = t->rprocs[p]->mm;

		for (size_t v = 0; mm && v < mm->n_vmas; v++) {
			VmaEntry *e = mm->vmas[v];
			uint64_t end = e->pgoff + (e->end - e->start);
			int i;

			if (e->kind != VMA_KIND__VMA_ANON_SHARED)
				continue;
			i = shm_index(e->shmem_id);
			if (i < 0) {
				void *n = realloc(shm, (nr_shm + 1) * sizeof(*shm));

				if (!n)
					return -ENOMEM;
				shm = n;
				i = (int)nr_shm++;
				shm[i].id = e->shmem_id;
				shm[i].size = 0;
			}
			if (end > shm[i].size)
				shm[i].size = end;
		}
	}
	for (size_t i = 0; i < nr_shm; i++) {
		int ret = make_shm(t, i);

		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Before any process exists: the files behind mappings are the tree's open
 * descriptions (files.c opened them all); each process's pages file is the
 * image check's fd, which amber hands to that process alone (restore.c).
 */
static int mem_restore_tree(struct tree *t)
{
	int ret = collect_shm(t);

	if (ret)
		return ret;
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct restore_ctx *ctx = t->rprocs[p];
		const struct img_file *pages;

		if (ctx->shares_vm)
			continue;
		ret = img_dir_raw(t->img, IMG_PAGES, &pages, "pages-%d.img", ctx->pid);
		if (ret)
			return ret;
		ctx->map_fd = t->desc_fd;
		/* the checked file itself (its description: the child preads at
		 * offsets), amber's fd until the process has its own (restore.c) */
		ctx->pages_fd = pages->fd;
	}
	return cow_plan(t);
}

struct vdso_block {
	unsigned long start, end;
	unsigned long part_start[3], part_end[3]; /* by kind - VDSO */
	int nr;
};

static int block_index(int kind)
{
	return kind - VMA_KIND__VMA_VDSO;
}

static int vdso_block_add(struct vdso_block *b, int kind, unsigned long start, unsigned long end)
{
	int i = block_index(kind);

	if (b->part_end[i])
		return -EINVAL; /* two [vdso]s? */
	b->part_start[i] = start;
	b->part_end[i] = end;
	if (!b->nr || start < b->start)
		b->start = start;
	if (end > b->end)
		b->end = end;
	b->nr++;
	return 0;
}

/* Same parts with the same sizes at the same offsets: then a move is enough. */
static bool vdso_compatible(const struct vdso_block *a, const struct vdso_block *b)
{
	if (a->nr != b->nr || a->end - a->start != b->end - b->start)
		return false;
	for (int i = 0; i < 3; i++)
		if (a->part_end[i] - a->part_start[i] != b->part_end[i] - b->part_start[i] ||
		    (a->part_end[i] && a->part_start[i] - a->start != b->part_start[i] - b->start))
			return false;
	return true;
}

/*
 * The syscalls that clear a child's address space and move its vDSO: run one
 * by one, or, once the scratch area is in place before them, collected and
 * run as one batch (they were seven stops a process).
 */
struct clear_plan {
	struct infect_sc *sc;
	long *want; /* what each returns when it works */
	size_t n, cap;
};

/* Runs it now (no plan), or adds it to the plan and answers as if it worked. */
static long plan_call(struct restore_ctx *ctx, struct clear_plan *cp, long want, long nr, long a0,
		      long a1, long a2, long a3, long a4)
{
	if (!cp)
		return infect_call(&ctx->inf, nr, a0, a1, a2, a3, a4, 0);
	if (cp->n == cp->cap) {
		size_t cap = cp->cap ? 2 * cp->cap : 16;
		struct infect_sc *sc = realloc(cp->sc, cap * sizeof(*sc));
		long *want_ = sc ? realloc(cp->want, cap * sizeof(*want_)) : NULL;

		if (sc)
			cp->sc = sc;
		if (!want_)
			return -ENOMEM;
		cp->want = want_;
		cp->cap = cap;
	}
	cp->sc[cp->n] = (struct infect_sc){nr, {a0, a1, a2, a3, a4, 0}, 0};
	cp->want[cp->n++] = want;
	return want;
}

static int move_block(struct restore_ctx *ctx, struct vdso_block *cur, unsigned long to,
		      struct clear_plan *cp)
{
	long delta = (long)to - (long)cur->start;

	for (int i = 0; i < 3; i++) {
		unsigned long len = cur->part_end[i] - cur->part_start[i];
		long r;

		if (!cur->part_end[i])
			continue;
		r = plan_call(ctx, cp, (long)(cur->part_start[i] + delta), SYS_mremap,
			      cur->part_start[i], len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
			      cur->part_start[i] + delta);
		if (r != (long)(cur->part_start[i] + delta)) {
			pr_err("pid %d: cannot move the vDSO into place: %s", ctx->pid,
			       strerror(r < 0 ? (int)-r : EFAULT));
			return r < 0 ? (int)r : -EFAULT;
		}
		if (i == block_index(VMA_KIND__VMA_VDSO))
			ctx->inf.syscall_ip += delta;
		cur->part_start[i] += delta;
		cur->part_end[i] += delta;
	}
	cur->start += delta;
	cur->end += delta;
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

void range_sort(struct range *r, size_t n)
{
	qsort(r, n, sizeof(*r), cmp_range);
}

unsigned long largest_gap(struct range *r, size_t n, unsigned long *len)
{
	unsigned long best = 0, prev = 1UL << 32;

	*len = 0;
	range_sort(r, n);
	for (size_t i = 0; i <= n; i++) {
		unsigned long next = i < n ? r[i].start : USER_TOP;

		if (next > prev && next - prev > *len) {
			best = prev;
			*len = next - prev;
		}
		if (i < n && r[i].end > prev)
			prev = r[i].end;
	}
	return best;
}

/* The middle of the largest gap between the VMAs of mm and mem-cow.c's area. */
static unsigned long find_gap(MmEntry *mm, unsigned long size)
{
	struct range *r = malloc((mm->n_vmas + 1) * sizeof(*r));
	unsigned long best, len;
	size_t n = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < mm->n_vmas; i++)
		r[n++] = (struct range){mm->vmas[i]->start, mm->vmas[i]->end};
	cow_area(&r[n].start, &r[n].end);
	if (r[n].start != r[n].end)
		n++;
	best = largest_gap(r, n, &len);
	free(r);
	if (len < size + (64UL << 20))
		return 0;
	return (best + len / 2) & ~(PAGE_SIZE - 1);
}

unsigned long mem_scratch_gap(struct restore_ctx *ctx)
{
	return ctx->shares_vm ? 0 : find_gap(ctx->mm, SCRATCH_SIZE);
}

/*
 * The process maps the scratch area itself before it stops, which spares
 * amber an injected mmap, a round trip to the CPU where it clears ahead
 * (mem_clear_ahead); where amber's own mappings are, amber maps it later.
 */
unsigned long mem_scratch_premap(unsigned long gap)
{
	void *p;

	if (!gap)
		return 0;
	p = mmap((void *)gap, SCRATCH_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == (void *)gap)
		return gap;
	if (p != MAP_FAILED)
		munmap(p, SCRATCH_SIZE);
	return 0;
}

/* The scratch area at gap: the one the process mapped (mem_scratch_premap), or injected. */
static int scratch_at(struct restore_ctx *ctx, unsigned long gap)
{
	if (gap && ctx->scratch_premapped == gap) {
		infect_scratch_adopt(&ctx->inf, gap, SCRATCH_SIZE);
		return 0;
	}
	return infect_scratch_try(&ctx->inf, gap, SCRATCH_SIZE);
}

/*
 * Unmap everything below top but the vDSO block, this process's premapped
 * VMAs and the scratch area if it is there already (keep).
 */
static int clear_address_space(struct restore_ctx *ctx, const struct vdso_block *cur,
			       unsigned long top, const struct range *keep, struct clear_plan *cp)
{
	struct range *k = malloc((ctx->mm->n_vmas + 2) * sizeof(*k));
	unsigned long pos = 0;
	size_t n = 0;
	long r = 0;

	if (!k)
		return -ENOMEM;
	k[n++] = (struct range){cur->start, cur->end};
	if (keep)
		k[n++] = *keep;
	for (size_t i = 0; i < ctx->mm->n_vmas; i++)
		if (cow_slot(ctx, i))
			k[n++] = (struct range){cow_slot(ctx, i), cow_slot(ctx, i) +
									  ctx->mm->vmas[i]->end -
									  ctx->mm->vmas[i]->start};
	range_sort(k, n);
	for (size_t i = 0; !r && i <= n; i++) {
		unsigned long end = i < n ? k[i].start : top;

		if (end > pos)
			r = plan_call(ctx, cp, 0, SYS_munmap, pos, end - pos, 0, 0, 0);
		if (i < n && k[i].end > pos)
			pos = k[i].end;
	}
	free(k);
	if (r) {
		pr_err("pid %d: cannot clear the address space: %s", ctx->pid, strerror((int)-r));
		return (int)r;
	}
	return 0;
}

/*
 * The vDSO block and the top of the mappings (the stack's end) of a process
 * that is a fork of amber's: amber's own, read once.  Its heap and what its
 * restore hooks mapped lie below; the scan of each child's maps cost a tree
 * of 500 about 50 ms.
 */
static int fork_layout(struct vdso_block *cur, unsigned long *top)
{
	static struct vdso_block own;
	static unsigned long own_top;
	struct vma *vmas;
	size_t nr;
	int ret;

	if (own_top) {
		*cur = own, *top = own_top;
		return 0;
	}
	ret = proc_parse_maps(getpid(), &vmas, &nr);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr; i++) {
		const char *p = vmas[i].path;
		int kind = !p				 ? -1
			   : !strcmp(p, "[vdso]")	 ? VMA_KIND__VMA_VDSO
			   : !strcmp(p, "[vvar]")	 ? VMA_KIND__VMA_VVAR
			   : !strcmp(p, "[vvar_vclock]") ? VMA_KIND__VMA_VVAR_VCLOCK
							 : -1;

		if (kind >= 0)
			vdso_block_add(&own, kind, vmas[i].start, vmas[i].end);
		else if ((!p || strcmp(p, "[vsyscall]")) && vmas[i].end > own_top)
			own_top = vmas[i].end;
	}
	proc_free_vmas(vmas, nr);
	if (!own_top)
		return -ENOENT;
	*cur = own, *top = own_top;
	return 0;
}

/*
 * Leave the child nothing but its vDSO, moved to where the target had it:
 * the kernel's vDSO is the same code, so it is moved rather than copied.
 */
static int replace_address_space(struct restore_ctx *ctx, bool *proxy, struct range *drop,
				 const struct range *scratch, struct clear_plan *cp)
{
	struct vdso_block cur = {0}, want = {0};
	unsigned long top = 0;
	int ret;

	ret = fork_layout(&cur, &top);
	if (ret)
		return ret;
	for (size_t i = 0; i < ctx->mm->n_vmas; i++) {
		VmaEntry *e = ctx->mm->vmas[i];

		if (is_vdso_part(e->kind) && vdso_block_add(&want, e->kind, e->start, e->end))
			goto incompatible;
	}
	if (!cur.nr || cur.part_end[block_index(VMA_KIND__VMA_VDSO)] == 0) {
		pr_err("amber itself runs without a vDSO; it needs one to restore");
		return -ENOENT;
	}
	/* The process had unmapped its vDSO: ours goes once the scratch area is there. */
	if (!want.nr) {
		*drop = (struct range){cur.start, cur.end};
		return clear_address_space(ctx, &cur, top, scratch, cp);
	}
	/* AMBER_VDSO_PROXY=1 takes the other-kernel path on this one (tests). */
	*proxy = !vdso_compatible(&cur, &want) || getenv("AMBER_VDSO_PROXY");
	if (*proxy && !want.part_end[block_index(VMA_KIND__VMA_VDSO)])
		goto incompatible;

	ret = clear_address_space(ctx, &cur, top, scratch, cp);
	if (ret)
		return ret;
	if (*proxy) {
		/* Ours goes to a free spot; the old vDSO's code is mapped from the image
		 * and its entry points jump into ours (vdso_proxy_patch). */
		unsigned long to = find_gap(ctx->mm, 2 * SCRATCH_SIZE + (cur.end - cur.start));

		if (!to)
			return -ENOMEM;
		to += 2 * SCRATCH_SIZE;
		if (to < cur.end && cur.start < to + (cur.end - cur.start))
			return -ENOMEM;
		pr_info("pid %d: vDSO layout differs: proxying the old vDSO to ours at %lx",
			ctx->pid, to);
		ctx->vdso_new = to + (cur.part_start[block_index(VMA_KIND__VMA_VDSO)] - cur.start);
		return move_block(ctx, &cur, to, cp);
	}
	if (cur.start != want.start) {
		/* Overlapping source and destination: go through a free spot. */
		if (cur.start < want.end && want.start < cur.end) {
			/* (the gap's middle; past the scratch area if that is there) */
			unsigned long tmp =
				scratch ? scratch->end : find_gap(ctx->mm, cur.end - cur.start);

			if (!tmp)
				return -ENOMEM;
			ret = move_block(ctx, &cur, tmp, cp);
			if (ret)
				return ret;
		}
		ret = move_block(ctx, &cur, want.start, cp);
		if (ret)
			return ret;
	}
	return 0;
incompatible:
	pr_err("the image has no usable vDSO record (dumped on kernel %s); cannot restore it "
	       "on this kernel",
	       ctx->inv->kernel);
	return -EOPNOTSUPP;
}

/*
 * The function symbols a vDSO exports, from its ELF dynamic symbol table.
 * The old vDSO comes from the image, so every offset, size and count is
 * checked against len, and the headers are copied out (they need not be
 * aligned there).
 */
int vdso_parse(const uint8_t *b, size_t len, struct vsym *out, int max)
{
	Elf64_Ehdr eh;
	int n = 0;

	if (len < sizeof(eh))
		return -EINVAL;
	memcpy(&eh, b, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_bounds(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), len))
		return -EINVAL;
	for (unsigned i = 0; i < eh.e_shnum && n < max; i++) {
		Elf64_Shdr sh, str;

		memcpy(&sh, b + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= eh.e_shnum)
			continue;
		memcpy(&str, b + eh.e_shoff + sh.sh_link * sizeof(str), sizeof(str));
		if (!in_bounds(sh.sh_offset, sh.sh_size, len) ||
		    !in_bounds(str.sh_offset, str.sh_size, len))
			continue;
		for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym) && n < max; k++) {
			const char *name = (const char *)b + str.sh_offset;
			Elf64_Sym sym;

			memcpy(&sym, b + sh.sh_offset + k * sizeof(sym), sizeof(sym));
			if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_shndx ||
			    sym.st_name >= str.sh_size || sym.st_value >= len)
				continue;
			name += sym.st_name;
			/* its end, too, must be inside the string table */
			if (!memchr(name, 0, str.sh_size - sym.st_name))
				continue;
			out[n].name = name;
			out[n++].off = sym.st_value;
		}
	}
	return n;
}

/*
 * The old vDSO's code is back at its old address (from the image), but its
 * data page is this kernel's.  Every function it exports now jumps to the
 * same function of our vDSO:  movabs $target, %r11; jmp *%r11.
 */
static int vdso_proxy_patch(struct restore_ctx *ctx)
{
	const VmaEntry *old = NULL;
	const PagemapEntry *run = NULL;
	struct vsym osym[64], nsym[64];
	const uint8_t *ours = (const void *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *oeh = (const void *)ours;
	const struct img_file *pages;
	uint8_t *img;
	int no, nn, ret = 0, patched = 0;
	size_t len;

	for (size_t i = 0; i < ctx->mm->n_vmas; i++)
		if (ctx->mm->vmas[i]->kind == VMA_KIND__VMA_VDSO)
			old = ctx->mm->vmas[i];
	for (size_t i = 0; old && i < ctx->nr_pm; i++)
		if (ctx->pm[i]->vaddr == old->start &&
		    ctx->pm[i]->nr_pages * PAGE_SIZE == old->end - old->start)
			run = ctx->pm[i];
	if (!old || !run || !ours) {
		pr_err("pid %d: the image lacks the old vDSO's code; cannot proxy it", ctx->pid);
		return -EBADMSG;
	}
	len = old->end - old->start;
	img = malloc(len);
	if (!img)
		return -ENOMEM;
	ret = img_dir_raw(ctx->img, IMG_PAGES, &pages, "pages-%d.img", ctx->pid);
	if (ret)
		goto out;
	if (sys_pread_full(pages->fd, img, len, PAGES_DATA_OFF + run->offset) != (ssize_t)len) {
		pr_err("pid %d: cannot read the old vDSO's code from %s", ctx->pid, pages->name);
		ret = -EIO;
		goto out;
	}
	no = vdso_parse(img, len, osym, 64);
	nn = vdso_parse(ours, oeh->e_shoff + oeh->e_shnum * sizeof(Elf64_Shdr), nsym, 64);
	if (no <= 0 || nn <= 0) {
		pr_err("pid %d: cannot read the symbol tables of the vDSOs", ctx->pid);
		ret = -EINVAL;
		goto out;
	}
	for (int i = 0; i < no && !ret; i++) {
		for (int k = 0; k < nn; k++) {
			uint8_t code[13] = {0x49, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0x41, 0xff, 0xe3};
			uint64_t target = ctx->vdso_new + nsym[k].off;

			if (strcmp(osym[i].name, nsym[k].name))
				continue;
			if (osym[i].off > len - sizeof(code)) {
				pr_err("pid %d: the old vDSO's %s is %lu bytes from its end, too "
				       "close to redirect; the image is corrupt",
				       ctx->pid, osym[i].name, len - osym[i].off);
				ret = -EBADMSG;
				break;
			}
			memcpy(code + 2, &target, 8);
			ret = infect_write(&ctx->inf, old->start + osym[i].off, code, sizeof(code));
			patched++;
			break;
		}
	}
	pr_info("pid %d: %d vDSO entry points redirected", ctx->pid, patched);
out:
	free(img);
	return ret;
}

/* The syscalls that rebuild the address space, run as one batch (pie/batch.S). */
enum step_kind {
	STEP_MMAP,
	STEP_MREMAP,
	STEP_PREAD,
	STEP_PREADV,
	STEP_MPROTECT,
	STEP_MADVISE,
	STEP_GUARD,
	STEP_MLOCK,
	STEP_SHMAT,
};

#define IOV_GROUP 1024 /* IOV_MAX: runs per preadv */

struct plan {
	struct infect_sc *sc;
	struct step {
		enum step_kind kind;
		const VmaEntry *vma;
		const PagemapEntry *run;
		size_t first, nruns; /* STEP_PREADV: ctx->pm[first..first+nruns) */
	} * steps;
	size_t n, cap;
	/* iovecs of the preadv steps: built here, copied to iov_area in the task */
	struct iovec *iov;
	size_t nr_iov;
	unsigned long iov_area;
};

static int plan_add(struct plan *p, enum step_kind kind, const VmaEntry *vma,
		    const PagemapEntry *run, long nr, long a1, long a2, long a3, long a4, long a5,
		    long a6)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		void *sc = realloc(p->sc, cap * sizeof(*p->sc));
		void *st = sc ? realloc(p->steps, cap * sizeof(*p->steps)) : NULL;

		if (sc)
			p->sc = sc;
		if (!st)
			return -ENOMEM;
		p->steps = st;
		p->cap = cap;
	}
	p->sc[p->n] = (struct infect_sc){nr, {a1, a2, a3, a4, a5, a6}, 0};
	p->steps[p->n++] = (struct step){kind, vma, run, 0, 0};
	return 0;
}

/*
 * The runs below upto (one VMA's, or back to back VMAs' for plan_group())
 * lie back to back in the pages file: one preadv per IOV_GROUP of them
 * instead of a pread each (sparse memory has many runs).
 */
static int plan_runs(struct restore_ctx *ctx, struct plan *p, const VmaEntry *e, uint64_t upto,
		     size_t *pm)
{
	size_t end = *pm;
	int ret = 0;

	while (end < ctx->nr_pm && ctx->pm[end]->vaddr < upto)
		end++;
	while (!ret && *pm < end) {
		size_t n = end - *pm < IOV_GROUP ? end - *pm : IOV_GROUP;
		const PagemapEntry *pe = ctx->pm[*pm];

		if (n == 1 || !p->iov_area) {
			ret = plan_add(p, STEP_PREAD, e, pe, SYS_pread64, ctx->pages_fd, pe->vaddr,
				       pe->nr_pages * PAGE_SIZE, PAGES_DATA_OFF + pe->offset, 0, 0);
			(*pm)++;
			continue;
		}
		for (size_t k = 0; k < n; k++)
			p->iov[p->nr_iov + k] =
				(struct iovec){(void *)ctx->pm[*pm + k]->vaddr,
					       ctx->pm[*pm + k]->nr_pages * PAGE_SIZE};
		ret = plan_add(p, STEP_PREADV, e, pe, SYS_preadv, ctx->pages_fd,
			       (long)(p->iov_area + p->nr_iov * sizeof(struct iovec)), (long)n,
			       PAGES_DATA_OFF + pe->offset, 0, 0);
		if (!ret) {
			p->steps[p->n - 1].first = *pm;
			p->steps[p->n - 1].nruns = n;
		}
		p->nr_iov += n;
		*pm += n;
	}
	return ret;
}

/* Hints, then guard pages (after the pages: installing one drops its page), then locks. */
static int plan_advice(struct plan *p, const VmaEntry *e)
{
	int ret = 0;

	for (size_t m = 0; !ret && m < sizeof(madv_map) / sizeof(madv_map[0]); m++)
		if (e->madv & (1u << m))
			ret = plan_add(p, STEP_MADVISE, e, NULL, SYS_madvise, e->start,
				       (long)(e->end - e->start), madv_map[m].advice, 0, 0, 0);
	for (size_t g = 0; !ret && g < e->n_guards; g++) {
		ret = plan_add(p, STEP_GUARD, e, NULL, SYS_madvise, e->guards[g]->start,
			       (long)(e->guards[g]->end - e->guards[g]->start), MADV_GUARD_INSTALL,
			       0, 0, 0);
		if (!ret)
			p->steps[p->n - 1].first = g;
	}
	if (!ret && e->mlock)
		ret = plan_add(p, STEP_MLOCK, e, NULL, SYS_mlock2, e->start,
			       (long)(e->end - e->start),
			       e->mlock & VMA_MLOCK_ONFAULT ? MLOCK_ONFAULT : 0, 0, 0, 0);
	return ret;
}

/* Premapped and filled before fork (mem-cow.c): moved into place, pages and all. */
static int plan_moved(struct restore_ctx *ctx, struct plan *p, const VmaEntry *e,
		      unsigned long slot, size_t *pm)
{
	long len = (long)(e->end - e->start);
	int ret;

	while (*pm < ctx->nr_pm && ctx->pm[*pm]->vaddr < e->end)
		(*pm)++;
	ret = plan_add(p, STEP_MREMAP, e, NULL, SYS_mremap, (long)slot, len, len,
		       MREMAP_MAYMOVE | MREMAP_FIXED, e->start, 0);
	if (!ret && e->prot != (PROT_READ | PROT_WRITE))
		ret = plan_add(p, STEP_MPROTECT, e, NULL, SYS_mprotect, e->start, len, e->prot, 0,
			       0, 0);
	return ret ? ret : plan_advice(p, e);
}

/*
 * A System V attach: shmat of the whole segment at its first VMA (the
 * segment exists again with its id, ipc/sysv.c), then each VMA's protection.
 */
static int plan_shmat(struct plan *p, const VmaEntry *e)
{
	long prot = PROT_READ | (e->sysv_rdonly ? 0 : PROT_WRITE);
	int ret = 0;

	if (!e->pgoff)
		ret = plan_add(p, STEP_SHMAT, e, NULL, SYS_shmat, e->sysv_shmid, e->start,
			       e->sysv_rdonly ? SHM_RDONLY : 0, 0, 0, 0);
	if (!ret && prot != (long)e->prot)
		ret = plan_add(p, STEP_MPROTECT, e, NULL, SYS_mprotect, e->start,
			       (long)(e->end - e->start), e->prot, 0, 0, 0);
	return ret ? ret : plan_advice(p, e);
}

/* no_runs: the pages come later, by userfaultfd (mem-uffd.c) */
static int plan_vma(struct restore_ctx *ctx, struct plan *p, size_t i, size_t *pm, bool no_runs)
{
	const VmaEntry *e = ctx->mm->vmas[i];
	bool anon = e->kind == VMA_KIND__VMA_ANON_PRIVATE || e->kind == VMA_KIND__VMA_VDSO;
	bool shared = e->kind == VMA_KIND__VMA_ANON_SHARED || e->kind == VMA_KIND__VMA_FILE_SHARED;
	bool filled = *pm < ctx->nr_pm && ctx->pm[*pm]->vaddr < e->end;
	long prot = e->prot | (filled ? PROT_WRITE : 0);
	long flags = MAP_FIXED | (shared ? MAP_SHARED : MAP_PRIVATE) | (anon ? MAP_ANONYMOUS : 0) |
		     (e->growsdown ? MAP_GROWSDOWN : 0) | (e->noreserve ? MAP_NORESERVE : 0);

	/* the page size's log2 in the flags (2 MiB: 21, 1 GiB: 30) */
	if (e->has_hugetlb_kib)
		flags |= MAP_HUGETLB | (long)(__builtin_ctz(e->hugetlb_kib) + 10) << MAP_HUGE_SHIFT;
	long fd = anon					 ? -1
		  : e->kind == VMA_KIND__VMA_ANON_SHARED ? shm[shm_index(e->shmem_id)].fd
							 : ctx->map_fd[e->file_id];
	long len = (long)(e->end - e->start);
	int ret;

	ret = plan_add(p, STEP_MMAP, e, NULL, SYS_mmap, e->start, len, prot, flags, fd,
		       anon ? 0 : e->pgoff);
	/* the pages straight from the image into place */
	while (no_runs && *pm < ctx->nr_pm && ctx->pm[*pm]->vaddr < e->end)
		(*pm)++;
	if (!ret)
		ret = plan_runs(ctx, p, e, e->end, pm);
	if (!ret && prot != (long)e->prot)
		ret = plan_add(p, STEP_MPROTECT, e, NULL, SYS_mprotect, e->start, len, e->prot, 0,
			       0, 0);
	return ret ? ret : plan_advice(p, e);
}

/* sel: per VMA, filled through userfaultfd (map_plan) */
static bool plain_anon(const struct restore_ctx *ctx, const bool *sel, size_t i)
{
	const VmaEntry *e = ctx->mm->vmas[i];

	return e->kind == VMA_KIND__VMA_ANON_PRIVATE && !e->growsdown && !e->has_hugetlb_kib &&
	       !sel[i] && !cow_slot(ctx, i);
}

/* How many VMAs from i on plan_group() takes (1: plan_vma() alone). */
static size_t group_span(const struct restore_ctx *ctx, const bool *sel, size_t i)
{
	size_t j = i + 1;

	if (!plain_anon(ctx, sel, i))
		return 1;
	while (j < ctx->mm->n_vmas && plain_anon(ctx, sel, j) &&
	       ctx->mm->vmas[j]->start == ctx->mm->vmas[j - 1]->end &&
	       ctx->mm->vmas[j]->noreserve == ctx->mm->vmas[i]->noreserve)
		j++;
	return j - i;
}

/*
 * Anonymous private VMAs back to back (a heap or an arena split by
 * mprotect(), a JVM's or an allocator's guard pages, 10,000 mappings of a
 * page): one mmap() of them all without access, each one's protection on its
 * part, their runs read together (one preadv() for up to IOV_GROUP of them,
 * not a pread() each), then the protections that had to let the pages in
 * taken back.  The kernel splits the mapping where protections differ, as
 * the VMAs were.  Read-only, executable or inaccessible parts are not
 * charged to the commit limit, as when each was mapped alone.
 */
static int plan_group(struct restore_ctx *ctx, struct plan *p, size_t i, size_t n, size_t *pm)
{
	VmaEntry *const *v = ctx->mm->vmas + i;
	bool *filled = calloc(n, sizeof(*filled));
	size_t k, r = *pm;
	int ret;

	if (!filled)
		return -ENOMEM;
	for (k = 0; k < n; k++) {
		while (r < ctx->nr_pm && ctx->pm[r]->vaddr < v[k]->start)
			r++;
		filled[k] = r < ctx->nr_pm && ctx->pm[r]->vaddr < v[k]->end;
	}
	ret = plan_add(p, STEP_MMAP, v[0], NULL, SYS_mmap, v[0]->start,
		       (long)(v[n - 1]->end - v[0]->start), PROT_NONE,
		       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS |
			       (v[0]->noreserve ? MAP_NORESERVE : 0),
		       -1, 0);
	for (k = 0; !ret && k < n; k++)
		if (v[k]->prot || filled[k])
			ret = plan_add(p, STEP_MPROTECT, v[k], NULL, SYS_mprotect, v[k]->start,
				       (long)(v[k]->end - v[k]->start),
				       v[k]->prot | (filled[k] ? PROT_WRITE : 0), 0, 0, 0);
	if (!ret)
		ret = plan_runs(ctx, p, v[0], v[n - 1]->end, pm);
	for (k = 0; !ret && k < n; k++)
		if (filled[k] && !(v[k]->prot & PROT_WRITE))
			ret = plan_add(p, STEP_MPROTECT, v[k], NULL, SYS_mprotect, v[k]->start,
				       (long)(v[k]->end - v[k]->start), v[k]->prot, 0, 0, 0);
	for (k = 0; !ret && k < n; k++)
		ret = plan_advice(p, v[k]);
	free(filled);
	return ret;
}

/* A pread may be short; finish it one syscall at a time. */
static int finish_pread(struct restore_ctx *ctx, const PagemapEntry *pe, uint64_t done)
{
	uint64_t len = pe->nr_pages * PAGE_SIZE;

	while (done < len) {
		long r = infect_call(&ctx->inf, SYS_pread64, ctx->pages_fd, pe->vaddr + done,
				     len - done, PAGES_DATA_OFF + pe->offset + done, 0, 0);

		if (r <= 0) {
			pr_err("pid %d: cannot load pages at %llx: %s", ctx->pid,
			       (unsigned long long)(pe->vaddr + done),
			       r ? strerror((int)-r) : "image ends early");
			return r ? (int)r : -EIO;
		}
		done += r;
	}
	return 0;
}

/* The pages a finished step loaded, for stats.c (and the progress line). */
static void count_step(struct restore_ctx *ctx, const struct step *st)
{
	if (st->kind == STEP_PREAD)
		stats_add(SC_PAGES_RESTORED, st->run->nr_pages);
	else if (st->kind == STEP_PREADV)
		for (size_t k = 0; k < st->nruns; k++)
			stats_add(SC_PAGES_RESTORED, ctx->pm[st->first + k]->nr_pages);
}

static int check_step(struct restore_ctx *ctx, const struct step *st, long r)
{
	const VmaEntry *e = st->vma;
	const char *path = e->has_file_id ? ctx->files[e->file_id]->path : "";
	int err = r < 0 && r > -4096 ? (int)-r : 0;

	switch (st->kind) {
	case STEP_MREMAP:
		if (r == (long)e->start)
			return 0;
		pr_err("pid %d: cannot move its premapped memory to %llx-%llx: %s", ctx->pid,
		       (unsigned long long)e->start, (unsigned long long)e->end,
		       strerror(err ? err : EFAULT));
		return err ? -err : -EFAULT;
	case STEP_SHMAT:
		if (r == (long)e->start)
			return 0;
		pr_err("pid %d: cannot attach System V segment %d at %llx: %s", ctx->pid,
		       e->sysv_shmid, (unsigned long long)e->start, strerror(err ? err : EFAULT));
		return err ? -err : -EFAULT;
	case STEP_MMAP:
		if (r == (long)e->start)
			return 0;
		pr_err("pid %d: cannot map %llx-%llx%s%s: %s%s", ctx->pid,
		       (unsigned long long)e->start, (unsigned long long)e->end,
		       *path ? " of " : "", path, strerror(err ? err : EFAULT),
		       e->has_hugetlb_kib && err == ENOMEM
			       ? " (huge pages: are there enough free? vm.nr_hugepages, "
				 "/sys/kernel/mm/hugepages)"
			       : "");
		return err ? -err : -EFAULT;
	case STEP_PREADV:
		if (r <= 0) {
			pr_err("pid %d: cannot load pages at %llx: %s", ctx->pid,
			       (unsigned long long)st->run->vaddr,
			       r ? strerror(err) : "image ends early");
			return r ? (int)r : -EIO;
		}
		/* short: finish run by run */
		for (size_t k = 0; k < st->nruns; k++) {
			const PagemapEntry *pe = ctx->pm[st->first + k];
			uint64_t len = pe->nr_pages * PAGE_SIZE;
			int ret;

			if ((uint64_t)r >= len) {
				r -= (long)len;
				continue;
			}
			ret = finish_pread(ctx, pe, (uint64_t)r);
			if (ret)
				return ret;
			r = 0;
			for (size_t m = k + 1; m < st->nruns; m++) {
				ret = finish_pread(ctx, ctx->pm[st->first + m], 0);
				if (ret)
					return ret;
			}
			return 0;
		}
		return 0;
	case STEP_PREAD:
		if (r > 0)
			return finish_pread(ctx, st->run, (uint64_t)r);
		pr_err("pid %d: cannot load pages at %llx: %s", ctx->pid,
		       (unsigned long long)st->run->vaddr, r ? strerror(err) : "image ends early");
		return r ? (int)r : -EIO;
	case STEP_MPROTECT:
		if (!r)
			return 0;
		pr_err("pid %d: cannot protect %llx-%llx: %s", ctx->pid,
		       (unsigned long long)e->start, (unsigned long long)e->end, strerror(err));
		return (int)r;
	case STEP_MADVISE:
		if (r)
			pr_warn("pid %d: madvise on %llx failed: %s", ctx->pid,
				(unsigned long long)e->start, strerror(err));
		return 0;
	case STEP_GUARD:
		if (!r)
			return 0;
		pr_err("pid %d: cannot install its guard pages %llx-%llx (MADV_GUARD_INSTALL, "
		       "Linux 6.13+): %s",
		       ctx->pid, (unsigned long long)e->guards[st->first]->start,
		       (unsigned long long)e->guards[st->first]->end, strerror(err));
		return (int)r;
	case STEP_MLOCK:
		if (!r)
			return 0;
		pr_err("pid %d: cannot lock %llx-%llx%s%s in memory (mlock2): %s", ctx->pid,
		       (unsigned long long)e->start, (unsigned long long)e->end,
		       *path ? " of " : "", path, strerror(err));
		return (int)r;
	}
	return -EINVAL;
}

/* The scratch area's first half: PR_SET_MM_MAP's struct, its auxv, then the iovecs. */
static unsigned long scratch_iov_off(const struct restore_ctx *ctx)
{
	return PAGE_SIZE +
	       ((ctx->mm->n_auxv * sizeof(uint64_t) + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1));
}

/*
 * Where the preadv steps' iovecs go in the task: the scratch area where they
 * fit, else an area of their own (*mapped) next to it (the scratch area is in
 * the middle of a large gap, so nothing of the image is mapped there),
 * injected now; ahead: -EAGAIN
 * then, for a mapping batch that is to run without amber (map_plan()).
 */
static int map_iov_area(struct restore_ctx *ctx, struct plan *p, size_t *size, bool *mapped,
			bool ahead)
{
	unsigned long off = scratch_iov_off(ctx);
	long r;

	*mapped = false;
	*size = (ctx->nr_pm * sizeof(struct iovec) + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
	if (ctx->nr_pm < 2 * 64) /* few runs: pread each */
		return 0;
	if (off + *size > ctx->inf.scratch_size / 2 && ahead)
		return -EAGAIN;
	p->iov = malloc(*size);
	if (!p->iov)
		return -ENOMEM;
	if (off + *size <= ctx->inf.scratch_size / 2) {
		p->iov_area = ctx->inf.scratch + off;
		return 0;
	}
	*mapped = true;
	r = infect_call(&ctx->inf, SYS_mmap, ctx->inf.scratch + ctx->inf.scratch_size, *size,
			PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			-1, 0);
	if (r == (long)(ctx->inf.scratch + ctx->inf.scratch_size))
		p->iov_area = (unsigned long)r;
	else if (r >= 0)
		infect_call(&ctx->inf, SYS_munmap, r, *size, 0, 0, 0, 0);
	if (!p->iov_area)
		*mapped = false;
	return 0;
}

#define UFFD_MIN_VMA (1UL << 20)  /* pages of one VMA below this: pread */
#define UFFD_MIN     (32UL << 20) /* pages of the process below this: no userfaultfd */

/*
 * The private anonymous VMAs whose pages UFFDIO_COPY fills (mem-uffd.c);
 * returns their bytes.  AMBER_UFFD=0 turns it off, =1 takes every such VMA.
 */
static uint64_t select_uffd(struct restore_ctx *ctx, bool *sel)
{
	const char *env = getenv("AMBER_UFFD");
	bool all = env && !strcmp(env, "1");
	uint64_t total = 0;
	size_t pm = 0;

	if (env && !strcmp(env, "0"))
		return 0;
	for (size_t i = 0; i < ctx->mm->n_vmas; i++) {
		VmaEntry *e = ctx->mm->vmas[i];
		uint64_t bytes = 0;

		while (pm < ctx->nr_pm && ctx->pm[pm]->vaddr < e->start)
			pm++;
		for (size_t k = pm; k < ctx->nr_pm && ctx->pm[k]->vaddr < e->end; k++)
			bytes += ctx->pm[k]->nr_pages * PAGE_SIZE;
		/*
		 * writable ones only: registering a read-only VMA loses its VM_ACCOUNT;
		 * not locked ones: mlock2 in the batch would fault on the userfaultfd
		 */
		if (e->kind != VMA_KIND__VMA_ANON_PRIVATE || !(e->prot & PROT_WRITE) || e->mlock ||
		    e->has_hugetlb_kib || e->n_guards || cow_slot(ctx, i) || !bytes ||
		    (!all && bytes < UFFD_MIN_VMA))
			continue;
		sel[i] = true;
		total += bytes;
	}
	return all || total >= UFFD_MIN ? total : 0;
}

/* The syscalls that map a process's memory and load its pages, and what they need. */
struct mapping {
	struct plan p;
	bool *sel; /* per VMA: filled through userfaultfd */
	int uffd;
	size_t iov_size;
	bool iov_mapped; /* the iovecs have an area of their own (map_iov_area) */
};

/*
 * Plans the mapping and puts its iovecs in place.  ahead: for a batch that
 * runs without amber, before the process's turn (mem_clear_ahead): -EAGAIN
 * where it needs amber in between (userfaultfd, an iovec area to map).
 */
static int map_plan(struct restore_ctx *ctx, bool proxy, struct mapping *m, bool ahead)
{
	struct plan *p = &m->p;
	size_t pm = 0;
	int ret;

	*m = (struct mapping){.uffd = -1};
	m->sel = calloc(ctx->mm->n_vmas + 1, sizeof(*m->sel));
	if (!m->sel)
		return -ENOMEM;
	if (select_uffd(ctx, m->sel)) {
		if (ahead)
			return -EAGAIN;
		m->uffd = uffd_open(ctx);
	}
	if (m->uffd < 0)
		memset(m->sel, 0, (ctx->mm->n_vmas + 1) * sizeof(*m->sel));
	ret = map_iov_area(ctx, p, &m->iov_size, &m->iov_mapped, ahead);

	for (size_t i = 0; !ret && i < ctx->mm->n_vmas; i++) {
		VmaEntry *e = ctx->mm->vmas[i];

		/* runs of VMAs not mapped here (the vDSO when moved) are skipped */
		while (pm < ctx->nr_pm && ctx->pm[pm]->vaddr < e->start)
			pm++;
		if ((is_vdso_part(e->kind) && !(proxy && e->kind == VMA_KIND__VMA_VDSO)) ||
		    e->kind == VMA_KIND__VMA_AIO || /* aio.c makes the ring once all is mapped */
		    e->kind == VMA_KIND__VMA_IO_URING ||  /* uring.c maps the rings then */
		    e->kind == VMA_KIND__VMA_PACKET_RING) /* and packet-ring.c its own */
			continue;
		if (e->kind == VMA_KIND__VMA_SYSV_SHM) {
			ret = plan_shmat(p, e);
		} else if (cow_slot(ctx, i)) {
			ret = plan_moved(ctx, p, e, cow_slot(ctx, i), &pm);
		} else {
			size_t n = group_span(ctx, m->sel, i);

			ret = n > 1 ? plan_group(ctx, p, i, n, &pm)
				    : plan_vma(ctx, p, i, &pm, m->sel[i]);
			i += n - 1;
		}
	}
	if (!ret && p->nr_iov)
		ret = infect_write(&ctx->inf, p->iov_area, p->iov, p->nr_iov * sizeof(*p->iov));
	return ret;
}

static void map_free(struct restore_ctx *ctx, struct mapping *m);

/* After the planned syscalls ran (ret: whether they could): their results, and what follows. */
static int map_check(struct restore_ctx *ctx, struct mapping *m, int ret)
{
	struct plan *p = &m->p;

	if (ret)
		pr_err("pid %d: cannot run the syscalls that map its memory: %s", ctx->pid,
		       strerror(-ret));
	/* in order: the first failure is the one that explains the others */
	for (size_t i = 0; !ret && i < p->n; i++) {
		ret = check_step(ctx, &p->steps[i], p->sc[i].ret);
		if (!ret)
			count_step(ctx, &p->steps[i]);
	}
	if (!ret && m->uffd >= 0)
		ret = uffd_fill(ctx, m->uffd, m->sel);
	map_free(ctx, m);
	return ret;
}

static void map_free(struct restore_ctx *ctx, struct mapping *m)
{
	struct plan *p = &m->p;

	if (m->uffd >= 0)
		close(m->uffd);
	free(m->sel);
	if (m->iov_mapped)
		infect_call(&ctx->inf, SYS_munmap, p->iov_area, m->iov_size, 0, 0, 0, 0);
	free(p->iov);
	free(p->sc);
	free(p->steps);
	*m = (struct mapping){.uffd = -1};
}

/* Every VMA with its pages, protection and advice: one batch, checked in order. */
static int map_vmas(struct restore_ctx *ctx, bool proxy)
{
	struct mapping m;
	int ret = map_plan(ctx, proxy, &m, false);

	if (!ret)
		ret = infect_batch(&ctx->inf, m.p.sc, m.p.n);
	return map_check(ctx, &m, ret);
}

/*
 * code/data/brk/stack bounds, arg/env (what ps shows), auxv, exe link:
 * PR_SET_MM_MAP's struct and auxv into the scratch area, and its call (*sc).
 */
static int mm_fields_plan(struct restore_ctx *ctx, struct infect_sc *sc)
{
	MmEntry *mm = ctx->mm;
	struct prctl_mm_map map = {
		.start_code = mm->start_code,
		.end_code = mm->end_code,
		.start_data = mm->start_data,
		.end_data = mm->end_data,
		.start_brk = mm->start_brk,
		.brk = mm->brk,
		.start_stack = mm->start_stack,
		.arg_start = mm->arg_start,
		.arg_end = mm->arg_end,
		.env_start = mm->env_start,
		.env_end = mm->env_end,
		.auxv = (__u64 *)(ctx->inf.scratch + 4096),
		.auxv_size = (__u32)(mm->n_auxv * sizeof(uint64_t)),
		.exe_fd = mm->has_exe_file_id ? (__u32)ctx->map_fd[mm->exe_file_id] : (__u32)-1,
	};
	int ret;

	ret = infect_write(&ctx->inf, ctx->inf.scratch, &map, sizeof(map));
	if (!ret && mm->n_auxv)
		ret = infect_write(&ctx->inf, ctx->inf.scratch + 4096, mm->auxv, map.auxv_size);
	*sc = (struct infect_sc){SYS_prctl,
				 {PR_SET_MM, PR_SET_MM_MAP, (long)ctx->inf.scratch, sizeof(map)}};
	return ret;
}

static int mm_fields_check(struct restore_ctx *ctx, long r)
{
	if (r) {
		pr_err("pid %d: PR_SET_MM_MAP (code/data/brk/arg/env bounds, auxv, exe) failed: "
		       "%s%s",
		       ctx->pid, strerror((int)-r),
		       r == -EINVAL ? " (kernel without CONFIG_CHECKPOINT_RESTORE?)" : "");
		return (int)r;
	}
	return 0;
}

static int restore_mm_fields(struct restore_ctx *ctx)
{
	struct infect_sc sc;
	int ret = mm_fields_plan(ctx, &sc);

	return ret
		       ?: mm_fields_check(ctx, infect_call(&ctx->inf, sc.nr, sc.a[0], sc.a[1],
							   sc.a[2], sc.a[3], 0, 0));
}

/*
 * Locking runs before the credentials are restored (as root, whom
 * RLIMIT_MEMLOCK does not bound): an image that is not root's may lock only
 * what its own RLIMIT_MEMLOCK, restored already, lets it.
 */
static int check_memlock(struct restore_ctx *ctx)
{
	uint64_t locked = 0;
	struct rlimit rl;

	if (ctx->tree->owner.unbounded)
		return 0;
	for (size_t i = 0; i < ctx->mm->n_vmas; i++)
		if (ctx->mm->vmas[i]->mlock)
			locked += ctx->mm->vmas[i]->end - ctx->mm->vmas[i]->start;
	if (!locked)
		return 0;
	if (prlimit(ctx->inf.pid, RLIMIT_MEMLOCK, NULL, &rl)) {
		pr_err("pid %d: cannot read its RLIMIT_MEMLOCK: %s", ctx->pid, strerror(errno));
		return -errno;
	}
	if (rl.rlim_cur == RLIM_INFINITY || locked <= rl.rlim_cur)
		return 0;
	pr_err("pid %d: its image locks %llu bytes in memory (mlock), more than its "
	       "RLIMIT_MEMLOCK (%llu) lets uid %u lock; refusing",
	       ctx->pid, (unsigned long long)locked, (unsigned long long)rl.rlim_cur,
	       ctx->tree->owner.uid);
	return -EPERM;
}

/* def_flags last: amber's own mappings until then are not locked. */
static int restore_mlock_future(struct restore_ctx *ctx)
{
	long r;

	if (!ctx->mm->mlock_future)
		return 0;
	r = infect_call(&ctx->inf, SYS_mlockall,
			MCL_FUTURE | (ctx->mm->mlock_future & VMA_MLOCK_ONFAULT ? MCL_ONFAULT : 0),
			0, 0, 0, 0, 0);
	if (!r)
		return 0;
	pr_err("pid %d: mlockall(MCL_FUTURE) failed: %s", ctx->pid, strerror((int)-r));
	return (int)r;
}

/* The clearing of a process's address space, which may start ahead of its turn. */
struct mem_clear {
	struct clear_plan cp;
	unsigned long moved_ip;
	struct range drop;
	bool proxy, started, finished;
	int ret;
	/* ahead, the mapping and PR_SET_MM_MAP in the same batch (map_ahead) */
	bool mapped;
	struct mapping map;
	struct infect_sc *all; /* cp's syscalls, map's, PR_SET_MM_MAP */
	size_t n_all;
	long mm_ret;
};

/* amber's rseq area, unregistered while amber's memory is still there: now, or planned (cp). */
static int forget_rseq(struct restore_ctx *ctx, struct clear_plan *cp)
{
	struct infect_sc rseq;
	long r;

	if (!regs_forget_rseq(ctx, &rseq))
		return 0;
	r = plan_call(ctx, cp, 0, rseq.nr, rseq.a[0], rseq.a[1], rseq.a[2], rseq.a[3], 0);
	if (r)
		pr_err("pid %d: cannot unregister amber's rseq area: %s", ctx->pid,
		       strerror((int)-r));
	return (int)r;
}

/*
 * The process's memory, mapped and filled, and its mm fields set, in the
 * batch that clears ahead, so that all of its memory's rebuild runs on the
 * other CPU: where the mapping needs no amber in between (map_plan) and no
 * vDSO of amber's is to go after the clearing.  The process is in its
 * cgroups already (cgroup.c moves it before it stops), where its pages are
 * charged.  0: planned into c->all; else the mapping waits its turn.
 */
static int map_ahead(struct restore_ctx *ctx, struct mem_clear *c)
{
	size_t n;

	if (c->drop.end)
		return -EAGAIN;
	if (map_plan(ctx, c->proxy, &c->map, true))
		goto unplan;
	n = c->cp.n + c->map.p.n + 1;
	c->all = malloc(n * sizeof(*c->all));
	if (!c->all || mm_fields_plan(ctx, &c->all[n - 1]))
		goto unplan;
	memcpy(c->all, c->cp.sc, c->cp.n * sizeof(*c->all));
	memcpy(c->all + c->cp.n, c->map.p.sc, c->map.p.n * sizeof(*c->all));
	c->n_all = n;
	c->mapped = true;
	return 0;
unplan:
	free(c->all);
	c->all = NULL;
	map_free(ctx, &c->map);
	return -EAGAIN;
}

/* Plans the clearing (scratch area mapped at gap); ahead: and starts it. */
static int clear_start(struct restore_ctx *ctx, struct mem_clear *c, unsigned long gap, bool ahead)
{
	struct range scratch = {gap, gap + SCRATCH_SIZE};
	int ret = forget_rseq(ctx, &c->cp);

	if (!ret)
		ret = replace_address_space(ctx, &c->proxy, &c->drop, &scratch, &c->cp);
	/* the vDSO's syscall where the plan moves it; meanwhile the executor's */
	c->moved_ip = ctx->inf.syscall_ip;
	if (!ret)
		ret = infect_scratch_syscall(&ctx->inf);
	if (!ret && ahead) {
		map_ahead(ctx, c);
		ret = c->mapped ? infect_batch_start(&ctx->inf, c->all, c->n_all)
				: infect_batch_start(&ctx->inf, c->cp.sc, c->cp.n);
		c->started = !ret;
		if (ret == -EAGAIN)
			ret = 0; /* at its turn, in pieces */
	}
	return ret;
}

static int clear_finish(struct restore_ctx *ctx, struct mem_clear *c, int ret)
{
	struct infect_sc *sc = c->mapped ? c->all : c->cp.sc;
	size_t n = c->mapped ? c->n_all : c->cp.n;

	if (!ret)
		ret = c->started ? infect_batch_wait(&ctx->inf, sc, n)
				 : infect_batch(&ctx->inf, sc, n);
	/* each part's results where its checks look for them */
	for (size_t i = 0; c->mapped && i < c->cp.n; i++)
		c->cp.sc[i].ret = c->all[i].ret;
	for (size_t i = 0; c->mapped && i < c->map.p.n; i++)
		c->map.p.sc[i].ret = c->all[c->cp.n + i].ret;
	if (c->mapped)
		c->mm_ret = c->all[n - 1].ret;
	free(c->all);
	c->all = NULL;
	for (size_t i = 0; !ret && i < c->cp.n; i++)
		if (c->cp.sc[i].ret != c->cp.want[i]) {
			pr_err("pid %d: cannot %s: %s", ctx->pid,
			       c->cp.sc[i].nr == SYS_munmap ? "clear the address space"
			       : c->cp.sc[i].nr == SYS_rseq ? "unregister amber's rseq area"
							    : "move the vDSO into place",
			       strerror(c->cp.sc[i].ret < 0 ? (int)-c->cp.sc[i].ret : EFAULT));
			ret = c->cp.sc[i].ret < 0 ? (int)c->cp.sc[i].ret : -EFAULT;
		}
	ctx->inf.syscall_ip = c->moved_ip;
	free(c->cp.sc);
	free(c->cp.want);
	c->cp = (struct clear_plan){0};
	c->finished = true;
	return c->ret = ret;
}

/*
 * A tree's restore drives one process at a time, on amber's CPU: the next
 * ones (restore.c's CLEAR_AHEAD) clear amber's mappings out of their address
 * spaces (the kernel's unmapping, the longest part of its memory's rebuild)
 * on another CPU meanwhile.  Where its scratch area cannot go first, it
 * waits its turn.
 */
int mem_clear_ahead(struct restore_ctx *ctx)
{
	unsigned long gap;
	int ret;

	if (ctx->shares_vm || ctx->clear)
		return 0;
	ret = check_memlock(ctx);
	if (ret)
		return ret;
	gap = find_gap(ctx->mm, SCRATCH_SIZE);
	if (!gap || scratch_at(ctx, gap))
		return 0;
	ctx->clear = calloc(1, sizeof(*ctx->clear));
	if (!ctx->clear)
		return -ENOMEM;
	ctx->clear->ret = clear_start(ctx, ctx->clear, gap, true);
	return 0;
}

int mem_clear_done(struct restore_ctx *ctx)
{
	if (!ctx->clear || ctx->clear->finished)
		return ctx->clear ? ctx->clear->ret : 0;
	return clear_finish(ctx, ctx->clear, ctx->clear->ret);
}

/* replace_address_space() as one batch, run by the executor in the scratch area at gap. */
static int clear_batched(struct restore_ctx *ctx, bool *proxy, struct range *drop,
			 unsigned long gap)
{
	struct mem_clear c = {0};
	int ret = clear_finish(ctx, &c, clear_start(ctx, &c, gap, false));

	*proxy = c.proxy;
	*drop = c.drop;
	return ret;
}

static int mem_restore_inject(struct restore_ctx *ctx)
{
	struct range drop = {0, 0};
	unsigned long gap;
	bool proxy = false;
	int ret;

	/* The parent, restored first, rebuilt this address space: only a scratch area
	 * (a CLONE_VM child of amber's has no rseq area: its clone is not libc's). */
	if (ctx->shares_vm)
		return infect_scratch_map(&ctx->inf, 0, SCRATCH_SIZE);
	if (ctx->clear) { /* cleared ahead (mem_clear_ahead), maybe mapped too */
		struct mem_clear *c = ctx->clear;

		ret = mem_clear_done(ctx);
		proxy = c->proxy;
		drop = c->drop;
		ctx->clear = NULL;
		if (c->mapped) {
			ret = ret ? (map_free(ctx, &c->map), ret) : map_check(ctx, &c->map, 0);
			ret = ret ?: (proxy ? vdso_proxy_patch(ctx) : 0)
				     ?: mm_fields_check(ctx, c->mm_ret)
				     ?: restore_mlock_future(ctx);
			free(c);
			return ret;
		}
		free(c);
		if (ret)
			return ret;
		goto cleared;
	}
	ret = check_memlock(ctx);
	if (ret)
		return ret;
	gap = find_gap(ctx->mm, SCRATCH_SIZE);
	if (!gap) {
		pr_err("pid %d: no room for amber's scratch area in the address space", ctx->pid);
		return -ENOMEM;
	}
	/* where amber's own mappings leave room, the scratch area first: then the
	 * clearing is one batch; else it is made once they are gone */
	if (!scratch_at(ctx, gap)) {
		ret = clear_batched(ctx, &proxy, &drop, gap);
	} else {
		ret = forget_rseq(ctx, NULL)
			      ?: replace_address_space(ctx, &proxy, &drop, NULL, NULL)
			      ?: infect_scratch_map(&ctx->inf, gap, SCRATCH_SIZE);
	}
	if (ret)
		return ret;
cleared:
	if (drop.end) {
		long r;

		ret = infect_scratch_syscall(&ctx->inf);
		r = ret ? ret
			: infect_call(&ctx->inf, SYS_munmap, drop.start, drop.end - drop.start, 0,
				      0, 0, 0);
		if (r) {
			pr_err("pid %d: cannot unmap amber's vDSO (the process had none): %s",
			       ctx->pid, strerror((int)-r));
			return (int)r;
		}
	}
	ret = map_vmas(ctx, proxy);
	if (ret)
		return ret;
	if (proxy) {
		ret = vdso_proxy_patch(ctx);
		if (ret)
			return ret;
	}
	ret = restore_mm_fields(ctx);
	return ret ? ret : restore_mlock_future(ctx);
}

const struct resource_ops mem_ops = {
	.name = "memory",
	.dump_tree = mem_dump_tree,
	.dump = mem_dump,
	.dump_late = mem_dump_pages,
	.restore_read = mem_restore_read,
	.restore_tree = mem_restore_tree,
	.restore_prefork = cow_prefork, /* never run in a CLONE_VM child (restore.c) */
	.restore_inject = mem_restore_inject,
};
