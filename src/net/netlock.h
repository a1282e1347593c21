/* SPDX-License-Identifier: MIT */
/*
 * The network lock (CRIU's --network-lock nft): from just before a dump reads
 * an established TCP connection until the restore has it back, every packet
 * of that connection is dropped by an nft table of amber's own, so that the
 * peer retransmits into silence instead of being answered with a reset.
 */
#ifndef AMBER_NETLOCK_H
#define AMBER_NETLOCK_H

#include <stddef.h>

#include "amber.h"

/*
 * Dump: drop the packets of connection e (both directions) from now on; the
 * first call creates the table.  *table: its name, which the image records
 * when the lock outlives the dump.  The lock goes when amber exits unless the
 * dump killed the tree (a failed dump or -R leaves the processes running).
 */
int netlock_connection(struct dump_ctx *ctx, const InetSkEntry *e, const char *what,
		       const char **table);

/* Restore: remove the table named in the image, once its connections exist again. */
int netlock_unlock(struct tree *t, const char *table);

/* amber check: 0 when nft runs here (why: what it said), or -errno. */
int netlock_probe(char *why, size_t len);

#endif
