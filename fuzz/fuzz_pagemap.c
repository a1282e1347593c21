// SPDX-License-Identifier: MIT
/*
 * fuzz_pagemap: the checks restore makes on mm-PID.img and pagemap-PID.img
 * before it maps anything (mem_check_mm, mem_check_pagemap).  What they
 * accept, the later steps take as given: the mapping syscalls, the preads
 * and UFFDIO_COPYs from pages-PID.img at the runs' offsets, the lookups of
 * files and shared memory.  So when both accept, this checks on its own,
 * without wraparound, that every VMA and run is what those steps need.
 *
 * Input: [u64 size of pages-PID.img][u8 number of files][u32 length][an
 * mm_entry] then pagemap_entry records [u32 length][payload] up to the end
 * (the records' framing and checksums are fuzz_records' part).
 */
#include "fuzz.h"
#include "mem.h"
#include "mutate.h"

#define HDR	 13
#define TASK_TOP (1ULL << 56) /* mem.c's TASK_SIZE_MAX */
#define MAX_AUXV (2 * 64)
#define MAX_RUNS 4096

typedef unsigned __int128 u128;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_setup();
	return 0;
}

static bool file_kind(int kind)
{
	return kind == VMA_KIND__VMA_FILE_PRIVATE || kind == VMA_KIND__VMA_FILE_SHARED;
}

static bool holds_pages(int kind)
{
	return kind == VMA_KIND__VMA_ANON_PRIVATE || kind == VMA_KIND__VMA_ANON_SHARED ||
	       kind == VMA_KIND__VMA_FILE_PRIVATE || kind == VMA_KIND__VMA_VDSO;
}

static void check_mm(const MmEntry *mm, size_t nr_files)
{
	uint64_t prev_end = 0;

	for (size_t i = 0; i < mm->n_vmas; i++) {
		const VmaEntry *e = mm->vmas[i];
		unsigned long long s = e->start, en = e->end;

		fuzz_check(s < en && s % PAGE_SIZE == 0 && en % PAGE_SIZE == 0 && en <= TASK_TOP,
			   "VMA %llx-%llx", s, en);
		fuzz_check(s >= prev_end, "VMA %llx-%llx overlaps the one before", s, en);
		fuzz_check((unsigned)e->kind <= VMA_KIND__VMA_VVAR_VCLOCK ||
				   e->kind == VMA_KIND__VMA_SYSV_SHM ||
				   e->kind == VMA_KIND__VMA_AIO ||
				   e->kind == VMA_KIND__VMA_IO_URING ||
				   e->kind == VMA_KIND__VMA_PACKET_RING,
			   "VMA %llx of kind %d", s, (int)e->kind);
		fuzz_check((e->kind != VMA_KIND__VMA_IO_URING &&
			    e->kind != VMA_KIND__VMA_PACKET_RING) ||
				   e->has_file_id,
			   "io_uring or packet ring VMA %llx without its file", s);
		fuzz_check(e->kind != VMA_KIND__VMA_SYSV_SHM || e->has_sysv_shmid,
			   "System V VMA %llx without its segment", s);
		fuzz_check(e->pgoff % PAGE_SIZE == 0 && (u128)e->pgoff + (en - s) <= UINT64_MAX,
			   "VMA %llx at file offset %llx", s, (unsigned long long)e->pgoff);
		fuzz_check(!file_kind(e->kind) || e->has_file_id, "file VMA %llx without file", s);
		fuzz_check(!e->has_file_id || e->file_id < nr_files, "VMA %llx of file %u of %zu",
			   s, e->file_id, nr_files);
		fuzz_check(e->kind != VMA_KIND__VMA_ANON_SHARED || e->has_shmem_id,
			   "shared VMA %llx without its object", s);
		prev_end = e->end;
	}
	fuzz_check(mm->n_auxv <= MAX_AUXV, "%zu auxv words", mm->n_auxv);
	fuzz_check(!mm->has_exe_file_id || mm->exe_file_id < nr_files, "exe is file %u of %zu",
		   mm->exe_file_id, nr_files);
}

