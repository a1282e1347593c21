// SPDX-License-Identifier: MIT
/* XXH3 by the widest vectors the CPU has (hash.h). */
#include <stdbool.h>

#include "hash.h"

static bool avx2;

static void __attribute__((constructor)) hash_init(void)
{
	__builtin_cpu_init();
	avx2 = __builtin_cpu_supports("avx2");
}

void hash_update(XXH3_state_t *st, const void *buf, size_t len)
{
	if (avx2)
		hash_update_avx2(st, buf, len);
	else
		XXH3_64bits_update(st, buf, len);
}

uint64_t hash_buf(const void *buf, size_t len)
{
	return avx2 ? hash_buf_avx2(buf, len) : XXH3_64bits(buf, len);
}
