/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz targets share (libFuzzer, built by `make fuzz`): a scratch
 * directory for the image files an input turns into, the record checksums
 * put right so that mutations reach the decoders, and a check that aborts
 * (a crash for libFuzzer) when amber accepted what it must refuse.
 *
 * amber's messages go to /dev/null (formatted all the same, so that a bad
 * argument of one still shows); AMBER_FUZZ_LOG=1 keeps them on stderr.
 */
#ifndef AMBER_FUZZ_H
#define AMBER_FUZZ_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fuzz_dir[64];
static int fuzz_dirfd = -1;

/* Every file of the scratch directory goes. */
static inline void fuzz_clear(void)
{
	int fd = dup(fuzz_dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;

	if (!d) {
		perror("fuzz: cannot list the scratch directory");
		abort();
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(fuzz_dirfd, de->d_name, 0);
	closedir(d);
}

static void fuzz_cleanup(void)
{
	if (fuzz_dirfd < 0)
		return;
	fuzz_clear();
	close(fuzz_dirfd);
	rmdir(fuzz_dir);
}

/* Quiet logs and a scratch directory (on tmpfs if there is one), removed at exit. */
static inline void fuzz_setup(void)
{
	const char *base = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";

	if (!getenv("AMBER_FUZZ_LOG")) {
		log_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (log_fd < 0)
			log_fd = 2;
	}
	snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/amber-fuzz-XXXXXX", base);
	if (!mkdtemp(fuzz_dir)) {
		perror("fuzz: cannot create a scratch directory");
		abort();
	}
	fuzz_dirfd = open(fuzz_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fuzz_dirfd < 0) {
		perror("fuzz: cannot open the scratch directory");
		abort();
	}
	atexit(fuzz_cleanup);
}

/* amber accepted something it must not have: a finding. */
static inline void __attribute__((format(printf, 2, 3))) fuzz_check(bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	fprintf(stderr, "fuzz: amber accepted a bad image: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* name (in the scratch directory) holds len bytes of buf. */
static inline void fuzz_write(const char *name, const void *buf, size_t len)
{
	int fd = openat(fuzz_dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			0600);

	if (fd < 0 || (len && write(fd, buf, len) != (ssize_t)len)) {
		fprintf(stderr, "fuzz: cannot write %s/%s: %s\n", fuzz_dir, name, strerror(errno));
		abort();
	}
	close(fd);
}

/*
 * The checksum of every record of an image file (header, then [u32 length]
 * [u64 xxh3][payload]) made right, up to the first one that does not fit:
 * a mutated payload would fail it and never be decoded.
 */
static inline void fuzz_fix_hashes(uint8_t *buf, size_t len)
{
	size_t pos = IMG_HDR_SIZE;

	while (len >= 12 && pos <= len - 12) {
		uint32_t rlen;
		uint64_t h;

		memcpy(&rlen, buf + pos, 4);
		if (rlen > len - pos - 12)
			break;
		h = XXH3_64bits(buf + pos + 12, rlen);
		memcpy(buf + pos + 4, &h, 8);
		pos += 12 + rlen;
	}
}

/*
 * An image file of kind, with msgs[0..n), as amber writes it; listed in set
 * (for an inventory), or in none if set is NULL.
 */
static inline void fuzz_write_records(struct img_set *set, const char *name, enum img_kind kind,
				      const ProtobufCMessage *const *msgs, size_t n)
{
	struct img_set own = {.dirfd = fuzz_dirfd};
	struct img *img;
	int ret = img_create(set ? set : &own, kind, &img, "%s", name);

	for (size_t i = 0; !ret && i < n; i++)
		ret = img_put(img, msgs[i]);
	if (!ret)
		ret = img_finish(img);
	else
		img_abort(img);
	img_set_free(&own);
	if (ret) {
		fprintf(stderr, "fuzz: cannot write %s: %s\n", name, strerror(-ret));
		abort();
	}
}

#endif
