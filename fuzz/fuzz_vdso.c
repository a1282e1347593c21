// SPDX-License-Identifier: MIT
/*
 * fuzz_vdso: vdso_parse() on any bytes, as restore runs it on the old
 * vDSO's code from pages-PID.img when this kernel's vDSO differs
 * (vdso_proxy_patch in mem.c, AMBER_VDSO_PROXY=1).  Every symbol it
 * returns must have a name that ends inside the image and an entry point
 * inside it; the names are then matched against this kernel's vDSO's, as
 * restore does.
 */
#include <elf.h>
#include <sys/auxv.h>

#include "fuzz.h"
#include "mem.h"

#define MAX_SYMS 64

static struct vsym ours[MAX_SYMS];
static int nr_ours;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const uint8_t *vdso = (const void *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const void *)vdso;

	fuzz_setup();
	if (vdso)
		nr_ours = vdso_parse(vdso, eh->e_shoff + eh->e_shnum * sizeof(Elf64_Shdr), ours,
				     MAX_SYMS);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vsym syms[MAX_SYMS];
	uint8_t *img = malloc(size ? size : 1);
	volatile int matched = 0; /* the comparisons are not optimised away */
	int n;

	if (!img)
		abort();
	memcpy(img, data, size); /* exactly size bytes: a read past them is caught */
	n = vdso_parse(img, size, syms, MAX_SYMS);
	fuzz_check(n <= MAX_SYMS, "%d symbols for room for %d", n, MAX_SYMS);
	for (int i = 0; i < n; i++) {
		const char *name = syms[i].name;
		const uint8_t *p = (const uint8_t *)name;

		fuzz_check(p >= img && p < img + size, "symbol %d's name is outside the image", i);
		fuzz_check(memchr(p, 0, (size_t)(img + size - p)), "symbol %d's name does not end",
			   i);
		fuzz_check(syms[i].off < size, "symbol %s at %#lx is outside the image (%zu bytes)",
			   name, syms[i].off, size);
		for (int k = 0; k < nr_ours; k++)
			if (!strcmp(name, ours[k].name)) {
				matched++;
				break;
			}
	}
	free(img);
	return 0;
}
