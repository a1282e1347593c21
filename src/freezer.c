// SPDX-License-Identifier: MIT
/*
 * dump --freeze-cgroup PATH: the tree is one cgroup (a container), and is
 * frozen as container runtimes do, with one write to the cgroup's freezer,
 * instead of interrupting thread after thread while the others may fork.
 *
 * Before anything is written, the cgroup's processes (with its descendants')
 * must be exactly the tree's: freezing it would otherwise freeze strangers
 * or miss members.  dump.c then freezes it, checks the members again (now
 * they cannot change), seizes and interrupts every thread, and thaws it:
 * each task stops in its ptrace stop before it runs a user instruction (v2:
 * a frozen task interrupted enters its ptrace stop at once and stays there
 * after the thaw; v1: it enters it as it leaves the refrigerator).  The dump
 * needs the tasks thawed: the syscalls it injects run in them.  A cgroup its
 * user had frozen before the dump is frozen again at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"
#include "freezer.h"
#include "log.h"
#include "proc.h"
#include "sys.h"

#define FREEZE_TIMEOUT_MS 10000

struct pidset {
	pid_t *v;
	size_t n;
};

static int pidset_add(struct pidset *s, pid_t pid)
{
	pid_t *nv = realloc(s->v, (s->n + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	s->v = nv;
	s->v[s->n++] = pid;
	return 0;
}

static bool pidset_has(const struct pidset *s, pid_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == pid)
			return true;
	return false;
}

static int read_cg_file(const struct freezer *fz, const char *dir, const char *name, char **out)
{
	char path[PATH_MAX];
	size_t len;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ret = sys_read_file(path, out, &len);
	if (ret)
		pr_err("--freeze-cgroup %s: cannot read %s: %s", fz->path, path, strerror(-ret));
	return ret;
}

static int write_cg_file(const struct freezer *fz, const char *name, const char *val)
{
	char path[PATH_MAX];
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fz->path, name);
	fd = sys_open(path, O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("--freeze-cgroup: cannot open %s: %s", path, strerror(-fd));
		return fd;
	}
	r = sys_write_full(fd, val, strlen(val));
	close(fd);
	if (r < 0) {
		pr_err("--freeze-cgroup: cannot write '%s' to %s: %s", val, path,
		       strerror((int)-r));
		return (int)r;
	}
	return 0;
}

/* v2: cgroup.events says "frozen 1"; v1: freezer.state says FROZEN (not FREEZING). */
static int is_frozen(const struct freezer *fz, bool *frozen)
{
	char *text;
	int ret = read_cg_file(fz, fz->path, fz->v1 ? "freezer.state" : "cgroup.events", &text);

	if (ret)
		return ret;
	*frozen = fz->v1 ? !strncmp(text, "FROZEN", 6) : strstr(text, "frozen 1") != NULL;
	free(text);
	return 0;
}

int freezer_open(struct freezer *fz, const char *path)
{
	char file[PATH_MAX];

	*fz = (struct freezer){.path = path};
	snprintf(file, sizeof(file), "%s/cgroup.freeze", path);
	if (access(file, F_OK)) {
		snprintf(file, sizeof(file), "%s/freezer.state", path);
		if (access(file, F_OK)) {
			pr_err("--freeze-cgroup %s: %s", path,
			       access(path, F_OK) ? strerror(errno)
						  : "not a cgroup v2 directory (no cgroup.freeze) "
						    "nor a v1 freezer cgroup (no freezer.state)");
			return -EINVAL;
		}
		fz->v1 = true;
	}
	return is_frozen(fz, &fz->was_frozen);
}

/* The processes of the cgroup dir and of every cgroup below it. */
static int cgroup_procs(const struct freezer *fz, const char *dir, struct pidset *s, int depth)
{
	struct dirent *de;
	char *text, *p, *end;
	DIR *d;
	int ret;

	if (depth > 64)
		return 0; /* cgroup.max.depth is far lower in practice */
	ret = read_cg_file(fz, dir, "cgroup.procs", &text);
	if (ret)
		return ret;
	for (p = text; !ret && *p; p = end) {
		long pid = strtol(p, &end, 10);

		if (end == p)
			break;
		if (pid > 0 && !pidset_has(s, (pid_t)pid))
			ret = pidset_add(s, (pid_t)pid);
	}
	free(text);
	if (ret)
		return ret;
	d = opendir(dir);
	if (!d) {
		pr_err("--freeze-cgroup %s: cannot list %s: %m", fz->path, dir);
		return -errno;
	}
	while (!ret && (de = readdir(d))) {
		char sub[PATH_MAX];

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		ret = cgroup_procs(fz, sub, s, depth + 1);
	}
	closedir(d);
	return ret;
}

/* Each live process of the tree: the root and, through every thread's children, below. */
static int tree_procs(pid_t root, struct pidset *s)
{
	int ret = pidset_add(s, root);

	for (size_t i = 0; !ret && i < s->n; i++) {
		char path[64];
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%d/task", s->v[i]);
		d = sys_opendir(path);
		if (!d)
			continue; /* it exited meanwhile: the check after the freeze sees it */
		while (!ret && (de = readdir(d))) {
			pid_t tid = atoi(de->d_name), *kids;
			int n;

			if (tid <= 0)
				continue;
			n = proc_children(tid, &kids);
			for (int k = 0; !ret && k < n; k++)
				if (!pidset_has(s, kids[k]))
					ret = pidset_add(s, kids[k]);
			if (n > 0)
				free(kids);
		}
		closedir(d);
	}
	return ret;
}

