// SPDX-License-Identifier: MIT
/*
 * libnftables, opened the first time a network namespace's ruleset is read
 * or loaded.  Linked, it and the five libraries it pulls in are some thirty
 * mappings in every amber process, and each process a restore forks copies
 * them and then unmaps them (docs/design.md): most trees have no ruleset.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <nftables/libnftables.h>

#include "log.h"
#include "nft.h"

#define NFT_LIB "libnftables.so.1"

static struct {
	__typeof__(nft_ctx_new) *ctx_new;
	__typeof__(nft_ctx_free) *ctx_free;
	__typeof__(nft_ctx_buffer_output) *buffer_output;
	__typeof__(nft_ctx_buffer_error) *buffer_error;
	__typeof__(nft_ctx_get_output_buffer) *get_output;
	__typeof__(nft_ctx_get_error_buffer) *get_error;
	__typeof__(nft_ctx_clear_include_paths) *clear_include_paths;
	__typeof__(nft_run_cmd_from_buffer) *run;
} lib;

static const struct {
	const char *name;
	void **fn;
} syms[] = {
	{"nft_ctx_new", (void **)&lib.ctx_new},
	{"nft_ctx_free", (void **)&lib.ctx_free},
	{"nft_ctx_buffer_output", (void **)&lib.buffer_output},
	{"nft_ctx_buffer_error", (void **)&lib.buffer_error},
	{"nft_ctx_get_output_buffer", (void **)&lib.get_output},
	{"nft_ctx_get_error_buffer", (void **)&lib.get_error},
	{"nft_ctx_clear_include_paths", (void **)&lib.clear_include_paths},
	{"nft_run_cmd_from_buffer", (void **)&lib.run},
};

static int load(bool quiet)
{
	static int ret = 1;
	void *h;

	if (ret <= 0)
		return ret;
	h = dlopen(NFT_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		if (quiet)
			return -ENOENT; /* told at the use, if there is one */
		pr_err("cannot load %s for the namespace's nftables ruleset: %s (install "
		       "Debian's libnftables1)",
		       NFT_LIB, dlerror());
		return ret = -ENOENT;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].fn = dlsym(h, syms[i].name);
		if (!*syms[i].fn) {
			pr_err("%s has no %s: %s", NFT_LIB, syms[i].name, dlerror());
			return ret = -ENOENT;
		}
	}
	return ret = 0;
}

void nft_preload(void)
{
	load(true);
}

struct nft_ctx *nft_open(void)
{
	struct nft_ctx *nft;

	if (load(false))
		return NULL;
	nft = lib.ctx_new(NFT_CTX_DEFAULT);
	if (!nft) {
		pr_err("cannot make an nftables context");
		return NULL;
	}
	lib.buffer_output(nft);
	lib.buffer_error(nft);
	lib.clear_include_paths(nft);
	return nft;
}

int nft_run(struct nft_ctx *nft, const char *cmd, const char **out, const char **err)
{
	int ret = lib.run(nft, cmd) ? -EIO : 0;

	/* each get empties its buffer: once */
	if (out)
		*out = lib.get_output(nft);
	*err = lib.get_error(nft);
	return ret;
}

void nft_close(struct nft_ctx *nft)
{
	if (nft)
		lib.ctx_free(nft);
}
