// SPDX-License-Identifier: MIT
/*
 * A user namespace of the tree (one, one level below amber's): its uid_map,
 * gid_map and setgroups, as amber reads them from its parent namespace.
 *
 * Dump: the maps are read from /proc/PID (lines "inside lower count", lower
 * in amber's namespace); the namespace must be a child of amber's
 * (NS_GET_PARENT), not deeper.  The credentials the image holds are amber's
 * view (creds.c reads /proc/PID/status, which the kernel translates to the
 * reader's namespace).
 *
 * Restore: a helper forked for it unshare()s CLONE_NEWUSER (amber may have
 * threads, which may not), amber writes setgroups and the maps into
 * /proc/HELPER as newuidmap would (it is root in the parent namespace, which
 * may write any map), keeps an fd on /proc/HELPER/ns/user and lets the
 * helper go.  creds.c translates the image's ids into the namespace's view
 * (userns_inside), since setresuid() inside takes those.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns.h"
#include "sys.h"

#define MAP_LINES_MAX 340 /* the kernel's limit on a map's lines */

static int read_map(NsEntry *e, pid_t pid, const char *name, NsIdmap ***map, size_t *n)
{
	char path[64], *buf = NULL, *line, *save = NULL;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("user namespace %u: cannot read %s: %s", e->id, path, strerror(-ret));
		return ret;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned int first, lower, count;
		NsIdmap **nm, *m;

		if (sscanf(line, "%u %u %u", &first, &lower, &count) != 3) {
			pr_err("user namespace %u: %s: cannot parse '%s'", e->id, path, line);
			ret = -EINVAL;
			break;
		}
		nm = realloc(*map, (*n + 1) * sizeof(*nm));
		m = malloc(sizeof(*m));
		if (nm)
			*map = nm;
		if (!nm || !m) {
			free(m);
			ret = -ENOMEM;
			break;
		}
		ns_idmap__init(m);
		m->first = first, m->lower = lower, m->count = count;
		(*map)[(*n)++] = m;
	}
	free(buf);
	return ret;
}

int userns_read(NsEntry *e, pid_t pid)
{
	char path[64], *buf = NULL;
	int ret;

	ret = read_map(e, pid, "uid_map", &e->uid_map, &e->n_uid_map);
	if (!ret)
		ret = read_map(e, pid, "gid_map", &e->gid_map, &e->n_gid_map);
	if (ret)
		return ret;
	if (!e->n_uid_map || !e->n_gid_map) {
		pr_err("pid %d: user namespace %u has no %s yet; amber cannot restore a "
		       "process whose ids are not mapped: dump it once the maps are written",
		       pid, e->id, e->n_uid_map ? "gid_map" : "uid_map");
		return -EOPNOTSUPP;
	}
	snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("user namespace %u: cannot read %s: %s", e->id, path, strerror(-ret));
		return ret;
	}
	e->has_setgroups_deny = 1;
	e->setgroups_deny = !strncmp(buf, "deny", 4);
	free(buf);
	return 0;
}

