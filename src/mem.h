/* SPDX-License-Identifier: MIT */
/*
 * Between mem.c (address spaces) and mem-cow.c (copy-on-write sharing); the
 * checks of restore's images are here too, for the fuzz targets (fuzz/).
 */
#ifndef AMBER_MEM_H
#define AMBER_MEM_H

#include <stdbool.h>
#include <stdint.h>

#include "amber.h"

#undef PAGE_SIZE
#define PAGE_SIZE 4096UL
#define USER_TOP  0x7ffffffff000UL /* top of the x86-64 user address space */

/* vma_entry.mlock, mm_entry.mlock_future */
#define VMA_MLOCK_LOCKED  1u /* VM_LOCKED: mlock(), MAP_LOCKED, mlockall(MCL_CURRENT) */
#define VMA_MLOCK_ONFAULT 2u /* VM_LOCKONFAULT: MLOCK_ONFAULT, MCL_ONFAULT */

/* An address range [start, end). */
struct range {
	unsigned long start, end;
};

void range_sort(struct range *r, size_t n);
/* Sorts r; the largest gap between its ranges from 4 GiB to the top of user
 * space starts at the return value and is *len bytes long. */
unsigned long largest_gap(struct range *r, size_t n, unsigned long *len);

/* ---- restore: what mem.c checks in the image before anything is mapped ---- */

/* The VMAs of mm-PID.img: sorted, page-aligned, in user space, of a known
 * kind, with their file (an id below nr_files, an offset that does not wrap)
 * or shmem object. */
int mem_check_mm(pid_t pid, const MmEntry *mm, size_t nr_files);
/* The runs of pagemap-PID.img: page-aligned, in address order, each inside
 * one VMA of mm that holds pages, and inside pages-PID.img (psize bytes)
 * unless it is the parent's. */
int mem_check_pagemap(pid_t pid, const MmEntry *mm, PagemapEntry *const *pm, size_t nr_pm,
		      uint64_t psize);

struct vsym {
	const char *name;  /* in the image, NUL-terminated there */
	unsigned long off; /* from the image's base */
};

/* Up to max function symbols of the vDSO ELF image b (len bytes), each
 * inside it, into out; returns how many, or -EINVAL if b is not a 64-bit ELF
 * image with its section headers inside it. */
int vdso_parse(const uint8_t *b, size_t len, struct vsym *out, int max);

/* ---- dump: which pages a process still shares with its parent ---- */

struct cow_dump {
	struct dump_ctx *parent; /* NULL: nothing is inherited */
	int pagemap_fd;		 /* the process's, borrowed from the caller */
	int parent_pagemap_fd;	 /* opened here */
	bool vma_ok;		 /* the current VMA is the parent's too (cow_dump_vma) */
};

/* Finds the parent in the tree and opens its pagemap; pagemap_fd is the
 * process's own, still the caller's to close (PFNs need root). */
void cow_dump_open(struct dump_ctx *ctx, struct cow_dump *cd, int pagemap_fd);
void cow_dump_close(struct cow_dump *cd);
/* Whether pages of this VMA can be taken from the parent on restore. */
void cow_dump_vma(struct cow_dump *cd, const VmaEntry *v);
/* Length of the longest run from start (< end) whose pages are all shared
 * with the parent (*shared) or all not; 0 on error. */
uint64_t cow_dump_prefix(struct cow_dump *cd, uint64_t start, uint64_t end, bool *shared);

/* In the process, before it stops for amber: where amber will want its
 * scratch area (0: nowhere), and that area mapped (its address, or 0). */
unsigned long mem_scratch_gap(struct restore_ctx *ctx);
unsigned long mem_scratch_premap(unsigned long gap);

/* ---- restore: premapped memory, inherited over fork ---- */

/* In amber, before any process exists: checks the inherited runs and places
 * every VMA that a child inherits (or that inherits) in a free area. */
int cow_plan(struct tree *t);
/* In the process, before it forks: its premapped VMAs, filled. */
int cow_prefork(struct restore_ctx *ctx);
/* Where VMA i waits to be moved into place (0: it is mapped normally). */
unsigned long cow_slot(const struct restore_ctx *ctx, size_t i);
/* The address range the premapped VMAs of the whole tree use (0, 0: none). */
void cow_area(unsigned long *lo, unsigned long *hi);
bool cow_eligible(const VmaEntry *v);

/* ---- restore: large anonymous VMAs filled with UFFDIO_COPY (mem-uffd.c) ---- */

/* A userfaultfd of the task's mm, as amber's fd; -errno: use pread. */
int uffd_open(struct restore_ctx *ctx);
/* Copies the runs of the VMAs i with sel[i] (mapped, still empty) into place. */
int uffd_fill(struct restore_ctx *ctx, int uffd, const bool *sel);

/* ---- AIO rings (aio.c; restored by aio_ops after the memory) ---- */

/* At dump, the VMA e of an io_setup ring: its header and unreaped events. */
int aio_dump_ring(struct dump_ctx *ctx, VmaEntry *e);
/* A VMA_AIO entry of an image: a ring io_setup can make, head, tail, events. */
bool aio_ring_valid(const VmaEntry *e);

/* ---- io_uring rings (uring.c: made with their fd, mapped after the memory) ---- */

/* At dump, a VMA of an io_uring: v->file_id, the ring's (the process's fd). */
int uring_vma_file(struct dump_ctx *ctx, struct vma *v);
/* A VMA of a file mapped again by its own kind (io_uring, packet ring): the process's fd on it, or
 * -1. */
int mem_vma_fd(struct restore_ctx *ctx, const VmaEntry *e);
/*
 * After such a mapping was made (r: what mmap returned in the process): at e's
 * place, else unmapped and -errno (logged, what naming it); advised and locked
 * as it was.
 */
int mem_vma_placed(struct restore_ctx *ctx, const VmaEntry *e, long r, const char *what);
/* At restore, every VMA_IO_URING of the image: a ring's, of one of the process's fds. */
int uring_check_vmas(struct restore_ctx *ctx);

/*
 * At dump, a VMA of a socket: if it is a packet socket's of the dump, its
 * whole ring (net/packet-ring.c), v->kind and v->file_id set, 0; 1 if it is
 * no packet socket's; -errno (logged) for part of a ring.
 */
int packet_vma_file(struct dump_ctx *ctx, struct vma *v);

#endif
