// SPDX-License-Identifier: MIT
/*
 * The mount namespace of the tree, when it is not amber's: mnt.img, one
 * mnt_entry per mount of /proc/PID/mountinfo (tmpfs.c saves the files of
 * each tmpfs made in it).  Every process of the tree is in that one
 * namespace (pstree_entry mnt_ns 1); a tree split between it and amber's,
 * or over two, is refused at dump.
 *
 * Dump (as root): each mount is compared with amber's own mountinfo:
 *  - MNT_HOST: amber has the same mount (mount point, filesystem, root,
 *    type): a copy the namespace got when it was made;
 *  - MNT_BIND: a directory or file of a filesystem amber sees: bind mounted
 *    again from that path (bind_src);
 *  - MNT_NEW: a filesystem only the namespace has: proc, sysfs, devpts,
 *    mqueue, tmpfs (with its files); a second mount of one is a bind of the
 *    first.  Any other is refused, naming the mount and the process.
 * Then amber's main thread enters the namespace (its own fs_struct first:
 * setns() into a mount namespace needs one), so that the paths the other
 * resources read (fds, cwd, root, mappings) are resolved where they were
 * named; it leaves when they are done (mnt_exit_ops, last of the table).
 *
 * Restore: amber's main thread unshare()s a mount namespace (a copy of
 * its own, made a slave of it so that nothing done in it reaches amber's),
 * removes the mounts the image does not have, makes the others parents
 * first, with their flags and propagation (a peer or slave of a group of
 * the tree is cloned from a mount of that group), checks the result
 * against the image, and stays in it: the files are opened there and every
 * process is created there (inherits it), so that cwd, root and mappings
 * are resolved inside too.  It leaves once the tree runs or the restore
 * failed (mnt_exit_ops); the namespace then lives on with the processes,
 * or ends with the last reference.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "net/nft.h"
#include "ns.h"
#include "sys.h"
#include "tty.h"

/* Per-mount flags: mountinfo's names, and what a bind remount sets. */
static const struct {
	const char *name;
	unsigned flag;
} mnt_flags[] = {
	{"ro", MS_RDONLY},	   {"nosuid", MS_NOSUID},	    {"nodev", MS_NODEV},
	{"noexec", MS_NOEXEC},	   {"noatime", MS_NOATIME},	    {"nodiratime", MS_NODIRATIME},
	{"relatime", MS_RELATIME}, {"strictatime", MS_STRICTATIME},
};
#define MNT_FLAGS                                                                                  \
	(MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME | \
	 MS_STRICTATIME)

/* Filesystems amber makes new (a proc of the restoring pid namespace...). */
static const char *const new_types[] = {"proc", "sysfs", "devpts", "mqueue", "tmpfs"};

/* One line of a mountinfo. */
struct minfo {
	uint32_t id, parent, shared, master;
	uint64_t dev;
	bool unbindable;
	unsigned flags;
	char *root, *mountpoint, *fstype, *source, *options;
};

struct mnt {
	MntEntry *e;
	int fd;	      /* restore: O_PATH on its root once made */
	bool by_init; /* restore: made by the tree's init (init_makes) */
};

static struct mnt *mnts;
static size_t nr_mnts;
static MntEntry **loaded; /* restore: mnt.img as read */
static size_t nr_loaded;
static int tree_fd = -1;	      /* dump: the tree's namespace */
static int own_fd = -1, own_cwd = -1; /* amber's namespace and cwd, to come back to */
static bool inside;		      /* amber's main thread is in the tree's */
static int *clones;		      /* restore: MNT_BIND's detached copies, by index */

/* --external mnt[A]:B: dump MOUNTPOINT, KEY; restore KEY, PATH */
static struct ext_mnt {
	char *a, *b;
	bool used;
	bool optional; /* the RPC's ext_mnt: a map of what may be there, as CRIU reads it */
} * exts;
static size_t nr_exts;

static bool is_new_type(const char *t)
{
	for (size_t i = 0; i < sizeof(new_types) / sizeof(new_types[0]); i++)
		if (!strcmp(t, new_types[i]))
			return true;
	return false;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = 0;
}

