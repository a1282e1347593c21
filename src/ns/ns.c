// SPDX-License-Identifier: MIT
/*
 * UTS, IPC, time, cgroup and user namespaces of the tree (the other kinds
 * are refused at dump, dump.c): each namespace a process of the tree is in
 * that is not amber's is one ns_entry of ns.img (its id in pstree_entry
 * uts_ns / ipc_ns / time_ns / cgroup_ns / user_ns).  With a user namespace
 * (userns.c) it is made first and the others inside it (make_inside); a
 * process enters it last (ns_restore_user).  What is particular to a kind is in its
 * table entry below (timens.c, cgroupns.c).
 *
 * Dump (as root): a namespace is known by the inode of /proc/PID/ns/KIND.
 * amber keeps an fd on it and reads its state from inside: its calling
 * thread setns()es into it (only that thread changes namespace), reads
 * uname() or the IPC sysctls of /proc/sys/kernel (per namespace), and
 * setns()es back into its own.  sysv.c does the same around each IPC
 * namespace's objects.  A time namespace is read from outside (entering it
 * would move amber's own clocks).
 *
 * Restore: amber makes every namespace before the first process exists
 * (restore_tree, first of the table): unshare() in its own thread, the
 * names or sysctls set, an fd kept on it above every restored fd (the
 * processes inherit it; drop_internal closes it in them), back into its
 * own (a time namespace: made by a process of its own, timens.c).  sysv.c
 * then makes each namespace's objects inside it.  Every
 * restored process setns()es into its namespaces (amber's own for id 0)
 * first thing after it is created, before it creates its children, so
 * processes that shared a namespace share the one made for it, whatever
 * their place in the tree, and those that did not, do not.  Only an image
 * of root's may make namespaces (owner.c): any other is refused before
 * anything exists.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "amber.h"
#include "ipc/ipc.h"
#include "dump.h"
#include "log.h"
#include "ns.h"
#include "sys.h"

#define HOSTNAME_MAX 64 /* the kernel's __NEW_UTS_LEN */
#define SYSCTL_MAX   64 /* a value: at most four numbers */

static int read_uts(NsEntry *e, pid_t pid);
static int read_ipc(NsEntry *e, pid_t pid);
static int check_uts(const NsEntry *e);
static int check_ipc(const NsEntry *e);

static const struct {
	const char *name; /* in /proc/PID/ns */
	const char *what; /* in messages */
	int flag;
	bool inside; /* dump: read from inside it (amber's thread setns()es) */
	int (*read)(NsEntry *e, pid_t pid);
	int (*check)(const NsEntry *e);
	/* restore: made by this (else unshare() in amber's thread and set_state) */
	int (*make)(const NsEntry *e, int base, int *fd);
	/* dump: each process of the tree in it, if it must be checked */
	int (*member)(NsEntry *e, pid_t pid);
} kinds[] = {
	[NS_KIND__NS_UTS] = {"uts", "UTS", CLONE_NEWUTS, true, read_uts, check_uts, NULL, NULL},
	[NS_KIND__NS_IPC] = {"ipc", "IPC", CLONE_NEWIPC, true, read_ipc, check_ipc, NULL, NULL},
	[NS_KIND__NS_TIME] = {"time", "time", CLONE_NEWTIME, false, timens_read, timens_check,
			      timens_make, NULL},
	[NS_KIND__NS_CGROUP] = {"cgroup", "cgroup", CLONE_NEWCGROUP, false, cgroupns_read,
				cgroupns_check, NULL, cgroupns_member},
	/* last: a process enters it after the others (userns.c) */
	[NS_KIND__NS_USER] = {"user", "user", CLONE_NEWUSER, false, userns_read, userns_check,
			      userns_make, userns_member},
};
#define FIRST_KIND NS_KIND__NS_UTS
#define LAST_KIND  NS_KIND__NS_USER

/* The IPC sysctls a namespace has of its own (/proc/sys/kernel). */
static const char *const ipc_sysctls[] = {
	"shmmax", "shmall", "shmmni", "shm_rmid_forced", "msgmax", "msgmnb", "msgmni", "sem",
};

struct ns {
	NsEntry *e;
	int fd; /* dump: on /proc/PID/ns/KIND of a process in it; restore: the one made */
};

static struct ns *nss;
static size_t nr_nss;
/* amber's own namespace of each kind, to come back to (and, restored, id 0's) */
static int own_fd[] = {[NS_KIND__NS_UTS] = -1,
		       [NS_KIND__NS_IPC] = -1,
		       [NS_KIND__NS_TIME] = -1,
		       [NS_KIND__NS_CGROUP] = -1,
		       [NS_KIND__NS_USER] = -1};
static NsEntry **loaded; /* restore: ns.img as read */
static size_t nr_loaded;

