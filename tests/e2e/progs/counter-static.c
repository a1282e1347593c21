// SPDX-License-Identifier: MIT
/* counter, linked statically (the Makefile adds -static for names containing "static"). */
#include "counter.c"
