/* SPDX-License-Identifier: MIT */
/* libnftables, loaded on first use (nft.c). */
#ifndef AMBER_NFT_H
#define AMBER_NFT_H

struct nft_ctx;

/*
 * Load the library now, quietly: from amber's own filesystem, before amber
 * enters a tree's mount namespace, where it may not be (a container's).
 */
void nft_preload(void);
/* A context whose output and errors are buffered, without include paths; NULL and logged if not. */
struct nft_ctx *nft_open(void);
/* One command; 0 or -EIO. *out (may be NULL) is its output, *err its error text, valid until nft_close(). */
int nft_run(struct nft_ctx *nft, const char *cmd, const char **out, const char **err);
void nft_close(struct nft_ctx *nft);

#endif
