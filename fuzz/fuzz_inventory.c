// SPDX-License-Identifier: MIT
/*
 * fuzz_inventory: inventory.img decoded and checked as restore checks an
 * image directory first (img_dir_open: every file it lists present, with
 * its size and checksum, none outside the directory, each opened once), with the files it
 * may list beside it.  When amber accepts, every listed file must really
 * be there with that size and checksum.
 *
 * Input: [flags][u32 length][inventory.img] then files [u8 name length]
 * [name][u32 length][content] up to the end.  flags bit 0 keeps the
 * inventory's record checksum as it is (else it is made right first).
 * Names with '/', "." and ".." are skipped.
 */
#include <sys/stat.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_setup();
	return 0;
}

/* Whether name is a file of the scratch directory with that size and checksum. */
static bool matches(const char *name, uint64_t size, uint64_t xxh3)
{
	int fd = openat(fuzz_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	bool ok = false;
	char *buf;

	if (fd < 0)
		return false;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size) {
		buf = malloc(size ? size : 1);
		if (buf && pread(fd, buf, size, 0) == (ssize_t)size)
			ok = XXH3_64bits(buf, size) == xxh3;
		free(buf);
	}
	close(fd);
	return ok;
}

/* The files after the inventory, those with a usable name. */
static void write_files(const uint8_t *p, size_t left)
{
	while (left > 1 && p[0] && p[0] < 64 && left > 1 + (size_t)p[0] + 4) {
		char name[64];
		uint32_t len;

		memcpy(name, p + 1, p[0]);
		name[p[0]] = 0;
		memcpy(&len, p + 1 + p[0], 4);
		left -= 1 + p[0] + 4;
		p += 1 + p[0] + 4;
		if (len > left)
			len = (uint32_t)left;
		if (strlen(name) == strcspn(name, "/") && strcmp(name, ".") && strcmp(name, "..") &&
		    strcmp(name, "inventory.img") && *name)
			fuzz_write(name, p, len);
		p += len;
		left -= len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct img_dir *d = NULL;
	Inventory *inv;
	uint8_t *file;
	uint32_t len;

	if (size < 5)
		return 0;
	memcpy(&len, data + 1, 4);
	if (len > size - 5)
		len = (uint32_t)(size - 5);
	file = malloc(len ? len : 1);
	if (!file)
		abort();
	memcpy(file, data + 5, len);
	if (!(data[0] & 1))
		fuzz_fix_hashes(file, len);
	fuzz_write("inventory.img", file, len);
	write_files(data + 5 + len, size - 5 - len);

	if (!img_dir_open(fuzz_dirfd, fuzz_dir, &d) && !img_dir_wait(d)) {
		inv = d->inv;
		for (size_t i = 0; i < inv->n_files; i++) {
			InventoryFile *f = inv->files[i];

			fuzz_check(!strchr(f->name, '/'), "%s is outside the image", f->name);
			fuzz_check(matches(f->name, f->size, f->xxh3),
				   "%s is not there with %llu bytes and checksum %016llx", f->name,
				   (unsigned long long)f->size, (unsigned long long)f->xxh3);
		}
	}
	img_dir_close(d);
	fuzz_clear();
	free(file);
	return 0;
}