static unsigned parse_flags(char *opts)
{
	unsigned flags = 0;

	for (char *save, *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
		for (size_t i = 0; i < sizeof(mnt_flags) / sizeof(mnt_flags[0]); i++)
			if (!strcmp(o, mnt_flags[i].name))
				flags |= mnt_flags[i].flag;
	return flags;
}

/* One line: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAG:N...] - TYPE SOURCE SUPEROPTS */
static int parse_line(char *line, struct minfo *m)
{
	char *save, *f[6], *tok;
	unsigned maj, min;

	memset(m, 0, sizeof(*m));
	for (int i = 0; i < 6; i++) {
		f[i] = strtok_r(i ? NULL : line, " ", &save);
		if (!f[i])
			return -EINVAL;
	}
	if (sscanf(f[2], "%u:%u", &maj, &min) != 2)
		return -EINVAL;
	m->id = (uint32_t)strtoul(f[0], NULL, 10);
	m->parent = (uint32_t)strtoul(f[1], NULL, 10);
	m->dev = makedev(maj, min);
	m->root = f[3];
	m->mountpoint = f[4];
	m->flags = parse_flags(f[5]);
	while ((tok = strtok_r(NULL, " ", &save)) && strcmp(tok, "-")) {
		if (!strncmp(tok, "shared:", 7))
			m->shared = (uint32_t)strtoul(tok + 7, NULL, 10);
		else if (!strncmp(tok, "master:", 7))
			m->master = (uint32_t)strtoul(tok + 7, NULL, 10);
		else if (!strcmp(tok, "unbindable"))
			m->unbindable = true;
	}
	m->fstype = strtok_r(NULL, " ", &save);
	m->source = strtok_r(NULL, " ", &save);
	m->options = strtok_r(NULL, " \n", &save);
	if (!tok || !m->fstype || !m->source || !m->options)
		return -EINVAL;
	unescape(m->root);
	unescape(m->mountpoint);
	unescape(m->source);
	return 0;
}

/* A whole mountinfo (buf keeps the strings the lines point into). */
static int read_mountinfo(const char *path, char **buf, struct minfo **out, size_t *n)
{
	struct minfo *ms = NULL;
	size_t nr = 0;
	char *line, *save;
	int ret = sys_read_file(path, buf, NULL);

	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	for (line = strtok_r(*buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct minfo *nm = realloc(ms, (nr + 1) * sizeof(*ms));

		if (!nm) {
			free(ms);
			return -ENOMEM;
		}
		ms = nm;
		if (parse_line(line, &ms[nr])) {
			pr_err("%s: cannot parse line %zu", path, nr + 1);
			free(ms);
			return -EINVAL;
		}
		nr++;
	}
	*out = ms;
	*n = nr;
	return 0;
}

/* Whether path is under (or is) dir, and what follows it. */
static const char *under(const char *path, const char *dir)
{
	size_t l = strlen(dir);

	if (!strcmp(dir, "/"))
		return path;
	if (strncmp(path, dir, l) || (path[l] && path[l] != '/'))
		return NULL;
	return path + l;
}

int mnt_external(const char *arg)
{
	return mnt_external_map(arg, false);
}

int mnt_external_map(const char *arg, bool optional)
{
	const char *p = arg + strlen("mnt["), *q = strchr(p, ']');
	struct ext_mnt *nx;

	if (!q || q == p || q[1] != ':' || !q[2]) {
		pr_err("--external %s: a mount is mnt[MOUNTPOINT]:KEY at dump, mnt[KEY]:PATH at "
		       "restore",
		       arg);
		return -EINVAL;
	}
	nx = realloc(exts, (nr_exts + 1) * sizeof(*nx));
	if (!nx)
		return -ENOMEM;
	exts = nx;
	exts[nr_exts].a = strndup(p, (size_t)(q - p));
	exts[nr_exts].b = strdup(q + 2);
	exts[nr_exts].used = false;
	exts[nr_exts].optional = optional;
	if (!exts[nr_exts].a || !exts[nr_exts].b) {
		free(exts[nr_exts].a);
		free(exts[nr_exts].b);
		return -ENOMEM;
	}
	nr_exts++;
	return 0;
}

/* dump: the KEY of the mount at mp, if it is external */
static const char *ext_key_of(const char *mp)
{
	for (size_t i = 0; i < nr_exts; i++)
		if (!strcmp(exts[i].a, mp)) {
			exts[i].used = true;
			return exts[i].b;
		}
	return NULL;
}

/* restore: the PATH given for KEY */
static const char *ext_path_of(const char *key)
{
	for (size_t i = 0; i < nr_exts; i++)
		if (!strcmp(exts[i].a, key)) {
			exts[i].used = true;
			return exts[i].b;
		}
	return NULL;
}

/* An --external mnt[] that named nothing of the image or tree is a mistake. */
static int exts_used(const char *what)
{
	for (size_t i = 0; i < nr_exts; i++)
		if (!exts[i].used && !exts[i].optional) {
			pr_err("--external mnt[%s]:%s: the tree has no %s %s", exts[i].a, exts[i].b,
			       what, exts[i].a);
			return -ENOENT;
		}
	return 0;
}

/* ---- entering and leaving the tree's namespace ---- */

/* amber's main thread into ns_fd: its fs_struct its own, its namespace and cwd kept. */
static int enter(int ns_fd, int base)
{
	int fd;

	if (unshare(CLONE_FS)) {
		pr_err("cannot give amber's main thread its own root and cwd: %m");
		return -errno;
	}
	if (own_fd < 0) {
		fd = sys_open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC, 0);
		own_fd = fd < 0 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, base);
		if (fd >= 0)
			close(fd);
		fd = sys_open(".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
		own_cwd = fd < 0 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, base);
		if (fd >= 0)
			close(fd);
		if (own_fd < 0 || own_cwd < 0) {
			pr_err("cannot keep amber's own mount namespace and cwd");
			return -EMFILE;
		}
	}
	nft_preload();
	if (ns_fd >= 0 && setns(ns_fd, CLONE_NEWNS)) {
		pr_err("cannot enter the tree's mount namespace: %m");
		return -errno;
	}
	if (ns_fd < 0 && unshare(CLONE_NEWNS)) {
		pr_err("cannot make a mount namespace: %m (needs CAP_SYS_ADMIN)");
		return -errno;
	}
	inside = true;
	return 0;
}

static void leave(void)
{
	if (!inside)
		return;
	/* amber's own paths (-D, --pidfile, scripts) would resolve in the tree's */
	if (setns(own_fd, CLONE_NEWNS) || fchdir(own_cwd)) {
		pr_err("cannot return to amber's own mount namespace: %m");
		abort();
	}
	inside = false;
}

static void close_own(void)
{
	if (own_fd >= 0)
		close(own_fd);
	if (own_cwd >= 0)
		close(own_cwd);
	own_fd = own_cwd = -1;
}

/* ---- dump ---- */

/* The path in amber's namespace of what e mounts, if amber sees it (0, *src NULL if not). */
static int host_path(const MntEntry *e, const struct minfo *own, size_t nr_own, char **src)
{
	*src = NULL;
	for (size_t i = 0; i < nr_own; i++) {
		const char *rest = under(e->root, own[i].root);

		if (own[i].dev != e->dev || !rest)
			continue;
		bool top = !strcmp(own[i].mountpoint, "/");

		/* the whole of a mount whose root is "/": its mount point, no "/" after */
		if (!strcmp(rest, "/"))
			rest = "";

		if (asprintf(src, "%s%s", top ? "" : own[i].mountpoint,
			     top && !*rest ? "/" : rest) < 0) {
			*src = NULL;
			return -ENOMEM;
		}
		return 0;
	}
	return 0;
}

/*
 * The namespace's mount of amber's namespace it is a copy of, or a bind
 * from.  Below a root of its own (a container's), no mount is amber's:
 * its mount points are not amber's paths.
 */
