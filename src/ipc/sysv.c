// SPDX-License-Identifier: MIT
/*
 * System V IPC of the tree, in amber's IPC namespace and in each of the
 * tree's own (ns/ns.c: amber's thread enters it, and all of its objects are
 * the tree's; shm-NS-ID.img, made again inside the new one): shared memory
 * segments, semaphore sets and message queues, with their ids, keys, owners,
 * modes and contents.  They are the kernel's, not a process's, so which
 * belong to the tree is decided here (README, Limits):
 *  - a segment attached by a process of the tree (its "/SYSV<key> (deleted)"
 *    mappings; the inode is the id), or one no process attaches that a
 *    process of the tree created (shm_cpid);
 *  - a semaphore set one of whose semaphores a process of the tree operated
 *    on last (sempid, GETPID), a message queue a process of the tree sent to
 *    or received from last (lspid, lrpid).
 * An object also used from outside the tree (attached by others, or a live
 * process outside the tree as sempid/lspid/lrpid) is refused: the dump takes
 * the objects with the tree (removes them once it killed it, dump_killed)
 * and the restore makes them again, each with its old id (the kernel's
 * shm/sem/msg_next_id, CONFIG_CHECKPOINT_RESTORE) and key.  Semaphore undo
 * lists (SEM_UNDO) are not readable: with semaphore sets in the image, a
 * process that has one (kcmp KCMP_SYSVSEM against a child forked for that, which has none) is
 * refused.
 *
 * Reading changes nothing: segments are read through /proc/PID/map_files of
 * an attaching process (an attach by amber would set shm_lpid and the
 * times; only a segment nobody attaches is attached), messages are copied
 * with msgrcv(MSG_COPY), values with semctl(GETALL).
 *
 * Restore: amber creates each object with the rights of its creator (cuid,
 * cgid; an image not root's may only hold the owner's own objects), fills a
 * segment, then sets owner and mode (IPC_SET) and SHM_LOCK; the restored
 * root process sets the semaphores' values and sends the messages (so the
 * kernel records a process of the tree as the last to use them, as it did),
 * each process attaches its segments at their addresses (mem.c, injected
 * shmat), and a segment that was removed while attached (SHM_DEST) is
 * removed again once attached.  A failed restore removes what it made.
 */
#include <errno.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <mqueue.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "ipc.h"
#include "log.h"
#include "mem.h"
#include "ns/ns.h"
#include "sys.h"

#ifndef KCMP_SYSVSEM
#define KCMP_SYSVSEM 6
#endif
#define SEMVMX	 32767 /* the kernel's largest semaphore value */
#define PERM_ALL 0777

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

enum { K_SHM, K_SEM, K_MSG };
static const char *const kind_name[] = {"shared memory segment", "semaphore set", "message queue"};
static const char *const next_id_file[] = {"/proc/sys/kernel/shm_next_id",
					   "/proc/sys/kernel/sem_next_id",
					   "/proc/sys/kernel/msg_next_id"};
static const char *const ipcrm_flag[] = {"-m", "-s", "-q"};

/* ---- dump ---- */

static IpcEntry **entries; /* what ipc.img gets, in order */
static size_t nr_entries;

