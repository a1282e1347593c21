/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kcmp-plain.h - never part of the series: the control for the rig's
 * per-boot order check (kcmp.order-control).  build.sh force-includes it
 * into kernel/kcmp.c only (make CFLAGS_kcmp.o="-include ..."), for the
 * kcmp-plain kernel, a copy of only-kcmp.  The cookies stay zero, so
 * kcmp_cookies_init() leaves cookies[t] = { 0, 2^63 + 1 } and, for the
 * even addresses of kernel objects, kptr_obfuscate(v) == v: kcmp becomes
 * a plain pointer comparison, whose order must repeat across boots if
 * the check of the real kernel is to mean anything.
 */
#include <linux/random.h>
#include <linux/string.h>
#define get_random_bytes(buf, len) memset((buf), 0, (len))