static int classify(pid_t pid, MntEntry *e, const struct minfo *own, size_t nr_own, bool own_root,
		    bool top)
{
	const char *key = ext_key_of(e->mountpoint);
	char *src;
	int ret;

	if (key) {
		e->kind = MNT_KIND__MNT_EXTERNAL;
		e->ext_key = strdup(key);
		return e->ext_key ? 0 : -ENOMEM;
	}
	for (size_t i = 0; !own_root && i < nr_own; i++)
		if (own[i].dev == e->dev && !strcmp(own[i].mountpoint, e->mountpoint) &&
		    !strcmp(own[i].root, e->root) && !strcmp(own[i].fstype, e->fstype)) {
			e->kind = MNT_KIND__MNT_HOST;
			return 0;
		}
	ret = host_path(e, own, nr_own, &src);
	if (ret)
		return ret;
	if (top) {
		/* the container's rootfs: restore --root gives it, src names it in messages */
		e->kind = MNT_KIND__MNT_ROOT;
		e->bind_src = src;
		return 0;
	}
	if (src) {
		e->kind = MNT_KIND__MNT_BIND;
		e->bind_src = src;
		return 0;
	}
	if (!strcmp(e->fstype, "overlay")) {
		pr_err("pid %d: mount %u at %s is an overlayfs (%s), which amber cannot make "
		       "again yet; dump a tree without it",
		       pid, e->id, e->mountpoint, e->options);
		return -EOPNOTSUPP;
	}
	if (!is_new_type(e->fstype)) {
		pr_err("pid %d: mount %u at %s is a %s filesystem (source %s) that only its mount "
		       "namespace has; amber makes again only proc, sysfs, devpts, mqueue and "
		       "tmpfs, and binds of what amber's own namespace sees: unmount it before "
		       "the dump",
		       pid, e->id, e->mountpoint, e->fstype, e->source ? e->source : "?");
		return -EOPNOTSUPP;
	}
	e->kind = MNT_KIND__MNT_NEW;
	return 0;
}

static bool own_group(uint32_t g, const struct minfo *own, size_t nr_own)
{
	for (size_t i = 0; g && i < nr_own; i++)
		if (own[i].shared == g)
			return true;
	return false;
}

static int add_mount(pid_t pid, const struct minfo *m, const struct minfo *own, size_t nr_own,
		     bool own_root, bool top)
{
	struct mnt *nm = realloc(mnts, (nr_mnts + 1) * sizeof(*nm));
	MntEntry *e;
	int ret;

	if (!nm)
		return -ENOMEM;
	mnts = nm;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	mnt_entry__init(e);
	mnts[nr_mnts++] = (struct mnt){e, -1};
	e->id = m->id;
	e->parent = m->parent;
	e->dev = m->dev;
	e->root = strdup(m->root);
	e->mountpoint = strdup(m->mountpoint);
	e->flags = m->flags;
	e->has_shared = m->shared != 0;
	e->shared = m->shared;
	e->has_master = m->master != 0;
	e->master = m->master;
	e->has_unbindable = m->unbindable;
	e->unbindable = m->unbindable;
	e->fstype = strdup(m->fstype);
	e->source = strdup(m->source);
	e->options = strdup(m->options);
	if (!e->root || !e->mountpoint || !e->fstype || !e->source || !e->options)
		return -ENOMEM;
	e->has_host_group = own_group(m->shared, own, nr_own) || own_group(m->master, own, nr_own);
	e->host_group = e->has_host_group;
	ret = classify(pid, e, own, nr_own, own_root, top);
	if (!ret)
		pr_debug("pid %d: mount %u at %s: %s %s, kind %d", pid, e->id, e->mountpoint,
			 e->fstype, e->root, e->kind);
	return ret;
}

