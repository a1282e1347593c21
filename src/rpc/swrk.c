// SPDX-License-Identifier: MIT
/*
 * amber swrk FD: CRIU's RPC worker.  The client (runc, libcriu) made a
 * SOCK_SEQPACKET socketpair and gave amber one end as FD; each packet is a
 * request, each answered by a packet of the same type.  The worker serves
 * requests until the client closes its end, then exits 0.
 *
 * A DUMP or RESTORE runs in a forked child: dump.c and restore.c keep state
 * in globals (signal handlers, stats, the log, the restore's tracer), which
 * one process must not carry from an operation to the next; a crash of
 * theirs must not take the worker down either.  The child talks to the
 * client itself for the NOTIFY round trips and hands its result back through
 * a pipe; the worker writes the answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amber.h"
#include "log.h"
#include "rpc/rpc.h"
#include "stats.h"

/* The worker ran an operation itself (rst_sibling): it exits after the answer. */
static bool last;

/* What the operation's child hands back to the worker. */
struct op_result {
	int ret;
	int pid; /* restore: the root's */
	char msg[2 * LOG_ERR_MAX + 8];
};

static const char *type_name(int type)
{
	static const char *const names[] = {
		"EMPTY",       "DUMP",	   "RESTORE",	       "CHECK",		  "PRE_DUMP",
		"PAGE_SERVER", "NOTIFY",   "CPUINFO_DUMP",     "CPUINFO_CHECK",	  "FEATURE_CHECK",
		"VERSION",     "WAIT_PID", "PAGE_SERVER_CHLD", "SINGLE_PRE_DUMP",
	};

	return type >= 0 && type < (int)(sizeof(names) / sizeof(names[0])) ? names[type] : "?";
}

/* The errors the child logged: the first is the cause, the last what it meant. */
static void result_msg(struct op_result *r)
{
	if (!log_first_err[0])
		snprintf(r->msg, sizeof(r->msg), "%s", strerror(-r->ret));
	else if (!strcmp(log_first_err, log_last_err))
		snprintf(r->msg, sizeof(r->msg), "%s", log_first_err);
	else
		snprintf(r->msg, sizeof(r->msg), "%s; %s", log_first_err, log_last_err);
}

/* In the child: the options, the log, then amber's own dump or restore. */
static void op_child(int sk, pid_t peer, const RpcRequest *req, struct op_result *r)
{
	struct opts o = {0};
	uint32_t root = 0;
	int ret;

	log_first_err[0] = log_last_err[0] = 0;
	if (!req->opts) {
		pr_err("a %s request needs options (images_dir_fd at least)", type_name(req->type));
		r->ret = -EINVAL;
		return;
	}
	ret = rpc_opts_log(req->opts, peer, &o);
	if (!ret)
		ret = opts_open_log(&o);
	/* open now: the operation must not open it again (that would empty it) */
	o.log_file = NULL;
	if (!ret)
		ret = rpc_opts_map(req->opts, req->type, peer, &o);
	o.rpc_sk = sk;
	if (!ret && req->type == RPC_TYPE__RPC_DUMP)
		ret = dump_run(&o);
	else if (!ret)
		ret = restore_run(&o, &root);
	/* what runtimes read after CRIU (podman's --print-stats) */
	if (!ret && o.work_dir)
		stats_write_rpc(o.work_dir, req->type == RPC_TYPE__RPC_RESTORE);
	r->ret = ret;
	r->pid = (int)root;
	if (ret)
		result_msg(r);
}

static int read_result(int fd, struct op_result *r)
{
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(*r)) {
		n = read(fd, (char *)r + got, sizeof(*r) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += n;
	}
	return 0;
}

