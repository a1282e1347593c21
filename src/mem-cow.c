// SPDX-License-Identifier: MIT
/*
 * Copy-on-write sharing of private memory inherited over fork().
 *
 * Dump: a page of a child that is the very page its parent maps at the same
 * address in the same VMA (same PFN in both pagemaps) is not saved again;
 * the child's pagemap marks the run "in_parent".
 *
 * Restore: such memory must reach the child the way it did originally, by
 * fork().  Before a process creates its children (in amber's forked code,
 * whose own mappings are still there) it maps each of its VMAs that a child
 * inherits at a "premap" slot, in an area free in every address space of the
 * image and in amber's, and fills it.  The children inherit the slots
 * copy-on-write, overwrite the pages they changed and drop the pages they
 * lost; later the injected restore moves each slot into place with mremap(),
 * which keeps the pages shared.
 *
 * Where practical: only private anonymous VMAs (not stacks) that the child
 * still has with the same bounds as its parent.  Other memory is copied.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "mem.h"
#include "proc.h"
#include "sys.h"

#define PM_PRESENT  (1ULL << 63)
#define PM_SWAPPED  (1ULL << 62)
#define PM_PFN_MASK ((1ULL << 55) - 1)
#define COW_BATCH   512
#define GIB	    (1UL << 30)

bool cow_eligible(const VmaEntry *v)
{
	return v->kind == VMA_KIND__VMA_ANON_PRIVATE && !v->growsdown && !v->has_hugetlb_kib;
}

/* The parent's VMA with exactly v's bounds, both eligible; -1 if none. */
static ssize_t same_vma(const MmEntry *mm, const VmaEntry *v)
{
	size_t lo = 0, hi = mm ? mm->n_vmas : 0;

	if (!cow_eligible(v))
		return -1;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (mm->vmas[mid]->start < v->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < mm->n_vmas && mm->vmas[lo]->start == v->start && mm->vmas[lo]->end == v->end &&
	    cow_eligible(mm->vmas[lo]))
		return (ssize_t)lo;
	return -1;
}

/* ---- dump ---- */

void cow_dump_open(struct dump_ctx *ctx, struct cow_dump *cd, int pagemap_fd)
{
	PstreeEntry *e = tree_entry(ctx->tree, (uint32_t)ctx->pid);
	struct dump_ctx *c = e ? tree_dproc(ctx->tree, e->ppid) : NULL;
	char path[64];

	memset(cd, 0, sizeof(*cd));
	cd->pagemap_fd = pagemap_fd;
	cd->parent_pagemap_fd = -1;
	if (!c || c->shares_vm || !c->mm || !c->mm->n_vmas)
		return;
	cd->parent = c;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", cd->parent->pid);
	cd->parent_pagemap_fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (cd->parent_pagemap_fd < 0) {
		/* not an error: the pages are then saved again */
		pr_info("pid %d: cannot compare its pages with its parent's", ctx->pid);
		cow_dump_close(cd);
	}
}

void cow_dump_close(struct cow_dump *cd)
{
	if (cd->parent_pagemap_fd >= 0)
		close(cd->parent_pagemap_fd);
	cd->parent_pagemap_fd = -1;
	cd->parent = NULL;
}

void cow_dump_vma(struct cow_dump *cd, const VmaEntry *v)
{
	cd->vma_ok = cd->parent && same_vma(cd->parent->mm, v) >= 0;
}

/* One physical page mapped by both (PFNs are 0 for readers without CAP_SYS_ADMIN). */
static bool same_page(uint64_t a, uint64_t b)
{
	return (a & PM_PRESENT) && (b & PM_PRESENT) && !(a & PM_SWAPPED) && !(b & PM_SWAPPED) &&
	       (a & PM_PFN_MASK) && (a & PM_PFN_MASK) == (b & PM_PFN_MASK);
}

uint64_t cow_dump_prefix(struct cow_dump *cd, uint64_t start, uint64_t end, bool *shared)
{
	uint64_t a[COW_BATCH], b[COW_BATCH];
	size_t n = (end - start) / PAGE_SIZE, i;
	off_t off = (off_t)(start / PAGE_SIZE * sizeof(uint64_t));

	*shared = false;
	if (!cd->vma_ok)
		return end - start;
	if (n > COW_BATCH)
		n = COW_BATCH;
	if (sys_pread_full(cd->pagemap_fd, a, n * sizeof(uint64_t), off) !=
		    (ssize_t)(n * sizeof(uint64_t)) ||
	    sys_pread_full(cd->parent_pagemap_fd, b, n * sizeof(uint64_t), off) !=
		    (ssize_t)(n * sizeof(uint64_t)))
		return n * PAGE_SIZE;
	*shared = same_page(a[0], b[0]);
	for (i = 1; i < n && same_page(a[i], b[i]) == *shared; i++)
		;
	return i * PAGE_SIZE;
}

