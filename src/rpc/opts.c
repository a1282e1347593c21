// SPDX-License-Identifier: MIT
/*
 * A DUMP or RESTORE request's options (rpc_opts) as amber's struct opts, with
 * CRIU's meanings.  What amber cannot do is refused by the option's name:
 * never left out, since the client would believe it done.  A flag set to
 * false, or an option at its default, asks for nothing and passes.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "ns/ns.h"
#include "rpc/rpc.h"

/* The paths of the fds, for the options that take paths (one operation per process). */
static char dir_path[32], work_path[32];

static int refuse(const char *opt, const char *why)
{
	pr_err("option %s is not supported: %s", opt, why);
	return -EOPNOTSUPP;
}

/* The client's fd N, opened anew by amber through /proc/PEER/fd/N. */
static int open_client_fd(pid_t peer, int n, const char *opt, int flags)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", peer, n);
	fd = open(path, flags | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		pr_err("option %s: fd %d of the client (pid %d) is not an open directory: %s", opt,
		       n, peer, strerror(err));
		return -err;
	}
	return fd;
}

int rpc_opts_log(const RpcOpts *ro, pid_t peer, struct opts *o)
{
	int fd;

	if (ro->has_log_level) {
		/* CRIU's 0 (nothing) .. 4 (debug); more is debug too */
		int n = ro->log_level < 0 ? 0 : ro->log_level > 4 ? 4 : ro->log_level;

		log_level = n - 1;
	}
	if (ro->images_dir_fd >= 0) {
		fd = open_client_fd(peer, ro->images_dir_fd, "images_dir_fd", O_RDONLY);
		if (fd < 0)
			return fd;
		snprintf(dir_path, sizeof(dir_path), "/proc/self/fd/%d", fd);
		o->dir = dir_path;
		o->dir_fd = fd;
	} else if (ro->images_dir && ro->images_dir[0]) {
		o->dir = ro->images_dir;
	} else {
		pr_err("option images_dir_fd: no image directory given (images_dir_fd or "
		       "images_dir)");
		return -EINVAL;
	}
	if (ro->has_work_dir_fd) {
		fd = open_client_fd(peer, ro->work_dir_fd, "work_dir_fd", O_PATH);
		if (fd < 0)
			return fd;
		snprintf(work_path, sizeof(work_path), "/proc/self/fd/%d", fd);
		o->work_dir = work_path;
	}
	if (ro->log_file) {
		/* CRIU's rule: a name in the work directory, no path */
		if (!ro->log_file[0] || strchr(ro->log_file, '/')) {
			pr_err("option log_file: '%s' is not a file name (no '/': the log goes in "
			       "the work directory)",
			       ro->log_file);
			return -EINVAL;
		}
		if (ro->has_log_to_stderr && ro->log_to_stderr)
			return refuse("log_to_stderr", "amber writes one log: log_file, or stderr");
		o->log_file = ro->log_file;
	}
	return 0;
}