/* DUMP, RESTORE: run in a child; its result, or how it died, into resp. */
static int run_op(int sk, pid_t peer, const RpcRequest *req, RpcResponse *resp, struct op_result *r)
{
	int p[2], status;
	pid_t child;

	/*
	 * rst_sibling: the root must be the client's child, so the process that
	 * makes it (CLONE_PARENT) must be: the worker itself, which then serves
	 * no further request (the operation's globals stay behind in it).
	 */
	if (req->type == RPC_TYPE__RPC_RESTORE && req->opts && req->opts->has_rst_sibling &&
	    req->opts->rst_sibling) {
		op_child(sk, peer, req, r);
		last = true;
		goto answer;
	}
	if (pipe2(p, O_CLOEXEC)) {
		r->ret = -errno;
		snprintf(r->msg, sizeof(r->msg), "cannot make a pipe: %s", strerror(errno));
		return 0;
	}
	child = fork();
	if (child < 0) {
		r->ret = -errno;
		snprintf(r->msg, sizeof(r->msg), "cannot fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return 0;
	}
	if (!child) {
		close(p[0]);
		op_child(sk, peer, req, r);
		_exit(write(p[1], r, sizeof(*r)) == sizeof(*r) ? 0 : 1);
	}
	close(p[1]);
	if (read_result(p[0], r)) {
		r->ret = -ECHILD;
		r->msg[0] = 0;
	}
	close(p[0]);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (r->ret == -ECHILD && !r->msg[0]) {
		if (WIFSIGNALED(status))
			snprintf(r->msg, sizeof(r->msg),
				 "the %s child (pid %d) was killed by signal %d before it answered",
				 type_name(req->type), child, WTERMSIG(status));
		else
			snprintf(r->msg, sizeof(r->msg),
				 "the %s child (pid %d) exited with %d before it answered",
				 type_name(req->type), child, WEXITSTATUS(status));
		pr_err("%s", r->msg);
	}
answer:
	if (!r->ret && req->type == RPC_TYPE__RPC_RESTORE) {
		static RpcRestoreResult rr = RPC_RESTORE_RESULT__INIT;

		rr.pid = r->pid;
		resp->restore = &rr;
	}
	if (!r->ret && req->type == RPC_TYPE__RPC_DUMP) {
		static RpcDumpResult dr = RPC_DUMP_RESULT__INIT;

		/* CRIU's "restored": set only when a dump is resumed by a restore */
		resp->dump = &dr;
	}
	return 0;
}

/* CHECK: amber check's verdict (its report is not part of the answer). */
static int run_check(struct op_result *r)
{
	char *argv[] = {"check", NULL};
	int status;
	pid_t child = fork();

	if (child < 0) {
		r->ret = -errno;
		snprintf(r->msg, sizeof(r->msg), "cannot fork: %s", strerror(errno));
		return 0;
	}
	if (!child) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (null < 0 || dup2(null, 1) < 0)
			_exit(3);
		_exit(cmd_check(1, argv));
	}
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return 0;
	r->ret = -EOPNOTSUPP;
	snprintf(r->msg, sizeof(r->msg),
		 "amber check: this kernel lacks what amber needs (run amber check for the list)");
	return 0;
}

static void features(const RpcRequest *req, RpcResponse *resp)
{
	static RpcFeatures f = RPC_FEATURES__INIT;

	/* answered for what was asked, as CRIU does: amber has none of the three */
	if (req->features) {
		f.has_mem_track = req->features->has_mem_track;
		f.has_lazy_pages = req->features->has_lazy_pages;
		f.has_pidfd_store = req->features->has_pidfd_store;
	}
	resp->features = &f;
}

