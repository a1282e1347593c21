// SPDX-License-Identifier: MIT
/*
 * Time namespaces of the tree (ns.c does the rest, as for UTS and IPC ones).
 *
 * A time namespace is two offsets to the host's clocks, CLOCK_MONOTONIC and
 * CLOCK_BOOTTIME (/proc/PID/timens_offsets).  The dump records them and the
 * host's two clocks then; inside, a clock read offset + host clock.  The
 * restore makes a namespace whose offsets are that value minus the host's
 * clock now, so the clocks inside go on from where they were at the dump,
 * on this machine or another one (the time between dump and restore does
 * not count, as for a process stopped meanwhile).
 *
 * The kernel's rules: unshare(CLONE_NEWTIME) only makes the namespace of
 * the caller's children to come (time_for_children), its offsets are
 * written in /proc/self/timens_offsets of that process, and only before any
 * process is in it.  amber has threads and must keep its own clocks, so a
 * helper process of its own unshares, writes the offsets, and waits while
 * amber opens its time_for_children.  Each restored process setns()es into
 * its namespace (ns.c), which the kernel lets a single-threaded process
 * only and which remaps its vDSO data (vvar) to the namespace's page: the
 * vDSO's clock_gettime() reads the namespace's clocks (mem.c moves the vvar
 * mapping, the pages come from the kernel as the process faults them).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns.h"
#include "sys.h"

#define NSEC 1000000000LL
/* the kernel's bound for a clock inside a namespace: KTIME_SEC_MAX / 2 */
#define CLOCK_MAX_NS ((INT64_MAX / NSEC / 2) * NSEC)

struct offsets {
	int64_t monotonic, boottime; /* ns */
};

/* /proc/PID/timens_offsets: the offsets of the namespace of its children (and its own). */
static int read_offsets(const char *who, pid_t pid, struct offsets *o)
{
	char path[64], *buf = NULL, *line, *save = NULL;
	int ret, seen = 0;

	snprintf(path, sizeof(path), "/proc/%d/timens_offsets", pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("%s: cannot read %s: %s", who, path, strerror(-ret));
		return ret;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[16];
		long long sec;
		long nsec;

		if (sscanf(line, "%15s %lld %ld", name, &sec, &nsec) != 3 || nsec < 0 ||
		    nsec >= NSEC)
			break;
		if (!strcmp(name, "monotonic") || !strcmp(name, "1"))
			o->monotonic = sec * NSEC + nsec, seen |= 1;
		else if (!strcmp(name, "boottime") || !strcmp(name, "7"))
			o->boottime = sec * NSEC + nsec, seen |= 2;
	}
	free(buf);
	if (seen != 3) {
		pr_err("%s: %s has not the monotonic and boottime offsets this kernel writes", who,
		       path);
		return -EPROTO;
	}
	return 0;
}

static int64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

/* The host's clocks: amber's own, less its own namespace's offsets (0 in the host's). */
static int host_clocks(const char *who, struct offsets *clk)
{
	struct offsets own;
	int ret = read_offsets(who, getpid(), &own);

	if (ret)
		return ret;
	clk->monotonic = now_ns(CLOCK_MONOTONIC) - own.monotonic;
	clk->boottime = now_ns(CLOCK_BOOTTIME) - own.boottime;
	return 0;
}

int timens_read(NsEntry *e, pid_t pid)
{
	struct offsets off, clk;
	char who[96];
	int ret;

	snprintf(who, sizeof(who), "pid %d: time namespace %u (inode %llu)", pid, e->id,
		 (unsigned long long)e->ino);
	ret = read_offsets(who, pid, &off);
	if (!ret)
		ret = host_clocks(who, &clk);
	if (ret)
		return ret;
	e->has_monotonic_off_ns = e->has_boottime_off_ns = 1;
	e->monotonic_off_ns = off.monotonic;
	e->boottime_off_ns = off.boottime;
	e->has_monotonic_ns = e->has_boottime_ns = 1;
	e->monotonic_ns = (uint64_t)clk.monotonic;
	e->boottime_ns = (uint64_t)clk.boottime;
	pr_debug("%s: offsets monotonic %lld ns, boottime %lld ns", who, (long long)off.monotonic,
		 (long long)off.boottime);
	return 0;
}