/* Flags and values that ask amber for what it does not do, with the reason. */
static int refuse_unsupported(const RpcOpts *ro, int type)
{
	static const char nomnt[] =
		"mounts are external only as ext_mnt or external mnt[] name them";
	const struct {
		const char *name;
		bool set;
		const char *why;
	} checks[] = {
		{"ps", ro->ps != NULL, "there is no page server: images go to images_dir_fd"},
		{"parent_img", ro->parent_img != NULL, "incremental dumps are not implemented"},
		{"track_mem", ro->has_track_mem && ro->track_mem,
		 "memory tracking (incremental dumps) is not implemented"},
		{"auto_dedup", ro->has_auto_dedup && ro->auto_dedup,
		 "incremental dumps are not implemented"},
		{"lazy_pages", ro->has_lazy_pages && ro->lazy_pages,
		 "lazy (post-copy) restore is not implemented"},
		{"ext_unix_sk", ro->has_ext_unix_sk && ro->ext_unix_sk,
		 "a unix socket whose peer is outside the tree is refused, not kept as external"},
		{"veths", ro->n_veths > 0,
		 "not mapped yet: give the veths as external veth[IF]:HOST strings"},
		{"cpu_cap", ro->has_cpu_cap, "amber checks the CPU features it needs itself"},
		{"force_irmap", ro->has_force_irmap && ro->force_irmap,
		 "inotify watches are resolved through /proc"},
		{"exec_cmd", ro->n_exec_cmd > 0, "amber runs no command after a restore"},
		{"cg_root", type == RPC_TYPE__RPC_DUMP && ro->n_cg_root > 0,
		 "it is a restore option"},
		{"rst_sibling",
		 type == RPC_TYPE__RPC_DUMP && ro->has_rst_sibling && ro->rst_sibling,
		 "it is a restore option"},
		{"inherit_fd", type == RPC_TYPE__RPC_DUMP && ro->n_inherit_fd > 0,
		 "it is a restore option"},
		{"auto_ext_mnt", ro->has_auto_ext_mnt && ro->auto_ext_mnt, nomnt},
		{"ext_sharing", ro->has_ext_sharing && ro->ext_sharing, nomnt},
		{"ext_masters", ro->has_ext_masters && ro->ext_masters, nomnt},
		{"skip_mnt", ro->n_skip_mnt > 0, nomnt},
		{"enable_fs", ro->n_enable_fs > 0, nomnt},
		{"unix_sk_ino", ro->n_unix_sk_ino > 0, "external unix sockets are not supported"},
		{"irmap_scan_paths", ro->n_irmap_scan_paths > 0,
		 "inotify watches are resolved through /proc"},
		/* CLONE_NEWNET (runc's default) is mapped below; the others the
		 * runtime cannot fill itself */
		{"empty_ns", ro->has_empty_ns && (ro->empty_ns & ~(uint32_t)CLONE_NEWNET),
		 "only the network namespace (CLONE_NEWNET) is left empty for the client"},
		{"join_ns", ro->n_join_ns > 0, "the restore does not join given namespaces"},
		{"cgroup_props", ro->cgroup_props != NULL,
		 "the dumped cgroup settings are the ones restored"},
		{"cgroup_props_file", ro->cgroup_props_file != NULL,
		 "the dumped cgroup settings are the ones restored"},
		{"cgroup_dump_controller", ro->n_cgroup_dump_controller > 0,
		 "every controller of the processes' cgroups is dumped"},
		{"timeout", ro->has_timeout && ro->timeout, "amber has no time limit to set"},
		{"weak_sysctls", ro->has_weak_sysctls && ro->weak_sysctls,
		 "a sysctl that cannot be restored fails the restore"},
		{"status_fd", ro->has_status_fd,
		 "amber has no page server or lazy-pages daemon to say ready"},
		/* runc names /etc/criu/runc.conf whether it exists or not: CRIU reads
		 * nothing from a missing one, amber no file at all */
		{"config_file", ro->config_file && access(ro->config_file, F_OK) == 0,
		 "the RPC reads no configuration file: give the options in the request"},
		{"lsm_profile", ro->lsm_profile != NULL, "LSM profiles are not set"},
		{"tls",
		 (ro->has_tls && ro->tls) || ro->tls_cacert || ro->tls_cacrl || ro->tls_cert ||
			 ro->tls_key || (ro->has_tls_no_cn_verify && ro->tls_no_cn_verify),
		 "there is no page server to talk to"},
		{"cgroup_yard", ro->cgroup_yard != NULL,
		 "amber makes cgroups where they belong, without a yard"},
		{"pre_dump_mode", ro->has_pre_dump_mode, "pre-dumps are not implemented"},
		{"pidfd_store_sk", ro->has_pidfd_store_sk, "amber keeps no pidfd store"},
		{"lsm_mount_context", ro->lsm_mount_context != NULL, nomnt},
		{"mntns_compat_mode", ro->has_mntns_compat_mode && ro->mntns_compat_mode, nomnt},
		{"skip_file_rwx_check", ro->has_skip_file_rwx_check && ro->skip_file_rwx_check,
		 "files are checked as amber checks them"},
		{"unprivileged", ro->has_unprivileged && ro->unprivileged,
		 "amber runs with root's rights"},
		{"allow_uprobes", ro->has_allow_uprobes && ro->allow_uprobes,
		 "uprobes mappings are not dumped"},
		{"ghost_fiemap", ro->has_ghost_fiemap && ro->ghost_fiemap,
		 "deleted files are saved whole (up to ghost_limit)"},
		{"file_validation_method", ro->has_file_validation_method,
		 "amber checks files its own way"},
		/* the request's kind decides these */
		{"pid", type == RPC_TYPE__RPC_RESTORE && ro->has_pid,
		 "a restore's processes have the image's pids"},
		{"leave_running",
		 type == RPC_TYPE__RPC_RESTORE && ro->has_leave_running && ro->leave_running,
		 "it is a dump option"},
		{"tcp_skip_in_flight",
		 type == RPC_TYPE__RPC_RESTORE && ro->has_tcp_skip_in_flight &&
			 ro->tcp_skip_in_flight,
		 "it is a dump option"},
	};

	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		if (checks[i].set)
			return refuse(checks[i].name, checks[i].why);
	return 0;
}

