// SPDX-License-Identifier: MIT
/*
 * pid -> pstree entry and dump or restore context, in O(1).  Every forked restore
 * child looks itself and its children up; a linear scan there made restoring
 * n processes O(n^2) cache misses (12% of a 500-process restore).  The index
 * follows t->pstree, t->dprocs and t->rprocs as they grow (all only append).
 */
#include <errno.h>
#include <stdlib.h>

#include "amber.h"

struct tree_index {
	struct slot {
		uint32_t pid; /* 0: free (pid 0 is never in a tree) */
		uint32_t pst; /* index in t->pstree */
		int32_t rp;   /* index in t->rprocs, or -1 */
		int32_t dp;   /* index in t->dprocs, or -1 */
	} * slot;
	size_t cap; /* power of two, at least twice the entries */
	size_t n_pst, n_rp, n_dp;
	/* restore: pstree indices by creator and by parent (tree_group_build) */
	struct tree_group {
		uint32_t *key, *idx; /* sorted by key, then index */
		size_t n;
	} by_creator, by_ppid;
};

static size_t slot_of(const struct tree_index *x, uint32_t pid)
{
	size_t i = (pid * 2654435761u) & (x->cap - 1);

	while (x->slot[i].pid && x->slot[i].pid != pid)
		i = (i + 1) & (x->cap - 1);
	return i;
}

/* Brings the index up to date; NULL when out of memory (callers scan instead). */
static struct tree_index *tree_index(const struct tree *ct)
{
	/* the index is a cache of the tree, not part of what callers see */
	struct tree *t = (struct tree *)ct;
	struct tree_index *x = t->index;

	if (!x) {
		x = calloc(1, sizeof(*x));
		if (!x)
			return NULL;
		t->index = x;
	}
	if (2 * t->nr_pstree >= x->cap) {
		size_t cap = 64;

		while (cap < 4 * t->nr_pstree)
			cap *= 2;
		free(x->slot);
		x->slot = calloc(cap, sizeof(*x->slot));
		if (!x->slot) {
			x->cap = 0;
			return NULL;
		}
		x->cap = cap;
		x->n_pst = x->n_rp = x->n_dp = 0;
	}
	for (; x->n_pst < t->nr_pstree; x->n_pst++) {
		uint32_t pid = t->pstree[x->n_pst]->pid;
		struct slot *s = &x->slot[slot_of(x, pid)];

		if (!s->pid) /* the first entry of a pid wins, as a scan finds it */
			*s = (struct slot){
				.pid = pid, .pst = (uint32_t)x->n_pst, .rp = -1, .dp = -1};
	}
	for (; t->rprocs && x->n_rp < t->nr_procs; x->n_rp++) {
		struct slot *s = &x->slot[slot_of(x, (uint32_t)t->rprocs[x->n_rp]->pid)];

		if (s->pid && s->rp < 0)
			s->rp = (int32_t)x->n_rp;
	}
	/* a dump adds a process to dprocs before its pstree entry: it waits for that */
	for (; t->dprocs && x->n_dp < t->nr_procs; x->n_dp++) {
		struct slot *s = &x->slot[slot_of(x, (uint32_t)t->dprocs[x->n_dp]->pid)];

		if (!s->pid)
			break;
		if (s->dp < 0)
			s->dp = (int32_t)x->n_dp;
	}
	return x;
}

static const uint32_t *sort_keys;