/* A clock inside at dump, offset + host clock, within what the kernel allows (or -1). */
static int64_t inside(int64_t off, uint64_t clock)
{
	int64_t v;

	if (clock > (uint64_t)CLOCK_MAX_NS || __builtin_add_overflow(off, (int64_t)clock, &v) ||
	    v < 0 || v > CLOCK_MAX_NS)
		return -1;
	return v;
}

int timens_check(const NsEntry *e)
{
	const char *bad = NULL;

	if (!e->has_monotonic_off_ns || !e->has_boottime_off_ns || !e->has_monotonic_ns ||
	    !e->has_boottime_ns)
		bad = "a time namespace needs its two offsets and the host's two clocks";
	else if (inside(e->monotonic_off_ns, e->monotonic_ns) < 0)
		bad = "its CLOCK_MONOTONIC (offset + host's clock at dump) is out of the kernel's "
		      "range";
	else if (inside(e->boottime_off_ns, e->boottime_ns) < 0)
		bad = "its CLOCK_BOOTTIME (offset + host's clock at dump) is out of the kernel's "
		      "range";
	if (!bad)
		return 0;
	pr_err("ns.img: time namespace %u: %s (monotonic offset %lld + %llu ns, boottime "
	       "offset %lld + %llu ns); the image is corrupt",
	       e->id, bad, (long long)e->monotonic_off_ns, (unsigned long long)e->monotonic_ns,
	       (long long)e->boottime_off_ns, (unsigned long long)e->boottime_ns);
	return -EBADMSG;
}

/* "monotonic SEC NSEC": the kernel wants 0 <= NSEC < 1e9, SEC signed. */
static int put_offset(char *buf, size_t len, const char *name, int64_t off)
{
	int64_t sec = off / NSEC, nsec = off % NSEC;

	if (nsec < 0)
		sec--, nsec += NSEC;
	return snprintf(buf, len, "%s %lld %lld\n", name, (long long)sec, (long long)nsec);
}

/*
 * In the maker, once unshared: the offsets that continue the clocks from the
 * host's clocks clk (read before the unshare: after it, its timens_offsets
 * are the new namespace's); 0 or -errno.
 */
static int write_offsets(const NsEntry *e, const struct offsets *clk)
{
	struct offsets off;
	char who[64], buf[128];
	int fd, n, ret;

	snprintf(who, sizeof(who), "time namespace %u", e->id);
	/* (checked at read: no overflow, and the kernel's range) */
	off.monotonic = inside(e->monotonic_off_ns, e->monotonic_ns) - clk->monotonic;
	off.boottime = inside(e->boottime_off_ns, e->boottime_ns) - clk->boottime;
	n = put_offset(buf, sizeof(buf), "monotonic", off.monotonic);
	n += put_offset(buf + n, sizeof(buf) - n, "boottime", off.boottime);
	fd = sys_open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("%s: cannot open /proc/self/timens_offsets: %s", who, strerror(-fd));
		return fd;
	}
	ret = write(fd, buf, n) == n ? 0 : errno ? -errno : -EIO;
	if (ret)
		pr_err("%s: cannot set its offsets (monotonic %lld ns, boottime %lld ns): %s", who,
		       (long long)off.monotonic, (long long)off.boottime, strerror(-ret));
	else
		pr_debug("%s: offsets monotonic %lld ns, boottime %lld ns", who,
			 (long long)off.monotonic, (long long)off.boottime);
	close(fd);
	return ret;
}

/*
 * The maker: offsets written for the children it would have
 * (time_for_children); inside the tree's user namespace when it has one, so
 * that the namespace is owned by it as at dump (ns.c checked that).
 */
static int unshare_time(void *arg)
{
	const NsEntry *e = arg;
	struct offsets clk;
	int ufd = ns_user_fd();

	if (host_clocks("the maker of a time namespace", &clk))
		return -EIO;
	if (ufd >= 0 && setns(ufd, CLONE_NEWUSER)) {
		pr_err("time namespace %u: cannot enter the tree's user namespace: %m", e->id);
		return -errno;
	}
	if (unshare(CLONE_NEWTIME)) {
		pr_err("cannot make time namespace %u: %m", e->id);
		return -errno;
	}
	return write_offsets(e, &clk);
}

int timens_make(const NsEntry *e, int base, int *fd)
{
	return ns_make_by_child("time", e->id, "time_for_children", unshare_time, NULL, (void *)e,
				base, fd);
}