static bool kind_ok(int kind)
{
	return kind >= FIRST_KIND && kind <= LAST_KIND;
}

const char *ns_kind_name(int kind)
{
	return kind_ok(kind) ? kinds[kind].what : "?";
}

static struct ns *find(int kind, uint32_t id)
{
	for (size_t i = 0; i < nr_nss; i++)
		if ((int)nss[i].e->kind == kind && nss[i].e->id == id)
			return &nss[i];
	return NULL;
}

bool ns_known(int kind, uint32_t id)
{
	return !id || find(kind, id);
}

uint32_t ns_next(int kind, uint32_t after)
{
	uint32_t next = 0;

	for (size_t i = 0; i < nr_nss; i++) {
		uint32_t id = nss[i].e->id;

		if ((int)nss[i].e->kind == kind && id > after && (!next || id < next))
			next = id;
	}
	return next;
}

uint32_t ns_of(const struct tree *t, uint32_t pid, int kind)
{
	const PstreeEntry *e = tree_entry(t, pid);

	if (!e)
		return 0;
	switch (kind) {
	case NS_KIND__NS_UTS:
		return e->uts_ns;
	case NS_KIND__NS_IPC:
		return e->ipc_ns;
	case NS_KIND__NS_TIME:
		return e->time_ns;
	case NS_KIND__NS_CGROUP:
		return e->cgroup_ns;
	case NS_KIND__NS_USER:
		return e->user_ns;
	}
	return 0;
}

/* amber's own namespace of a kind, once, at or above fd base (restore: inherited). */
static bool absent[LAST_KIND + 1];

static int own_ns(int kind, int base)
{
	char path[64];
	int fd;

	if (own_fd[kind] >= 0 || absent[kind])
		return 0;
	snprintf(path, sizeof(path), "/proc/thread-self/ns/%s", kinds[kind].name);
	fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd == -ENOENT) {
		absent[kind] = true; /* a kernel without this kind: one namespace for all */
		return 0;
	}
	if (fd < 0) {
		pr_err("cannot open amber's own %s namespace (%s): %s", kinds[kind].what, path,
		       strerror(-fd));
		return fd;
	}
	own_fd[kind] = fcntl(fd, F_DUPFD_CLOEXEC, base);
	close(fd);
	if (own_fd[kind] < 0) {
		pr_err("cannot keep an fd on amber's own %s namespace: %m", kinds[kind].what);
		return -errno;
	}
	return 0;
}

int ns_enter(int kind, uint32_t id)
{
	struct ns *n = id ? find(kind, id) : NULL;

	if (!id)
		return 0;
	if (!n) {
		pr_err("no %s namespace %u in this image", ns_kind_name(kind), id);
		return -ENOENT;
	}
	if (setns(n->fd, kinds[kind].flag)) {
		pr_err("cannot enter %s namespace %u (inode %llu at dump): %m", kinds[kind].what,
		       id, (unsigned long long)n->e->ino);
		return -errno;
	}
	return 0;
}

void ns_leave(int kind, uint32_t id)
{
	if (!id)
		return;
	/* amber's own steps would go to the tree's namespace: nothing may follow */
	if (setns(own_fd[kind], kinds[kind].flag)) {
		pr_err("cannot return to amber's own %s namespace from namespace %u: %m",
		       kinds[kind].what, id);
		abort();
	}
}

/* ---- dump ---- */

static int read_uts(NsEntry *e, pid_t pid)
{
	struct utsname u;

	if (uname(&u)) {
		pr_err("UTS namespace %u (inode %llu): uname failed: %m", e->id,
		       (unsigned long long)e->ino);
		return -errno;
	}
	e->hostname = strdup(u.nodename);
	e->domainname = strdup(u.domainname);
	return e->hostname && e->domainname ? 0 : -ENOMEM;
}

static int read_ipc(NsEntry *e, pid_t pid)
{
	size_t n = sizeof(ipc_sysctls) / sizeof(ipc_sysctls[0]);

	/* before the fds are looked at: its message queues are known as its */
	mqueue_probe_ns(e->id);

	e->sysctls = calloc(n, sizeof(*e->sysctls));
	if (!e->sysctls)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char path[64], *buf = NULL;
		NsSysctl *s;
		int ret;

		snprintf(path, sizeof(path), "/proc/sys/kernel/%s", ipc_sysctls[i]);
		ret = sys_read_file(path, &buf, NULL);
		if (ret == -ENOENT)
			continue; /* not in this kernel: the new namespace's own default */
		if (ret) {
			pr_err("IPC namespace %u (inode %llu): cannot read %s: %s", e->id,
			       (unsigned long long)e->ino, path, strerror(-ret));
			return ret;
		}
		buf[strcspn(buf, "\n")] = 0;
		s = malloc(sizeof(*s));
		if (!s) {
			free(buf);
			return -ENOMEM;
		}
		ns_sysctl__init(s);
		s->name = strdup(ipc_sysctls[i]);
		s->value = buf;
		e->sysctls[e->n_sysctls++] = s;
		if (!s->name)
			return -ENOMEM;
	}
	return 0;
}