/* ---- restore ---- */

static unsigned long area_lo, area_hi;

void cow_area(unsigned long *lo, unsigned long *hi)
{
	*lo = area_lo;
	*hi = area_hi;
}

unsigned long cow_slot(const struct restore_ctx *ctx, size_t i)
{
	return ctx->cow_slot ? ctx->cow_slot[i] : 0;
}

/* The parent whose memory a process can inherit (not a CLONE_VM child), or NULL. */
static struct restore_ctx *parent_of(struct tree *t, struct restore_ctx *ctx)
{
	PstreeEntry *e = tree_entry(t, (uint32_t)ctx->pid);
	struct restore_ctx *parent = e ? tree_rproc(t, e->ppid) : NULL;

	return parent && !parent->shares_vm ? parent : NULL;
}

/* Index of the VMA holding run pe (mem.c checked that one does). */
static size_t vma_of(const MmEntry *mm, const PagemapEntry *pe)
{
	size_t i = 0;

	while (i + 1 < mm->n_vmas && mm->vmas[i]->end <= pe->vaddr)
		i++;
	return i;
}

/*
 * A free area for `size` bytes: the largest gap above 4 GiB between every
 * mapping of the image and of amber itself (whose forks do the premapping),
 * starting 1 GiB into it so that mem.c's scratch areas, placed in the
 * middle of a gap, stay clear of it.
 */
static unsigned long find_area(struct tree *t, unsigned long size)
{
	struct range *r = NULL;
	size_t n = 0, cap = 0;
	struct vma *own = NULL;
	size_t nr_own = 0;
	unsigned long best = 0, best_len = 0;

	if (proc_parse_maps(getpid(), &own, &nr_own))
		return 0;
	for (size_t p = 0; p < t->nr_procs; p++)
		cap += t->rprocs[p]->mm ? t->rprocs[p]->mm->n_vmas : 0;
	r = malloc((cap + nr_own + 1) * sizeof(*r));
	if (!r)
		goto free_own;
	for (size_t p = 0; p < t->nr_procs; p++)
		for (size_t i = 0; t->rprocs[p]->mm && i < t->rprocs[p]->mm->n_vmas; i++)
			r[n++] = (struct range){t->rprocs[p]->mm->vmas[i]->start,
						t->rprocs[p]->mm->vmas[i]->end};
	for (size_t i = 0; i < nr_own; i++)
		if (own[i].start < USER_TOP) /* not [vsyscall] */
			r[n++] = (struct range){own[i].start, own[i].end};
	best = largest_gap(r, n, &best_len);
	free(r);
free_own:
	proc_free_vmas(own, nr_own);
	/* room for the area, 1 GiB before it and the gap's middle half after it */
	if (best_len / 2 < size + GIB)
		return 0;
	return (best + GIB + (2UL << 20) - 1) & ~((2UL << 20) - 1);
}

