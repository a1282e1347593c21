/* SPDX-License-Identifier: MIT */
/*
 * amber's core types: the options of a run, the dump and restore contexts,
 * and the table of per-resource operations.  Each resource kind lives in one
 * source file (mem.c, files.c, signals.c, timers.c, ...) and plugs into
 * `resources[]` (resources.c); the drivers (dump.c, restore.c) only walk it.
 */
#ifndef AMBER_H
#define AMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "image.h"
#include "infect.h"
#include "owner.h"

#define AMBER_VERSION "0.1.0"
/* The CRIU version amber answers for (swrk's VERSION, criu --version): the RPC's. */
#define CRIU_MAJOR   4
#define CRIU_MINOR   0
#define CRIU_VERSION "4.0"

enum { CMD_DUMP, CMD_RESTORE, CMD_CHECK, CMD_SHOW, CMD__COUNT };

#define MAX_ACTION_SCRIPTS 8
#define MAX_ARGS	   4

/* The options of every command (opts.c's table). */
struct opts {
	pid_t pid;
	const char *dir;
	const char *work_dir; /* -W: where a relative --log-file goes (default: dir) */
	const char *log_file; /* -o */
	const char *pidfile;
	const char *scripts[MAX_ACTION_SCRIPTS]; /* --action-script (action.c) */
	int nr_scripts;
	const char *args[MAX_ARGS]; /* show: DIR [VIEW] */
	int nr_args;
	char **argv_store; /* the configuration files' options, which these point into */
	bool leave_running;
	bool leave_stopped; /* -s: SIGSTOP after the dump or restore */
	bool json;	    /* check --json */
	bool stats;	    /* show --stats */
	bool help;
	bool shell_job;
	bool orphan_pts_master; /* RPC -j: the job's terminal's master is the client's (tty.c) */
	bool detached;
	bool tcp_established;	    /* dump/restore established TCP connections (TCP_REPAIR) */
	bool skip_in_flight;	    /* drop connections not yet accept()ed */
	bool tcp_close;		    /* connections: dump without repair, restore reset */
	bool network_lock_skip;	    /* --network-lock skip: no nft lock (netlock.c) */
	bool netlock_ipt;	    /* --network-lock iptables: a chain, not a table */
	bool display_stats;	    /* --display-stats: print stats.c's numbers at the end */
	bool file_locks;	    /* -l, --file-locks: dump and restore file locks (locks.c) */
	bool link_remap;	    /* --link-remap: links for unlinked, linked-elsewhere files */
	uint64_t ghost_limit;	    /* --ghost-limit: most data bytes of one deleted file */
	bool new_pidns;		    /* restore --new-pidns: in a new pid namespace (ns/pidns.c) */
	const char *manage_cgroups; /* soft (NULL), full, ignore (cgroup.c) */
	const char *root;	    /* restore --root: the tree's root mount (ns/mnt.c) */
	bool veth_external;	    /* an --external veth[] was given (restore only) */
	/* amber swrk (src/rpc/) */
	int dir_fd;	 /* > 0: dump into this open directory (dir names it) */
	bool rpc_notify; /* the stages go to the client as NOTIFY messages on rpc_sk */
	int rpc_sk;
	bool rst_sibling; /* the root is made a child of amber's parent (CLONE_PARENT) */
	bool empty_netns; /* the RPC's empty_ns CLONE_NEWNET: the runtime fills them (ns/net.c) */
	const char *freeze_cgroup; /* dump --freeze-cgroup: the tree's cgroup (freezer.c) */
	/* the RPC's cg_root: where the client wants the root's cgroups (cgroup.c) */
	struct cg_root {
		const char *ctrl; /* "": every hierarchy not named */
		const char *path;
	} * cg_root;
	size_t nr_cg_root;
	/* the RPC's inherit_fd: a file of the image (by key) is this fd of amber's (files.c) */
	struct inherit_fd {
		const char *key; /* "pipe:[INODE]", or the file's path */
		int fd;
	} * inherit_fd;
	size_t nr_inherit_fd;
};