/* A namespace of the tree not seen yet: an fd on it, and its state read from inside. */
static int add_ns(int kind, pid_t pid, uint64_t ino, uint32_t *id)
{
	struct ns *nn = realloc(nss, (nr_nss + 1) * sizeof(*nn));
	char path[64];
	NsEntry *e;
	int ret;

	if (!nn)
		return -ENOMEM;
	nss = nn;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	ns_entry__init(e);
	e->id = (uint32_t)nr_nss + 1;
	e->kind = kind;
	e->has_ino = 1;
	e->ino = ino;
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, kinds[kind].name);
	nss[nr_nss].e = e;
	nss[nr_nss].fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (nss[nr_nss].fd < 0) {
		pr_err("pid %d: cannot open its %s namespace (%s, inode %llu): %s", pid,
		       kinds[kind].what, path, (unsigned long long)ino, strerror(-nss[nr_nss].fd));
		ret = nss[nr_nss].fd;
		free(e);
		return ret;
	}
	nr_nss++;
	if (kinds[kind].inside) {
		ret = ns_enter(kind, e->id);
		if (ret)
			return ret;
	}
	ret = kinds[kind].read(e, pid);
	if (kinds[kind].inside)
		ns_leave(kind, e->id);
	if (!ret)
		pr_debug("pid %d: %s namespace %u (inode %llu)%s%s", pid, kinds[kind].what, e->id,
			 (unsigned long long)ino, e->hostname ? ", hostname " : "",
			 e->hostname ? e->hostname : "");
	*id = e->id;
	return ret;
}

/* The id of pid's namespace of a kind: 0 for amber's, else its ns.img entry's. */
static struct stat own_st[LAST_KIND + 1]; /* amber's namespaces, once a dump */
static bool own_st_read[LAST_KIND + 1];

static int ns_id(int kind, pid_t pid, uint32_t *id)
{
	struct stat *own = &own_st[kind], st;
	char path[64];

	*id = 0;
	if (absent[kind])
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, kinds[kind].name);
	if (sys_stat(path, &st)) {
		pr_err("pid %d: cannot stat %s: %m", pid, path);
		return -errno;
	}
	snprintf(path, sizeof(path), "/proc/self/ns/%s", kinds[kind].name);
	if (!own_st_read[kind] && sys_stat(path, own)) {
		pr_err("cannot stat amber's own %s: %m", path);
		return -errno;
	}
	own_st_read[kind] = true;
	*id = 0;
	if (st.st_ino == own->st_ino && st.st_dev == own->st_dev)
		return 0;
	for (size_t i = 0; !*id && i < nr_nss; i++)
		if ((int)nss[i].e->kind == kind && nss[i].e->ino == st.st_ino)
			*id = nss[i].e->id;
	if (!*id) {
		int ret = add_ns(kind, pid, st.st_ino, id);

		if (ret)
			return ret;
	}
	return kinds[kind].member ? kinds[kind].member(find(kind, *id)->e, pid) : 0;
}

static int write_ns_img(struct tree *t)
{
	struct img *img = NULL;
	int ret = img_create(&t->imgs, IMG_NS, &img, "ns.img");

	for (size_t i = 0; !ret && i < nr_nss; i++)
		ret = img_put(img, &nss[i].e->base);
	if (ret) {
		if (img)
			img_abort(img);
		return ret;
	}
	return img_finish(img);
}

/*
 * Threads of one process come back in one set of namespaces (the leader's):
 * a thread that setns()ed or unshare()d alone is refused, naming it.  Its
 * user and time namespaces cannot differ (the kernel changes them only in
 * a single-threaded process, and a thread starts in its creator's), so
 * only the other kinds are compared: seven links a thread, not nine.
 */
static const char *const thread_kinds[] = {
	"uts", "ipc", "net", "mnt", "cgroup", "pid_for_children", "time_for_children"};
#define NR_THREAD_KINDS (sizeof(thread_kinds) / sizeof(thread_kinds[0]))