static void check_runs(const MmEntry *mm, PagemapEntry *const *pm, size_t n, uint64_t psize)
{
	u128 prev_end = 0;

	for (size_t i = 0; i < n; i++) {
		const PagemapEntry *pe = pm[i];
		u128 len = (u128)pe->nr_pages * PAGE_SIZE, end = pe->vaddr + len;
		unsigned long long va = pe->vaddr;
		const VmaEntry *in = NULL;

		fuzz_check(pe->nr_pages && va % PAGE_SIZE == 0, "run %zu at %llx of %llu pages", i,
			   va, (unsigned long long)pe->nr_pages);
		fuzz_check(pe->vaddr >= prev_end, "run %zu at %llx overlaps the one before", i, va);
		for (size_t v = 0; v < mm->n_vmas && !in; v++)
			if (mm->vmas[v]->start <= pe->vaddr && end <= mm->vmas[v]->end)
				in = mm->vmas[v];
		fuzz_check(in, "run %zu at %llx is in no VMA", i, va);
		fuzz_check(holds_pages(in->kind), "run %zu at %llx in a VMA of kind %d", i, va,
			   (int)in->kind);
		fuzz_check(
			pe->in_parent || (pe->offset % PAGE_SIZE == 0 &&
					  (u128)pe->offset + len + PAGES_DATA_OFF <= psize),
			"run %zu at %llx: %llu pages at offset %llx of pages-PID.img (%llu bytes)",
			i, va, (unsigned long long)pe->nr_pages, (unsigned long long)pe->offset,
			(unsigned long long)psize);
		prev_end = end;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	PagemapEntry **pm = NULL;
	MmEntry *mm;
	uint64_t psize;
	size_t nr_files, n = 0, pos;
	uint32_t len;

	if (size < HDR)
		return 0;
	memcpy(&psize, data, 8);
	nr_files = data[8];
	memcpy(&len, data + 9, 4);
	if (len > size - HDR)
		return 0;
	mm = mm_entry__unpack(NULL, len, data + HDR);
	if (!mm)
		return 0;
	pm = calloc(MAX_RUNS, sizeof(*pm));
	if (!pm)
		abort();
	for (pos = HDR + len; n < MAX_RUNS && size - pos >= 4; pos += len) {
		memcpy(&len, data + pos, 4);
		pos += 4;
		if (len > size - pos)
			break;
		pm[n] = pagemap_entry__unpack(NULL, len, data + pos);
		if (!pm[n])
			break;
		n++;
	}
	if (!mem_check_mm(1, mm, nr_files)) {
		check_mm(mm, nr_files);
		if (!mem_check_pagemap(1, mm, pm, n, psize))
			check_runs(mm, pm, n, psize);
	}
	for (size_t i = 0; i < n; i++)
		pagemap_entry__free_unpacked(pm[i], NULL);
	free(pm);
	mm_entry__free_unpacked(mm, NULL);
	return 0;
}

/* Half of the time the mm record's or a run's fields (mutate.h), else byte mutations. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
	uint64_t rs = seed * 0x9e3779b97f4a7c15ULL | 1;
	size_t at[MAX_RUNS + 1], n = 0, pos = 9, r, nsize;
	uint32_t len;

	if (size < HDR || rnd_next(&rs) % 2)
		return LLVMFuzzerMutate(data, size, max_size);
	/* at[0]: the mm record's length (at 9); then each run's */
	for (; n <= MAX_RUNS && size - pos >= 4; pos += 4 + len) {
		memcpy(&len, data + pos, 4);
		if (len > size - pos - 4)
			break;
		at[n++] = pos;
	}
	if (!n)
		return LLVMFuzzerMutate(data, size, max_size);
	/* the mm record a third of the time: it has the VMAs the runs must fit */
	r = rnd_next(&rs) % 3 == 0 ? 0 : rnd_next(&rs) % n;
	memcpy(&len, data + at[r], 4);
	nsize = mutate_record(data, size, max_size, at[r], at[r] + 4, len,
			      r ? &pagemap_entry__descriptor : &mm_entry__descriptor, &rs);
	return nsize ? nsize : LLVMFuzzerMutate(data, size, max_size);
}