/* One line of /proc/PID/maps plus what smaps adds. */
struct vma {
	unsigned long start, end, pgoff;
	int prot;
	bool shared;
	unsigned long dev, ino;
	char *path; /* NULL for anonymous; "[vdso]" etc. for special mappings */
	bool deleted;
	unsigned vmflags;     /* VMF_* from smaps VmFlags */
	int kind;	      /* VmaKind, or -1 for mappings amber skips ([vsyscall]) */
	int file_id;	      /* -1, or index into the dump's file table */
	unsigned hugetlb_kib; /* private MAP_HUGETLB memory: its page size */
};

enum {
	VMF_GROWSDOWN = 1 << 0,
	VMF_DONTFORK = 1 << 1,
	VMF_WIPEONFORK = 1 << 2,
	VMF_DONTDUMP = 1 << 3,
	VMF_HUGEPAGE = 1 << 4,
	VMF_NOHUGEPAGE = 1 << 5,
	VMF_MERGEABLE = 1 << 6,
	VMF_LOCKED = 1 << 7,
	VMF_SEQ_READ = 1 << 8,
	VMF_RAND_READ = 1 << 9,
	VMF_MAYWRITE = 1 << 10,
	VMF_NORESERVE = 1 << 11,
	VMF_LOCKONFAULT = 1 << 12,
};

/* Open file descriptions found while dumping; ids index this table. */
struct file_table {
	RegFile **f;
	size_t n, cap;
	/* the files behind mappings: ids + 1 by (dev, ino), open addressing, 0 free (files.c) */
	uint32_t *by_ino;
	size_t by_ino_cap, by_ino_n;
};

/* One thread of the process; threads[0] is the leader (ctx->inf, ctx->core). */
/* A task of a tree whose root is a pid namespace's init, as seen from both sides. */
struct pid_pair {
	pid_t host;
	uint32_t ns, ns_pgid, ns_sid; /* 0: outside the namespace */
	uint32_t nested;	      /* its pid in a pid namespace one below (0: none) */
};

/*
 * Dump: what a thread's kernel state tells only through injected syscalls,
 * asked in one batch (thread_probe(), threads.c) for the resources that
 * need it: the alternate signal stack (signals.c), securebits and the
 * parent-death signal (creds.c), the tid address (regs.c).
 */
enum { PROBE_ALTSTACK, PROBE_SECUREBITS, PROBE_PDEATHSIG, PROBE_TID_ADDRESS, PROBE_NR };
#define PROBE_ALTSTACK_AT  0  /* offsets in mem of what the syscalls wrote: a stack_t */
#define PROBE_PDEATHSIG_AT 32 /* an int */
#define PROBE_TID_AT	   40 /* a pointer */
struct thread_probe {
	bool done;
	long ret[PROBE_NR];
	uint8_t mem[48];
};

struct thread {
	pid_t tid;
	struct infect *inf;
	TaskCore *core;
	struct thread_probe probe;
};

int thread_probe(struct thread *t);
struct restore_ctx;
/*
 * Restore: a thread the restore cloned (not the leader, named before its
 * fork) gets its name from a syscall of a batch it runs anyway, the last one
 * (creds.c's): one stop a thread fewer.  The caller puts the name
 * (t->core->comm) at the scratch address at; 1 and *sc filled, 0 for the
 * leader (threads.c).
 */
int thread_name_sc(struct restore_ctx *ctx, struct thread *t, unsigned long at,
		   struct infect_sc *sc);

/*
 * One batch in each of a process's threads, THREAD_WINDOW at a time
 * (threads.c): each on a table of its own, table entries apart (its end
 * marker too), all of a window started before the first is waited for, so
 * that their round trips overlap (a JVM's 200 threads took theirs one after
 * the other).  plan() fills thread t's (into *sc, *n: storage of arg's; *n 0:
 * none for t) for data slot `slot` of the scratch area; with `alone` (slot 0)
 * it runs by itself (it takes its syscalls one by one, alone() says so, or no
 * table fits), from the area's start, once the window before it is done.
 * done() takes the results (*sc[i].ret) of the batch planned for `slot`.
 * ctx is the caller's, passed on to plan(): the restore's (threads_batches())
 * or the dump's (threads_probe()).
 */