static void serve(int sk, pid_t peer, const RpcRequest *req, RpcResponse *resp, struct op_result *r)
{
	static RpcVersion v = RPC_VERSION__INIT;

	switch (req->type) {
	case RPC_TYPE__RPC_VERSION:
		v.major_number = CRIU_MAJOR;
		v.minor_number = CRIU_MINOR;
		v.name = "amber " AMBER_VERSION;
		resp->version = &v;
		return;
	case RPC_TYPE__RPC_FEATURE_CHECK:
		features(req, resp);
		return;
	case RPC_TYPE__RPC_CHECK:
		run_check(r);
		return;
	case RPC_TYPE__RPC_DUMP:
	case RPC_TYPE__RPC_RESTORE:
		run_op(sk, peer, req, resp, r);
		return;
	case RPC_TYPE__RPC_PRE_DUMP:
	case RPC_TYPE__RPC_SINGLE_PRE_DUMP:
		r->ret = -EOPNOTSUPP;
		snprintf(r->msg, sizeof(r->msg),
			 "%s is not supported: amber has no incremental dumps (no memory "
			 "tracking); dump in one go",
			 type_name(req->type));
		return;
	case RPC_TYPE__RPC_PAGE_SERVER:
	case RPC_TYPE__RPC_PAGE_SERVER_CHLD:
	case RPC_TYPE__RPC_CPUINFO_DUMP:
	case RPC_TYPE__RPC_CPUINFO_CHECK:
	case RPC_TYPE__RPC_WAIT_PID:
		r->ret = -EOPNOTSUPP;
		snprintf(r->msg, sizeof(r->msg), "%s is not supported by amber",
			 type_name(req->type));
		return;
	case RPC_TYPE__RPC_NOTIFY:
		r->ret = -EPROTO;
		snprintf(r->msg, sizeof(r->msg),
			 "a NOTIFY answer, but no operation is waiting for one");
		return;
	default:
		r->ret = -EINVAL;
		snprintf(r->msg, sizeof(r->msg), "unknown request type %d", req->type);
		return;
	}
}

/* Answers one packet; 0 to go on, 1 when the client is gone, -errno to stop. */
static int serve_one(int sk, pid_t peer)
{
	RpcResponse resp = RPC_RESPONSE__INIT;
	struct op_result r = {0};
	RpcRequest *req;
	int ret;

	ret = rpc_recv(sk, &req, r.msg, sizeof(r.msg));
	if (!ret)
		return 1;
	if (ret < 0 && ret != -EBADMSG)
		return ret;
	resp.type = RPC_TYPE__RPC_EMPTY; /* a packet that is no request has no type */
	if (ret == -EBADMSG) {
		r.ret = ret;
		pr_err("swrk: %s", r.msg);
	} else {
		resp.type = req->type;
		pr_info("swrk: request %s", type_name(req->type));
		serve(sk, peer, req, &resp, &r);
		rpc_request__free_unpacked(req, NULL);
	}
	resp.success = !r.ret;
	if (r.ret) {
		resp.has_cr_errno = true;
		resp.cr_errno = -r.ret;
		resp.cr_errmsg = r.msg;
	}
	ret = rpc_send(sk, &resp);
	if (!ret && last)
		pr_info("swrk: the restore ran in the worker (rst_sibling): done");
	return ret == -EPIPE || (!ret && last) ? 1 : ret;
}

int cmd_swrk(int argc, char **argv)
{
	struct ucred cred;
	socklen_t len = sizeof(int);
	int sk, type, ret;
	char *end;
	long n;

	if (argc != 2) {
		pr_err("usage: amber swrk FD (FD: a SOCK_SEQPACKET socket, CRIU's RPC)");
		return 2;
	}
	n = strtol(argv[1], &end, 10);
	if (!*argv[1] || *end || n < 0 || n > 1 << 20) {
		pr_err("swrk: '%s' is not an fd number", argv[1]);
		return 2;
	}
	sk = (int)n;
	if (getsockopt(sk, SOL_SOCKET, SO_TYPE, &type, &len)) {
		pr_err("swrk: fd %d is not a socket: %m", sk);
		return 1;
	}
	if (type != SOCK_SEQPACKET) {
		pr_err("swrk: fd %d is a socket of type %d, not SOCK_SEQPACKET", sk, type);
		return 1;
	}
	len = sizeof(cred);
	if (getsockopt(sk, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid <= 0) {
		pr_err("swrk: fd %d has no peer process (a socketpair's end is expected)", sk);
		return 1;
	}
	/* what amber runs (action scripts) does not get the client's socket */
	fcntl(sk, F_SETFD, FD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	pr_info("swrk: serving the client pid %d on fd %d", cred.pid, sk);
	do
		ret = serve_one(sk, cred.pid);
	while (!ret);
	close(sk);
	return ret < 0 ? 1 : 0;
}