/* A filesystem made new is made by its mount of root "/": another is a bind of it. */
static int check_instances(pid_t pid)
{
	for (size_t i = 0; i < nr_mnts; i++) {
		MntEntry *e = mnts[i].e;
		bool whole = false;

		if (e->kind != MNT_KIND__MNT_NEW)
			continue;
		for (size_t k = 0; k < nr_mnts && !whole; k++)
			whole = mnts[k].e->kind == MNT_KIND__MNT_NEW && mnts[k].e->dev == e->dev &&
				!strcmp(mnts[k].e->root, "/");
		if (!whole) {
			pr_err("pid %d: mount %u at %s is %s of a %s none of whose mounts is its "
			       "whole filesystem; amber cannot make it again",
			       pid, e->id, e->mountpoint, e->root, e->fstype);
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

static int write_img(struct tree *t)
{
	struct img *img = NULL;
	int ret = img_create(&t->imgs, IMG_MNT, &img, "mnt.img");

	for (size_t i = 0; !ret && i < nr_mnts; i++)
		ret = img_put(img, &mnts[i].e->base);
	if (ret) {
		if (img)
			img_abort(img);
		return ret;
	}
	return img_finish(img);
}

static bool parent_listed(const struct minfo *m, const struct minfo *ms, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ms[i].id == m->parent && &ms[i] != m)
			return true;
	return false;
}

/* Whether the tree's root mount m is amber's root (a copy of it). */
static bool is_amber_root(const struct minfo *m, const struct minfo *own, size_t nr_own)
{
	for (size_t i = 0; i < nr_own; i++)
		if (!strcmp(own[i].mountpoint, "/") && own[i].dev == m->dev &&
		    !strcmp(own[i].root, m->root) && !strcmp(own[i].fstype, m->fstype))
			return true;
	return false;
}

/* The tree's mount namespace: none (0), or the one its first process is in. */
static int tree_ns(struct tree *t, pid_t *first)
{
	struct stat own, st, one = {0};
	char path[64];

	if (sys_stat("/proc/self/ns/mnt", &own)) {
		pr_err("cannot stat amber's own mount namespace: %m");
		return -errno;
	}
	*first = 0;
	for (size_t p = 0; p < t->nr_procs; p++) {
		pid_t pid = t->dprocs[p]->pid;

		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
		if (sys_stat(path, &st)) {
			pr_err("pid %d: cannot stat %s: %m", pid, path);
			return -errno;
		}
		if (!p)
			one = st;
		if (st.st_ino != one.st_ino) {
			pr_err("pid %d is in another mount namespace (inode %llu) than pid %d "
			       "(inode %llu); amber restores a tree in one mount namespace",
			       pid, (unsigned long long)st.st_ino, t->dprocs[0]->pid,
			       (unsigned long long)one.st_ino);
			return -EOPNOTSUPP;
		}
	}
	if (t->nr_procs && one.st_ino != own.st_ino)
		*first = t->dprocs[0]->pid;
	return 0;
}

static const MntEntry *root_entry(void);

/*
 * A dump's root (the RPC's, CRIU's root of the dumped tree): amber reads the
 * tree's root from its mounts; a root given must be that one.
 */
static int check_dump_root(const struct tree *t)
{
	const char *dir = t->o->root;
	const MntEntry *r = root_entry();
	char *real;
	int ret = 0;

	if (!dir)
		return 0;
	if (!r || r->kind != MNT_KIND__MNT_ROOT) {
		pr_err("root %s: the tree %s, not %s", dir,
		       r ? "has amber's root" : "is in amber's mount namespace", dir);
		return -EINVAL;
	}
	real = realpath(dir, NULL);
	if (!real || !r->bind_src || strcmp(real, r->bind_src)) {
		pr_err("root %s: the tree's root mount is %s", dir,
		       r->bind_src ? r->bind_src : "a path amber does not see");
		ret = -EINVAL;
	}
	free(real);
	return ret;
}

static int mnt_dump_tree(struct tree *t)
{
	struct minfo *own = NULL, *theirs = NULL;
	size_t nr_own = 0, nr_theirs = 0;
	char *own_buf = NULL, *buf = NULL, path[64];
	pid_t pid = 0;
	bool own_root = false;
	int ret = tree_ns(t, &pid);

	if (!ret && !pid && t->o->root)
		ret = check_dump_root(t);
	if (!ret && !pid && nr_exts) {
		pr_err("--external mnt[%s]:%s: the tree is in amber's mount namespace, where "
		       "nothing is external",
		       exts[0].a, exts[0].b);
		ret = -EINVAL;
	}
	if (ret || !pid)
		return ret;
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", pid);
	ret = read_mountinfo("/proc/self/mountinfo", &own_buf, &own, &nr_own);
	if (!ret)
		ret = read_mountinfo(path, &buf, &theirs, &nr_theirs);
	for (size_t i = 0; !ret && i < nr_theirs; i++)
		if (!parent_listed(&theirs[i], theirs, nr_theirs))
			own_root = !is_amber_root(&theirs[i], own, nr_own);
	for (size_t i = 0; !ret && i < nr_theirs; i++)
		ret = add_mount(pid, &theirs[i], own, nr_own, own_root,
				!parent_listed(&theirs[i], theirs, nr_theirs));
	if (!ret)
		ret = exts_used("mount at");
	if (!ret)
		ret = check_dump_root(t);
	if (!ret)
		ret = check_instances(pid);
	/* every process, zombies too (check_pstree() wants one namespace for all) */
	for (size_t i = 0; !ret && i < t->nr_pstree; i++) {
		t->pstree[i]->has_mnt_ns = 1;
		t->pstree[i]->mnt_ns = 1;
	}
	if (!ret) {
		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
		tree_fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
		if (tree_fd < 0) {
			pr_err("pid %d: cannot open its mount namespace: %s", pid,
			       strerror(-tree_fd));
			ret = tree_fd;
		}
	}
	/* the files of each tmpfs, seen from inside */
	if (!ret)
		ret = enter(tree_fd, 0);
	for (size_t i = 0; !ret && i < nr_mnts; i++) {
		MntEntry *e = mnts[i].e;

		if (e->kind == MNT_KIND__MNT_NEW && !strcmp(e->fstype, "tmpfs") &&
		    !strcmp(e->root, "/"))
			ret = tmpfs_dump(t, pid, e);
	}
	if (!ret)
		ret = write_img(t);
	if (!ret)
		pr_info("pid %d: mount namespace with %zu mounts", pid, nr_mnts);
	free(own);
	free(theirs);
	free(own_buf);
	free(buf);
	return ret;
}

static int mnt_dump_done(struct tree *t)
{
	leave();
	return 0;
}

static void mnt_dump_undo(struct tree *t)
{
	leave();
}

/* ---- restore ---- */

static bool listed(const struct tree *t, const char *name)
{
	for (size_t i = 0; i < t->inv->n_files; i++)
		if (!strcmp(t->inv->files[i]->name, name))
			return true;
	return false;
}

static int corrupt(const MntEntry *e, const char *what)
{
	pr_err("mnt.img: mount %u at %s: %s; the image is corrupt", e->id,
	       e->mountpoint ? e->mountpoint : "?", what);
	return -EBADMSG;
}

/* An absolute path without ".", ".." or empty components. */
static bool clean_path(const char *p)
{
	if (!p || p[0] != '/' || strlen(p) >= PATH_MAX)
		return false;
	if (!strcmp(p, "/"))
		return true;
	for (const char *c = p + 1;;) {
		size_t l = strcspn(c, "/");

		if (!l || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[l])
			return true;
		c += l + 1;
	}
}

static struct mnt *find(uint32_t id)
{
	for (size_t i = 0; i < nr_mnts; i++)
		if (mnts[i].e->id == id)
			return &mnts[i];
	return NULL;
}

static bool is_root(const MntEntry *e)
{
	return e->parent == e->id || !find(e->parent);
}

/*
 * A proc of a tree that is its own pid namespace shows that namespace,
 * which exists only once the tree's init does: the init mounts it
 * (mnt_restore_proc), amber leaves its mount point empty.  So is a sysfs of
 * a tree with a network namespace of its own (it shows the mounter's).  So are second
 * mounts of it (a runtime's read-only /proc/sys bind) and every mount on
 * one of those (masked /proc files): they need the proc below them.
 */
static bool init_makes(const struct tree *t, const MntEntry *e)
{
	if (e->kind != MNT_KIND__MNT_NEW)
		return false;
	/* a sysfs shows its mounter's network namespace: the init's, which has entered it */
	return (t->own_pidns && !strcmp(e->fstype, "proc")) ||
	       (t->nr_pstree && t->pstree[0]->net_ns && !strcmp(e->fstype, "sysfs"));
}

/* Marks by_init: the init's procs and, to a fixed point, every mount on one. */
static void mark_by_init(const struct tree *t)
{
	bool more = true;

	for (size_t i = 0; i < nr_mnts; i++)
		mnts[i].by_init = init_makes(t, mnts[i].e);
	while (more) {
		more = false;
		for (size_t i = 0; i < nr_mnts; i++) {
			const struct mnt *p = find(mnts[i].e->parent);

			if (!mnts[i].by_init && p && p != &mnts[i] && p->by_init)
				more = mnts[i].by_init = true;
		}
	}
}

/* What the init cannot make: amber's own mount (a copy of the host's) on its proc. */
static int check_init_proc(const struct tree *t, const struct mnt *m)
{
	const MntEntry *e = m->e;

	if (!m->by_init || e->kind != MNT_KIND__MNT_HOST)
		return 0;
	pr_err("mnt.img: mount %u at %s is amber's own on the proc of the tree's pid "
	       "namespace, which its init makes once it exists; the image is corrupt",
	       e->id, e->mountpoint);
	return -EBADMSG;
}

static int check_entry(const MntEntry *e, size_t idx)
{
	char want[32];
	struct mnt *p;
	size_t depth = 0;

	for (size_t k = 0; k < idx; k++)
		if (mnts[k].e->id == e->id)
			return corrupt(e, "listed twice");
	if (!clean_path(e->mountpoint) || !clean_path(e->root))
		return corrupt(e, "a mount point or root that is not a plain absolute path");
	if (e->flags & ~MNT_FLAGS)
		return corrupt(e, "unknown mount flags");
	if (strlen(e->options ? e->options : "") > 4096 || strchr(e->fstype, ','))
		return corrupt(e, "options too long, or a bad type");
	switch (e->kind) {
	case MNT_KIND__MNT_HOST:
		break;
	case MNT_KIND__MNT_BIND:
		if (!clean_path(e->bind_src))
			return corrupt(e, "a bind mount's source is not a plain absolute path");
		break;
	case MNT_KIND__MNT_NEW:
		if (!is_new_type(e->fstype))
			return corrupt(e, "a type of filesystem amber does not make");
		break;
	case MNT_KIND__MNT_ROOT:
		if (e->bind_src && !clean_path(e->bind_src))
			return corrupt(e, "a root's source is not a plain absolute path");
		break;
	case MNT_KIND__MNT_EXTERNAL:
		if (!e->ext_key || !*e->ext_key || strlen(e->ext_key) > 4096)
			return corrupt(e, "an external mount without a key");
		break;
	default:
		return corrupt(e, "unknown kind");
	}
	if (e->bind_src && e->kind != MNT_KIND__MNT_BIND && e->kind != MNT_KIND__MNT_ROOT)
		return corrupt(e, "a bind source for a mount not bound");
	if (e->kind == MNT_KIND__MNT_BIND && !e->bind_src)
		return corrupt(e, "a bind mount without a source");
	if ((e->kind == MNT_KIND__MNT_EXTERNAL) != (e->ext_key != NULL))
		return corrupt(e, "a key for a mount not external");
	snprintf(want, sizeof(want), "tmpfs-%u.img", e->id);
	if (e->contents && (e->kind != MNT_KIND__MNT_NEW || strcmp(e->fstype, "tmpfs") ||
			    strcmp(e->root, "/") || strcmp(e->contents, want)))
		return corrupt(e, "contents for a mount that is not a new tmpfs");
	if (is_root(e)) {
		if ((e->kind != MNT_KIND__MNT_HOST && e->kind != MNT_KIND__MNT_ROOT) ||
		    strcmp(e->mountpoint, "/"))
			return corrupt(e, "a root mount that is not amber's root");
		return 0;
	}
	if (e->kind == MNT_KIND__MNT_ROOT)
		return corrupt(e, "a container's root that is not the root mount");
	/* parents end at the root, below which each mount point is */
	for (p = find(e->parent); p && !is_root(p->e); p = find(p->e->parent))
		if (++depth > nr_mnts)
			return corrupt(e, "a cycle of parents");
	if (!under(e->mountpoint, find(e->parent)->e->mountpoint))
		return corrupt(e, "a mount point outside its parent's");
	return 0;
}

static int check_pstree(const struct tree *t)
{
	for (size_t i = 0; i < t->nr_pstree; i++) {
		const PstreeEntry *p = t->pstree[i];

		if (p->mnt_ns > 1 || (p->mnt_ns == 1) != (nr_mnts > 0)) {
			pr_err("pstree.img: pid %u is in mount namespace %u, %s; the image is "
			       "corrupt",
			       p->pid, p->mnt_ns,
			       nr_mnts ? "mnt.img has namespace 1 for every process"
				       : "without a mnt.img");
			return -EBADMSG;
		}
	}
	return 0;
}

static const MntEntry *root_entry(void)
{
	for (size_t i = 0; i < nr_mnts; i++)
		if (is_root(mnts[i].e))
			return mnts[i].e;
	return NULL;
}

/* A container's root comes from --root, which nothing else takes. */
static int check_root(const struct tree *t)
{
	const MntEntry *r = root_entry();
	const char *dir = t->o->root;
	struct stat st;

	if (!r || r->kind != MNT_KIND__MNT_ROOT) {
		if (!dir)
			return 0;
		pr_err("--root %s: the image's tree %s; --root is for a tree that pivot_root()ed "
		       "into a root of its own",
		       dir, r ? "has amber's root" : "is in amber's mount namespace");
		return -EINVAL;
	}
	for (size_t i = 0; i < nr_mnts; i++)
		if (mnts[i].e->kind == MNT_KIND__MNT_HOST)
			return corrupt(mnts[i].e, "amber's mount below a container's root");
	if (!dir) {
		pr_err("the image's tree pivot_root()ed into a root of its own (%s at dump): "
		       "give it with --root DIR",
		       r->bind_src ? r->bind_src : "a path amber did not see");
		return -EINVAL;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		pr_err("--root %s: %s", dir,
		       errno == ENOENT ? "no such directory" : "not a directory");
		return -ENOTDIR;
	}
	return 0;
}

static int check_external(const MntEntry *e)
{
	const char *path;
	struct stat st;

	if (e->kind != MNT_KIND__MNT_EXTERNAL)
		return 0;
	path = ext_path_of(e->ext_key);
	if (!path) {
		pr_err("mount %u at %s is external (key %s): give its source with --external "
		       "mnt[%s]:PATH",
		       e->id, e->mountpoint, e->ext_key, e->ext_key);
		return -ENOENT;
	}
	if (stat(path, &st)) {
		pr_err("--external mnt[%s]:%s: %m", e->ext_key, path);
		return -errno;
	}
	return 0;
}

int mnt_restore_read(struct tree *t)
{
	size_t roots = 0;
	int ret = 0;

	if (listed(t, "mnt.img"))
		ret = img_read_all(t->img, IMG_MNT, &mnt_entry__descriptor, &loaded, &nr_loaded,
				   "mnt.img");
	if (ret)
		return ret;
	mnts = calloc(nr_loaded + 1, sizeof(*mnts));
	clones = calloc(nr_loaded + 1, sizeof(*clones));
	if (!mnts || !clones)
		return -ENOMEM;
	for (size_t i = 0; i < nr_loaded; i++) {
		mnts[nr_mnts++] = (struct mnt){loaded[i], -1};
		clones[i] = -1;
	}
	for (size_t i = 0; !ret && i < nr_mnts; i++) {
		ret = check_entry(mnts[i].e, i);
		roots += !ret && is_root(mnts[i].e);
	}
	if (!ret)
		mark_by_init(t);
	for (size_t i = 0; !ret && i < nr_mnts; i++)
		ret = check_init_proc(t, &mnts[i]);
	if (!ret && nr_mnts && roots != 1) {
		pr_err("mnt.img: %zu root mounts; the image is corrupt", roots);
		ret = -EBADMSG;
	}
	if (!ret)
		ret = check_pstree(t);
	if (!ret)
		ret = check_root(t);
	for (size_t i = 0; !ret && i < nr_mnts; i++)
		ret = check_external(mnts[i].e);
	if (!ret)
		ret = exts_used("mount of key");
	if (!ret && nr_mnts && !t->owner.unbounded) {
		pr_err("the image has a mount namespace of %zu mounts (made new at restore, which "
		       "needs CAP_SYS_ADMIN); uid %u's image may not make one: refusing",
		       nr_mnts, t->owner.uid);
		ret = -EPERM;
	}
	return ret;
}

/* The data of mount(2) for a new filesystem: its super options, less ro/rw. */
static char *fs_data(const MntEntry *e)
{
	char *d = calloc(1, strlen(e->options) + 16), *save, *copy = strdup(e->options);

	if (!d || !copy) {
		free(d);
		free(copy);
		return NULL;
	}
	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (!strcmp(o, "rw") || !strcmp(o, "ro"))
			continue;
		if (*d)
			strcat(d, ",");
		strcat(d, o);
	}
	if (!strcmp(e->fstype, "devpts") && !strstr(d, "newinstance"))
		strcat(d, *d ? ",newinstance" : "newinstance");
	free(copy);
	return d;
}

/* A mount already made this one can be cloned from: a peer, its master, or its filesystem. */
static struct mnt *clone_source(const MntEntry *e, bool *slave)
{
	*slave = false;
	for (size_t i = 0; i < nr_mnts; i++) {
		const MntEntry *o = mnts[i].e;

		if (mnts[i].fd < 0 || o == e || o->dev != e->dev || !under(e->root, o->root))
			continue;
		if (!e->host_group && e->shared && o->shared == e->shared)
			return &mnts[i];
	}
	for (size_t i = 0; i < nr_mnts; i++) {
		const MntEntry *o = mnts[i].e;

		if (mnts[i].fd < 0 || o == e || o->dev != e->dev || !under(e->root, o->root))
			continue;
		if (!e->host_group && e->master && o->shared == e->master) {
			*slave = true;
			return &mnts[i];
		}
	}
	if (e->kind != MNT_KIND__MNT_NEW)
		return NULL;
	for (size_t i = 0; i < nr_mnts; i++)
		if (mnts[i].fd >= 0 && mnts[i].e != e && mnts[i].e->dev == e->dev &&
		    mnts[i].e->kind == MNT_KIND__MNT_NEW && under(e->root, mnts[i].e->root))
			return &mnts[i];
	return NULL;
}

/* Whether e can be made now: its parent is, and so is the mount it is cloned from. */
static bool ready(const MntEntry *e)
{
	bool slave;

	if (find(e->parent)->fd < 0)
		return false;
	if (e->kind == MNT_KIND__MNT_NEW && strcmp(e->root, "/"))
		return clone_source(e, &slave) != NULL;
	/* a peer or slave of the tree's group waits for the group's first mount */
	for (size_t i = 0; !e->host_group && (e->shared || e->master) && i < nr_mnts; i++) {
		const MntEntry *o = mnts[i].e;

		if (o != e && o->dev == e->dev && mnts[i].fd < 0 &&
		    ((e->master && o->shared == e->master) ||
		     (e->shared && o->shared == e->shared && o < e)))
			return false;
	}
	return true;
}

static int propagate(const MntEntry *e, bool slave, bool peer)
{
	unsigned long kind = 0;

	if (slave)
		kind = MS_SLAVE;
	else if (!e->master || !e->host_group)
		kind = e->kind == MNT_KIND__MNT_HOST && e->master ? 0 : MS_PRIVATE;
	if (peer)
		kind = 0;
	if (kind && mount(NULL, e->mountpoint, NULL, kind, NULL))
		goto fail;
	/* shared with amber's namespace: a slave of it (nothing flows back to amber's) */
	if (e->shared && !peer && !(e->host_group && !e->master) &&
	    mount(NULL, e->mountpoint, NULL, MS_SHARED, NULL))
		goto fail;
	if (e->unbindable && mount(NULL, e->mountpoint, NULL, MS_UNBINDABLE, NULL))
		goto fail;
	return 0;
fail:
	pr_err("mount %u at %s: cannot set its propagation: %m", e->id, e->mountpoint);
	return -errno;
}

static int remount(const MntEntry *e)
{
	if (!mount(NULL, e->mountpoint, NULL, MS_REMOUNT | MS_BIND | e->flags, NULL))
		return 0;
	pr_err("mount %u at %s: cannot set its flags (%s): %m", e->id, e->mountpoint,
	       e->flags & MS_RDONLY ? "read-only" : "read-write");
	return -errno;
}

static int attach(int fd, const MntEntry *e)
{
	if (!move_mount(fd, "", AT_FDCWD, e->mountpoint, MOVE_MOUNT_F_EMPTY_PATH))
		return 0;
	pr_err("mount %u: cannot mount it at %s: %m", e->id, e->mountpoint);
	return -errno;
}

static int make_mount(struct tree *t, struct mnt *m, size_t idx)
{
	MntEntry *e = m->e;
	bool slave = false, peer = false;
	struct mnt *src = clone_source(e, &slave);
	int fd, ret = 0;

	if (src) {
		const char *rest = under(e->root, src->e->root);

		peer = !slave && e->shared && src->e->shared == e->shared;
		/* a file of a devpts (runc's /dev/console): the job's new pty is it */
		if (*rest && !strcmp(src->e->fstype, "devpts") && t->o->orphan_pts_master) {
			ret = tty_orphan_open(t, src->fd);
			if (ret)
				return ret;
		}
		fd = open_tree(src->fd, *rest ? rest + 1 : "",
			       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (fd < 0) {
			pr_err("mount %u at %s: cannot copy mount %u (%s%s): %m", e->id,
			       e->mountpoint, src->e->id, src->e->mountpoint, rest);
			return -errno;
		}
		ret = attach(fd, e);
		close(fd);
	} else if (e->kind == MNT_KIND__MNT_BIND || e->kind == MNT_KIND__MNT_EXTERNAL) {
		ret = attach(clones[idx], e);
	} else {
		char *data = fs_data(e);
		int ipc = 0;

		if (!data)
			return -ENOMEM;
		/* a mqueue shows the queues of the IPC namespace of its maker */
		if (!strcmp(e->fstype, "mqueue") && t->nr_pstree)
			ipc = (int)ns_of(t, t->pstree[0]->pid, NS_KIND__NS_IPC);
		ret = ns_enter(NS_KIND__NS_IPC, (uint32_t)ipc);
		if (!ret && mount(e->source, e->mountpoint, e->fstype, 0, data)) {
			ret = -errno;
			pr_err("mount %u: cannot mount a %s (%s) at %s: %m", e->id, e->fstype, data,
			       e->mountpoint);
		}
		ns_leave(NS_KIND__NS_IPC, (uint32_t)ipc);
		free(data);
	}
	if (ret)
		return ret;
	fd = sys_openat(AT_FDCWD, e->mountpoint, O_PATH | O_CLOEXEC, 0); /* the tree's /proc too */
	m->fd = fd < 0 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
	if (fd >= 0)
		close(fd);
	if (m->fd < 0) {
		pr_err("mount %u: cannot open its mount point %s", e->id, e->mountpoint);
		return -EIO;
	}
	if (e->contents)
		ret = tmpfs_restore(t, e, m->fd);
	if (!ret)
		ret = propagate(e, slave, peer);
	if (!ret)
		ret = remount(e);
	if (!ret)
		pr_debug("made mount %u at %s (%s %s)", e->id, e->mountpoint, e->fstype, e->root);
	return ret;
}

/* The new namespace's copies amber keeps (MNT_HOST), and the others gone. */
static int keep_host(struct tree *t)
{
	struct minfo *cur = NULL;
	size_t nr_cur = 0;
	char *buf = NULL;
	bool *kept;
	int ret = read_mountinfo("/proc/thread-self/mountinfo", &buf, &cur, &nr_cur);

	if (ret)
		return ret;
	kept = calloc(nr_cur + 1, sizeof(*kept));
	if (!kept)
		ret = -ENOMEM;
	for (size_t i = 0; !ret && i < nr_mnts; i++) {
		MntEntry *e = mnts[i].e;
		bool found = false;

		if (e->kind != MNT_KIND__MNT_HOST)
			continue;
		for (size_t k = 0; k < nr_cur && !found; k++)
			if (!kept[k] && !strcmp(cur[k].mountpoint, e->mountpoint) &&
			    !strcmp(cur[k].root, e->root) && !strcmp(cur[k].fstype, e->fstype))
				found = kept[k] = true;
		if (!found) {
			pr_err("mount %u at %s (%s %s) was amber's at dump, which has it no "
			       "longer; "
			       "cannot restore the tree's mount namespace",
			       e->id, e->mountpoint, e->fstype, e->source);
			ret = -ENOENT;
		}
	}
	/* the deepest first: the mounts made on amber's side since, or the tree removed */
	for (size_t k = nr_cur; !ret && k-- > 0;) {
		if (kept[k])
			continue;
		if (umount2(cur[k].mountpoint, MNT_DETACH) && errno != EINVAL && errno != ENOENT) {
			pr_err("cannot remove mount %s (%s), which the tree's namespace did not "
			       "have: %m",
			       cur[k].mountpoint, cur[k].fstype);
			ret = -errno;
		}
	}
	free(kept);
	free(cur);
	free(buf);
	return ret;
}

/* What was made is what the image says: mount points, types, read-only, kinds. */
static int check_made(void)
{
	struct minfo *cur = NULL;
	size_t nr_cur = 0;
	char *buf = NULL;
	size_t later = 0;
	int ret = read_mountinfo("/proc/thread-self/mountinfo", &buf, &cur, &nr_cur);

	for (size_t i = 0; i < nr_mnts; i++)
		later += mnts[i].by_init;
	if (!ret && nr_cur + later != nr_mnts) {
		pr_err("the tree's mount namespace was made with %zu mounts, the image has %zu "
		       "(%zu the tree's init makes)",
		       nr_cur, nr_mnts, later);
		ret = -EIO;
	}
	for (size_t i = 0; !ret && i < nr_mnts; i++) {
		const MntEntry *e = mnts[i].e;
		bool found = false;

		if (mnts[i].by_init)
			continue;

		/* a root or external mount is what the options give, of any type */
		bool any = e->kind == MNT_KIND__MNT_ROOT || e->kind == MNT_KIND__MNT_EXTERNAL;

		for (size_t k = 0; k < nr_cur && !found; k++)
			found = !strcmp(cur[k].mountpoint, e->mountpoint) &&
				(any || !strcmp(cur[k].fstype, e->fstype)) &&
				(cur[k].flags & MS_RDONLY) == (e->flags & MS_RDONLY) &&
				!cur[k].shared == !e->shared && !cur[k].master == !e->master;
		if (!found) {
			pr_err("mount %u at %s (%s) did not come back as it was", e->id,
			       e->mountpoint, e->fstype);
			ret = -EIO;
		}
	}
	free(cur);
	free(buf);
	return ret;
}

/*
 * A container's root: --root DIR's copy mounted on DIR and pivot_root()ed
 * into, amber's root detached: the namespace holds that one mount.
 */
static int enter_root(struct tree *t, size_t idx)
{
	const char *dir = t->o->root;
	MntEntry *e = mnts[idx].e;
	int fd, ret;

	if (move_mount(clones[idx], "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH)) {
		pr_err("cannot mount --root %s in the tree's mount namespace: %m", dir);
		return -errno;
	}
	/* pivot_root() refuses a shared new root; the image's propagation comes after */
	if (mount(NULL, dir, NULL, MS_PRIVATE, NULL) || chdir(dir) ||
	    syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) || chdir("/")) {
		pr_err("cannot make --root %s the root of the tree's mount namespace: %m", dir);
		return -errno;
	}
	fd = sys_openat(AT_FDCWD, "/", O_PATH | O_CLOEXEC, 0);
	mnts[idx].fd = fd < 0 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
	if (fd >= 0)
		close(fd);
	if (mnts[idx].fd < 0) {
		pr_err("mount %u: cannot open the new root %s", e->id, dir);
		return -EIO;
	}
	ret = propagate(e, false, false);
	if (!ret)
		ret = remount(e);
	if (!ret)
		pr_debug("made mount %u at / (--root %s)", e->id, dir);
	return ret;
}

static int build(struct tree *t)
{
	size_t made = 0;
	int ret = 0;

	/* nothing done here reaches amber's namespace */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL)) {
		pr_err("cannot make the new mount namespace a slave of amber's: %m");
		return -errno;
	}
	for (size_t i = 0; i < nr_mnts; i++)
		if (mnts[i].e->kind == MNT_KIND__MNT_ROOT) {
			ret = enter_root(t, i);
			made++;
			break;
		}
	if (!made && !ret)
		ret = keep_host(t);
	for (size_t i = 0; i < nr_mnts; i++)
		made += mnts[i].by_init;
	for (size_t i = 0; !ret && i < nr_mnts; i++) {
		MntEntry *e = mnts[i].e;
		int fd;

		if (e->kind != MNT_KIND__MNT_HOST)
			continue;
		fd = sys_openat(AT_FDCWD, e->mountpoint, O_PATH | O_CLOEXEC,
				0); /* the tree's /proc too */
		mnts[i].fd = fd < 0 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
		if (fd >= 0)
			close(fd);
		if (mnts[i].fd < 0) {
			pr_err("mount %u: cannot open %s", e->id, e->mountpoint);
			return -EIO;
		}
		made++;
		ret = propagate(e, false, false);
		if (!ret)
			ret = remount(e);
	}
	while (!ret && made < nr_mnts) {
		size_t before = made;

		for (size_t i = 0; !ret && i < nr_mnts; i++) {
			if (mnts[i].fd >= 0 || !ready(mnts[i].e) || mnts[i].by_init)
				continue;
			ret = make_mount(t, &mnts[i], i);
			made++;
		}
		if (!ret && made == before) {
			pr_err("mnt.img: mounts that wait for each other; the image is corrupt");
			ret = -EBADMSG;
		}
	}
	return ret ? ret : check_made();
}

