// SPDX-License-Identifier: MIT
/*
 * xxhash's XXH3, inlined into this file alone, which is built with -mavx2
 * (Makefile): hash.c calls it only on a CPU with AVX2.  The state is the
 * library's (the same header, the same layout): created, reset and read by
 * the library, updated here.
 */
#define XXH_INLINE_ALL
#include <xxhash.h>

void hash_update_avx2(void *st, const void *buf, size_t len);
uint64_t hash_buf_avx2(const void *buf, size_t len);

void hash_update_avx2(void *st, const void *buf, size_t len)
{
	XXH3_64bits_update(st, buf, len);
}

uint64_t hash_buf_avx2(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}