static int check_thread(struct dump_ctx *ctx, pid_t tid, void *arg)
{
	char(*leader)[64] = arg, path[96], theirs[64];
	int nsd, ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/ns", ctx->pid, tid);
	nsd = sys_open(path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (nsd < 0)
		return 0; /* gone meanwhile */
	for (size_t i = 0; !ret && i < NR_THREAD_KINDS; i++) {
		if (!leader[i][0] ||
		    sys_readlinkat(nsd, thread_kinds[i], theirs, sizeof(theirs)) < 0 ||
		    !strcmp(leader[i], theirs))
			continue;
		pr_err("pid %d: thread %d is in another %s namespace (%s) than its "
		       "process (%s); amber restores a process's threads in one set of "
		       "namespaces: let the thread return to its process's before the dump",
		       ctx->pid, tid, thread_kinds[i], theirs, leader[i]);
		ret = -EOPNOTSUPP;
	}
	close(nsd);
	return ret;
}

static int check_threads(struct dump_ctx *ctx)
{
	char path[96], leader[NR_THREAD_KINDS][64];

	if (ctx->nr_threads < 2)
		return 0;
	for (size_t i = 0; i < NR_THREAD_KINDS; i++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", ctx->pid, thread_kinds[i]);
		if (sys_readlink(path, leader[i], sizeof(leader[i])) < 0)
			leader[i][0] = 0;
	}
	return dump_each_thread(ctx, check_thread, leader);
}

/*
 * One user namespace for the whole tree, and the tree's other namespaces owned
 * by it: the restore makes them inside it (a namespace unshare()d before the
 * user namespace is owned by amber's, which the restore would not remake).
 */
static int check_userns(struct tree *t)
{
	struct stat want, owner;
	struct ns *user = NULL;

	for (size_t i = 0; i < nr_nss; i++) {
		if (nss[i].e->kind != NS_KIND__NS_USER)
			continue;
		if (user) {
			pr_err("the tree's processes are in several user namespaces (inodes %llu "
			       "and %llu); amber restores one user namespace a tree: dump each "
			       "part by itself",
			       (unsigned long long)user->e->ino, (unsigned long long)nss[i].e->ino);
			return -EOPNOTSUPP;
		}
		user = &nss[i];
	}
	if (!user)
		return 0;
	for (size_t p = 0; p < t->nr_procs; p++) {
		const PstreeEntry *e = tree_entry(t, (uint32_t)t->dprocs[p]->pid);

		if (e->user_ns == user->e->id)
			continue;
		pr_err("pid %d is in amber's user namespace, others of the tree in user namespace "
		       "%llu: the tree is in several user namespaces; amber restores one user "
		       "namespace a tree: dump each part by itself",
		       t->dprocs[p]->pid, (unsigned long long)user->e->ino);
		return -EOPNOTSUPP;
	}
	if (fstat(user->fd, &want)) {
		pr_err("cannot stat user namespace %u: %m", user->e->id);
		return -errno;
	}
	for (size_t i = 0; i < nr_nss; i++) {
		int fd;

		if (nss[i].e->kind == NS_KIND__NS_USER)
			continue;
		fd = ioctl(nss[i].fd, NS_GET_USERNS);
		if (fd < 0 || fstat(fd, &owner)) {
			pr_err("cannot get the owner of %s namespace %u (inode %llu): %m",
			       kinds[nss[i].e->kind].what, nss[i].e->id,
			       (unsigned long long)nss[i].e->ino);
			if (fd >= 0)
				close(fd);
			return -errno;
		}
		close(fd);
		if (owner.st_ino == want.st_ino && owner.st_dev == want.st_dev)
			continue;
		pr_err("%s namespace %u (inode %llu) of the tree is owned by user namespace %llu, "
		       "not by the tree's (%llu): the restore makes the tree's namespaces inside "
		       "its user namespace; make them after the user namespace (unshare --user "
		       "with the others)",
		       kinds[nss[i].e->kind].what, nss[i].e->id, (unsigned long long)nss[i].e->ino,
		       (unsigned long long)owner.st_ino, (unsigned long long)want.st_ino);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int ns_dump_tree(struct tree *t)
{
	int ret = 0;

	for (int k = FIRST_KIND; !ret && k <= LAST_KIND; k++)
		ret = own_ns(k, 0);
	memset(own_st_read, 0, sizeof(own_st_read)); /* an RPC worker's earlier dump's */
	for (size_t p = 0; !ret && p < t->nr_procs; p++) {
		pid_t pid = t->dprocs[p]->pid;
		PstreeEntry *e = tree_entry(t, (uint32_t)pid);

		ret = check_threads(t->dprocs[p]);
		if (!ret)
			ret = ns_id(NS_KIND__NS_UTS, pid, &e->uts_ns);
		if (!ret)
			ret = ns_id(NS_KIND__NS_IPC, pid, &e->ipc_ns);
		if (!ret)
			ret = ns_id(NS_KIND__NS_TIME, pid, &e->time_ns);
		if (!ret)
			ret = ns_id(NS_KIND__NS_CGROUP, pid, &e->cgroup_ns);
		if (!ret)
			ret = ns_id(NS_KIND__NS_USER, pid, &e->user_ns);
		e->has_user_ns = e->user_ns != 0;
		/* (check_sharing ran before: clone_fs is known) */
		if (!ret && e->user_ns && e->clone_fs) {
			pr_err("pid %d shares its cwd and root with its parent (CLONE_FS) in a "
			       "user "
			       "namespace; a process sharing them cannot enter a user namespace at "
			       "restore",
			       pid);
			ret = -EOPNOTSUPP;
		}
		e->has_uts_ns = e->uts_ns != 0;
		e->has_ipc_ns = e->ipc_ns != 0;
		e->has_time_ns = e->time_ns != 0;
		e->has_cgroup_ns = e->cgroup_ns != 0;
	}
	if (!ret)
		ret = check_userns(t);
	if (!ret && nr_nss)
		ret = write_ns_img(t);
	return ret;
}

/* ---- restore ---- */

static bool listed(const struct tree *t, const char *name)
{
	for (size_t i = 0; i < t->inv->n_files; i++)
		if (!strcmp(t->inv->files[i]->name, name))
			return true;
	return false;
}

static int corrupt(const char *what, uint32_t id)
{
	pr_err("ns.img: namespace %u: %s; the image is corrupt", id, what);
	return -EBADMSG;
}

static bool is_ipc_sysctl(const char *name)
{
	for (size_t i = 0; i < sizeof(ipc_sysctls) / sizeof(ipc_sysctls[0]); i++)
		if (!strcmp(name, ipc_sysctls[i]))
			return true;
	return false;
}

static int check_entry(const NsEntry *e, size_t idx)
{
	if (!kind_ok(e->kind))
		return corrupt("unknown kind", e->id);
	if (!e->id || e->id > nr_loaded)
		return corrupt("id out of range", e->id);
	for (size_t k = 0; k < idx; k++)
		if (loaded[k]->id == e->id)
			return corrupt("listed twice", e->id);
	if (e->kind != NS_KIND__NS_TIME && (e->has_monotonic_off_ns || e->has_boottime_off_ns ||
					    e->has_monotonic_ns || e->has_boottime_ns))
		return corrupt("only a time namespace has clock offsets", e->id);
	if (e->kind != NS_KIND__NS_UTS && (e->hostname || e->domainname))
		return corrupt("only a UTS namespace has a hostname", e->id);
	if (e->kind != NS_KIND__NS_IPC && e->n_sysctls)
		return corrupt("only an IPC namespace has sysctls", e->id);
	if (e->kind != NS_KIND__NS_CGROUP && e->n_cgroup_roots)
		return corrupt("only a cgroup namespace has cgroup roots", e->id);
	if (e->kind != NS_KIND__NS_USER && (e->n_uid_map || e->n_gid_map || e->has_setgroups_deny))
		return corrupt("only a user namespace has maps and setgroups", e->id);
	return kinds[e->kind].check(e);
}

static int check_uts(const NsEntry *e)
{
	if (!e->hostname || !e->domainname)
		return corrupt("a UTS namespace needs a hostname and a domainname", e->id);
	if (strlen(e->hostname) > HOSTNAME_MAX || strlen(e->domainname) > HOSTNAME_MAX)
		return corrupt("hostname or domainname longer than 64 bytes", e->id);
	return 0;
}

static int check_ipc(const NsEntry *e)
{
	for (size_t i = 0; i < e->n_sysctls; i++) {
		const NsSysctl *s = e->sysctls[i];
		size_t len = strlen(s->value);

		if (!is_ipc_sysctl(s->name))
			return corrupt("a sysctl that is not a namespace's IPC sysctl", e->id);
		if (!len || len > SYSCTL_MAX || strspn(s->value, "0123456789 \t") != len)
			return corrupt("a sysctl value that is not numbers", e->id);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(e->sysctls[k]->name, s->name))
				return corrupt("a sysctl set twice", e->id);
	}
	return 0;
}

/* Every process names namespaces of ns.img of their kind, and each of them has one. */
static int check_pstree(const struct tree *t)
{
	uint32_t user = t->nr_pstree ? t->pstree[0]->user_ns : 0;

	for (size_t i = 0; i < t->nr_pstree; i++) {
		const PstreeEntry *p = t->pstree[i];

		/* setns() into a user namespace needs a cwd/root of one's own */
		if (user && p->clone_fs) {
			pr_err("pstree.img: pid %u shares its cwd and root with its parent "
			       "(CLONE_FS) in user namespace %u; a process sharing them cannot "
			       "enter a user namespace: refusing",
			       p->pid, user);
			return -EOPNOTSUPP;
		}
		/* a process cannot leave a user namespace for its parent's */
		if (p->user_ns != user) {
			pr_err("pstree.img: pid %u is in user namespace %u, the root in %u; amber "
			       "restores one user namespace a tree; the image is corrupt",
			       p->pid, p->user_ns, user);
			return -EBADMSG;
		}

		for (int k = FIRST_KIND; k <= LAST_KIND; k++) {
			uint32_t id = ns_of(t, p->pid, k);

			if (!id || find(k, id))
				continue;
			pr_err("pstree.img: pid %u is in %s namespace %u, which ns.img does not "
			       "have; "
			       "the image is corrupt",
			       p->pid, kinds[k].what, id);
			return -EBADMSG;
		}
		/* it shares its parent's memory: the kernel keeps it in the parent's
		 * time namespace (setns() would need it alone in its memory) */
		if (p->clone_vm && p->time_ns != ns_of(t, p->ppid, NS_KIND__NS_TIME)) {
			pr_err("pstree.img: pid %u shares the memory of its parent %u but not its "
			       "time namespace; the image is corrupt",
			       p->pid, p->ppid);
			return -EBADMSG;
		}
	}
	for (size_t n = 0; user && n < nr_nss; n++) {
		if (nss[n].e->kind == NS_KIND__NS_USER && nss[n].e->id != user)
			return corrupt("a second user namespace (amber restores one a tree)",
				       nss[n].e->id);
	}
	for (size_t n = 0; n < nr_nss; n++) {
		bool used = false;

		for (size_t i = 0; !used && i < t->nr_pstree; i++)
			used = ns_of(t, t->pstree[i]->pid, nss[n].e->kind) == nss[n].e->id;
		if (!used)
			return corrupt("no process of pstree.img is in it", nss[n].e->id);
	}
	return 0;
}

/* Only root's image may make namespaces: a namespace is root's to make. */
static int check_owner(const struct tree *t)
{
	const NsEntry *e = nss[0].e;

	if (t->owner.unbounded)
		return 0;
	/* a user namespace with any maps is the first thing root's right covers */
	for (size_t i = 0; i < nr_nss; i++)
		if (nss[i].e->kind == NS_KIND__NS_USER)
			e = nss[i].e;
	pr_err("the image has %s namespace %u%s%s (made new at restore, which needs "
	       "CAP_SYS_ADMIN); uid %u's image may not make namespaces: refusing",
	       kinds[e->kind].what, e->id, e->hostname ? ", hostname " : "",
	       e->hostname ? e->hostname : "", t->owner.uid);
	return -EPERM;
}

int ns_restore_read(struct tree *t)
{
	int ret = 0;

	if (listed(t, "ns.img"))
		ret = img_read_all(t->img, IMG_NS, &ns_entry__descriptor, &loaded, &nr_loaded,
				   "ns.img");
	if (!ret && listed(t, "ns.img") && !nr_loaded) {
		pr_err("ns.img is empty; the image is corrupt");
		ret = -EBADMSG;
	}
	for (size_t i = 0; !ret && i < nr_loaded; i++)
		ret = check_entry(loaded[i], i);
	if (ret)
		return ret;
	nss = calloc(nr_loaded + 1, sizeof(*nss));
	if (!nss)
		return -ENOMEM;
	for (size_t i = 0; i < nr_loaded; i++)
		nss[nr_nss++] = (struct ns){loaded[i], -1};
	ret = check_pstree(t);
	if (!ret && nr_nss)
		ret = check_owner(t);
	return ret;
}

static int write_sysctl(const NsEntry *e, const NsSysctl *s)
{
	char path[64];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/sys/kernel/%s", s->name);
	fd = sys_open(path, O_WRONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("IPC namespace %u: cannot open %s to set it to %s: %s", e->id, path,
		       s->value, strerror(-fd));
		return fd;
	}
	if (sys_write_full(fd, s->value, strlen(s->value)) != (ssize_t)strlen(s->value)) {
		ret = errno ? -errno : -EIO;
		pr_err("IPC namespace %u: cannot set %s to %s: %s", e->id, path, s->value,
		       strerror(-ret));
	}
	close(fd);
	return ret;
}

/* In amber's thread, now in the new namespace: its names or sysctls. */
static int set_state(const NsEntry *e)
{
	int ret = 0;

	if (e->kind == NS_KIND__NS_CGROUP)
		return 0; /* rooted at amber's cgroups, which are its roots (cgroupns.c) */
	if (e->kind == NS_KIND__NS_UTS) {
		if (sethostname(e->hostname, strlen(e->hostname)) ||
		    setdomainname(e->domainname, strlen(e->domainname))) {
			pr_err("UTS namespace %u: cannot set hostname %s, domainname %s: %m", e->id,
			       e->hostname, e->domainname);
			return -errno;
		}
		return 0;
	}
	for (size_t i = 0; !ret && i < e->n_sysctls; i++)
		ret = write_sysctl(e, e->sysctls[i]);
	return ret;
}

static struct ns *tree_userns(void)
{
	for (size_t i = 0; i < nr_nss; i++)
		if (nss[i].e->kind == NS_KIND__NS_USER)
			return &nss[i];
	return NULL;
}

int ns_user_fd(void)
{
	const struct ns *user = tree_userns();

	return user ? user->fd : -1;
}

bool ns_has_user(void)
{
	return tree_userns() != NULL;
}

int ns_make_by_child(const char *what, uint32_t id, const char *nsfile, int (*make)(void *arg),
		     int (*ready)(pid_t pid, void *arg), void *arg, int base, int *fd)
{
	int go[2], made[2], nfd, st, ret;
	char path[64], c = 0;
	pid_t pid;

	*fd = -1;
	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(made, O_CLOEXEC)) {
		ret = -errno;
		goto close_go;
	}
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		pr_err("%s namespace %u: cannot fork its maker: %m", what, id);
		goto close_made;
	}
	if (!pid) {
		/* amber gone, the maker goes too; its read of go ends when amber closes it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(go[1]);
		close(made[0]);
		c = make(arg) ? 0 : 1;
		if (write(made[1], &c, 1) != 1 || !c)
			_exit(1);
		_exit(read(go[0], &c, 1) < 0);
	}
	close(go[0]);
	go[0] = -1;
	close(made[1]);
	made[1] = -1;
	ret = read(made[0], &c, 1) == 1 && c ? 0 : -EPERM; /* the maker logged why */
	if (!ret && ready)
		ret = ready(pid, arg);
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", pid, nsfile);
	nfd = ret ? -1 : sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (!ret && nfd < 0) {
		pr_err("cannot open the new %s namespace %u (%s): %s", what, id, path,
		       strerror(-nfd));
		ret = nfd;
	}
	if (nfd >= 0) {
		/* above the restored fds, inherited by every process */
		*fd = fcntl(nfd, F_DUPFD_CLOEXEC, base);
		if (*fd < 0) {
			ret = -errno;
			pr_err("cannot keep an fd on %s namespace %u: %m", what, id);
		}
		close(nfd);
	}
	close(go[1]);
	go[1] = -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!ret && (!WIFEXITED(st) || WEXITSTATUS(st))) {
		pr_err("%s namespace %u: its maker (pid %d) failed", what, id, pid);
		ret = -EIO;
	}
	if (ret && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
close_made:
	if (made[1] >= 0)
		close(made[1]);
	close(made[0]);
close_go:
	if (go[0] >= 0)
		close(go[0]);
	if (go[1] >= 0)
		close(go[1]);
	return ret;
}

/* In the maker of a namespace owned by the tree's user namespace (make_inside). */
struct inside {
	struct ns *n;
	int userfd;
};

static int make_in_userns(void *arg)
{
	struct inside *in = arg;
	int kind = in->n->e->kind;

	if (setns(in->userfd, CLONE_NEWUSER)) {
		pr_err("%s namespace %u: cannot enter the tree's user namespace: %m",
		       kinds[kind].what, in->n->e->id);
		return -errno;
	}
	/* as the namespace's root, whom its IPC sysctls let write them
	 * (kept capabilities: the uid 0 it leaves is not this one's root) */
	if ((setresgid(0, 0, 0) || setresuid(0, 0, 0)) && errno != EINVAL) {
		pr_err("%s namespace %u: cannot become the user namespace's root: %m",
		       kinds[kind].what, in->n->e->id);
		return -errno;
	}
	if (unshare(kinds[kind].flag)) {
		pr_err("cannot make %s namespace %u: %m", kinds[kind].what, in->n->e->id);
		return -errno;
	}
	return set_state(in->n->e);
}

/*
 * A namespace owned by the tree's user namespace: made by a helper that
 * entered it (amber, maybe threaded, may not, and could not come back).
 */
static int make_inside(struct tree *t, struct ns *n, int userfd)
{
	struct inside in = {n, userfd};
	int kind = n->e->kind;
	int ret = ns_make_by_child(kinds[kind].what, n->e->id, kinds[kind].name, make_in_userns,
				   NULL, &in, tree_fd_floor(t), &n->fd);

	if (!ret)
		pr_info("made %s namespace %u inside the tree's user namespace%s%s",
			kinds[kind].what, n->e->id, n->e->hostname ? ", hostname " : "",
			n->e->hostname ? n->e->hostname : "");
	return ret;
}

static int make_ns(struct tree *t, struct ns *n)
{
	int kind = n->e->kind, fd, ret;
	struct ns *user = tree_userns();
	char path[64];

	/* (a time namespace's maker enters the user namespace itself: timens.c) */
	if (user && kind != NS_KIND__NS_USER && kind != NS_KIND__NS_TIME)
		return make_inside(t, n, user->fd);
	if (kinds[kind].make) {
		ret = kinds[kind].make(n->e, tree_fd_floor(t), &n->fd);
		if (!ret)
			pr_info("made %s namespace %u", kinds[kind].what, n->e->id);
		return ret;
	}
	if (unshare(kinds[kind].flag)) {
		pr_err("cannot make %s namespace %u: %m", kinds[kind].what, n->e->id);
		return -errno;
	}
	ret = set_state(n->e);
	snprintf(path, sizeof(path), "/proc/thread-self/ns/%s", kinds[kind].name);
	fd = ret ? -1 : sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (!ret && fd < 0) {
		pr_err("cannot open the new %s namespace %u: %s", kinds[kind].what, n->e->id,
		       strerror(-fd));
		ret = fd;
	}
	if (fd >= 0) {
		/* above the restored fds, inherited by every process */
		n->fd = fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
		if (n->fd < 0) {
			ret = -errno;
			pr_err("cannot keep an fd on %s namespace %u: %m", kinds[kind].what,
			       n->e->id);
		}
		close(fd);
	}
	ns_leave(kind, n->e->id);
	if (!ret)
		pr_info("made %s namespace %u%s%s", kinds[kind].what, n->e->id,
			n->e->hostname ? ", hostname " : "", n->e->hostname ? n->e->hostname : "");
	return ret;
}

static int ns_restore_tree(struct tree *t)
{
	int ret = 0;

	if (!nr_nss)
		return 0;
	for (int k = FIRST_KIND; !ret && k <= LAST_KIND; k++)
		ret = own_ns(k, tree_fd_floor(t));
	/* the user namespace first: the others are made inside it */
	for (size_t i = 0; !ret && i < nr_nss; i++)
		if (nss[i].e->kind == NS_KIND__NS_USER)
			ret = make_ns(t, &nss[i]);
	for (size_t i = 0; !ret && i < nr_nss; i++)
		if (nss[i].e->kind != NS_KIND__NS_USER)
			ret = make_ns(t, &nss[i]);
	return ret;
}

/* Whether the calling thread is in the namespace of fd already. */
static bool in_ns(int kind, int fd)
{
	struct stat want, cur;
	char path[64];

	snprintf(path, sizeof(path), "/proc/thread-self/ns/%s", kinds[kind].name);
	return !fstat(fd, &want) && !sys_stat(path, &cur) && want.st_ino == cur.st_ino &&
	       want.st_dev == cur.st_dev;
}

const NsEntry *ns_user(const struct tree *t, uint32_t pid)
{
	struct ns *n = find(NS_KIND__NS_USER, ns_of(t, pid, NS_KIND__NS_USER));

	return n ? n->e : NULL;
}

int ns_restore_process(const struct tree *t, uint32_t pid)
{
	/* the user namespace last, by ns_restore_user */
	for (int k = FIRST_KIND; nr_nss && k < NS_KIND__NS_USER; k++) {
		uint32_t id = ns_of(t, pid, k);
		int fd = id ? find(k, id)->fd : own_fd[k];

		/* a time namespace is entered alone in one's memory: a CLONE_VM child
		 * is in its parent's already (checked at read) */
		if (in_ns(k, fd))
			continue;
		if (setns(fd, kinds[k].flag)) {
			pr_err("pid %u: cannot enter %s namespace %u: %m", pid, kinds[k].what, id);
			return -errno;
		}
	}
	return 0;
}

/*
 * After the others and after it made its children: amber's root may enter
 * any namespace from outside, also amber's own, and choose its children's
 * pids (clone3 set_tid needs CAP_CHECKPOINT_RESTORE in amber's namespace),
 * which a process inside could not.
 */
int ns_restore_user(const struct tree *t, uint32_t pid)
{
	struct ns *n = find(NS_KIND__NS_USER, ns_of(t, pid, NS_KIND__NS_USER));

	if (!n || in_ns(NS_KIND__NS_USER, n->fd))
		return 0;
	if (setns(n->fd, CLONE_NEWUSER)) {
		pr_err("pid %u: cannot enter user namespace %u: %m", pid, n->e->id);
		return -errno;
	}
	return 0;
}

/* The processes are in them (or gone): amber holds them no longer. */
static void close_all(struct tree *t)
{
	for (size_t i = 0; i < nr_nss; i++)
		if (nss[i].fd >= 0) {
			close(nss[i].fd);
			nss[i].fd = -1;
		}
}

const struct resource_ops ns_ops = {
	.name = "namespaces",
	.dump_tree = ns_dump_tree,
	.restore_tree = ns_restore_tree,
	.restore_done = close_all,
	.restore_undo = close_all,
};