/*
 * CRIU's root: on RESTORE the rootfs of a tree that pivot_root()ed (amber's
 * --root); on DUMP the root of the dumped tree, which amber reads from the
 * tree's mounts and checks against it (ns/mnt.c).  "/" is amber's own: none.
 */
static void map_root(const RpcOpts *ro, struct opts *o)
{
	o->root = ro->root && ro->root[0] && strcmp(ro->root, "/") ? ro->root : NULL;
}

/*
 * ext_mnt (key, val): on DUMP mount point -> key, on RESTORE key -> path,
 * as --external mnt[key]:val; external: --external's own strings.
 */
static int map_externals(const RpcOpts *ro, bool dump, struct opts *o)
{
	char *s;
	int ret;

	for (size_t i = 0; i < ro->n_ext_mnt; i++) {
		const RpcKeyVal *kv = ro->ext_mnt[i];

		if (!kv->key[0] || strchr(kv->key, ']') || !kv->val[0]) {
			pr_err("option ext_mnt: '%s' -> '%s' is not a mount point (dump) or key "
			       "(restore) and its key (dump) or path (restore)",
			       kv->key, kv->val);
			return -EINVAL;
		}
		if (asprintf(&s, "mnt[%s]:%s", kv->key, kv->val) < 0)
			return -ENOMEM;
		/* runc names every device node, masked path and bind it could have
		 * made; CRIU takes the ones that are mounts */
		ret = mnt_external_map(s, true); /* keeps copies */
		free(s);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < ro->n_external; i++) {
		const char *x = ro->external[i];

		if (!strncmp(x, "mnt[", 4)) {
			ret = mnt_external(x);
		} else if (!strncmp(x, "veth[", 5) && !dump) {
			o->veth_external = true;
			ret = netns_external(x);
		} else if (!strncmp(x, "veth[", 5)) {
			pr_err("option external is not supported on DUMP: '%s': veth[] is for "
			       "restore, a dump takes only mnt[MOUNTPOINT]:KEY",
			       x);
			ret = -EOPNOTSUPP;
		} else {
			pr_err("option external is not supported: '%s': amber knows mnt[] and "
			       "veth[] (restore) only, no other external resources "
			       "(namespaces, files) to be joined or given back",
			       x);
			ret = -EOPNOTSUPP;
		}
		if (ret)
			return ret;
	}
	return 0;
}

static int map_cgroups(const RpcOpts *ro, struct opts *o)
{
	if (!ro->has_manage_cgroups_mode) {
		/* CRIU: the old flag means soft, its absence... soft as well, set false: ignore */
		if (ro->has_manage_cgroups && !ro->manage_cgroups)
			o->manage_cgroups = "ignore";
		return 0;
	}
	switch (ro->manage_cgroups_mode) {
	case RPC_CG_MODE__RPC_CG_IGNORE:
		o->manage_cgroups = "ignore";
		return 0;
	case RPC_CG_MODE__RPC_CG_SOFT:
	case RPC_CG_MODE__RPC_CG_DEFAULT:
		o->manage_cgroups = NULL;
		return 0;
	case RPC_CG_MODE__RPC_CG_FULL:
		o->manage_cgroups = "full";
		return 0;
	case RPC_CG_MODE__RPC_CG_NONE:
		return refuse("manage_cgroups_mode", "none: amber always dumps the cgroups");
	case RPC_CG_MODE__RPC_CG_PROPS:
		return refuse("manage_cgroups_mode", "props: amber has soft, full and ignore");
	case RPC_CG_MODE__RPC_CG_STRICT:
		return refuse("manage_cgroups_mode", "strict: amber has soft, full and ignore");
	default:
		pr_err("option manage_cgroups_mode: unknown mode %d", ro->manage_cgroups_mode);
		return -EINVAL;
	}
}

/* cg_root: checked against the image's cgroups (cgroup.c) */
static int map_cg_root(const RpcOpts *ro, struct opts *o)
{
	if (!ro->n_cg_root)
		return 0;
	o->cg_root = calloc(ro->n_cg_root, sizeof(*o->cg_root));
	if (!o->cg_root)
		return -ENOMEM;
	for (size_t i = 0; i < ro->n_cg_root; i++) {
		const RpcCgRoot *r = ro->cg_root[i];

		if (r->path[0] != '/') {
			pr_err("option cg_root: '%s' is not an absolute cgroup path", r->path);
			return -EINVAL;
		}
		o->cg_root[i].ctrl = r->controller ? r->controller : "";
		o->cg_root[i].path = r->path;
	}
	o->nr_cg_root = ro->n_cg_root;
	return 0;
}