#define THREAD_WINDOW 32
struct thread_batch {
	const char *what; /* its syscalls, for errors */
	size_t table;
	void *arg;
	int (*plan)(void *arg, void *ctx, struct thread *t, size_t slot, bool alone,
		    struct infect_sc **sc, size_t *n);
	int (*done)(void *arg, struct thread *t, size_t slot);
	bool (*alone)(void *arg, const struct thread *t); /* NULL: none */
};
/* threads[first..nr), whose leader (its scratch area and batch code) is leader */
int threads_batches_in(void *ctx, struct infect *leader, struct thread *threads, size_t first,
		       size_t nr, const struct thread_batch *b);
int threads_batches(struct restore_ctx *ctx, const struct thread_batch *b);

/*
 * Dump: what the process tells only through injected syscalls, asked in one
 * batch with its leader's thread_probe() (proc_probe(), threads.c): its
 * dumpable, THP and subreaper settings (task.c), its brk (mem.c), its
 * interval timers (timers.c), membarrier registrations (membarrier.c) and
 * signal actions (signals.c: 64 rt_sigaction() calls, signal n's at
 * PP_SIGACTION + n - 1).  Eight stops a process were a third of a tree's
 * injected time; the actions' own batch was one stop a process more.
 */
enum {
	PP_DUMPABLE,
	PP_THP_DISABLE,
	PP_SUBREAPER,
	PP_BRK,
	PP_ITIMER, /* three: ITIMER_REAL, _VIRTUAL, _PROF */
	PP_MEMBARRIER = PP_ITIMER + 3,
	PP_PERSONALITY,
	PP_TIMERSLACK,
	PP_SIGACTION, /* PP_NR_SIGACTIONS: signals 1 to 64 */
	PP_NR = PP_SIGACTION + 64
};
#define PP_NR_SIGACTIONS  64
#define PP_SIGACTION_SIZE 32 /* the kernel's struct sigaction */
#define MB_GET_REGISTRATIONS (1 << 9) /* Linux 6.3; not in every uapi header */
#define PP_SUBREAPER_AT	     48	      /* offsets in mem of what the syscalls wrote: an int */
#define PP_ITIMER_AT	     64	      /* three struct itimerval */
#define PP_SIGACTION_AT	     256      /* PP_NR_SIGACTIONS of PP_SIGACTION_SIZE */
struct proc_probe {
	bool done;
	long ret[PP_NR];
	uint8_t mem[PP_SIGACTION_AT + PP_NR_SIGACTIONS * PP_SIGACTION_SIZE];
};

struct dump_ctx;
struct restore_ctx;
struct freezer;

/*
 * What a dump or restore shares across the processes of a tree: the image
 * directory, the open file descriptions (one table, so that descriptions
 * shared between processes are one entry), and the processes themselves.
 */
/* A process of a gone session or group leader's pid, made only to remake it. */
struct tree_helper {
	uint32_t pid;
	uint32_t creator; /* its parent (0: amber) */
	bool session;	  /* setsid(); else setpgid(0, 0) */
	uint32_t sid;	  /* the session it is in */
};

