// SPDX-License-Identifier: MIT
/*
 * cgroups: each restored process goes back into the cgroups it was in, one
 * per hierarchy (cgroup v1 controllers, named v1 hierarchies, the v2 tree),
 * as CRIU's --manage-cgroups=soft does by default.
 *
 * Dump: /proc/PID/cgroup of each process (a thread in other cgroups than its
 * process is refused: cgroup.procs moves a process whole), as a set shared
 * by the processes that have the same cgroups; and of each cgroup of a set
 * but a hierarchy's root, the settings a restore may need to remake it
 * (limits, weights, cpusets: the files below that exist).
 *
 * Restore (--manage-cgroups MODE): "soft" (the default) makes a cgroup that
 * is missing, with the dumped settings, and leaves existing ones as they
 * are; "full" sets the dumped settings on existing cgroups too; "ignore"
 * leaves the processes in amber's cgroups.  Every path is checked before
 * anything is made; cgroups are made and settings written with the image
 * owner's rights.  A process is moved as soon as it exists, before its
 * memory is restored, so that its pages are charged to its own cgroup; for
 * a non-root owner's image it is moved once its credentials are its own
 * (the kernel then judges the move as the owner's).  The RPC's cg_root
 * moves the root process's cgroups, and all below them, to the path the
 * runtime names (a container restored under a new id).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/bpf.h>

#include "amber.h"
#include "image.h"
#include "dump.h"
#include "log.h"
#include "owner.h"
#include "proc.h"
#include "ns/ns.h"
#include "restore.h"
#include "sys.h"

#define MAX_HIER 32

/*
 * The settings kept, per controller, in the order they are written back:
 * one value, a file written a line at a time, or a v1 device list (every
 * device denied, then each line allowed: a cgroup made again must not
 * inherit its parent's wider list).
 */
enum prop_how { PROP_ONE, PROP_LINES, PROP_DEVICES };

static const struct {
	const char *name;
	enum prop_how how;
} props[] = {
	{"cpuset.cpus", PROP_ONE},
	{"cpuset.mems", PROP_ONE},
	{"cpu.cfs_period_us", PROP_ONE},
	{"cpu.cfs_quota_us", PROP_ONE},
	{"cpu.shares", PROP_ONE},
	{"cpu.max", PROP_ONE},
	{"cpu.weight", PROP_ONE},
	{"memory.limit_in_bytes", PROP_ONE},
	{"memory.memsw.limit_in_bytes", PROP_ONE}, /* after the limit: not below it */
	{"memory.soft_limit_in_bytes", PROP_ONE},
	{"memory.swappiness", PROP_ONE},
	{"memory.max", PROP_ONE},
	{"memory.high", PROP_ONE},
	{"memory.low", PROP_ONE},
	{"memory.min", PROP_ONE},
	{"memory.swap.max", PROP_ONE},
	{"pids.max", PROP_ONE},
	{"hugetlb.2MB.limit_in_bytes", PROP_ONE},
	{"hugetlb.1GB.limit_in_bytes", PROP_ONE},
	{"hugetlb.2MB.max", PROP_ONE},
	{"hugetlb.1GB.max", PROP_ONE},
	{"net_cls.classid", PROP_ONE},
	{"net_prio.ifpriomap", PROP_LINES},
	{"blkio.weight", PROP_ONE},
	{"blkio.weight_device", PROP_LINES},
	{"blkio.throttle.read_bps_device", PROP_LINES},
	{"blkio.throttle.write_bps_device", PROP_LINES},
	{"blkio.throttle.read_iops_device", PROP_LINES},
	{"blkio.throttle.write_iops_device", PROP_LINES},
	{"io.weight", PROP_LINES},
	{"io.max", PROP_LINES},
	{"rdma.max", PROP_LINES},
	{"misc.max", PROP_LINES},
	{"devices.list", PROP_DEVICES},
};

#define NR_PROPS (sizeof(props) / sizeof(props[0]))
#define PROP_MAX 65536 /* a value's length */

/*
 * The cgroup BPF attach types a v2 cgroup may hold programs of: such a
 * cgroup (a container's device filter, its firewall) is not made again.
 */
static const struct {
	enum bpf_attach_type type;
	const char *name;
} bpf_types[] = {
	{BPF_CGROUP_INET_INGRESS, "ingress"},
	{BPF_CGROUP_INET_EGRESS, "egress"},
	{BPF_CGROUP_INET_SOCK_CREATE, "sock_create"},
	{BPF_CGROUP_SOCK_OPS, "sock_ops"},
	{BPF_CGROUP_DEVICE, "device"},
	{BPF_CGROUP_INET4_BIND, "bind4"},
	{BPF_CGROUP_INET6_BIND, "bind6"},
	{BPF_CGROUP_INET4_CONNECT, "connect4"},
	{BPF_CGROUP_INET6_CONNECT, "connect6"},
	{BPF_CGROUP_INET4_POST_BIND, "post_bind4"},
	{BPF_CGROUP_INET6_POST_BIND, "post_bind6"},
	{BPF_CGROUP_UDP4_SENDMSG, "sendmsg4"},
	{BPF_CGROUP_UDP6_SENDMSG, "sendmsg6"},
	{BPF_CGROUP_SYSCTL, "sysctl"},
	{BPF_CGROUP_UDP4_RECVMSG, "recvmsg4"},
	{BPF_CGROUP_UDP6_RECVMSG, "recvmsg6"},
	{BPF_CGROUP_GETSOCKOPT, "getsockopt"},
	{BPF_CGROUP_SETSOCKOPT, "setsockopt"},
	{BPF_CGROUP_INET4_GETPEERNAME, "getpeername4"},
	{BPF_CGROUP_INET6_GETPEERNAME, "getpeername6"},
	{BPF_CGROUP_INET4_GETSOCKNAME, "getsockname4"},
	{BPF_CGROUP_INET6_GETSOCKNAME, "getsockname6"},
	{BPF_CGROUP_INET_SOCK_RELEASE, "sock_release"},
};

