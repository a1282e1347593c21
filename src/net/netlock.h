/* SPDX-License-Identifier: MIT */
/*
 * The network lock (CRIU's --network-lock nftables or iptables): from just
 * before a dump reads an established TCP connection until the restore has it
 * back, every packet of that connection is dropped by an nft table (or an
 * iptables chain) of amber's own, so that the peer retransmits into silence
 * instead of being answered with a reset.
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

/*
 * Restore failed: name each network lock of the image still in place (a
 * restore that fails leaves it, so that it can be tried again) and the
 * command that removes it.
 */
void netlock_restore_failed(struct tree *t);

/* amber check: 0 when nft runs here (why: what it said), or -errno. */
int netlock_probe(char *why, size_t len);

#endif