struct tree {
	struct opts *o;
	int dirfd;
	/* dump */
	struct img_set imgs;
	struct file_table files;
	int ghosts; /* ghost files written so far */
	struct dump_ctx **dprocs;
	struct freezer *freezer; /* --freeze-cgroup (freezer.c): seizes wait for the thaw */
	/* an exit handler acts only for dead processes (the network lock, TCP
	 * repair mode): the dump's kill waits for them to be gone */
	bool kill_waits;
	/* restore */
	struct img_dir *img; /* every image file, opened and checked once */
	Inventory *inv;
	uid_t image_uid;    /* owner of the image directory and files: what it may grant */
	gid_t image_gid;    /* group of inventory.img */
	struct owner owner; /* whose rights bound the restore (owner.c) */
	RegFile **rfiles;
	size_t nr_rfiles;
	int *desc_fd; /* per file id: amber's fd on it, the same number in every process */
	int fd_base;  /* fds >= this in a restored process are amber's */
	int fd_top;   /* above every desc_fd: where what a process receives goes */
	struct restore_ctx **rprocs;
	/* both */
	struct tree_helper *helpers; /* sessions.c: leaderless sessions and groups */
	size_t nr_helpers;
	uint32_t *creator; /* per pstree entry: who creates it (a helper, its parent; 0: amber) */
	PstreeEntry **pstree;
	size_t nr_procs; /* live processes (dprocs/rprocs), in pstree order */
	size_t nr_pstree;
	struct tree_index *index; /* tree.c: pid -> pstree entry, restore context */
	/* the root is the init of a pid namespace of its own (ns/pidns.c): the
	 * image holds that namespace's pids, amber's calls take the host's */
	bool own_pidns;
	char pidns[64];		 /* dump: the root's /proc/PID/ns/pid link */
	struct pid_pair *pidmap; /* dump: every process and thread, host -> namespace */
	size_t nr_pidmap;
	pid_t *hpid; /* restore: per pstree entry, its host pid once made (0: not yet) */
};

struct proc_stat;
struct proc_status;
struct dump_ctx {
	struct opts *o;
	struct tree *tree;
	pid_t pid;
	int pidfd;
	struct img_set *imgs;
	struct infect inf;
	TaskCore *core;
	struct thread *threads;
	size_t nr_threads;
	MmEntry *mm;
	struct vma *vmas;
	size_t nr_vmas;
	struct file_table *files;
	int *ghosts;
	bool shares_vm; /* CLONE_VM child: its parent's dump holds the memory */
	struct proc_probe probe;
	struct proc_stat *stat;	    /* dump_stat() */
	struct proc_status *status; /* dump_status() */
};

int proc_probe(struct dump_ctx *ctx);
/* Every thread's thread_probe() but the leader's, many at once (dump_resources()). */
int threads_probe(struct dump_ctx *ctx);
/* Its /proc/PID/stat and status, read once while it is stopped (the hooks all ask). */
int dump_stat(struct dump_ctx *ctx, struct proc_stat *st);
int dump_status(struct dump_ctx *ctx, struct proc_status *st);

struct restore_ctx {
	struct opts *o;
	struct tree *tree;
	struct img_dir *img;
	Inventory *inv;
	pid_t pid;
	TaskCore *core;
	struct thread *threads; /* [0] is the leader */
	size_t nr_threads;
	MmEntry *mm;
	PagemapEntry **pm;
	size_t nr_pm;
	RegFile **files;
	size_t nr_files;
	FdEntry **fds;
	size_t nr_fds;
	FsEntry *fs;
	/* Opened by amber before the processes exist: the same fds in every one. */
	int *map_fd; /* per file id (tree->desc_fd) */
	/* on pages-PID.img: amber's fd, and once the process reported, the
	 * process's own (it is given it with go: restore.c) */
	int pages_fd;
	struct infect inf;
	unsigned long vdso_new;		 /* our vDSO's address when the old one is proxied */
	bool shares_vm;			 /* CLONE_VM child: its parent restores the memory */
	bool attached;			 /* amber drives it (restore.c) */
	struct mem_clear *clear;	 /* its address space's clearing, started ahead (mem.c) */
	unsigned long scratch_premapped; /* the scratch area it mapped itself (mem.c), or 0 */
	unsigned long *cow_slot;	 /* per VMA: premapped there before fork (mem-cow.c) */
	uint8_t *cow_reuse;		 /* per VMA: the slot is the parent's, inherited */
};