int ipc_add(IpcEntry *e)
{
	IpcEntry **n = realloc(entries, (nr_entries + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	entries = n;
	entries[nr_entries++] = e;
	return 0;
}

IpcMqueue *ipc_find_mqueue(uint64_t ino, uint32_t ns)
{
	/* (each namespace's queues are on a filesystem of its own) */
	for (size_t i = 0; i < nr_entries; i++)
		if (entries[i]->mqueue && entries[i]->mqueue->ino == ino && entries[i]->ns == ns)
			return entries[i]->mqueue;
	return NULL;
}

/* A segment of the dump: where its bytes can be read from. */
struct seg {
	uint32_t ns; /* its IPC namespace (ns.img id, 0: amber's) */
	int id;
	uint64_t size;
	unsigned long nattch;
	int attaches;	      /* VMAs of the tree on it */
	pid_t reader;	      /* a process of the tree mapping it... */
	unsigned long rstart; /* ...at rstart-rend */
	unsigned long rend;
	IpcShm *e;
};

static struct seg *segs;
static size_t nr_segs;
/* dump: the IPC namespace whose objects are being taken (amber is in it) */
static uint32_t cur_ns;

static struct seg *seg_of(int id)
{
	for (size_t i = 0; i < nr_segs; i++)
		if (segs[i].ns == cur_ns && segs[i].id == id)
			return &segs[i];
	return NULL;
}

/* A process of the tree in the IPC namespace being dumped. */
static bool in_cur_ns(struct tree *t, const struct dump_ctx *ctx)
{
	return ns_of(t, (uint32_t)ctx->pid, NS_KIND__NS_IPC) == cur_ns;
}

/* The entry goes into ipc.img with its namespace. */
static int add_entry(IpcEntry *e)
{
	e->has_ns = cur_ns != 0;
	e->ns = cur_ns;
	return ipc_add(e);
}

static bool in_tree(struct tree *t, pid_t pid)
{
	return pid > 0 && tree_entry(t, (uint32_t)pid);
}

/* A pid that is someone's outside the tree (alive: the object is theirs too). */
static bool outsider(struct tree *t, pid_t pid)
{
	return pid > 0 && !in_tree(t, pid) && (kill(pid, 0) == 0 || errno == EPERM);
}

static IpcPerm *new_perm(const struct ipc_perm *p, int id)
{
	IpcPerm *perm = malloc(sizeof(*perm));

	if (!perm)
		return NULL;
	ipc_perm__init(perm);
	perm->key = p->__key;
	perm->id = id;
	perm->uid = p->uid;
	perm->gid = p->gid;
	perm->cuid = p->cuid;
	perm->cgid = p->cgid;
	perm->mode = p->mode & PERM_ALL;
	return perm;
}

static bool is_sysv_vma(const struct vma *v)
{
	return v->path && !strncmp(v->path, "/SYSV", 5);
}

/* Processes that share an address space (CLONE_VM) list its attaches once. */
static bool own_vmas(const struct dump_ctx *ctx)
{
	return !ctx->shares_vm;
}

static int undo_compare(struct tree *t, pid_t ref, int set);

/*
 * A process's undo list exists once it did a semop with SEM_UNDO, or
 * created a thread (CLONE_SYSVSEM makes one, empty): which entries it holds
 * nobody can read.  With semaphore sets in the image, refused; adjustments
 * to sets not the tree's are applied when the dump kills it, as at an exit.
 */
static int undo_check(struct tree *t)
{
	int set = -1, ret;
	pid_t ref;

	for (size_t i = 0; i < nr_entries && set < 0; i++)
		if (entries[i]->sem)
			set = entries[i]->sem->perm->id;
	if (set < 0)
		return 0;
	/*
	 * kcmp tells only whether two lists are one: compared with a child forked
	 * now, which has none (amber's own threads share one of amber's).
	 */
	ref = fork();
	if (ref < 0) {
		pr_err("cannot fork a process to compare semaphore undo lists with: %m");
		return -errno;
	}
	if (!ref) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	ret = undo_compare(t, ref, set);
	kill(ref, SIGKILL);
	while (waitpid(ref, NULL, 0) < 0 && errno == EINTR)
		;
	return ret;
}

/* Has a thread of the tree an undo list (one that ref, which has none, has not)? */
static int undo_compare(struct tree *t, pid_t ref, int set)
{
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct dump_ctx *ctx = t->dprocs[p];

		for (size_t i = 0; i < ctx->nr_threads; i++) {
			pid_t tid = ctx->threads[i].tid;
			int r = sys_kcmp(ref, tid, KCMP_SYSVSEM, 0, 0);

			if (r < 0) {
				pr_err("pid %d: cannot compare its System V semaphore undo list "
				       "(kcmp KCMP_SYSVSEM): %s",
				       tid, strerror(-r));
				return r;
			}
			if (r) {
				pr_err("pid %d (of pid %d) has a System V semaphore undo list "
				       "(a semop with SEM_UNDO, or a thread made with "
				       "CLONE_SYSVSEM), which the kernel does not show, and the "
				       "tree uses semaphore set %d: amber cannot tell which "
				       "adjustments it holds; refusing",
				       tid, ctx->pid, set);
				return -EOPNOTSUPP;
			}
		}
	}
	return 0;
}

/* The segments the tree maps: how often (nattch counts VMAs), and one to read. */
static int count_attaches(struct tree *t)
{
	for (size_t p = 0; p < t->nr_procs; p++) {
		struct dump_ctx *ctx = t->dprocs[p];

		for (size_t i = 0; own_vmas(ctx) && in_cur_ns(t, ctx) && i < ctx->nr_vmas; i++) {
			struct vma *v = &ctx->vmas[i];
			struct seg *s;

			if (!is_sysv_vma(v))
				continue;
			s = seg_of((int)v->ino);
			if (!s) {
				pr_err("pid %d: mapping %lx-%lx (%s) is no System V segment of "
				       "this IPC namespace (id %lu); amber cannot dump it",
				       ctx->pid, v->start, v->end, v->path, v->ino);
				return -EOPNOTSUPP;
			}
			s->attaches++;
			if (!s->reader) {
				s->reader = ctx->pid;
				s->rstart = v->start;
				s->rend = v->end;
			}
		}
	}
	return 0;
}

/*
 * Each attach comes back as one shmat of the whole segment, then
 * mprotect: its VMAs must cover the segment from its start, contiguously,
 * with one SHM_RDONLY state.
 */
static int check_attaches(struct dump_ctx *ctx)
{
	unsigned long base = 0, next = 0, end = 0;
	struct seg *s = NULL;
	bool rdonly = false;

	for (size_t i = 0; own_vmas(ctx) && i <= ctx->nr_vmas; i++) {
		struct vma *v = i < ctx->nr_vmas ? &ctx->vmas[i] : NULL;
		bool sysv = v && is_sysv_vma(v);

		/* does v continue the current attach? */
		if (s && sysv && v->start == next && v->start - v->pgoff == base &&
		    (int)v->ino == s->id && rdonly == !(v->vmflags & VMF_MAYWRITE)) {
			next = v->end;
			continue;
		}
		if (s && next != end) {
			pr_err("pid %d: System V segment %d (%llu bytes) is attached at %lx but "
			       "mapped only up to %lx; amber restores whole attaches (the "
			       "process unmapped part of it)",
			       ctx->pid, s->id, (unsigned long long)s->size, base, next);
			return -EOPNOTSUPP;
		}
		s = NULL;
		if (!sysv)
			continue;
		s = seg_of((int)v->ino);
		base = v->start - v->pgoff;
		next = v->end;
		end = base + ((s->size + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1));
		rdonly = !(v->vmflags & VMF_MAYWRITE);
		if (v->pgoff) {
			pr_err("pid %d: System V segment %d is mapped at %lx-%lx from offset "
			       "%#lx, without its start; amber restores whole attaches",
			       ctx->pid, s->id, v->start, v->end, v->pgoff);
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

static int take_shm(struct tree *t, int id, const struct shmid_ds *ds)
{
	struct seg *s = seg_of(id);
	IpcEntry *e;
	IpcShm *shm;

	/* a namespace of the tree's: all of its objects are the tree's */
	if (!s->attaches && !(ds->shm_nattch == 0 && (cur_ns || in_tree(t, ds->shm_cpid))))
		return 0;
	if (s->attaches && ds->shm_nattch != (unsigned long)s->attaches) {
		pr_err("System V segment %d (key %#x) is attached %lu times, %d of them by the "
		       "tree: a process outside the tree uses it; amber cannot dump a segment "
		       "shared with processes it does not dump (dump them together)",
		       id, (unsigned)ds->shm_perm.__key, (unsigned long)ds->shm_nattch,
		       s->attaches);
		return -EOPNOTSUPP;
	}
	e = malloc(sizeof(*e));
	shm = malloc(sizeof(*shm));
	if (!e || !shm) {
		free(e);
		free(shm);
		return -ENOMEM;
	}
	ipc_entry__init(e);
	ipc_shm__init(shm);
	e->shm = shm;
	shm->perm = new_perm(&ds->shm_perm, id);
	if (!shm->perm) {
		free(shm);
		free(e);
		return -ENOMEM;
	}
	shm->size = ds->shm_segsz;
	if (ds->shm_perm.mode & SHM_LOCKED)
		shm->has_locked = shm->locked = 1;
	if (ds->shm_perm.mode & SHM_DEST)
		shm->has_dest = shm->dest = 1;
	s->e = shm;
	pr_debug("System V segment %d: key %#x, %llu bytes, mode %03o%s%s, %d attach(es), IPC "
		 "namespace %u",
		 id, (unsigned)ds->shm_perm.__key, (unsigned long long)shm->size, shm->perm->mode,
		 shm->locked ? ", locked" : "", shm->dest ? ", removed" : "", s->attaches, cur_ns);
	return add_entry(e);
}

static int dump_shms(struct tree *t)
{
	struct shm_info info;
	struct shmid_ds ds;
	int max = shmctl(0, SHM_INFO, (struct shmid_ds *)&info), ret;
	size_t first = nr_segs;

	if (max < 0) {
		pr_err("cannot list System V shared memory (SHM_INFO): %m");
		return -errno;
	}
	for (int idx = 0; idx <= max; idx++) {
		int id = shmctl(idx, SHM_STAT_ANY, &ds);
		struct seg *n;

		if (id < 0)
			continue;
		n = realloc(segs, (nr_segs + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		segs = n;
		segs[nr_segs++] = (struct seg){
			.ns = cur_ns, .id = id, .size = ds.shm_segsz, .nattch = ds.shm_nattch};
	}
	ret = count_attaches(t);
	for (size_t p = 0; !ret && p < t->nr_procs; p++)
		if (in_cur_ns(t, t->dprocs[p]))
			ret = check_attaches(t->dprocs[p]);
	for (size_t i = first; !ret && i < nr_segs; i++) {
		if (shmctl(segs[i].id, IPC_STAT, &ds) < 0) {
			if (errno == EINVAL || errno == EIDRM)
				continue; /* gone meanwhile: nobody of the tree had it */
			pr_err("System V segment %d: IPC_STAT failed: %m", segs[i].id);
			return -errno;
		}
		ret = take_shm(t, segs[i].id, &ds);
	}
	return ret;
}

static int take_sem(struct tree *t, int id, const struct semid_ds *ds)
{
	size_t n = ds->sem_nsems;
	unsigned short *vals;
	bool ours = false;
	pid_t other = 0;
	IpcEntry *e;
	IpcSem *sem;
	int ret = 0;

	for (size_t i = 0; i < n; i++) {
		int pid = semctl(id, (int)i, GETPID);

		if (pid < 0)
			return errno == EINVAL || errno == EIDRM ? 0 : -errno;
		if (in_tree(t, pid))
			ours = true;
		else if (outsider(t, pid))
			other = pid;
	}
	if (!ours && !cur_ns)
		return 0;
	if (other) {
		pr_err("System V semaphore set %d (key %#x) is used by the tree and by pid %d "
		       "outside it (sempid); amber cannot dump a set shared with processes it "
		       "does not dump",
		       id, (unsigned)ds->sem_perm.__key, other);
		return -EOPNOTSUPP;
	}
	if (n > MAX_IPC_ITEMS) {
		pr_err("System V semaphore set %d has %zu semaphores, more than amber's %d", id, n,
		       MAX_IPC_ITEMS);
		return -EOPNOTSUPP;
	}
	e = calloc(1, sizeof(*e));
	sem = calloc(1, sizeof(*sem));
	vals = calloc(n + 1, sizeof(*vals));
	if (!e || !sem || !vals) {
		ret = -ENOMEM;
		goto free_all;
	}
	ipc_entry__init(e);
	ipc_sem__init(sem);
	sem->values = calloc(n + 1, sizeof(*sem->values));
	sem->perm = new_perm(&ds->sem_perm, id);
	if (!sem->values || !sem->perm) {
		ret = -ENOMEM;
		goto free_all;
	}
	if (semctl(id, 0, GETALL, (union semun){.array = vals}) < 0) {
		ret = -errno;
		pr_err("System V semaphore set %d: GETALL failed: %m", id);
		goto free_all;
	}
	for (size_t i = 0; i < n; i++)
		sem->values[i] = vals[i];
	sem->n_values = n;
	e->sem = sem;
	free(vals);
	pr_debug("System V semaphore set %d: key %#x, %zu semaphores, mode %03o, IPC namespace %u",
		 id, (unsigned)ds->sem_perm.__key, n, sem->perm->mode, cur_ns);
	return add_entry(e);
free_all:
	if (sem) {
		free(sem->values);
		free(sem->perm);
	}
	free(sem);
	free(e);
	free(vals);
	return ret;
}

static int dump_sems(struct tree *t)
{
	struct seminfo info;
	struct semid_ds ds;
	int max = semctl(0, 0, SEM_INFO, (union semun){.buf = (struct semid_ds *)&info}), ret = 0;

	if (max < 0) {
		pr_err("cannot list System V semaphores (SEM_INFO): %m");
		return -errno;
	}
	for (int idx = 0; !ret && idx <= max; idx++) {
		int id = semctl(idx, 0, SEM_STAT_ANY, (union semun){.buf = &ds});

		if (id >= 0)
			ret = take_sem(t, id, &ds);
	}
	return ret;
}

/* Every message, in queue order, copied (MSG_COPY) so that the queue keeps it. */
static int copy_msgs(int id, const struct msqid_ds *ds, IpcMsq *msq)
{
	size_t n = ds->msg_qnum, max = ds->__msg_cbytes;
	struct msgbuf *buf = malloc(sizeof(long) + max + 1);

	msq->msgs = calloc(n + 1, sizeof(*msq->msgs));
	if (!buf || !msq->msgs) {
		free(buf);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		ssize_t len = msgrcv(id, buf, max, (long)i, IPC_NOWAIT | MSG_COPY | MSG_NOERROR);
		IpcMsg *m;

		if (len < 0) {
			int err = errno;

			pr_err("System V message queue %d: cannot copy message %zu of %zu "
			       "(msgrcv MSG_COPY): %s%s",
			       id, i + 1, n, strerror(err),
			       err == ENOSYS ? " (kernel without CONFIG_CHECKPOINT_RESTORE)" : "");
			free(buf);
			return -err;
		}
		m = malloc(sizeof(*m));
		if (!m) {
			free(buf);
			return -ENOMEM;
		}
		ipc_msg__init(m);
		m->type = buf->mtype;
		m->data.len = (size_t)len;
		m->data.data = malloc((size_t)len + 1);
		msq->msgs[msq->n_msgs++] = m;
		if (!m->data.data) {
			free(buf);
			return -ENOMEM;
		}
		memcpy(m->data.data, buf->mtext, (size_t)len);
	}
	free(buf);
	return 0;
}

static int take_msq(struct tree *t, int id, const struct msqid_ds *ds)
{
	pid_t s = ds->msg_lspid, r = ds->msg_lrpid;
	IpcEntry *e;
	IpcMsq *msq;
	int ret;

	if (!in_tree(t, s) && !in_tree(t, r) && !cur_ns)
		return 0;
	if (outsider(t, s) || outsider(t, r)) {
		pr_err("System V message queue %d (key %#x) is used by the tree and by pid %d "
		       "outside it (lspid/lrpid); amber cannot dump a queue shared with "
		       "processes it does not dump",
		       id, (unsigned)ds->msg_perm.__key, outsider(t, s) ? s : r);
		return -EOPNOTSUPP;
	}
	if (ds->msg_qnum > MAX_IPC_ITEMS) {
		pr_err("System V message queue %d holds %lu messages, more than amber's %d", id,
		       (unsigned long)ds->msg_qnum, MAX_IPC_ITEMS);
		return -EOPNOTSUPP;
	}
	e = malloc(sizeof(*e));
	msq = malloc(sizeof(*msq));
	if (!e || !msq) {
		free(e);
		free(msq);
		return -ENOMEM;
	}
	ipc_entry__init(e);
	ipc_msq__init(msq);
	e->msq = msq;
	msq->qbytes = ds->msg_qbytes;
	msq->perm = new_perm(&ds->msg_perm, id);
	ret = msq->perm ? copy_msgs(id, ds, msq) : -ENOMEM;
	if (ret) {
		ipc_entry__free_unpacked(e, NULL);
		return ret;
	}
	pr_debug("System V message queue %d: key %#x, %zu messages, mode %03o, IPC namespace %u",
		 id, (unsigned)ds->msg_perm.__key, msq->n_msgs, msq->perm->mode, cur_ns);
	return add_entry(e);
}

static int dump_msqs(struct tree *t)
{
	struct msginfo info;
	struct msqid_ds ds;
	int max = msgctl(0, MSG_INFO, (struct msqid_ds *)&info), ret = 0;

	if (max < 0) {
		pr_err("cannot list System V message queues (MSG_INFO): %m");
		return -errno;
	}
	for (int idx = 0; !ret && idx <= max; idx++) {
		int id = msgctl(idx, MSG_STAT_ANY, &ds);

		if (id >= 0)
			ret = take_msq(t, id, &ds);
	}
	return ret;
}

/* The objects of one IPC namespace, amber in it (0: its own). */
static int dump_ns(struct tree *t, uint32_t ns)
{
	int ret = ns_enter(NS_KIND__NS_IPC, ns);

	if (ret)
		return ret;
	cur_ns = ns;
	ret = dump_shms(t);
	if (!ret)
		ret = dump_sems(t);
	if (!ret)
		ret = dump_msqs(t);
	cur_ns = 0;
	ns_leave(NS_KIND__NS_IPC, ns);
	if (ret && ns)
		pr_err("dumping the System V objects of IPC namespace %u failed", ns);
	return ret;
}

static int ipc_dump_tree(struct tree *t)
{
	int ret = dump_ns(t, 0);

	for (uint32_t ns = ns_next(NS_KIND__NS_IPC, 0); !ret && ns;
	     ns = ns_next(NS_KIND__NS_IPC, ns))
		ret = dump_ns(t, ns);
	return ret ? ret : undo_check(t);
}

/* shm-ID.img, or shm-NS-ID.img for a segment of a namespace of the tree */
static void shm_name(char *buf, size_t len, uint32_t ns, int id)
{
	if (ns)
		snprintf(buf, len, "shm-%u-%d.img", ns, id);
	else
		snprintf(buf, len, "shm-%d.img", id);
}

/* Bytes through fd (the segment's shmem file) into shm-ID.img, in 1 MiB steps. */
static int copy_segment(struct tree *t, struct seg *s, int fd)
{
	size_t chunk = 1 << 20;
	char *buf = malloc(chunk);
	struct img *img;
	struct statfs sfs;
	char name[64];
	int ret;

	if (!buf)
		return -ENOMEM;
	if (!fstatfs(fd, &sfs) && sfs.f_type == HUGETLBFS_MAGIC) {
		pr_err("System V segment %d is of huge pages (SHM_HUGETLB), which amber cannot "
		       "dump yet",
		       s->id);
		free(buf);
		return -EOPNOTSUPP;
	}
	shm_name(name, sizeof(name), s->ns, s->id);
	ret = img_create(&t->imgs, IMG_SHM, &img, "%s", name);
	for (uint64_t off = 0; !ret && off < s->size; off += chunk) {
		size_t len = s->size - off < chunk ? s->size - off : chunk;
		ssize_t r = sys_pread_full(fd, buf, len, (off_t)off);

		if (r != (ssize_t)len) {
			ret = r < 0 ? (int)r : -EIO;
			pr_err("System V segment %d: cannot read its bytes at %llu: %s", s->id,
			       (unsigned long long)off, strerror(-ret));
			break;
		}
		ret = img_write(img, buf, len);
	}
	free(buf);
	if (ret) {
		if (img)
			img_abort(img);
		return ret;
	}
	return img_finish(img);
}

/* Through a mapping of the tree (no attach), or, if nobody attaches it, amber's own. */
static int save_segment(struct tree *t, struct seg *s)
{
	char path[96];
	void *at = NULL;
	int fd, ret = ns_enter(NS_KIND__NS_IPC, s->ns);

	if (ret)
		return ret;
	if (s->reader) {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", s->reader, s->rstart,
			 s->rend);
	} else {
		at = shmat(s->id, NULL, SHM_RDONLY);
		if (at == (void *)-1) {
			ret = -errno;
			pr_err("System V segment %d: cannot attach it to read it: %m", s->id);
			ns_leave(NS_KIND__NS_IPC, s->ns);
			return ret;
		}
		snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)at,
			 (unsigned long)at + ((s->size + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)));
	}
	fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("System V segment %d: cannot open %s: %s", s->id, path, strerror(-fd));
		ret = fd;
	} else {
		ret = copy_segment(t, s, fd);
		close(fd);
	}
	if (at)
		shmdt(at);
	ns_leave(NS_KIND__NS_IPC, s->ns);
	return ret;
}

static int ipc_dump_tree_late(struct tree *t)
{
	struct img *img;
	int ret = 0;

	for (size_t i = 0; !ret && i < nr_segs; i++)
		if (segs[i].e)
			ret = save_segment(t, &segs[i]);
	if (ret || !nr_entries)
		return ret;
	ret = img_create(&t->imgs, IMG_IPC, &img, "ipc.img");
	for (size_t i = 0; !ret && i < nr_entries; i++)
		ret = img_put(img, &entries[i]->base);
	if (ret) {
		if (img)
			img_abort(img);
		return ret;
	}
	return img_finish(img);
}

static const IpcPerm *perm_of(const IpcEntry *e, int *kind)
{
	if (e->shm) {
		*kind = K_SHM;
		return e->shm->perm;
	}
	if (e->sem) {
		*kind = K_SEM;
		return e->sem->perm;
	}
	if (e->msq) {
		*kind = K_MSG;
		return e->msq->perm;
	}
	return NULL;
}

static int rmid(int kind, int id)
{
	int r = kind == K_SHM	? shmctl(id, IPC_RMID, NULL)
		: kind == K_SEM ? semctl(id, 0, IPC_RMID)
				: msgctl(id, IPC_RMID, NULL);

	return r < 0 ? -errno : 0;
}

/* A queue the tree had under a name: the name goes, if it is still that queue's. */
static void unlink_mqueue(const IpcMqueue *q)
{
	struct stat st;
	int fd;

	if (q->unlinked)
		return;
	fd = mq_open(q->name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* gone already */
	if (!fstat(fd, &st) && st.st_ino == q->ino && mq_unlink(q->name))
		pr_warn("cannot remove message queue %s, which the image holds: %m (rm "
			"/dev/mqueue%s before the restore)",
			q->name, q->name);
	close(fd);
}

/* The image has them now; the tree that used them is gone. */
static void ipc_dump_killed(struct tree *t)
{
	for (size_t i = 0; i < nr_entries; i++) {
		int kind, ret;
		const IpcPerm *p = perm_of(entries[i], &kind);

		/* a namespace of the tree's goes with its processes */
		if (entries[i]->ns)
			continue;
		if (!p) {
			unlink_mqueue(entries[i]->mqueue);
			continue;
		}
		ret = rmid(kind, p->id);
		if (ret && ret != -EINVAL && ret != -EIDRM)
			pr_warn("cannot remove System V %s %d, which the image holds: %s (ipcrm "
				"%s %d before the restore)",
				kind_name[kind], p->id, strerror(-ret), ipcrm_flag[kind], p->id);
	}
}

/* ---- restore ---- */

static IpcEntry **rentries;
static size_t nr_rentries;
static bool loaded;
static int load_ret;

/* What this restore made, to remove if it fails. */
static struct made {
	int kind, id;
} * made; /* in amber's namespace: a new namespace goes with everything in it */
static size_t nr_made;

static bool listed(struct tree *t, const char *name)
{
	for (size_t i = 0; i < t->inv->n_files; i++)
		if (!strcmp(t->inv->files[i]->name, name))
			return true;
	return false;
}

static int corrupt(const char *what, int id)
{
	pr_err("ipc.img: bad %s (id %d); the image is corrupt", what, id);
	return -EBADMSG;
}

/* Whose object the owner may make again: its own (uids) in its groups. */
static int check_owner(struct tree *t, const char *what, int id, uint32_t uid, uint32_t gid,
		       uint32_t cuid, uint32_t cgid)
{
	if (t->owner.unbounded)
		return 0;
	if (uid == t->owner.uid && cuid == t->owner.uid && owner_in_group(t, gid) &&
	    owner_in_group(t, cgid))
		return 0;
	pr_err("ipc.img: %s %d belongs to uid %u/gid %u (created by uid %u/gid %u); uid %u's "
	       "image may hold only its own objects, in its groups; refusing",
	       what, id, uid, gid, cuid, cgid, t->owner.uid);
	return -EPERM;
}

static int check_entry(struct tree *t, const IpcEntry *e)
{
	const IpcPerm *p;
	const struct img_file *f;
	int kind, ret;

	if (!!e->shm + !!e->sem + !!e->msq + !!e->mqueue != 1)
		return corrupt("entry", -1);
	if (e->ns && !ns_known(NS_KIND__NS_IPC, e->ns)) {
		pr_err("ipc.img: an entry names IPC namespace %u, which ns.img does not have; "
		       "the image is corrupt",
		       e->ns);
		return -EBADMSG;
	}
	if (e->mqueue)
		return mqueue_check(t, e->mqueue, e->ns);
	p = perm_of(e, &kind);
	if (p->id < 0 || p->mode & ~PERM_ALL)
		return corrupt(kind_name[kind], p->id);
	if (e->shm) {
		if (!e->shm->size || e->shm->size > (1ULL << 47))
			return corrupt(kind_name[kind], p->id);
		char name[64];

		shm_name(name, sizeof(name), e->ns, p->id);
		ret = img_dir_raw(t->img, IMG_SHM, &f, "%s", name);
		if (ret)
			return ret;
		if (f->size != IMG_HDR_SIZE + e->shm->size)
			return corrupt("segment size", p->id);
	} else if (e->sem) {
		if (!e->sem->n_values || e->sem->n_values > MAX_IPC_ITEMS)
			return corrupt(kind_name[kind], p->id);
		for (size_t i = 0; i < e->sem->n_values; i++)
			if (e->sem->values[i] > SEMVMX)
				return corrupt("semaphore value", p->id);
	} else {
		uint64_t bytes = 0;

		for (size_t i = 0; i < e->msq->n_msgs; i++) {
			if (e->msq->msgs[i]->type < 1 || e->msq->msgs[i]->data.len > INT32_MAX)
				return corrupt("message", p->id);
			bytes += e->msq->msgs[i]->data.len;
		}
		if (bytes > INT32_MAX || e->msq->qbytes > INT32_MAX)
			return corrupt(kind_name[kind], p->id);
	}
	return check_owner(t, kind_name[kind], p->id, p->uid, p->gid, p->cuid, p->cgid);
}

/* Is the id (its index) or the key in use?  Then nothing may be made. */
static int check_free(int kind, const IpcPerm *p)
{
	int idx = p->id % 32768, other = -1, r;

	if (kind == K_SHM) {
		struct shmid_ds ds;

		other = shmctl(idx, SHM_STAT_ANY, &ds);
		r = p->key ? shmget(p->key, 0, 0) : -1;
	} else if (kind == K_SEM) {
		struct semid_ds ds;

		other = semctl(idx, 0, SEM_STAT_ANY, (union semun){.buf = &ds});
		r = p->key ? semget(p->key, 0, 0) : -1;
	} else {
		struct msqid_ds ds;

		other = msgctl(idx, MSG_STAT_ANY, &ds);
		r = p->key ? msgget(p->key, 0) : -1;
	}
	if (other >= 0) {
		pr_err("System V %s id %d is taken (by id %d, at the same index); amber restores "
		       "each object with its id: remove it (ipcrm %s %d) and restore again",
		       kind_name[kind], p->id, other, ipcrm_flag[kind], other);
		return -EEXIST;
	}
	if (p->key && (r >= 0 || errno == EACCES)) {
		pr_err("System V %s id %d: its key %#x is taken by another one%s; remove it "
		       "(ipcrm %s %#x) and restore again",
		       kind_name[kind], p->id, (unsigned)p->key, r >= 0 ? "" : " (not ours to see)",
		       kind == K_SHM   ? "-M"
		       : kind == K_SEM ? "-S"
				       : "-Q",
		       (unsigned)p->key);
		return -EEXIST;
	}
	return 0;
}

/* The process that sets the semaphores and sends the messages of IPC namespace ns. */
static struct restore_ctx *filler(struct tree *t, uint32_t ns)
{
	for (size_t p = 0; p < t->nr_procs; p++)
		if (ns_of(t, (uint32_t)t->rprocs[p]->pid, NS_KIND__NS_IPC) == ns)
			return t->rprocs[p];
	return NULL;
}

/* Whether a process of pstree.img (not a zombie) is in IPC namespace ns. */
static bool live_in(struct tree *t, uint32_t ns)
{
	for (size_t i = 0; i < t->nr_pstree; i++)
		if (!t->pstree[i]->zombie && t->pstree[i]->ipc_ns == ns)
			return true;
	return false;
}

static int load(struct tree *t)
{
	int ret;

	if (!listed(t, "ipc.img"))
		return 0;
	ret = img_read_all(t->img, IMG_IPC, &ipc_entry__descriptor, &rentries, &nr_rentries,
			   "ipc.img");
	for (size_t i = 0; !ret && i < nr_rentries; i++) {
		int kind, kind2;
		const IpcPerm *p;

		ret = check_entry(t, rentries[i]);
		p = ret ? NULL : perm_of(rentries[i], &kind);
		for (size_t k = 0; p && k < i; k++) {
			const IpcPerm *q = perm_of(rentries[k], &kind2);

			if (q && kind2 == kind && rentries[k]->ns == rentries[i]->ns &&
			    (q->id % 32768 == p->id % 32768 || (p->key && q->key == p->key)))
				ret = corrupt("object (listed twice)", p->id);
		}
	}
	for (size_t i = 0; !ret && i < nr_rentries; i++) {
		int kind;
		const IpcPerm *p = perm_of(rentries[i], &kind);

		/* a namespace the restore makes is empty */
		if (p && !rentries[i]->ns)
			ret = check_free(kind, p);
		if (!ret && p && !live_in(t, rentries[i]->ns)) {
			pr_err("ipc.img: System V %s %d is in IPC namespace %u, where no process "
			       "of "
			       "the image is; the image is corrupt",
			       kind_name[kind], p->id, rentries[i]->ns);
			ret = -EBADMSG;
		}
	}
	return ret;
}

int ipc_load(struct tree *t, IpcEntry ***out, size_t *n)
{
	if (!loaded) {
		loaded = true;
		load_ret = load(t);
	}
	*out = rentries;
	*n = nr_rentries;
	return load_ret;
}

static const IpcShm *shm_entry(uint32_t ns, int32_t id)
{
	for (size_t i = 0; i < nr_rentries; i++)
		if (rentries[i]->shm && rentries[i]->ns == ns && rentries[i]->shm->perm->id == id)
			return rentries[i]->shm;
	return NULL;
}

/* Every attach of the process names a segment of the image, whole, one the owner may attach. */
static int check_vmas(struct restore_ctx *ctx)
{
	const MmEntry *mm = ctx->mm;
	uint32_t ns = ns_of(ctx->tree, (uint32_t)ctx->pid, NS_KIND__NS_IPC);
	uint64_t next = 0, end = 0;

	for (size_t i = 0; mm && i < mm->n_vmas; i++) {
		const VmaEntry *e = mm->vmas[i];
		const IpcShm *s;

		if (e->kind != VMA_KIND__VMA_SYSV_SHM) {
			if (next != end)
				goto corrupt;
			continue;
		}
		s = e->has_sysv_shmid ? shm_entry(ns, e->sysv_shmid) : NULL;
		if (!s)
			goto corrupt;
		if (!e->pgoff) {
			if (next != end)
				goto corrupt;
			next = e->start;
			end = e->start + ((s->size + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1));
		}
		if (e->start != next || e->end > end)
			goto corrupt;
		next = e->end;
		if (!ctx->tree->owner.unbounded &&
		    (!(s->perm->mode & 0400) || (!e->sysv_rdonly && !(s->perm->mode & 0200)))) {
			pr_err("pid %d: its image attaches System V segment %d at %llx %s, which "
			       "its mode %03o does not let uid %u do; refusing",
			       ctx->pid, e->sysv_shmid, (unsigned long long)e->start,
			       e->sysv_rdonly ? "read-only" : "for writing", s->perm->mode,
			       ctx->tree->owner.uid);
			return -EPERM;
		}
	}
	if (next == end)
		return 0;
corrupt:
	pr_err("mm-%d.img: a System V segment's attach does not fit the segment in ipc.img; "
	       "the image is corrupt",
	       ctx->pid);
	return -EBADMSG;
}

static int ipc_restore_read(struct restore_ctx *ctx)
{
	IpcEntry **e;
	size_t n;
	int ret = ipc_load(ctx->tree, &e, &n);

	return ret ? ret : check_vmas(ctx);
}

static int write_next_id(int kind, int id)
{
	char buf[16];
	int fd = sys_open(next_id_file[kind], O_WRONLY | O_CLOEXEC, 0), len, ret = 0;

	if (fd < 0) {
		pr_err("cannot open %s to give System V %s %d its id: %s%s", next_id_file[kind],
		       kind_name[kind], id, strerror(-fd),
		       fd == -ENOENT ? " (kernel without CONFIG_CHECKPOINT_RESTORE)" : "");
		return fd;
	}
	len = snprintf(buf, sizeof(buf), "%d", id);
	if (sys_write_full(fd, buf, len) != len) {
		ret = -errno;
		pr_err("cannot write %s: %m", next_id_file[kind]);
	}
	close(fd);
	return ret;
}

struct create {
	int kind;
	const IpcEntry *e;
	const IpcPerm *p;
	int id;
};

static int do_create(void *arg)
{
	struct create *c = arg;
	int flags = IPC_CREAT | IPC_EXCL | 0600;

	if (c->kind == K_SHM)
		c->id = shmget(c->p->key, c->e->shm->size, flags);
	else if (c->kind == K_SEM)
		c->id = semget(c->p->key, (int)c->e->sem->n_values, flags);
	else
		c->id = msgget(c->p->key, flags);
	return c->id < 0 ? -errno : 0;
}

/* With the creator's effective ids (its cuid and cgid are what the kernel records). */
static int as_creator(struct tree *t, const IpcPerm *p, int (*fn)(void *), void *arg)
{
	gid_t egid = getegid(), groups[NGROUPS_MAX];
	int n = getgroups(NGROUPS_MAX, groups), ret, back;

	if (n < 0)
		return -errno;
	ret = sys_thread_setid(p->cuid, p->cgid, t->owner.unbounded ? NULL : t->owner.groups,
			       t->owner.unbounded ? 0 : t->owner.n_groups);
	if (ret) {
		pr_err("cannot take uid %u/gid %u to create System V object %d: %s", p->cuid,
		       p->cgid, p->id, strerror(-ret));
	} else {
		ret = fn(arg);
	}
	back = sys_thread_setid(0, egid, groups, n);
	if (back) {
		pr_err("cannot return to root's rights after creating System V object %d: %s",
		       p->id, strerror(-back));
		abort();
	}
	return ret;
}

/* shmat as amber, the bytes straight from shm-ID.img into it. */
static int fill_segment(struct tree *t, uint32_t ns, int id, const IpcShm *s)
{
	const struct img_file *f;
	void *at;
	ssize_t r;
	char name[64];
	int ret;

	shm_name(name, sizeof(name), ns, id);
	ret = img_dir_raw(t->img, IMG_SHM, &f, "%s", name);
	if (ret)
		return ret;
	at = shmat(id, NULL, 0);
	if (at == (void *)-1) {
		pr_err("System V segment %d: cannot attach it to fill it: %m", id);
		return -errno;
	}
	r = sys_pread_full(f->fd, at, s->size, IMG_HDR_SIZE);
	if (r != (ssize_t)s->size) {
		ret = r < 0 ? (int)r : -EIO;
		pr_err("System V segment %d: cannot read its bytes from %s: %s", id, name,
		       strerror(-ret));
	}
	shmdt(at);
	return ret;
}

/* Owner and mode (and SHM_LOCK) once made and filled: as root for root's image, else as the owner.
 */
static int finish_object(struct tree *t, int kind, const IpcEntry *e, const IpcPerm *p)
{
	int r, ret = owner_enter(t);

	if (ret)
		return ret;
	if (kind == K_SHM) {
		struct shmid_ds ds = {.shm_perm = {.uid = p->uid, .gid = p->gid, .mode = p->mode}};

		ret = fill_segment(t, e->ns, p->id, e->shm);
		if (!ret && e->shm->locked && shmctl(p->id, SHM_LOCK, NULL) < 0) {
			ret = -errno;
			pr_err("System V segment %d: SHM_LOCK failed: %m", p->id);
		}
		r = ret ? 0 : shmctl(p->id, IPC_SET, &ds);
	} else if (kind == K_SEM) {
		struct semid_ds ds = {.sem_perm = {.uid = p->uid, .gid = p->gid, .mode = p->mode}};

		r = semctl(p->id, 0, IPC_SET, (union semun){.buf = &ds});
	} else {
		struct msqid_ds ds;
		uint64_t room = e->msq->qbytes, bytes = 0;

		/* room for the messages while they are sent (qbytes may be below them) */
		for (size_t i = 0; i < e->msq->n_msgs; i++)
			bytes += e->msq->msgs[i]->data.len;
		room = bytes > room ? bytes : room;
		room = e->msq->n_msgs > room ? e->msq->n_msgs : room;
		r = msgctl(p->id, IPC_STAT, &ds);
		ds.msg_perm.uid = p->uid;
		ds.msg_perm.gid = p->gid;
		ds.msg_perm.mode = p->mode;
		ds.msg_qbytes = room;
		if (!r)
			r = msgctl(p->id, IPC_SET, &ds);
	}
	if (!ret && r < 0) {
		ret = -errno;
		pr_err("System V %s %d: cannot set its owner uid %u/gid %u and mode %03o "
		       "(IPC_SET): %m",
		       kind_name[kind], p->id, p->uid, p->gid, p->mode);
	}
	owner_leave(t);
	return ret;
}

static int renumbered(int kind, int id, int got)
{
	pr_err("System V %s %d came back as id %d: another one took the id meanwhile; "
	       "restore again",
	       kind_name[kind], id, got);
	return -EEXIST;
}

static int create_object(struct tree *t, int kind, const IpcEntry *e, const IpcPerm *p)
{
	struct create c = {kind, e, p, -1};
	struct made *m;
	int ret = write_next_id(kind, p->id);

	if (ret)
		return ret;
	ret = as_creator(t, p, do_create, &c);
	if (ret) {
		write_next_id(kind, -1); /* not left for whoever creates one next */
		pr_err("cannot create System V %s %d (key %#x, IPC namespace %u): %s",
		       kind_name[kind], p->id, (unsigned)p->key, e->ns, strerror(-ret));
		return ret;
	}
	if (e->ns) /* it goes with its namespace */
		return c.id != p->id ? renumbered(kind, p->id, c.id) : finish_object(t, kind, e, p);
	m = realloc(made, (nr_made + 1) * sizeof(*m));
	if (!m) {
		rmid(kind, c.id);
		return -ENOMEM;
	}
	made = m;
	made[nr_made++] = (struct made){kind, c.id};
	if (c.id != p->id)
		return renumbered(kind, p->id, c.id);
	return finish_object(t, kind, e, p);
}

static int ipc_restore_tree(struct tree *t)
{
	IpcEntry **e;
	size_t n;
	int ret = ipc_load(t, &e, &n);

	for (size_t i = 0; !ret && i < n; i++) {
		int kind;
		const IpcPerm *p = perm_of(e[i], &kind);

		if (!p)
			continue;
		ret = ns_enter(NS_KIND__NS_IPC, e[i]->ns);
		if (ret)
			break;
		ret = create_object(t, kind, e[i], p);
		ns_leave(NS_KIND__NS_IPC, e[i]->ns);
	}
	return ret ? ret : mqueue_restore_finish(t);
}

/* A scratch buffer of len bytes in the task, for what its syscalls read. */
static long task_buffer(struct restore_ctx *ctx, size_t len)
{
	long r = infect_call(&ctx->inf, SYS_mmap, 0, (long)len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (r < 0 && r > -4096)
		pr_err("pid %d: cannot map %zu bytes for its semaphores and messages: %s", ctx->pid,
		       len, strerror((int)-r));
	return r;
}

/* The process sets the values and sends the messages (sempid and lspid are its own). */
static int fill_by_task(struct restore_ctx *ctx, const IpcEntry *e, long buf)
{
	const IpcPerm *p = e->sem ? e->sem->perm : e->msq->perm;
	long r = 0;
	int ret = 0;

	if (e->sem) {
		unsigned short *vals = malloc(e->sem->n_values * sizeof(*vals));

		if (!vals)
			return -ENOMEM;
		for (size_t i = 0; i < e->sem->n_values; i++)
			vals[i] = (unsigned short)e->sem->values[i];
		ret = infect_write(&ctx->inf, buf, vals, e->sem->n_values * sizeof(*vals));
		free(vals);
		r = ret ? 0 : infect_call(&ctx->inf, SYS_semctl, p->id, 0, SETALL, buf, 0, 0);
	}
	for (size_t i = 0; e->msq && !ret && !r && i < e->msq->n_msgs; i++) {
		const IpcMsg *m = e->msq->msgs[i];
		long type = m->type;

		ret = infect_write(&ctx->inf, buf, &type, sizeof(type));
		if (!ret && m->data.len)
			ret = infect_write(&ctx->inf, buf + sizeof(long), m->data.data,
					   m->data.len);
		r = ret ? 0
			: infect_call(&ctx->inf, SYS_msgsnd, p->id, buf, (long)m->data.len,
				      IPC_NOWAIT, 0, 0);
	}
	if (!ret && r) {
		ret = (int)r;
		pr_err("pid %d: cannot %s System V %s %d: %s", ctx->pid,
		       e->sem ? "set the values of" : "queue the messages of",
		       e->sem ? kind_name[K_SEM] : kind_name[K_MSG], p->id, strerror((int)-r));
	}
	if (!ret && e->msq) { /* the queue's own size limit, now that the messages are in */
		struct msqid_ds ds;

		ret = ns_enter(NS_KIND__NS_IPC, e->ns);
		if (ret)
			return ret;
		ret = owner_enter(ctx->tree);
		if (ret) {
			ns_leave(NS_KIND__NS_IPC, e->ns);
			return ret;
		}
		if (!msgctl(p->id, IPC_STAT, &ds) && ds.msg_qbytes != e->msq->qbytes) {
			ds.msg_qbytes = e->msq->qbytes;
			if (msgctl(p->id, IPC_SET, &ds) < 0) {
				ret = -errno;
				pr_err("System V message queue %d: cannot set its size limit to "
				       "%llu bytes: %m",
				       p->id, (unsigned long long)e->msq->qbytes);
			}
		}
		owner_leave(ctx->tree);
		ns_leave(NS_KIND__NS_IPC, e->ns);
	}
	return ret;
}

/* Whether ctx fills entry e: the first process of e's IPC namespace does. */
static bool fills(struct restore_ctx *ctx, const IpcEntry *e)
{
	return (e->sem || e->msq) && filler(ctx->tree, e->ns) == ctx;
}

static int fill_sems_msgs(struct restore_ctx *ctx)
{
	size_t len = 0;
	long buf;
	int ret = 0;

	for (size_t i = 0; i < nr_rentries; i++) {
		const IpcEntry *e = rentries[i];

		if (!fills(ctx, e))
			continue;
		if (e->sem && e->sem->n_values * sizeof(short) > len)
			len = e->sem->n_values * sizeof(short);
		for (size_t m = 0; e->msq && m < e->msq->n_msgs; m++)
			if (sizeof(long) + e->msq->msgs[m]->data.len > len)
				len = sizeof(long) + e->msq->msgs[m]->data.len;
	}
	if (!len)
		return 0;
	len = (len + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
	buf = task_buffer(ctx, len);
	if (buf < 0 && buf > -4096)
		return (int)buf;
	for (size_t i = 0; !ret && i < nr_rentries; i++)
		if (fills(ctx, rentries[i]))
			ret = fill_by_task(ctx, rentries[i], buf);
	infect_call(&ctx->inf, SYS_munmap, buf, (long)len, 0, 0, 0, 0);
	return ret;
}

/* Segments that were removed while attached: again, now that every process attached them. */
static int remove_dest(void)
{
	for (size_t i = 0; i < nr_rentries; i++) {
		const IpcShm *s = rentries[i]->shm;
		uint32_t ns = rentries[i]->ns;
		int ret;

		if (!s || !s->dest)
			continue;
		ret = ns_enter(NS_KIND__NS_IPC, ns);
		if (ret)
			return ret;
		if (shmctl(s->perm->id, IPC_RMID, NULL) < 0) {
			ret = -errno;
			pr_err("System V segment %d (IPC namespace %u): cannot mark it removed "
			       "(IPC_RMID): %m",
			       s->perm->id, ns);
		}
		ns_leave(NS_KIND__NS_IPC, ns);
		if (ret)
			return ret;
	}
	return 0;
}

static int ipc_restore_inject(struct restore_ctx *ctx)
{
	struct tree *t = ctx->tree;
	int ret = 0;

	ret = fill_sems_msgs(ctx);
	if (!ret && ctx == t->rprocs[t->nr_procs - 1])
		ret = remove_dest();
	return ret;
}

static void ipc_restore_undo(struct tree *t)
{
	for (size_t i = 0; i < nr_made; i++) {
		int ret = rmid(made[i].kind, made[i].id);

		if (ret && ret != -EINVAL && ret != -EIDRM)
			pr_warn("cannot remove System V %s %d made by the failed restore: %s "
				"(ipcrm %s %d)",
				kind_name[made[i].kind], made[i].id, strerror(-ret),
				ipcrm_flag[made[i].kind], made[i].id);
	}
	nr_made = 0;
	mqueue_restore_undo();
}

const struct resource_ops ipc_ops = {
	.name = "ipc",
	.dump_tree = ipc_dump_tree,
	.dump_tree_late = ipc_dump_tree_late,
	.dump_killed = ipc_dump_killed,
	.restore_read = ipc_restore_read,
	.restore_tree = ipc_restore_tree,
	.restore_undo = ipc_restore_undo,
	.restore_inject = ipc_restore_inject,
};
