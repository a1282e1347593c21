// SPDX-License-Identifier: MIT
/*
 * Dump and restore statistics.  Phases are timed with CLOCK_MONOTONIC and
 * may be entered many times (once per process): their times add up.  The
 * dump's are part of the image (stats-dump.img, in the inventory); the
 * restore's are written beside it afterwards (stats-restore.img), so that a
 * later restore of the same image still verifies.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "amber.h"
#include "image.h"
#include "log.h"
#include "owner.h"
#include "stats.h"
#include "stats.pb-c.h"
#include "rpc.pb-c.h"
#include "sys.h"

#define MAX_RESOURCES 64

static uint64_t spent[ST__COUNT], started[ST__COUNT], counts[SC__COUNT];
static uint64_t by_resource[MAX_RESOURCES]; /* amber's side of each resource's hooks */

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t stats_now(void)
{
	return now_us();
}

void stats_resource(size_t r, uint64_t since)
{
	if (r < MAX_RESOURCES)
		by_resource[r] += now_us() - since;
}

void stats_start(enum stat_time t)
{
	started[t] = now_us();
}

void stats_stop(enum stat_time t)
{
	if (started[t])
		spent[t] += now_us() - started[t];
	started[t] = 0;
}

void stats_add(enum stat_count c, uint64_t n)
{
	__atomic_fetch_add(&counts[c], n, __ATOMIC_RELAXED);
}

uint64_t stats_get(enum stat_count c)
{
	return __atomic_load_n(&counts[c], __ATOMIC_RELAXED);
}

/* The total so far, for the records written before the end. */
static uint64_t total(void)
{
	return spent[ST_TOTAL] + (started[ST_TOTAL] ? now_us() - started[ST_TOTAL] : 0);
}

static void fill_dump(DumpStats *s)
{
	dump_stats__init(s);
	s->freezing_time = spent[ST_FREEZING];
	/* still frozen when the image is written: the time so far */
	s->frozen_time =
		spent[ST_FROZEN] + (started[ST_FROZEN] ? now_us() - started[ST_FROZEN] : 0);
	s->memdump_time = spent[ST_MEMDUMP];
	s->memwrite_time = spent[ST_MEMWRITE];
	s->pages_scanned = counts[SC_PAGES_SCANNED];
	s->pages_skipped_parent = counts[SC_PAGES_SKIPPED_PARENT];
	s->pages_written = counts[SC_PAGES_WRITTEN];
	s->processes = (uint32_t)counts[SC_PROCESSES];
	s->total_time = total();
}

static void fill_restore(RestoreStats *s)
{
	restore_stats__init(s);
	s->forking_time = spent[ST_FORKING];
	s->restore_time = spent[ST_RESTORE];
	s->pages_restored = counts[SC_PAGES_RESTORED];
	s->processes = (uint32_t)counts[SC_PROCESSES];
	s->total_time = total();
}

/* a CRIU-sized time: its uint32 microseconds (71 minutes at most) */
static uint32_t us32(uint64_t us)
{
	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

void stats_write_rpc(const char *work_dir, bool restore)
{
	RpcDumpStats d = RPC_DUMP_STATS__INIT;
	RpcRestoreStats r = RPC_RESTORE_STATS__INIT;
	RpcStats s = RPC_STATS__INIT;
	const char *name = restore ? "stats-restore" : "stats-dump";
	uint8_t buf[256];
	uint32_t head[3] = {0x55105940, 0x57093306, 0};
	char path[PATH_MAX];
	size_t len;
	int fd;

	if (restore) {
		r.forking_time = us32(spent[ST_FORKING]);
		r.restore_time = us32(spent[ST_RESTORE]);
		r.has_pages_restored = true;
		r.pages_restored = counts[SC_PAGES_RESTORED];
		s.restore = &r;
	} else {
		d.freezing_time = us32(spent[ST_FREEZING]);
		d.frozen_time = us32(spent[ST_FROZEN] +
				     (started[ST_FROZEN] ? now_us() - started[ST_FROZEN] : 0));
		d.memdump_time = us32(spent[ST_MEMDUMP]);
		d.memwrite_time = us32(spent[ST_MEMWRITE]);
		d.pages_scanned = counts[SC_PAGES_SCANNED];
		d.pages_skipped_parent = counts[SC_PAGES_SKIPPED_PARENT];
		d.pages_written = counts[SC_PAGES_WRITTEN];
		s.dump = &d;
	}
	len = rpc_stats__get_packed_size(&s);
	if (len > sizeof(buf))
		return;
	rpc_stats__pack(&s, buf);
	head[2] = (uint32_t)len; /* (x86: little-endian, as the file's format is) */
	snprintf(path, sizeof(path), "%s/%s", work_dir, name);
	/* replaced each time, as CRIU does; the client's directory, never a link in it */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, head, sizeof(head)) != sizeof(head) ||
	    write(fd, buf, len) != (ssize_t)len)
		pr_warn("cannot write the client's %s in the work directory: %m", name);
	if (fd >= 0)
		close(fd);
}