/* The namespace must be a child of amber's: a deeper one would need its parents made. */
int userns_member(NsEntry *e, pid_t pid)
{
	struct stat own, parent;
	char path[64];
	int fd, pfd;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
	fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("pid %d: cannot open %s: %s", pid, path, strerror(-fd));
		return fd;
	}
	pfd = ioctl(fd, NS_GET_PARENT);
	close(fd);
	if (pfd < 0) {
		pr_err("pid %d: cannot get the parent of its user namespace: %m", pid);
		return -errno;
	}
	if (fstat(pfd, &parent) || sys_stat("/proc/self/ns/user", &own)) {
		pr_err("pid %d: cannot stat its user namespace's parent or amber's own: %m", pid);
		close(pfd);
		return -errno;
	}
	close(pfd);
	if (parent.st_ino != own.st_ino || parent.st_dev != own.st_dev) {
		pr_err("pid %d is in a nested user namespace (inode %llu, whose parent %llu is "
		       "not amber's %llu); amber restores one level of user namespace below "
		       "its own: run amber in the parent namespace (nsenter)",
		       pid, (unsigned long long)e->ino, (unsigned long long)parent.st_ino,
		       (unsigned long long)own.st_ino);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int corrupt(const NsEntry *e, const char *map, const char *what)
{
	pr_err("ns.img: user namespace %u: %s %s; the image is corrupt", e->id, map, what);
	return -EBADMSG;
}

static bool overlap(uint32_t a, uint32_t an, uint32_t b, uint32_t bn)
{
	return a < b + (uint64_t)bn && b < a + (uint64_t)an;
}

static int check_map(const NsEntry *e, const char *name, NsIdmap *const *map, size_t n)
{
	if (!n)
		return corrupt(e, name, "is empty");
	if (n > MAP_LINES_MAX)
		return corrupt(e, name, "has more than 340 lines (the kernel's limit)");
	for (size_t i = 0; i < n; i++) {
		const NsIdmap *m = map[i];

		if (!m->count || (uint64_t)m->first + m->count > 0xffffffffULL ||
		    (uint64_t)m->lower + m->count > 0xffffffffULL)
			return corrupt(e, name, "has a line of no ids or past the last id");
		for (size_t k = 0; k < i; k++)
			if (overlap(m->first, m->count, map[k]->first, map[k]->count) ||
			    overlap(m->lower, m->count, map[k]->lower, map[k]->count))
				return corrupt(e, name, "has overlapping lines");
	}
	return 0;
}

int userns_check(const NsEntry *e)
{
	int ret = check_map(e, "uid_map", e->uid_map, e->n_uid_map);

	return ret ? ret : check_map(e, "gid_map", e->gid_map, e->n_gid_map);
}

int userns_inside(const NsEntry *e, bool gid, uint32_t id, uint32_t *inside)
{
	NsIdmap *const *map = gid ? e->gid_map : e->uid_map;
	size_t n = gid ? e->n_gid_map : e->n_uid_map;

	for (size_t i = 0; i < n; i++)
		if (id >= map[i]->lower && id - map[i]->lower < map[i]->count) {
			*inside = map[i]->first + (id - map[i]->lower);
			return 0;
		}
	return -ERANGE;
}

static int write_map(const NsEntry *e, pid_t pid, const char *name, NsIdmap *const *map, size_t n)
{
	char path[64], *buf = malloc(n * 36 + 1);
	size_t len = 0;
	int fd, ret = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(buf + len, "%u %u %u\n", map[i]->first, map[i]->lower,
				       map[i]->count);
	if (!len) /* setgroups */
		len = (size_t)sprintf(buf, "%s", e->setgroups_deny ? "deny" : "allow");
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	fd = sys_open(path, O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		ret = fd;
		pr_err("user namespace %u: cannot open %s: %s", e->id, path, strerror(-fd));
	} else if (sys_write_full(fd, buf, len) != (ssize_t)len) {
		ret = errno ? -errno : -EIO;
		pr_err("user namespace %u: cannot write %s: %s", e->id, path, strerror(-ret));
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

static int unshare_user(void *arg)
{
	const NsEntry *e = arg;

	if (unshare(CLONE_NEWUSER)) {
		pr_err("cannot make user namespace %u: %m", e->id);
		return -errno;
	}
	return 0;
}

/* setgroups before gid_map: a deny must be written first */
static int write_maps(pid_t pid, void *arg)
{
	const NsEntry *e = arg;
	int ret = write_map(e, pid, "setgroups", NULL, 0);

	if (!ret)
		ret = write_map(e, pid, "uid_map", e->uid_map, e->n_uid_map);
	if (!ret)
		ret = write_map(e, pid, "gid_map", e->gid_map, e->n_gid_map);
	return ret;
}

int userns_make(const NsEntry *e, int base, int *fd)
{
	/* the maker: in the new namespace until amber wrote its maps and has its fd */
	return ns_make_by_child("user", e->id, "user", unshare_user, write_maps, (void *)e, base,
				fd);
}
