/* SPDX-License-Identifier: MIT */
/*
 * XXH3, the image's checksums, with the widest vectors the CPU has.
 * Debian's libxxhash is built for SSE2 alone; where the CPU has AVX2 the
 * same hash comes from xxhash's own inline code built for it (hash-avx2.c),
 * about 2.5 times as fast: a dump or restore of dense memory hashes every
 * byte on a CPU that also copies them.
 */
#ifndef AMBER_HASH_H
#define AMBER_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

void hash_update(XXH3_state_t *st, const void *buf, size_t len);
uint64_t hash_buf(const void *buf, size_t len);

/* hash-avx2.c: only called where the CPU has AVX2 */
void hash_update_avx2(void *st, const void *buf, size_t len);
uint64_t hash_buf_avx2(const void *buf, size_t len);

#endif
