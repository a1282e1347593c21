// SPDX-License-Identifier: MIT
/*
 * Cgroup namespaces of the tree, where amber can make them exactly (ns.c
 * does the rest, as for UTS and IPC ones).
 *
 * A cgroup namespace is a root cgroup in each hierarchy (one per cgroup v1
 * controller on a hybrid machine, and v2's): inside, /proc/self/cgroup
 * shows paths below it.  amber does not restore cgroup membership: a
 * restored process is in amber's cgroups.  So a namespace comes back
 * exactly when its processes sat at its root (inside, every line says
 * "/") and amber's cgroups at restore are that root: a namespace that
 * amber's thread unshare()s there is rooted where the restored processes
 * are, and they see "/" again.  Anything else is refused, naming it: at
 * dump a process below its namespace's root (it would see another path),
 * at restore a root that is not amber's cgroup (run amber there).
 *
 * Dump: /proc/PID/cgroup shows paths as the reader's namespace sees them;
 * amber reads it from its own namespace (the root, then) and from inside
 * (its thread setns()es in: "/" for a process at the root).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amber.h"
#include "log.h"
#include "ns.h"
#include "sys.h"

#define MAX_HIERARCHIES 64

/* The lines of /proc/PID/cgroup (pid 0: amber's own), in *buf, NUL-separated. */
static int read_cgroups(pid_t pid, char **buf, char **lines, size_t *n)
{
	char path[64], *line, *save = NULL;
	int ret;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/cgroup");
	ret = sys_read_file(path, buf, NULL);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	*n = 0;
	for (line = strtok_r(*buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (*n == MAX_HIERARCHIES) {
			pr_err("%s: more than %d cgroup hierarchies", path, MAX_HIERARCHIES);
			free(*buf);
			*buf = NULL;
			return -E2BIG;
		}
		lines[(*n)++] = line;
	}
	return 0;
}

/* "ID:CONTROLLERS:PATH" -> PATH */
static const char *cg_path(const char *line)
{
	const char *p = strchr(line, ':');

	p = p ? strchr(p + 1, ':') : NULL;
	return p ? p + 1 : "";
}

int cgroupns_member(NsEntry *e, pid_t pid)
{
	char *lines[MAX_HIERARCHIES], *buf = NULL;
	size_t n = 0;
	int ret;

	ret = ns_enter(NS_KIND__NS_CGROUP, e->id);
	if (ret)
		return ret;
	ret = read_cgroups(pid, &buf, lines, &n);
	ns_leave(NS_KIND__NS_CGROUP, e->id);
	for (size_t i = 0; !ret && i < n; i++) {
		if (!strcmp(cg_path(lines[i]), "/"))
			continue;
		pr_err("pid %d is in cgroup %s of its cgroup namespace %u (inode %llu), below the "
		       "namespace's root; amber does not restore cgroups, only a namespace whose "
		       "processes are at its root: dump it at the root",
		       pid, lines[i], e->id, (unsigned long long)e->ino);
		ret = -EOPNOTSUPP;
	}
	free(buf);
	return ret;
}

int cgroupns_read(NsEntry *e, pid_t pid)
{
	char *lines[MAX_HIERARCHIES], *buf = NULL;
	size_t n = 0;
	int ret = read_cgroups(pid, &buf, lines, &n);

	if (ret)
		return ret;
	e->cgroup_roots = calloc(n, sizeof(*e->cgroup_roots));
	ret = e->cgroup_roots ? 0 : -ENOMEM;
	for (size_t i = 0; !ret && i < n; i++) {
		e->cgroup_roots[e->n_cgroup_roots] = strdup(lines[i]);
		if (!e->cgroup_roots[e->n_cgroup_roots++])
			ret = -ENOMEM;
	}
	free(buf);
	if (!ret)
		pr_debug("pid %d: cgroup namespace %u (inode %llu): %zu hierarchies", pid, e->id,
			 (unsigned long long)e->ino, e->n_cgroup_roots);
	return ret;
}

static bool sound(const char *line)
{
	const char *p = cg_path(line);

	if (*p != '/' || strlen(line) >= PATH_MAX || strstr(p, "//"))
		return false;
	for (const char *c = p; (c = strstr(c, "/..")); c += 3)
		if (!c[3] || c[3] == '/')
			return false;
	for (const char *c = p; (c = strstr(c, "/.")); c += 2)
		if (!c[2] || c[2] == '/')
			return false;
	return !strchr(line, '\n');
}

/*
 * Each root sound, and amber's own cgroup in its hierarchy (the restored
 * processes are in amber's cgroups): checked before anything is made.
 */
int cgroupns_check(const NsEntry *e)
{
	char *lines[MAX_HIERARCHIES], *buf = NULL;
	size_t n = 0;
	int ret;

	if (!e->n_cgroup_roots) {
		pr_err("ns.img: cgroup namespace %u has no root; the image is corrupt", e->id);
		return -EBADMSG;
	}
	for (size_t i = 0; i < e->n_cgroup_roots; i++) {
		if (sound(e->cgroup_roots[i]))
			continue;
		pr_err("ns.img: cgroup namespace %u: root \"%.200s\" is not ID:CONTROLLERS:/PATH "
		       "without . or ..; the image is corrupt",
		       e->id, e->cgroup_roots[i]);
		return -EBADMSG;
	}
	ret = read_cgroups(0, &buf, lines, &n);
	for (size_t i = 0; !ret && i < e->n_cgroup_roots; i++) {
		const char *root = e->cgroup_roots[i];
		size_t k = 0;

		while (k < n && strcmp(lines[k], root))
			k++;
		if (k < n)
			continue;
		pr_err("cgroup namespace %u has its root at %s, which is not amber's cgroup of "
		       "that hierarchy (amber does not restore cgroups: its processes come back in "
		       "amber's, and would not be at the root); run amber in that cgroup to "
		       "restore",
		       e->id, root);
		ret = -EOPNOTSUPP;
	}
	if (!ret && n != e->n_cgroup_roots) {
		pr_err("cgroup namespace %u has roots in %zu cgroup hierarchies, amber is in %zu: "
		       "the image is of another cgroup layout",
		       e->id, e->n_cgroup_roots, n);
		ret = -EOPNOTSUPP;
	}
	free(buf);
	return ret;
}
