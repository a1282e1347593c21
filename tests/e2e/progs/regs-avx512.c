// SPDX-License-Identifier: MIT
/* regs built with -mavx512f (the Makefile adds it for names containing "avx512"):
 * zmm0-31 and k0-k7 instead of ymm0-15. */
#include "regs.c"