static int mnt_restore_tree(struct tree *t)
{
	int ret = 0;

	if (!nr_mnts)
		return 0;
	/* copies of amber's files for the binds, before anything covers them */
	for (size_t i = 0; !ret && i < nr_mnts; i++) {
		MntEntry *e = mnts[i].e;
		const char *src = e->bind_src;
		int fd;

		if (e->kind == MNT_KIND__MNT_EXTERNAL)
			src = ext_path_of(e->ext_key);
		else if (e->kind == MNT_KIND__MNT_ROOT)
			src = t->o->root;
		else if (e->kind != MNT_KIND__MNT_BIND)
			continue;
		fd = open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (fd < 0) {
			pr_err("mount %u at %s: cannot copy its source %s: %m", e->id,
			       e->mountpoint, src);
			return -errno;
		}
		clones[i] = fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
		close(fd);
		if (clones[i] < 0)
			return -EMFILE;
	}
	ret = enter(-1, tree_fd_floor(t));
	if (!ret)
		ret = build(t);
	if (!ret && chdir("/")) {
		pr_err("cannot enter the new mount namespace's root: %m");
		ret = -errno;
	}
	if (ret) {
		pr_err("the tree's mount namespace could not be made; amber's is unchanged");
		leave();
		return ret;
	}
	pr_info("made the tree's mount namespace: %zu mounts", nr_mnts);
	return 0;
}

