/* SPDX-License-Identifier: MIT */
/* Namespaces (src/ns/). */
#ifndef AMBER_NS_H
#define AMBER_NS_H

#include "amber.h"

/*
 * restore --new-pidns (pidns.c): run restore(o, &root) in a new pid and mount
 * namespace, as its init; returns what do_restore returns (0, -errno, or the
 * root's exit status | RESTORE_WAITED).
 */
int pidns_restore(struct opts *o, int (*restore)(struct opts *o, uint32_t *root));

#endif