struct resource_ops {
	const char *name;
	/* Once per dump, every process frozen, before their own dumps (kcmp sharing). */
	int (*dump_tree)(struct tree *t);
	/* Once per dump, after every process's dump (tables shared by all). */
	int (*dump_tree_late)(struct tree *t);
	/* The dumped processes run on (the dump failed, or -R): undo, before
	 * they do, what must not outlive the freeze (sockets in repair mode). */
	void (*dump_undo)(struct tree *t);
	/* The image is complete and the processes were killed: objects that
	 * outlive them (System V IPC) go with them, the image has them now. */
	void (*dump_killed)(struct tree *t);
	/* Once per restore, in amber before any process exists: tree-wide objects
	 * (file descriptions, pipes) that every restored process inherits. */
	int (*restore_tree)(struct tree *t);
	/* The restore is done, the processes run: remove what only the restore
	 * needed (--link-remap links).  Cannot fail the restore. */
	void (*restore_done)(struct tree *t);
	/* The restore failed: remove what restore_tree made that outlives
	 * amber's processes (System V objects, message queues). */
	void (*restore_undo)(struct tree *t);
	/* Task frozen, signals blocked, injection usable (inf, scratch page). */
	int (*dump)(struct dump_ctx *ctx);
	/* Task frozen with its own registers and mask back: bulk work (pages). */
	int (*dump_late)(struct dump_ctx *ctx);
	/* In amber before the child exists: read and check this resource's images. */
	int (*restore_read)(struct restore_ctx *ctx);
	/* In the forked child, with libc, before it creates its children (what
	 * they inherit).  Not run in a CLONE_VM child. */
	int (*restore_prefork)(struct restore_ctx *ctx);
	/* In the forked child, with libc, before its address space is replaced. */
	int (*restore_child)(struct restore_ctx *ctx);
	/* In amber, driving the stopped child through injected syscalls. */
	int (*restore_inject)(struct restore_ctx *ctx);
	/* In amber, once every process went through restore_inject (all exist,
	 * credentials restored), still stopped, scratch area mapped: what needs
	 * the other processes as they will run (files.c: /proc files, pidfds). */
	int (*restore_late)(struct restore_ctx *ctx);
	/* Per thread, leader included, after restore_inject (threads exist by then). */
	int (*dump_thread)(struct dump_ctx *ctx, struct thread *t);
	int (*restore_thread)(struct restore_ctx *ctx, struct thread *t);
};

/* Dump order = restore order within each phase.  NULL-terminated. */
extern const struct resource_ops *const resources[];

extern const struct resource_ops ns_ops;	  /* ns/ns.c: UTS and IPC namespaces */
extern const struct resource_ops cgroup_ops;	  /* cgroup.c: each process's cgroups */
extern const struct resource_ops netns_ops;	  /* ns/net.c: network namespaces */
extern const struct resource_ops mnt_ops;	  /* ns/mnt.c: the mount namespace */
extern const struct resource_ops mnt_exit_ops;	  /* ns/mnt.c: amber leaves it, last */
extern const struct resource_ops task_ops;	  /* task.c: identity, prctls */
extern const struct resource_ops rlimits_ops;	  /* rlimits.c: resource limits */
extern const struct resource_ops creds_ops;	  /* creds.c: uids, gids, capabilities */
extern const struct resource_ops fs_ops;	  /* fs.c: cwd, root, umask */
extern const struct resource_ops files_ops;	  /* files.c: fds and open files */
extern const struct resource_ops tty_ops;	  /* tty.c: terminals */
extern const struct resource_ops mem_ops;	  /* mem.c: VMAs, pages, mm fields, vDSO */
extern const struct resource_ops threads_ops;	  /* threads.c: the other threads */
extern const struct resource_ops signals_ops;	  /* signals.c: actions, altstack, pending */
extern const struct resource_ops timers_ops;	  /* timers.c: itimers, POSIX timers */
extern const struct resource_ops locks_ops;	  /* locks.c: file locks, O_ASYNC owners */
extern const struct resource_ops sched_ops;	  /* sched.c: policy, affinity, ioprio */
extern const struct resource_ops regs_ops;	  /* regs.c: GP/FPU registers, TLS, sigmask */
extern const struct resource_ops ipc_ops;	  /* ipc/sysv.c: System V IPC, message queues */
extern const struct resource_ops seccomp_ops;	  /* seccomp.c: strict mode, filters */
extern const struct resource_ops membarrier_ops;  /* membarrier.c: registrations */
extern const struct resource_ops aio_ops;	  /* aio.c: io_setup contexts */
extern const struct resource_ops uring_ops;	  /* uring.c: io_uring, what only calls show */
extern const struct resource_ops packet_ring_ops; /* net/packet-ring.c: packet rings mapped */