/* The init's: its proc, then what is on it, each once its parent and source exist. */
int mnt_restore_proc(struct tree *t)
{
	size_t left = 0;
	int ret = 0;

	for (size_t i = 0; i < nr_mnts; i++)
		left += mnts[i].by_init;
	while (!ret && left) {
		size_t before = left;

		for (size_t i = 0; !ret && i < nr_mnts; i++) {
			MntEntry *e = mnts[i].e;
			char *data;

			if (!mnts[i].by_init || mnts[i].fd >= 0 || !ready(e))
				continue;
			left--;
			if (strcmp(e->fstype, "proc") || !init_makes(t, e) ||
			    strcmp(e->root, "/")) {
				ret = make_mount(t, &mnts[i], i);
				continue;
			}
			data = fs_data(e);
			if (!data)
				return -ENOMEM;
			if (mount(e->source, e->mountpoint, e->fstype, 0, data)) {
				ret = -errno;
				pr_err("mount %u: cannot mount a proc of the tree's pid namespace "
				       "(%s) at %s: %m",
				       e->id, data, e->mountpoint);
			}
			free(data);
			if (!ret) {
				int fd = sys_openat(AT_FDCWD, e->mountpoint, O_PATH | O_CLOEXEC, 0);

				mnts[i].fd = fd;
				if (fd < 0) {
					pr_err("mount %u: cannot open its mount point %s", e->id,
					       e->mountpoint);
					ret = -EIO;
				}
			}
			if (!ret)
				ret = propagate(e, false, false);
			if (!ret)
				ret = remount(e);
			if (!ret)
				pr_debug("made mount %u at %s (a proc of the tree's pid namespace)",
					 e->id, e->mountpoint);
		}
		if (!ret && left == before) {
			pr_err("mnt.img: mounts on the tree's proc that wait for each other; the "
			       "image is corrupt");
			ret = -EBADMSG;
		}
	}
	return ret;
}

static void close_all(struct tree *t)
{
	leave();
	close_own();
	for (size_t i = 0; i < nr_mnts; i++) {
		if (mnts[i].fd >= 0)
			close(mnts[i].fd);
		if (clones && clones[i] >= 0)
			close(clones[i]);
		mnts[i].fd = -1;
		if (clones)
			clones[i] = -1;
	}
}

const struct resource_ops mnt_ops = {
	.name = "mount namespace",
	.dump_tree = mnt_dump_tree,
	.restore_tree = mnt_restore_tree,
};

/* Last of the table: amber's main thread leaves once the others are done. */
const struct resource_ops mnt_exit_ops = {
	.name = "mount namespace (leave)",
	.dump_tree_late = mnt_dump_done,
	.dump_undo = mnt_dump_undo,
	.restore_done = close_all,
	.restore_undo = close_all,
};