static int by_key(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (sort_keys[x] != sort_keys[y])
		return sort_keys[x] < sort_keys[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* keys: one per pstree entry.  The entries with one key come out in pstree order. */
static int group_build(struct tree_group *g, const uint32_t *keys, size_t n)
{
	g->key = malloc((n ? n : 1) * sizeof(*g->key));
	g->idx = malloc((n ? n : 1) * sizeof(*g->idx));
	if (!g->key || !g->idx)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		g->idx[i] = (uint32_t)i;
	sort_keys = keys;
	qsort(g->idx, n, sizeof(*g->idx), by_key);
	for (size_t i = 0; i < n; i++)
		g->key[i] = keys[g->idx[i]];
	g->n = n;
	return 0;
}

static size_t group_find(const struct tree_group *g, uint32_t key, const uint32_t **idx)
{
	size_t lo = 0, hi = g->n, end;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (g->key[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < g->n && g->key[end] == key; end++)
		;
	*idx = g->idx + lo;
	return end - lo;
}

/*
 * Who creates whom, and whose children are whose, as sorted lists: every
 * restored process looks up the processes it creates, and amber each one's
 * children; a scan of the whole tree for each was O(n^2) for n processes.
 */
static int groups_build(const struct tree *t, struct tree_index *x)
{
	uint32_t *ppids = malloc((t->nr_pstree ? t->nr_pstree : 1) * sizeof(*ppids));
	int ret;

	if (!ppids)
		return -ENOMEM;
	for (size_t i = 0; i < t->nr_pstree; i++)
		ppids[i] = i ? t->pstree[i]->ppid : 0;
	ret = group_build(&x->by_ppid, ppids, t->nr_pstree);
	if (!ret)
		ret = group_build(&x->by_creator, t->creator, t->nr_pstree);
	free(ppids);
	return ret;
}

int tree_index_build(const struct tree *t)
{
	struct tree_index *x = tree_index(t);

	if (!x)
		return -ENOMEM;
	return t->creator && !x->by_creator.idx ? groups_build(t, x) : 0;
}

size_t tree_created(const struct tree *t, uint32_t creator, const uint32_t **idx)
{
	return group_find(&t->index->by_creator, creator, idx);
}

size_t tree_children(const struct tree *t, uint32_t ppid, const uint32_t **idx)
{
	return group_find(&t->index->by_ppid, ppid, idx);
}

void tree_index_free(struct tree *t)
{
	if (t->index) {
		free(t->index->slot);
		free(t->index->by_creator.key);
		free(t->index->by_creator.idx);
		free(t->index->by_ppid.key);
		free(t->index->by_ppid.idx);
	}
	free(t->index);
	t->index = NULL;
}

bool tree_shares_files(const struct tree *t, uint32_t pid)
{
	const PstreeEntry *e = tree_entry(t, pid);

	if (e && e->clone_files)
		return true;
	for (size_t i = 0; i < t->nr_pstree; i++)
		if (t->pstree[i]->ppid == pid && t->pstree[i]->clone_files)
			return true;
	return false;
}

PstreeEntry *tree_entry(const struct tree *t, uint32_t pid)
{
	struct tree_index *x = pid ? tree_index(t) : NULL;
	struct slot *s;

	if (!x) {
		for (size_t i = 0; i < t->nr_pstree; i++)
			if (t->pstree[i]->pid == pid)
				return t->pstree[i];
		return NULL;
	}
	s = &x->slot[slot_of(x, pid)];
	return s->pid ? t->pstree[s->pst] : NULL;
}

struct restore_ctx *tree_rproc(const struct tree *t, uint32_t pid)
{
	struct tree_index *x = pid ? tree_index(t) : NULL;
	struct slot *s;

	if (!x) {
		for (size_t p = 0; p < t->nr_procs; p++)
			if ((uint32_t)t->rprocs[p]->pid == pid)
				return t->rprocs[p];
		return NULL;
	}
	s = &x->slot[slot_of(x, pid)];
	return s->pid && s->rp >= 0 ? t->rprocs[s->rp] : NULL;
}

struct dump_ctx *tree_dproc(const struct tree *t, uint32_t pid)
{
	struct tree_index *x = pid ? tree_index(t) : NULL;
	struct slot *s;

	if (x) {
		s = &x->slot[slot_of(x, pid)];
		if (s->pid && s->dp >= 0)
			return t->dprocs[s->dp];
		if (x->n_dp == t->nr_procs)
			return NULL;
	}
	/* (not all indexed: one was added to dprocs, its pstree entry still to come) */
	for (size_t p = 0; p < t->nr_procs; p++)
		if ((uint32_t)t->dprocs[p]->pid == pid)
			return t->dprocs[p];
	return NULL;
}

size_t tree_pos(const struct tree *t, uint32_t pid)
{
	struct tree_index *x = pid ? tree_index(t) : NULL;
	struct slot *s;

	if (!x) {
		for (size_t i = 0; i < t->nr_pstree; i++)
			if (t->pstree[i]->pid == pid)
				return i;
		return (size_t)-1;
	}
	s = &x->slot[slot_of(x, pid)];
	return s->pid ? s->pst : (size_t)-1;
}
