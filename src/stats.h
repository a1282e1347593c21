/* SPDX-License-Identifier: MIT */
/*
 * What a dump or a restore measures (stats.c): phase times and page counts,
 * recorded in the image as CRIU's stats files are, printed with
 * --display-stats and by amber show --stats.
 */
#ifndef AMBER_STATS_H
#define AMBER_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct img_set;
struct img_dir;
struct tree;

enum stat_time {
	ST_TOTAL,
	ST_FREEZING, /* dump: seizing and stopping every task */
	ST_FROZEN,   /* dump: last task stopped until released or killed */
	ST_MEMDUMP,  /* dump: scanning and copying pages (the writes overlap it) */
	ST_MEMWRITE, /* dump: the writes left after the scan, and the sync */
	ST_FORKING,  /* restore: until every process exists */
	ST_RESTORE,  /* restore: rebuilding the processes until they run */
	ST_INJECT,   /* both: inside injected syscalls and batches (ptrace round trips) */
	ST__COUNT,
};

enum stat_count {
	SC_PAGES_SCANNED,
	SC_PAGES_SKIPPED_PARENT,
	SC_PAGES_WRITTEN,
	SC_PAGES_RESTORED,
	SC_PROCESSES,
	SC_DONE,     /* processes dumped or restored so far (progress.c) */
	SC_INJECTED, /* syscalls run in a task by ptrace, one round trip each */
	SC_BATCHES,  /* batches of syscalls run in one round trip */
	SC_BATCHED,  /* the syscalls in them */
	SC__COUNT,
};

void stats_start(enum stat_time t);
/* A monotonic time in us, and the time since it added to resource r (resources[]). */
uint64_t stats_now(void);
void stats_resource(size_t r, uint64_t since);
void stats_stop(enum stat_time t);
void stats_add(enum stat_count c, uint64_t n);
/* From another thread too (the progress line). */
uint64_t stats_get(enum stat_count c);

/* dump: stats-dump.img into the image (before the inventory is written) */
int stats_write_dump(struct img_set *set);
/* restore: stats-restore.img beside the image, with the owner's rights; warns only */
void stats_write_restore(struct tree *t);
/* swrk: CRIU's stats-dump or stats-restore in the client's work directory; warns only */
void stats_write_rpc(const char *work_dir, bool restore);
/* --display-stats: what this dump or restore measured, on stderr */
void stats_print(bool restore);
/* amber show --stats DIR: both files, where they are; 0 or 1 (some unreadable) */
int stats_show(struct img_dir *d, FILE *out);

#endif