/* inherit_fd: fds of the worker's own (the client passed them at its start) */
static int map_inherit_fd(const RpcOpts *ro, struct opts *o)
{
	if (!ro->n_inherit_fd)
		return 0;
	o->inherit_fd = calloc(ro->n_inherit_fd, sizeof(*o->inherit_fd));
	if (!o->inherit_fd)
		return -ENOMEM;
	for (size_t i = 0; i < ro->n_inherit_fd; i++) {
		const RpcInheritFd *h = ro->inherit_fd[i];

		if (!h->key[0] || h->fd < 0 || fcntl(h->fd, F_GETFD) < 0) {
			pr_err("option inherit_fd: key '%s': fd %d is not an open fd of amber swrk "
			       "(the client passes it when it starts the worker)",
			       h->key, h->fd);
			return -EBADF;
		}
		o->inherit_fd[i].key = h->key;
		o->inherit_fd[i].fd = h->fd;
	}
	o->nr_inherit_fd = ro->n_inherit_fd;
	return 0;
}

static int map_netlock(const RpcOpts *ro, struct opts *o)
{
	if (!ro->has_network_lock)
		return 0; /* amber's default, nftables */
	switch (ro->network_lock) {
	case RPC_NETLOCK__RPC_NETLOCK_IPTABLES:
		o->netlock_ipt = true;
		return 0;
	case RPC_NETLOCK__RPC_NETLOCK_NFTABLES:
		return 0;
	case RPC_NETLOCK__RPC_NETLOCK_SKIP:
		o->network_lock_skip = true;
		return 0;
	default:
		pr_err("option network_lock: unknown method %d", ro->network_lock);
		return -EINVAL;
	}
}

int rpc_opts_map(const RpcOpts *ro, int type, pid_t peer, struct opts *o)
{
	bool dump = type == RPC_TYPE__RPC_DUMP;
	int ret;

	ret = refuse_unsupported(ro, type);
	if (!ret)
		ret = map_cgroups(ro, o);
	if (!ret)
		ret = map_cg_root(ro, o);
	if (!ret)
		ret = map_inherit_fd(ro, o);
	if (!ret)
		ret = map_netlock(ro, o);
	if (!ret)
		ret = map_externals(ro, dump, o);
	if (ret)
		return ret;
	map_root(ro, o);
	/* CRIU: without a pid, the client dumps itself (amber then says it is its parent) */
	if (dump)
		o->pid = ro->has_pid ? ro->pid : peer;
	if (dump && o->pid <= 0) {
		pr_err("option pid: %d is not a process", o->pid);
		return -EINVAL;
	}
	o->leave_running = dump && ro->has_leave_running && ro->leave_running;
	o->leave_stopped = ro->has_leave_stopped && ro->leave_stopped;
	o->shell_job = ro->has_shell_job && ro->shell_job;
	/*
	 * runc always asks at restore; it matters only for a job's terminal
	 * (tty.c).  A dump through RPC takes a root leading a session on it
	 * (runc's console): CRIU's clients restore it with a new pty they take.
	 */
	o->orphan_pts_master =
		o->shell_job && (dump || (ro->has_orphan_pts_master && ro->orphan_pts_master));
	o->tcp_established = ro->has_tcp_established && ro->tcp_established;
	o->skip_in_flight = ro->has_tcp_skip_in_flight && ro->tcp_skip_in_flight;
	o->tcp_close = ro->has_tcp_close && ro->tcp_close;
	o->file_locks = ro->has_file_locks && ro->file_locks;
	/* a dump option in CRIU as in amber: a restore follows what the image holds */
	o->link_remap = dump && ro->has_link_remap && ro->link_remap;
	o->display_stats = ro->has_display_stats && ro->display_stats;
	o->ghost_limit = ro->has_ghost_limit ? ro->ghost_limit : 1 << 20;
	o->rpc_notify = ro->has_notify_scripts && ro->notify_scripts;
	o->empty_netns = ro->has_empty_ns && (ro->empty_ns & CLONE_NEWNET);
	/* evasive_devices is a permission (another path to a device node), asks for
	 * nothing: amber reopens a device at its path or fails the restore naming it */
	/* the worker runs such a restore itself: the client is its parent (swrk.c) */
	o->rst_sibling = !dump && ro->has_rst_sibling && ro->rst_sibling;
	/* a dump's: the restore has nothing to freeze */
	o->freeze_cgroup =
		dump && ro->freeze_cgroup && ro->freeze_cgroup[0] ? ro->freeze_cgroup : NULL;
	/* the client's answers come back on this socket; the operation waits for none else */
	o->detached = true;
	return 0;
}