/* A cgroup hierarchy mounted in amber's mount namespace. */
struct hier {
	char controllers[128]; /* as /proc/PID/cgroup names it; "" for v2 */
	char mnt[PATH_MAX];    /* where amber saw it (for messages) */
	int fd;		       /* on that mount: it is reached so from any mount namespace */
	char root[PATH_MAX];   /* the mount's root in the hierarchy ("/") */
};

static struct hier hiers[MAX_HIER];
static size_t nr_hiers;

/* Does a v1 mount's super options name the hierarchy "a,b" (each of a, b)? */
static bool names_all(const char *opts, const char *controllers)
{
	char want[128], *save, *tok;

	snprintf(want, sizeof(want), "%s", controllers);
	for (tok = strtok_r(want, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t n = strlen(tok);
		const char *p = opts;
		bool found = false;

		while ((p = strstr(p, tok))) {
			if ((p == opts || p[-1] == ',') && (p[n] == ',' || !p[n])) {
				found = true;
				break;
			}
			p += n;
		}
		if (!found)
			return false;
	}
	return true;
}

/*
 * Find each line of our own /proc/self/cgroup's hierarchy among the mounts,
 * before amber enters a tree's mount namespace (mnt.c), which may not show
 * them: each is kept as an fd at or above base.
 */
static int find_hiers(int base)
{
	char line[4096], own[4096];
	FILE *mi, *cg;
	int ret = 0;

	if (nr_hiers)
		return 0;
	cg = sys_fopen_read("/proc/self/cgroup");
	if (!cg && errno == ENOENT)
		return 0; /* a kernel without cgroups: nothing to find */
	mi = sys_fopen_read("/proc/self/mountinfo");
	if (!cg || !mi) {
		ret = -errno;
		pr_err("cannot read /proc/self/cgroup or mountinfo: %m");
		goto close_files;
	}
	while (fgets(own, sizeof(own), cg) && nr_hiers < MAX_HIER) {
		char *c1 = strchr(own, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		struct hier *h = &hiers[nr_hiers];

		if (!c2)
			continue;
		*c2 = 0;
		snprintf(h->controllers, sizeof(h->controllers), "%s", c1 + 1);
		rewind(mi);
		while (fgets(line, sizeof(line), mi)) {
			char root[PATH_MAX], mnt[PATH_MAX], fstype[64], opts[1024];
			const char *sep = strstr(line, " - ");

			if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
			    sscanf(sep + 3, "%63s %*s %1023s", fstype, opts) != 2)
				continue;
			if (h->controllers[0]
				    ? strcmp(fstype, "cgroup") || !names_all(opts, h->controllers)
				    : strcmp(fstype, "cgroup2"))
				continue;
			snprintf(h->mnt, sizeof(h->mnt), "%s", mnt);
			snprintf(h->root, sizeof(h->root), "%s", root);
			h->fd = open(mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (h->fd >= 0 && h->fd < base) {
				int hi = fcntl(h->fd, F_DUPFD_CLOEXEC, base);

				close(h->fd);
				h->fd = hi;
			}
			if (h->fd < 0) {
				ret = -errno;
				pr_err("cannot open the cgroup hierarchy at %s: %m", mnt);
				goto close_files;
			}
			nr_hiers++;
			break;
		}
	}
close_files:
	if (cg)
		fclose(cg);
	if (mi)
		fclose(mi);
	return ret;
}

static const struct hier *hier_of(const char *controllers)
{
	for (size_t i = 0; i < nr_hiers; i++)
		if (!strcmp(hiers[i].controllers, controllers))
			return &hiers[i];
	return NULL;
}

/*
 * Cgroup path of h as a path below h->fd ("." for the mount's root), with
 * name (a file of it) after it when not NULL.
 */
static int cg_rel(const struct hier *h, const char *path, const char *name, char *out, size_t len)
{
	size_t rl = strcmp(h->root, "/") ? strlen(h->root) : 0;
	const char *sub = path + rl;
	int n;

	if (strncmp(path, h->root, rl) || (sub[0] && sub[0] != '/'))
		return -ENOENT;
	while (*sub == '/')
		sub++;
	n = snprintf(out, len, "%s%s%s", *sub ? sub : ".", name ? "/" : "", name ? name : "");
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- dump ---- */

static CgroupEntry **sets, **tasks, **dirs;
static size_t nr_sets, nr_tasks, nr_dirs;

static int push(CgroupEntry ***arr, size_t *n, CgroupEntry *e)
{
	CgroupEntry **na = realloc(*arr, (*n + 1) * sizeof(*na));

	if (!na)
		return -ENOMEM;
	*arr = na;
	(*arr)[(*n)++] = e;
	return 0;
}

/* A process's (or thread's) /proc/.../cgroup, whole. */
static int read_cgroup(const char *path, char *buf, size_t len)
{
	int fd = sys_open_raw(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

static bool same_set(const CgSet *s, char *lines)
{
	size_t n = 0;
	char *save, *l;

	for (l = strtok_r(lines, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2 || n >= s->n_members)
			return false;
		*c2 = 0;
		if (strcmp(s->members[n]->controllers, c1 + 1) ||
		    strcmp(s->members[n]->path, c2 + 1))
			return false;
	}
	return n == s->n_members;
}

static int new_set(char *lines, uint32_t id, CgroupEntry **out)
{
	CgroupEntry *e = calloc(1, sizeof(*e));
	CgSet *s = calloc(1, sizeof(*s));
	char *save, *l;

	if (!e || !s)
		goto nomem;
	cgroup_entry__init(e);
	cg_set__init(s);
	e->set = s;
	s->id = id;
	s->members = calloc(MAX_HIER, sizeof(*s->members));
	if (!s->members)
		goto nomem;
	for (l = strtok_r(lines, "\n", &save); l && s->n_members < MAX_HIER;
	     l = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		CgMember *m;

		if (!c2)
			continue;
		*c2 = 0;
		m = calloc(1, sizeof(*m));
		if (!m)
			goto nomem;
		cg_member__init(m);
		m->controllers = strdup(c1 + 1);
		m->path = strdup(c2 + 1);
		s->members[s->n_members++] = m;
		if (!m->controllers || !m->path)
			goto nomem;
	}
	*out = e;
	return 0;
nomem:
	if (e)
		cgroup_entry__free_unpacked(e, NULL);
	else
		free(s);
	return -ENOMEM;
}

/* A thread in the cgroups of its process (mine: the process's /proc/PID/cgroup). */
static int check_thread(struct dump_ctx *ctx, pid_t tid, void *mine)
{
	char path[96], theirs[8192];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/cgroup", ctx->pid, tid);
	if (read_cgroup(path, theirs, sizeof(theirs)) || !strcmp(mine, theirs))
		return 0;
	pr_err("pid %d: thread %d is in other cgroups than its process (a cgroup v1 'tasks' "
	       "file, or a v2 threaded cgroup); amber moves processes whole: put the thread back "
	       "first",
	       ctx->pid, tid);
	return -EOPNOTSUPP;
}

static int cgroup_dump(struct dump_ctx *ctx)
{
	char mine[8192], copy[8192], path[96];
	CgroupEntry *te;
	uint32_t id = 0;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", ctx->pid);
	ret = read_cgroup(path, mine, sizeof(mine));
	if (ret == -ENOENT && !sys_access("/proc/self", F_OK) &&
	    sys_access("/proc/self/cgroup", F_OK))
		return 0; /* a kernel without cgroups */
	if (ret) {
		pr_err("pid %d: cannot read %s: %s", ctx->pid, path, strerror(-ret));
		return ret;
	}
	ret = dump_each_thread(ctx, check_thread, mine);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr_sets && !id; i++) {
		snprintf(copy, sizeof(copy), "%s", mine);
		if (same_set(sets[i]->set, copy))
			id = sets[i]->set->id;
	}
	if (!id) {
		CgroupEntry *se;

		snprintf(copy, sizeof(copy), "%s", mine);
		ret = new_set(copy, (uint32_t)nr_sets + 1, &se);
		if (!ret)
			ret = push(&sets, &nr_sets, se);
		if (ret)
			return ret;
		id = se->set->id;
	}
	te = calloc(1, sizeof(*te));
	if (!te)
		return -ENOMEM;
	cgroup_entry__init(te);
	te->task = calloc(1, sizeof(*te->task));
	if (!te->task) {
		free(te);
		return -ENOMEM;
	}
	cg_task__init(te->task);
	te->task->pid = dump_vpid(ctx->tree, ctx->pid);
	te->task->set = id;
	return push(&tasks, &nr_tasks, te);
}

static bool dir_known(const CgMember *m)
{
	for (size_t i = 0; i < nr_dirs; i++)
		if (!strcmp(dirs[i]->dir->controllers, m->controllers) &&
		    !strcmp(dirs[i]->dir->path, m->path))
			return true;
	return false;
}

/* fd's contents into buf (len bytes, the last for the NUL): their length, or -errno. */
static int read_all(int fd, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t r;

	while ((r = read(fd, buf + n, len - 1 - n)) > 0)
		if ((n += (size_t)r) == len - 1)
			return -EFBIG;
	if (r < 0)
		return -errno;
	buf[n] = 0;
	return (int)n;
}

/* net_prio.ifpriomap without its "IFNAME 0" lines. */
static void drop_zero_prios(char *val)
{
	char *out = val, *l = val;

	while (*l) {
		size_t n = strcspn(l, "\n");

		if (n < 2 || strncmp(l + n - 2, " 0", 2)) {
			memmove(out, l, n);
			out += n;
			*out++ = '\n';
		}
		l += n + (l[n] == '\n');
	}
	*out = 0;
}

/*
 * The attach types of the BPF programs attached to v2 cgroup rel of h
 * itself (not inherited), into d->bpf.  Querying needs CAP_NET_ADMIN: a
 * non-root owner's dump sees none, and its restore makes cgroups with the
 * owner's rights only.
 */
static int bpf_attached(const struct hier *h, const char *rel, CgDir *d)
{
	int fd = openat(h->fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		pr_err("cannot open cgroup %s/%s: %m", h->mnt, rel);
		return -errno;
	}
	for (size_t i = 0; i < sizeof(bpf_types) / sizeof(bpf_types[0]); i++) {
		union bpf_attr a;
		long r;

		memset(&a, 0, sizeof(a));
		a.query.target_fd = (__u32)fd;
		a.query.attach_type = bpf_types[i].type;
		r = sys_bpf(BPF_PROG_QUERY, &a, sizeof(a));
		if (r == -EPERM || r == -ENOSYS)
			break; /* not root, or no BPF: nothing to see */
		if (r == -EINVAL)
			continue; /* a type this kernel does not have */
		if (r < 0) {
			pr_err("cgroup %s/%s: cannot query its BPF programs: %s", h->mnt, rel,
			       strerror((int)-r));
			close(fd);
			return (int)r;
		}
		if (a.query.prog_cnt && !(d->bpf[d->n_bpf++] = strdup(bpf_types[i].name))) {
			close(fd);
			return -ENOMEM;
		}
	}
	close(fd);
	return 0;
}

/* The settings of a cgroup of the tree (not a hierarchy's root). */
static int dump_dir(const CgMember *m)
{
	const struct hier *h = hier_of(m->controllers);
	char file[PATH_MAX + 64], *val;
	int ret = -ENOMEM;
	CgroupEntry *e;
	CgDir *d;

	if (!strcmp(m->path, "/") || dir_known(m))
		return 0;
	if (!h || cg_rel(h, m->path, NULL, file, sizeof(file)))
		return 0; /* a hierarchy amber does not see: its processes are moved nowhere */
	e = calloc(1, sizeof(*e));
	d = calloc(1, sizeof(*d));
	val = malloc(PROP_MAX);
	if (!e || !d || !val)
		goto nomem;
	cgroup_entry__init(e);
	cg_dir__init(d);
	e->dir = d;
	d->controllers = strdup(m->controllers);
	d->path = strdup(m->path);
	d->props = calloc(NR_PROPS, sizeof(*d->props));
	d->bpf = calloc(sizeof(bpf_types) / sizeof(bpf_types[0]), sizeof(*d->bpf));
	if (!d->controllers || !d->path || !d->props || !d->bpf)
		goto free_entry;
	for (size_t i = 0; i < NR_PROPS; i++) {
		CgProp *p;
		int fd, r;

		if (cg_rel(h, m->path, props[i].name, file, sizeof(file)))
			continue;
		fd = openat(h->fd, file, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue; /* not a file of this cgroup's controllers, or of this kernel */
		r = fd < 0 ? -errno : read_all(fd, val, PROP_MAX);
		if (fd >= 0)
			close(fd);
		if (r == -EFBIG) {
			pr_err("cgroup %s/%s: more than %d bytes; amber cannot keep it", h->mnt,
			       file, PROP_MAX - 1);
			ret = r;
			goto free_entry;
		}
		/* a setting not read would come back as the kernel's default, unsaid */
		if (r < 0) {
			pr_err("cgroup %s/%s: cannot read it: %s; amber would lose that setting",
			       h->mnt, file, strerror(-r));
			ret = r;
			goto free_entry;
		}
		if (!r)
			continue;
		if (props[i].how == PROP_ONE)
			val[strcspn(val, "\n")] = 0;
		else if (!strcmp(props[i].name, "net_prio.ifpriomap"))
			drop_zero_prios(val); /* the default: an interface may be gone */
		while (*val && val[strlen(val) - 1] == '\n')
			val[strlen(val) - 1] = 0;
		if (!*val && props[i].how == PROP_LINES)
			continue;
		p = calloc(1, sizeof(*p));
		if (!p)
			goto free_entry;
		cg_prop__init(p);
		p->name = strdup(props[i].name);
		p->value = strdup(val);
		d->props[d->n_props++] = p;
		if (!p->name || !p->value)
			goto free_entry;
	}
	if (!m->controllers[0]) {
		ret = cg_rel(h, m->path, NULL, file, sizeof(file));
		if (!ret)
			ret = bpf_attached(h, file, d);
		if (ret)
			goto free_entry;
	}
	free(val);
	return push(&dirs, &nr_dirs, e);
free_entry:
	free(val);
	cgroup_entry__free_unpacked(e, NULL);
	return ret;
nomem:
	free(val);
	free(e);
	free(d);
	return -ENOMEM;
}

static void free_all(void)
{
	for (size_t i = 0; i < nr_sets; i++)
		cgroup_entry__free_unpacked(sets[i], NULL);
	for (size_t i = 0; i < nr_tasks; i++)
		cgroup_entry__free_unpacked(tasks[i], NULL);
	for (size_t i = 0; i < nr_dirs; i++)
		cgroup_entry__free_unpacked(dirs[i], NULL);
	free(sets);
	free(tasks);
	free(dirs);
	sets = tasks = dirs = NULL;
	nr_sets = nr_tasks = nr_dirs = 0;
}

static int cgroup_dump_tree_late(struct tree *t)
{
	struct img *img = NULL;
	int ret = find_hiers(0);

	for (size_t i = 0; !ret && i < nr_sets; i++)
		for (size_t j = 0; !ret && j < sets[i]->set->n_members; j++)
			ret = dump_dir(sets[i]->set->members[j]);
	if (!ret)
		ret = img_create(&t->imgs, IMG_CGROUP, &img, "cgroup.img");
	for (size_t i = 0; !ret && i < nr_sets; i++)
		ret = img_put(img, &sets[i]->base);
	for (size_t i = 0; !ret && i < nr_tasks; i++)
		ret = img_put(img, &tasks[i]->base);
	for (size_t i = 0; !ret && i < nr_dirs; i++)
		ret = img_put(img, &dirs[i]->base);
	if (img)
		ret = ret ? (img_abort(img), ret) : img_finish(img);
	free_all();
	return ret;
}

/* Before the mount namespace's dump_tree enters the tree's (ns/mnt.c). */
static int cgroup_dump_tree(struct tree *t)
{
	return find_hiers(0);
}

static void cgroup_dump_undo(struct tree *t)
{
	free_all();
}

/* ---- restore ---- */

static CgroupEntry **loaded;
static size_t nr_loaded;

static const CgSet *set_by_id(uint32_t id)
{
	for (size_t i = 0; i < nr_loaded; i++)
		if (loaded[i]->set && loaded[i]->set->id == id)
			return loaded[i]->set;
	return NULL;
}

static const CgSet *set_of(uint32_t pid)
{
	for (size_t i = 0; i < nr_loaded; i++)
		if (loaded[i]->task && loaded[i]->task->pid == pid)
			return set_by_id(loaded[i]->task->set);
	return NULL;
}

static const CgDir *dir_of(const CgMember *m)
{
	for (size_t i = 0; i < nr_loaded; i++)
		if (loaded[i]->dir && !strcmp(loaded[i]->dir->controllers, m->controllers) &&
		    !strcmp(loaded[i]->dir->path, m->path))
			return loaded[i]->dir;
	return NULL;
}

/* An absolute path without "." or ".." components or empty ones. */
static bool clean_path(const char *p)
{
	if (p[0] != '/' || strlen(p) >= PATH_MAX / 2)
		return false;
	for (const char *c = p; *c; c++)
		if (*c == '/' && (c[1] == '/' || (c[1] == '.' && (!c[2] || c[2] == '/')) ||
				  (c[1] == '.' && c[2] == '.' && (!c[3] || c[3] == '/'))))
			return false;
	return strcmp(p, "/") ? p[strlen(p) - 1] != '/' : true;
}

/* The props[] entry of a setting, NULL for one amber does not keep. */
static int prop_index(const char *name)
{
	for (size_t i = 0; i < NR_PROPS; i++)
		if (!strcmp(props[i].name, name))
			return (int)i;
	return -1;
}

static bool known_bpf(const char *name)
{
	for (size_t i = 0; i < sizeof(bpf_types) / sizeof(bpf_types[0]); i++)
		if (!strcmp(bpf_types[i].name, name))
			return true;
	return false;
}

static int corrupt(const char *what, const char *detail)
{
	pr_err("cgroup.img: %s%s%s; the image is corrupt", what, detail ? ": " : "",
	       detail ? detail : "");
	return -EBADMSG;
}

/* Every record makes sense before anything is made. */
static int check_loaded(struct tree *t)
{
	for (size_t i = 0; i < nr_loaded; i++) {
		const CgroupEntry *e = loaded[i];

		if (!!e->set + !!e->task + !!e->dir != 1)
			return corrupt("a record that is not one set, task or cgroup", NULL);
		if (e->set) {
			if (!e->set->id || e->set->n_members > MAX_HIER)
				return corrupt("a set's id or size", NULL);
			for (size_t j = 0; j < i; j++)
				if (loaded[j]->set && loaded[j]->set->id == e->set->id)
					return corrupt("two sets of one id", NULL);
			for (size_t j = 0; j < e->set->n_members; j++) {
				const CgMember *m = e->set->members[j];

				if (!clean_path(m->path) || strlen(m->controllers) >= 128 ||
				    strchr(m->controllers, '/'))
					return corrupt("a cgroup path or hierarchy", m->path);
			}
		} else if (e->task) {
			if (!tree_entry(t, e->task->pid))
				return corrupt("a process not in pstree.img", NULL);
			if (!set_by_id(e->task->set))
				return corrupt("a process's set is not in it", NULL);
			for (size_t j = 0; j < i; j++)
				if (loaded[j]->task && loaded[j]->task->pid == e->task->pid)
					return corrupt("a process listed twice", NULL);
		} else {
			if (!clean_path(e->dir->path) || !strcmp(e->dir->path, "/"))
				return corrupt("a cgroup's path", e->dir->path);
			for (size_t j = 0; j < e->dir->n_props; j++) {
				const CgProp *p = e->dir->props[j];
				int k = prop_index(p->name);

				if (k < 0 || strlen(p->value) >= PROP_MAX ||
				    (props[k].how == PROP_ONE && strchr(p->value, '\n')))
					return corrupt("a cgroup setting", p->name);
			}
			for (size_t j = 0; j < e->dir->n_bpf; j++)
				if (!known_bpf(e->dir->bpf[j]) || strlen(e->dir->controllers))
					return corrupt("a cgroup's BPF program type",
						       e->dir->bpf[j]);
		}
	}
	return 0;
}

static int write_file(int dirfd, const char *path, const char *val)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC), ret = 0;
	size_t n = strlen(val);

	if (fd < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		ret = errno ? -errno : -EIO;
	close(fd);
	return ret;
}

/* Each line of val into file of cgroup dir (below h->fd), one write each. */
static int write_lines(const struct hier *h, const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX + 64], line[PROP_MAX];
	int ret = cg_rel(h, dir, file, path, sizeof(path));

	for (const char *l = val; !ret && *l; l += strcspn(l, "\n"), l += *l == '\n') {
		snprintf(line, sizeof(line), "%.*s", (int)strcspn(l, "\n"), l);
		ret = *line ? write_file(h->fd, path, line) : 0;
		if (ret)
			pr_err("cannot write '%s' to %s/%s: %s", line, h->mnt, path,
			       strerror(-ret));
	}
	return ret;
}

/* The dumped settings of cgroup d of h (made by amber, or with "full"). */
static int set_props(const struct hier *h, const CgDir *d)
{
	char file[PATH_MAX + 64];

	for (size_t i = 0; i < d->n_props; i++) {
		const CgProp *p = d->props[i];
		int ret = cg_rel(h, d->path, p->name, file, sizeof(file));

		if (ret || faccessat(h->fd, file, F_OK, 0))
			continue; /* not this kernel's or this hierarchy's */
		switch (props[prop_index(p->name)].how) {
		case PROP_ONE:
			ret = write_file(h->fd, file, p->value);
			if (ret)
				pr_err("cannot set %s/%s to '%s': %s", h->mnt, file, p->value,
				       strerror(-ret));
			break;
		case PROP_LINES:
			ret = write_lines(h, d->path, p->name, p->value);
			break;
		case PROP_DEVICES:
			/* nothing but what the dumped cgroup allowed */
			ret = write_lines(h, d->path, "devices.deny", "a");
			if (!ret)
				ret = write_lines(h, d->path, "devices.allow", p->value);
			break;
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* Make cgroup path of h and its missing parents (soft, full), each with its dumped settings. */
static int make_dir(const struct hier *h, const char *path, bool *made)
{
	char rel[PATH_MAX], sub[PATH_MAX];
	size_t len = strlen(path);

	*made = false;
	for (size_t i = 1; i <= len; i++) {
		const CgDir *d;
		CgMember m;
		int ret;

		if (path[i] != '/' && path[i])
			continue;
		snprintf(sub, sizeof(sub), "%.*s", (int)i, path);
		ret = cg_rel(h, sub, NULL, rel, sizeof(rel));
		if (ret)
			return ret;
		if (!mkdirat(h->fd, rel, 0755)) {
			*made = true;
			m.controllers = (char *)h->controllers;
			m.path = sub;
			d = dir_of(&m);
			pr_info("cgroup %s/%s made%s", h->mnt, rel,
				d ? " with its dumped settings" : "");
			ret = d ? set_props(h, d) : 0;
			if (ret)
				return ret;
		} else if (errno != EEXIST) {
			pr_err("cannot make cgroup %s/%s: %m", h->mnt, rel);
			return -errno;
		}
	}
	return 0;
}

/*
 * A v2 cgroup that had BPF programs attached (a runtime's device filter or
 * firewall) must exist: made again it would have none, and its processes
 * would have devices and network the dump did not give them.
 */
static int bpf_cgroup_there(const CgDir *d)
{
	const struct hier *h = hier_of(d->controllers);
	char rel[PATH_MAX], types[256] = "";

	if (h && !cg_rel(h, d->path, NULL, rel, sizeof(rel)) &&
	    !faccessat(h->fd, rel, F_OK, AT_SYMLINK_NOFOLLOW))
		return 0;
	for (size_t i = 0; i < d->n_bpf; i++)
		snprintf(types + strlen(types), sizeof(types) - strlen(types), "%s%s", i ? "," : "",
			 d->bpf[i]);
	pr_err("cgroup %s had BPF programs attached (%s), which amber cannot make again: "
	       "make the cgroup with its programs before the restore (as the container "
	       "runtime does), or restore with --manage-cgroups=ignore",
	       d->path, types);
	return -EPERM;
}

/* Whether the cg_root controller name ctrl is one of a hierarchy's. */
static bool ctrl_names(const char *controllers, const char *ctrl)
{
	size_t l = strlen(ctrl);

	for (const char *p = controllers; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
		if (!strncmp(p, ctrl, l) && (p[l] == ',' || !p[l]))
			return true;
	return false;
}

/* CRIU's rule: a cg_root without a controller is for every hierarchy no other one names. */
static bool applies(const struct tree *t, const struct cg_root *r, const char *controllers)
{
	if (*r->ctrl)
		return ctrl_names(controllers, r->ctrl);
	for (size_t i = 0; i < t->o->nr_cg_root; i++)
		if (*t->o->cg_root[i].ctrl && ctrl_names(controllers, t->o->cg_root[i].ctrl))
			return false;
	return true;
}

/*
 * path below old (or old itself) as the same place below new, into *path
 * (0 done, 1 not below old, -ENOMEM).
 */
static int reroot(char **path, const char *old, const char *new)
{
	size_t l = strlen(old);
	const char *rest = *path + l;
	char *p;

	if (!strcmp(old, "/"))
		rest = strcmp(*path, "/") ? *path : "";
	else if (strncmp(*path, old, l) || (*rest && *rest != '/'))
		return 1;
	if (asprintf(&p, "%s%s", strcmp(new, "/") || !*rest ? new : "", rest) < 0)
		return -ENOMEM;
	free(*path);
	*path = p;
	return 0;
}

/*
 * The RPC's cg_root (runc makes the container's cgroups, then names them;
 * podman's restore --import gives a new container new ones): the root
 * process's cgroup of each hierarchy it applies to becomes that path, and
 * every cgroup of the image below it moves along.  A process of the tree in
 * a cgroup outside the root's cannot follow, and is refused by name.
 */
static int apply_cg_root(const struct tree *t)
{
	const CgSet *s = set_of(t->pstree[0]->pid);

	for (size_t i = 0; s && i < t->o->nr_cg_root; i++) {
		const struct cg_root *r = &t->o->cg_root[i];

		if (!clean_path(r->path)) {
			pr_err("option cg_root: '%s' is not a clean absolute cgroup path", r->path);
			return -EINVAL;
		}
		for (size_t j = 0; j < s->n_members; j++) {
			const CgMember *rm = s->members[j];
			char *old;
			int ret = 0;

			if (!applies(t, r, rm->controllers) || !strcmp(rm->path, r->path))
				continue;
			old = strdup(rm->path);
			if (!old)
				return -ENOMEM;
			pr_info("cg_root: hierarchy '%s': the image's %s becomes %s",
				rm->controllers, old, r->path);
			for (size_t k = 0; !ret && k < nr_loaded; k++) {
				const CgSet *o = loaded[k]->set;
				CgDir *d = loaded[k]->dir;

				for (size_t m = 0; o && !ret && m < o->n_members; m++) {
					CgMember *om = o->members[m];

					if (strcmp(om->controllers, rm->controllers))
						continue;
					ret = reroot(&om->path, old, r->path);
					if (ret == 1) {
						pr_err("option cg_root: a process was in cgroup %s "
						       "of "
						       "hierarchy '%s', outside the root process's "
						       "%s: it cannot be moved below %s",
						       om->path, om->controllers, old, r->path);
						ret = -EOPNOTSUPP;
					}
				}
				/* the settings of cgroups outside the root's stay where they were
				 */
				if (d && !strcmp(d->controllers, rm->controllers) &&
				    reroot(&d->path, old, r->path) < 0)
					ret = -ENOMEM;
			}
			free(old);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static bool mode_is(const struct tree *t, const char *mode)
{
	return !strcmp(t->o->manage_cgroups ? t->o->manage_cgroups : "soft", mode);
}

static int cgroup_restore_tree(struct tree *t)
{
	bool have = false;
	int ret;

	for (size_t i = 0; i < t->inv->n_files; i++)
		have |= !strcmp(t->inv->files[i]->name, "cgroup.img");
	/* one the inventory does not list is read, and so refused (images before it have none) */
	have |= !faccessat(t->dirfd, "cgroup.img", F_OK, AT_SYMLINK_NOFOLLOW);
	if (!have || mode_is(t, "ignore"))
		return 0;
	ret = img_read_all(t->img, IMG_CGROUP, &cgroup_entry__descriptor, &loaded, &nr_loaded,
			   "cgroup.img");
	if (!ret)
		ret = check_loaded(t);
	if (!ret)
		ret = apply_cg_root(t);
	if (!ret)
		ret = find_hiers(tree_fd_floor(t));
	/* every cgroup reachable (or makeable) before anything is made */
	for (size_t i = 0; !ret && i < nr_loaded; i++) {
		const CgSet *s = loaded[i]->set;

		for (size_t j = 0; s && !ret && j < s->n_members; j++) {
			const struct hier *h = hier_of(s->members[j]->controllers);
			char rel[PATH_MAX];

			if (!h) {
				pr_err("the image's processes were in cgroup %s of hierarchy '%s', "
				       "which this machine does not mount; restore with "
				       "--manage-cgroups=ignore to leave them in amber's",
				       s->members[j]->path, s->members[j]->controllers);
				ret = -ENOENT;
			} else if (cg_rel(h, s->members[j]->path, NULL, rel, sizeof(rel))) {
				pr_err("cgroup %s of hierarchy '%s' is outside what amber sees of "
				       "it "
				       "(mounted from %s)",
				       s->members[j]->path, h->controllers, h->root);
				ret = -ENOENT;
			}
		}
	}
	for (size_t i = 0; !ret && i < nr_loaded; i++)
		if (loaded[i]->dir && loaded[i]->dir->n_bpf)
			ret = bpf_cgroup_there(loaded[i]->dir);
	if (ret)
		return ret;
	ret = owner_enter(t);
	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < nr_loaded; i++) {
		const CgSet *s = loaded[i]->set;

		for (size_t j = 0; s && !ret && j < s->n_members; j++) {
			const struct hier *h = hier_of(s->members[j]->controllers);
			const CgDir *d = dir_of(s->members[j]);
			bool made;

			ret = make_dir(h, s->members[j]->path, &made);
			if (!ret && !made && d && mode_is(t, "full"))
				ret = set_props(h, d);
		}
	}
	owner_leave(t);
	return ret;
}

/* Is pid in cgroup m already (its /proc/PID/cgroup, read into now)? */
static bool already_in(const char *now, const CgMember *m)
{
	char want[PATH_MAX + 160];
	const char *p = now;
	size_t n;

	n = (size_t)snprintf(want, sizeof(want), ":%s:%s\n", m->controllers, m->path);
	while ((p = strstr(p, want))) {
		const char *bol = p;

		while (bol > now && bol[-1] != '\n')
			bol--;
		if (strspn(bol, "0123456789") == (size_t)(p - bol))
			return true;
		p += n;
	}
	return false;
}

/*
 * Move the process of image pid into each cgroup of its set it is not in
 * yet (cgroup.procs); host: its pid as amber sees it, 0 for the caller itself.
 */
static int move(struct tree *t, uint32_t pid, pid_t host)
{
	const CgSet *s = set_of(pid);
	char file[PATH_MAX + 32], val[16], now[8192] = "";
	int ret;

	if (!s)
		return 0;
	snprintf(val, sizeof(val), "%d", host);
	if (host)
		snprintf(file, sizeof(file), "/proc/%d/cgroup", host);
	else
		snprintf(file, sizeof(file), "/proc/self/cgroup");
	read_cgroup(file, now, sizeof(now));
	ret = owner_enter(t);
	if (ret)
		return ret;
	for (size_t j = 0; !ret && j < s->n_members; j++) {
		const struct hier *h = hier_of(s->members[j]->controllers);

		if (!h || cg_rel(h, s->members[j]->path, "cgroup.procs", file, sizeof(file)) ||
		    already_in(now, s->members[j]))
			continue;
		ret = write_file(h->fd, file, val);
		if (ret)
			pr_err("pid %u: cannot move it into cgroup %s/%s: %s (restore with "
			       "--manage-cgroups=ignore to leave it in amber's)",
			       pid, h->mnt, file, strerror(-ret));
	}
	owner_leave(t);
	return ret;
}

/*
 * Root's image: the child moves itself before it makes its memory (the
 * copy-on-write pages it shares with its children are charged then), and
 * amber moves it again (a CLONE_VM child skips the first); a non-root
 * owner's: once its credentials are its own.
 */
static int cgroup_restore_prefork(struct restore_ctx *ctx)
{
	if (!nr_loaded || ctx->tree->owner.switches)
		return 0;
	return move(ctx->tree, (uint32_t)ctx->pid, 0);
}

static int cgroup_restore_inject(struct restore_ctx *ctx)
{
	if (!nr_loaded || ctx->tree->owner.switches)
		return 0;
	return move(ctx->tree, (uint32_t)ctx->pid, tree_hpid(ctx->tree, (uint32_t)ctx->pid));
}

static int cgroup_restore_late(struct restore_ctx *ctx)
{
	if (!nr_loaded || !ctx->tree->owner.switches)
		return 0;
	return move(ctx->tree, (uint32_t)ctx->pid, tree_hpid(ctx->tree, (uint32_t)ctx->pid));
}

const struct resource_ops cgroup_ops = {
	.name = "cgroups",
	.dump_tree = cgroup_dump_tree,
	.dump = cgroup_dump,
	.dump_tree_late = cgroup_dump_tree_late,
	.dump_undo = cgroup_dump_undo,
	.restore_tree = cgroup_restore_tree,
	.restore_prefork = cgroup_restore_prefork,
	.restore_inject = cgroup_restore_inject,
	.restore_late = cgroup_restore_late,
};