int stats_write_dump(struct img_set *set)
{
	struct img *img;
	DumpStats s;
	int ret = img_create(set, IMG_STATS, &img, "stats-dump.img");

	if (ret)
		return ret;
	fill_dump(&s);
	ret = img_put(img, &s.base);
	if (ret) {
		img_abort(img);
		return ret;
	}
	return img_finish(img);
}

void stats_write_restore(struct tree *t)
{
	struct img_set set = {.dirfd = t->dirfd};
	struct img *img;
	RestoreStats s;
	int ret;

	/* in the owner's directory: as the owner, never through a planted link */
	ret = owner_enter(t);
	if (ret)
		goto warn;
	if (unlinkat(t->dirfd, "stats-restore.img", 0) && errno != ENOENT) {
		ret = -errno;
		goto leave;
	}
	ret = img_create(&set, IMG_STATS, &img, "stats-restore.img");
	if (ret)
		goto leave;
	fill_restore(&s);
	ret = img_put(img, &s.base);
	if (ret)
		img_abort(img);
	else
		ret = img_finish(img);
leave:
	owner_leave(t);
	img_set_free(&set);
warn:
	if (ret)
		pr_warn("the restore statistics were not written to stats-restore.img: %s",
			strerror(-ret));
}

static void print_ms(FILE *out, const char *what, uint64_t us)
{
	fprintf(out, "  %-22s %10.3f ms\n", what, us / 1000.0);
}

static void print_n(FILE *out, const char *what, uint64_t n)
{
	fprintf(out, "  %-22s %10llu\n", what, (unsigned long long)n);
}

static void print_dump(FILE *out, const DumpStats *s)
{
	fprintf(out, "dump statistics:\n");
	print_ms(out, "total time", s->total_time);
	print_ms(out, "freezing time", s->freezing_time);
	print_ms(out, "frozen time", s->frozen_time);
	print_ms(out, "memory dump time", s->memdump_time);
	print_ms(out, "memory write time", s->memwrite_time);
	print_n(out, "processes", s->processes);
	print_n(out, "pages scanned", s->pages_scanned);
	print_n(out, "pages skipped (parent)", s->pages_skipped_parent);
	print_n(out, "pages written", s->pages_written);
}

static void print_restore(FILE *out, const RestoreStats *s)
{
	fprintf(out, "restore statistics:\n");
	print_ms(out, "total time", s->total_time);
	print_ms(out, "forking time", s->forking_time);
	print_ms(out, "restore time", s->restore_time);
	print_n(out, "processes", s->processes);
	print_n(out, "pages restored", s->pages_restored);
}

/*
 * Where the time went, beyond the image's records: ptrace round trips, and
 * amber's side of each resource's hooks (a restored child's own work is in
 * neither), the most costly first.
 */
static void print_breakdown(FILE *out)
{
	bool shown[MAX_RESOURCES] = {false};
	size_t n = 0;

	while (resources[n] && n < MAX_RESOURCES)
		n++;
	print_ms(out, "injected syscall time", spent[ST_INJECT]);
	print_n(out, "injected syscalls", counts[SC_INJECTED]);
	print_n(out, "syscall batches", counts[SC_BATCHES]);
	print_n(out, "syscalls in batches", counts[SC_BATCHED]);
	for (;;) {
		size_t best = n;
		char what[96];

		for (size_t i = 0; i < n; i++)
			if (!shown[i] && by_resource[i] &&
			    (best == n || by_resource[i] > by_resource[best]))
				best = i;
		if (best == n)
			break;
		shown[best] = true;
		snprintf(what, sizeof(what), "time in %s", resources[best]->name);
		print_ms(out, what, by_resource[best]);
	}
}

void stats_print(bool restore)
{
	if (restore) {
		RestoreStats s;

		fill_restore(&s);
		print_restore(stderr, &s);
	} else {
		DumpStats s;

		fill_dump(&s);
		print_dump(stderr, &s);
	}
	print_breakdown(stderr);
}

int stats_show(struct img_dir *d, FILE *out)
{
	DumpStats *ds = NULL;
	RestoreStats *rs = NULL;
	int bad = 0;

	if (img_read_one(d, IMG_STATS, &dump_stats__descriptor, (ProtobufCMessage **)&ds,
			 "stats-dump.img")) {
		fprintf(out, "dump statistics: none (stats-dump.img is missing or unreadable)\n");
		bad = 1;
	} else {
		print_dump(out, ds);
		dump_stats__free_unpacked(ds, NULL);
	}
	if (faccessat(d->dirfd, "stats-restore.img", F_OK, AT_SYMLINK_NOFOLLOW)) {
		fprintf(out, "restore statistics: none (not restored yet)\n");
	} else if (img_read_one(d, IMG_STATS, &restore_stats__descriptor, (ProtobufCMessage **)&rs,
				"stats-restore.img")) {
		fprintf(out, "restore statistics: stats-restore.img is unreadable\n");
		bad = 1;
	} else {
		print_restore(out, rs);
		restore_stats__free_unpacked(rs, NULL);
	}
	return bad;
}