/* A command's options (opts.c): 0, or -errno with the reason logged. */
int opts_parse(int argc, char **argv, struct opts *o, int cmd);
/* CMD_* of a command's name, or -1. */
int opts_cmd(const char *name);
/* A command's usage and every option it takes, from the table. */
void opts_usage(FILE *f, int cmd);
/* Every option of the table with its commands, one per line (the man page's test). */
void opts_list(FILE *f);
/* Frees what opts_parse() kept for o. */
void opts_free(struct opts *o);
/* -o: the log goes to that file from now on (after -D exists); 0 or -errno. */
int opts_open_log(const struct opts *o);

int cmd_dump(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_swrk(int argc, char **argv); /* rpc/swrk.c */

/* The dump and restore of the commands, for amber swrk: 0 or -errno (logged).
 * restore_run() waits for the root unless o->detached; *root: its pid. */
int dump_run(struct opts *o);
int restore_run(struct opts *o, uint32_t *root);

/* file table helpers (files.c), used by mem.c for mapped files */
int files_add(struct dump_ctx *ctx, RegFile *f);
int files_known(struct dump_ctx *ctx, dev_t dev, ino_t ino, const char *path, int flags);
int files_dump_path(struct dump_ctx *ctx, const char *procpath, const char *path, int flags,
		    uint64_t pos, int *id);

/* sessions.c: mark leaderless sessions and groups at dump, and check them. */
int sessions_dump(struct tree *t);
/* Who creates each process (t->creator, t->helpers); 0 or -errno, logged. */
int sessions_plan(struct tree *t);
bool sessions_is_helper(const struct tree *t, uint32_t pid);
/* Whether pid is a zombie that makes members of its session (it dies early). */
bool sessions_zombie_leads(const struct tree *t, uint32_t pid);

/* tree.c: the pstree.img entry of pid, or NULL; its restore context (zombies
 * have none), or NULL.  O(1) through an index that follows the tree. */
PstreeEntry *tree_entry(const struct tree *t, uint32_t pid);
struct restore_ctx *tree_rproc(const struct tree *t, uint32_t pid);
/* The dump context of pid, or NULL. */
struct dump_ctx *tree_dproc(const struct tree *t, uint32_t pid);
/* The index of pid's pstree entry, (size_t)-1 if none. */
size_t tree_pos(const struct tree *t, uint32_t pid);
/* Builds the index now (before forking, so children do not each build one);
 * on a restore, once t->creator is planned, also what the next two read. */
int tree_index_build(const struct tree *t);
/* Restore: the pstree indices of the entries creator makes (t->creator), and
 * of the children of ppid (0: the root), each in pstree order; the count. */
size_t tree_created(const struct tree *t, uint32_t creator, const uint32_t **idx);
/*
 * Where amber's own fds go in a restore: above fd_base, and once the
 * descriptions are open (files.c), above them too, whose numbers a process
 * frees for the ones it receives.
 */
static inline int tree_fd_floor(const struct tree *t)
{
	return t->fd_top > t->fd_base ? t->fd_top : t->fd_base;
}
size_t tree_children(const struct tree *t, uint32_t ppid, const uint32_t **idx);
/* pid shares its fd table with its parent or a child (CLONE_FILES). */
bool tree_shares_files(const struct tree *t, uint32_t pid);
void tree_index_free(struct tree *t);

#endif