int cow_plan(struct tree *t)
{
	unsigned long total = 0, next;

	/* 1. VMAs that take pages from the parent's, and the parent's they take */
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct restore_ctx *ctx = t->rprocs[p], *parent;

		if (ctx->shares_vm || !ctx->mm)
			continue;
		ctx->cow_slot = calloc(ctx->mm->n_vmas + 1, sizeof(*ctx->cow_slot));
		ctx->cow_reuse = calloc(ctx->mm->n_vmas + 1, sizeof(*ctx->cow_reuse));
		if (!ctx->cow_slot || !ctx->cow_reuse)
			return -ENOMEM;
		parent = parent_of(t, ctx);
		for (size_t i = 0; i < ctx->nr_pm; i++) {
			PagemapEntry *pe = ctx->pm[i];
			size_t v;
			ssize_t w;

			if (!pe->in_parent)
				continue;
			v = vma_of(ctx->mm, pe);
			w = parent && parent->mm ? same_vma(parent->mm, ctx->mm->vmas[v]) : -1;
			if (w < 0) {
				pr_err("pagemap-%d.img: the pages at %llx are to come from the "
				       "parent, "
				       "which has no such mapping; the image is corrupt",
				       ctx->pid, (unsigned long long)pe->vaddr);
				return -EBADMSG;
			}
			ctx->cow_reuse[v] = 1;
			parent->cow_slot[w] = 1; /* needed: placed below */
		}
	}
	/* 2. fresh slots for the VMAs needed by a child that are not inherited themselves */
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct restore_ctx *ctx = t->rprocs[p];

		for (size_t i = 0; ctx->cow_slot && i < ctx->mm->n_vmas; i++)
			if (ctx->cow_slot[i] && !ctx->cow_reuse[i])
				total += ctx->mm->vmas[i]->end - ctx->mm->vmas[i]->start;
	}
	if (!total)
		return 0;
	next = area_lo = find_area(t, total);
	if (!area_lo) {
		pr_err("no free address range of %lu MiB for the memory the processes share "
		       "copy-on-write",
		       total >> 20);
		return -ENOMEM;
	}
	/* 3. parents first: a child's inherited VMA lies where its parent's does */
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct restore_ctx *ctx = t->rprocs[p], *parent = parent_of(t, ctx);

		for (size_t i = 0; ctx->cow_slot && i < ctx->mm->n_vmas; i++) {
			VmaEntry *v = ctx->mm->vmas[i];

			if (ctx->cow_reuse[i]) {
				ctx->cow_slot[i] = parent->cow_slot[same_vma(parent->mm, v)];
			} else if (ctx->cow_slot[i]) {
				ctx->cow_slot[i] = next;
				next += v->end - v->start;
			}
		}
	}
	area_hi = next;
	pr_info("premapping %lu MiB shared copy-on-write at %lx-%lx", total >> 20, area_lo,
		area_hi);
	return 0;
}

static int drop_range(struct restore_ctx *ctx, unsigned long slot, const VmaEntry *v, uint64_t from,
		      uint64_t to)
{
	if (from >= to || !madvise((void *)(slot + (from - v->start)), to - from, MADV_DONTNEED))
		return 0;
	pr_err("pid %d: cannot drop the pages at %llx-%llx it no longer had: %m", ctx->pid,
	       (unsigned long long)from, (unsigned long long)to);
	return -errno;
}

/* One VMA: a fresh slot, or the parent's (inherited), patched to this process's pages. */
static int premap_vma(struct restore_ctx *ctx, size_t i, size_t *pm)
{
	VmaEntry *v = ctx->mm->vmas[i];
	unsigned long slot = ctx->cow_slot[i], len = v->end - v->start;
	bool reuse = ctx->cow_reuse[i];
	uint64_t pos = v->start;
	int ret;

	if (!reuse) {
		void *p = mmap((void *)slot, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE |
				       (v->noreserve ? MAP_NORESERVE : 0),
			       -1, 0);

		if (p != (void *)slot) {
			pr_err("pid %d: cannot premap %llx-%llx at %lx: %m", ctx->pid,
			       (unsigned long long)v->start, (unsigned long long)v->end, slot);
			return p == MAP_FAILED ? -errno : -EEXIST;
		}
	}
	for (; *pm < ctx->nr_pm && ctx->pm[*pm]->vaddr < v->end; (*pm)++) {
		const PagemapEntry *pe = ctx->pm[*pm];
		uint64_t rlen = pe->nr_pages * PAGE_SIZE;

		/* what the parent has there and this process had not */
		if (reuse) {
			ret = drop_range(ctx, slot, v, pos, pe->vaddr);
			if (ret)
				return ret;
		}
		pos = pe->vaddr + rlen;
		if (pe->in_parent)
			continue;
		if (sys_pread_full(ctx->pages_fd, (void *)(slot + (pe->vaddr - v->start)), rlen,
				   (off_t)(PAGES_DATA_OFF + pe->offset)) != (ssize_t)rlen) {
			pr_err("pid %d: cannot load pages at %llx from pages-%d.img", ctx->pid,
			       (unsigned long long)pe->vaddr, ctx->pid);
			return -EIO;
		}
	}
	return reuse ? drop_range(ctx, slot, v, pos, v->end) : 0;
}

int cow_prefork(struct restore_ctx *ctx)
{
	size_t pm = 0;

	for (size_t i = 0; ctx->cow_slot && i < ctx->mm->n_vmas; i++) {
		int ret;

		while (pm < ctx->nr_pm && ctx->pm[pm]->vaddr < ctx->mm->vmas[i]->start)
			pm++;
		if (!ctx->cow_slot[i])
			continue;
		ret = premap_vma(ctx, i, &pm);
		if (ret)
			return ret;
	}
	return 0;
}