static const char *comm_of(pid_t pid, struct proc_stat *st)
{
	return proc_parse_stat(pid, st) ? "gone meanwhile" : st->comm;
}

/*
 * One look at the cgroup and the tree: the tree's live processes outside the
 * cgroup go to out, the cgroup's processes outside the tree to strangers.
 */
static int mismatches(const struct freezer *fz, pid_t root, struct pidset *out,
		      struct pidset *strangers)
{
	struct pidset cg = {0}, tree = {0};
	struct proc_stat st;
	int ret = cgroup_procs(fz, fz->path, &cg, 0);

	if (!ret)
		ret = tree_procs(root, &tree);
	for (size_t i = 0; !ret && i < tree.n; i++)
		/* a zombie has left its cgroup: there is nothing of it to freeze */
		if (!pidset_has(&cg, tree.v[i]) && !proc_parse_stat(tree.v[i], &st) &&
		    st.state != 'Z' && st.state != 'X')
			ret = pidset_add(out, tree.v[i]);
	for (size_t i = 0; !ret && i < cg.n; i++)
		if (!pidset_has(&tree, cg.v[i]))
			ret = pidset_add(strangers, cg.v[i]);
	free(cg.v);
	free(tree.v);
	return ret;
}

/* Keep in s only what is also in k. */
static void pidset_keep(struct pidset *s, const struct pidset *k)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		if (pidset_has(k, s->v[i]))
			s->v[n++] = s->v[i];
	s->n = n;
}

int freezer_check_members(const struct freezer *fz, pid_t root)
{
	struct pidset out = {0}, strangers = {0};
	struct proc_stat st;
	int ret = mismatches(fz, root, &out, &strangers);

	/*
	 * Not frozen yet, the two lists are read at two moments: a child forked
	 * (or a process exited) in between is a mismatch of that one look only.
	 * What stays out of place over several looks is.
	 */
	for (int look = 1; !ret && !fz->frozen && look < 5 && (out.n || strangers.n); look++) {
		struct pidset o2 = {0}, s2 = {0};

		nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
		ret = mismatches(fz, root, &o2, &s2);
		pidset_keep(&out, &o2);
		pidset_keep(&strangers, &s2);
		free(o2.v);
		free(s2.v);
	}
	if (!ret && out.n) {
		pr_err("pid %d (%s) of the tree of pid %d is not in cgroup %s (nor below it): "
		       "freezing the cgroup would miss it; move it there or dump without "
		       "--freeze-cgroup",
		       out.v[0], comm_of(out.v[0], &st), root, fz->path);
		ret = -EINVAL;
	} else if (!ret && strangers.n) {
		pr_err("pid %d (%s) is in cgroup %s but not in the tree of pid %d: freezing the "
		       "cgroup would freeze it too; dump the cgroup's whole tree, or without "
		       "--freeze-cgroup",
		       strangers.v[0], comm_of(strangers.v[0], &st), fz->path, root);
		ret = -EINVAL;
	}
	free(out.v);
	free(strangers.v);
	return ret;
}

/* Poll until the kernel reports the cgroup frozen; the freeze takes each task
 * at its next return to user space, so a task in an uninterruptible sleep
 * (D state) holds it back. */
static int wait_frozen(struct freezer *fz)
{
	const struct timespec step = {0, 5 * 1000 * 1000};
	bool frozen = false;

	for (int ms = 0;; ms += 5) {
		int ret = is_frozen(fz, &frozen);

		if (ret || frozen)
			return ret;
		ret = dump_check_interrupted();
		if (ret)
			return ret;
		if (ms >= FREEZE_TIMEOUT_MS)
			break;
		nanosleep(&step, NULL);
	}
	pr_err("cgroup %s did not freeze within %d s (%s): a process of it may be in an "
	       "uninterruptible sleep",
	       fz->path, FREEZE_TIMEOUT_MS / 1000,
	       fz->v1 ? "freezer.state still FREEZING" : "cgroup.events still frozen 0");
	return -ETIMEDOUT;
}

int freezer_freeze(struct freezer *fz)
{
	int ret = write_cg_file(fz, fz->v1 ? "freezer.state" : "cgroup.freeze",
				fz->v1 ? "FROZEN" : "1");

	if (ret)
		return ret;
	fz->frozen = true;
	ret = wait_frozen(fz);
	if (ret)
		freezer_thaw(fz);
	else
		pr_info("froze cgroup %s (%s)%s", fz->path,
			fz->v1 ? "v1 freezer.state" : "v2 cgroup.freeze",
			fz->was_frozen ? ", frozen already by its user" : "");
	return ret;
}

int freezer_thaw(struct freezer *fz)
{
	int ret = write_cg_file(fz, fz->v1 ? "freezer.state" : "cgroup.freeze",
				fz->v1 ? "THAWED" : "0");

	if (!ret)
		fz->frozen = false;
	return ret;
}

int freezer_restore(struct freezer *fz)
{
	int ret;

	if (!fz->was_frozen)
		return fz->frozen ? freezer_thaw(fz) : 0;
	ret = write_cg_file(fz, fz->v1 ? "freezer.state" : "cgroup.freeze",
			    fz->v1 ? "FROZEN" : "1");
	fz->frozen = false; /* frozen now as its user had it: not amber's to thaw */
	return ret;
}

int freezer_wait_restored(struct freezer *fz)
{
	return fz->was_frozen ? wait_frozen(fz) : 0;
}
