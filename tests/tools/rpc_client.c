// SPDX-License-Identifier: MIT
/*
 * rpc_client: plays runc against amber swrk (tests/e2e/tests.d/rpc.sh).  It
 * makes a SOCK_SEQPACKET socketpair, runs AMBER swrk FD on one end, sends
 * the STEPs' requests in order and prints one line per answer:
 *
 *   TYPE ok [details]            TYPE fail errno=N msg=TEXT
 *
 * then closes its end and prints "worker exit N" (or "worker signal N").
 *
 *   rpc_client [-n NOTIFY_LOG] [-F STAGE] AMBER STEP...
 *
 * Steps: version, features, check, pre_dump, badtype, garbage (random
 * bytes), truncated (a request cut short), oversized (a 1 MiB + 1 packet),
 * dump=DIR,PID[,OPT...], restore=DIR[,OPT...], dump_close=DIR,PID[,OPT...]
 * (sends a dump and closes the socket at once, unanswered).  OPTs: notify,
 * leave_running, ext_unix_sk, work=DIR, log=NAME, root=PATH, external=STRING,
 * ext_mnt=KEY:VAL (external and ext_mnt repeat, up to 4 each), cgmode=N,
 * log_level=N.  NOTIFY messages are answered with success (-F
 * STAGE: failure at that stage) and appended to NOTIFY_LOG as "STAGE PID".
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpc.pb-c.h"

static const char *notify_log, *fail_stage;
static int sk = -1;

static int send_req(RpcRequest *req)
{
	size_t n = rpc_request__get_packed_size(req);
	unsigned char *buf = malloc(n);
	ssize_t w;

	rpc_request__pack(req, buf);
	w = send(sk, buf, n, MSG_NOSIGNAL);
	free(buf);
	if (w != (ssize_t)n) {
		printf("send failed: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int send_raw(const void *buf, size_t n)
{
	if (send(sk, buf, n, MSG_NOSIGNAL) != (ssize_t)n) {
		printf("send failed: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* The next answer (runc's buffer: 40960 bytes); NULL and a line on failure. */
static RpcResponse *recv_resp(void)
{
	static unsigned char buf[10 * 4096];
	ssize_t n = recv(sk, buf, sizeof(buf), MSG_TRUNC);
	RpcResponse *resp;

	if (n <= 0) {
		printf("recv: %s\n", n ? strerror(errno) : "end of stream");
		return NULL;
	}
	if (n > (ssize_t)sizeof(buf)) {
		printf("recv: an answer of %zd bytes is larger than runc's buffer\n", n);
		return NULL;
	}
	resp = rpc_response__unpack(NULL, n, buf);
	if (!resp)
		printf("recv: %zd bytes that are no answer\n", n);
	return resp;
}

static void record_notify(const RpcNotify *nt)
{
	FILE *f;

	if (!notify_log)
		return;
	f = fopen(notify_log, "a");
	if (!f)
		return;
	fprintf(f, "%s %d\n", nt && nt->script ? nt->script : "?", nt && nt->has_pid ? nt->pid : 0);
	fclose(f);
}

/* Answers NOTIFYs until the request's own answer, which it prints. */
static int finish(const char *what)
{
	RpcResponse *resp;

	for (;;) {
		RpcRequest ans = RPC_REQUEST__INIT;

		resp = recv_resp();
		if (!resp)
			return -1;
		if (resp->type != RPC_TYPE__RPC_NOTIFY)
			break;
		record_notify(resp->notify);
		ans.type = RPC_TYPE__RPC_NOTIFY;
		ans.has_notify_success = true;
		ans.notify_success = !(fail_stage && resp->notify && resp->notify->script &&
				       !strcmp(fail_stage, resp->notify->script));
		rpc_response__free_unpacked(resp, NULL);
		if (send_req(&ans))
			return -1;
	}
	printf("%s %s", what, resp->success ? "ok" : "fail");
	if (!resp->success)
		printf(" errno=%d msg=%s", resp->cr_errno, resp->cr_errmsg ? resp->cr_errmsg : "");
	if (resp->version)
		printf(" major=%d minor=%d", resp->version->major_number,
		       resp->version->minor_number);
	if (resp->features)
		printf(" mem_track=%d/%d lazy_pages=%d/%d pidfd_store=%d/%d",
		       resp->features->has_mem_track, resp->features->mem_track,
		       resp->features->has_lazy_pages, resp->features->lazy_pages,
		       resp->features->has_pidfd_store, resp->features->pidfd_store);
	if (resp->restore)
		printf(" pid=%d", resp->restore->pid);
	printf(" type=%d\n", resp->type);
	rpc_response__free_unpacked(resp, NULL);
	return 0;
}

static int open_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	if (fd < 0)
		printf("cannot open %s: %s\n", path, strerror(errno));
	return fd;
}

/* "DIR[,PID],OPT..." into opts; 0 or -1. */
static int parse_opts(char *arg, bool with_pid, RpcOpts *o)
{
	static char *external[4];
	static RpcKeyVal kvs[4], *ext_mnt[4];
	char *tok, *save;
	int fd;

	tok = strtok_r(arg, ",", &save);
	if (!tok || (fd = open_dir(tok)) < 0)
		return -1;
	o->images_dir_fd = fd;
	if (with_pid) {
		tok = strtok_r(NULL, ",", &save);
		if (!tok)
			return -1;
		o->has_pid = true;
		o->pid = atoi(tok);
	}
	while ((tok = strtok_r(NULL, ",", &save))) {
		if (!strcmp(tok, "notify")) {
			o->has_notify_scripts = o->notify_scripts = true;
		} else if (!strcmp(tok, "leave_running")) {
			o->has_leave_running = o->leave_running = true;
		} else if (!strcmp(tok, "shell_job")) {
			o->has_shell_job = o->shell_job = true;
		} else if (!strcmp(tok, "ext_unix_sk")) {
			o->has_ext_unix_sk = o->ext_unix_sk = true;
		} else if (!strncmp(tok, "work=", 5)) {
			o->has_work_dir_fd = true;
			o->work_dir_fd = open_dir(tok + 5);
			if (o->work_dir_fd < 0)
				return -1;
		} else if (!strncmp(tok, "log=", 4)) {
			o->log_file = tok + 4;
		} else if (!strncmp(tok, "log_level=", 10)) {
			o->has_log_level = true;
			o->log_level = atoi(tok + 10);
		} else if (!strncmp(tok, "root=", 5)) {
			o->root = tok + 5;
		} else if (!strncmp(tok, "external=", 9) && o->n_external < 4) {
			external[o->n_external++] = tok + 9;
			o->external = external;
		} else if (!strncmp(tok, "ext_mnt=", 8) && strchr(tok + 8, ':') &&
			   o->n_ext_mnt < 4) {
			RpcKeyVal *kv = &kvs[o->n_ext_mnt];

			rpc_key_val__init(kv);
			kv->key = tok + 8;
			kv->val = strchr(tok + 8, ':');
			*kv->val++ = 0;
			ext_mnt[o->n_ext_mnt++] = kv;
			o->ext_mnt = ext_mnt;
		} else if (!strncmp(tok, "cgmode=", 7)) {
			o->has_manage_cgroups_mode = true;
			o->manage_cgroups_mode = atoi(tok + 7);
		} else if (!strncmp(tok, "empty_ns=", 9)) {
			o->has_empty_ns = true;
			o->empty_ns = (uint32_t)strtoul(tok + 9, NULL, 0);
		} else if (!strncmp(tok, "cg_root=", 8) && strchr(tok + 8, ':') && !o->n_cg_root) {
			/* cg_root=CONTROLLER:PATH (CONTROLLER may be empty), one */
			static RpcCgRoot cr, *crs[1] = {&cr};

			rpc_cg_root__init(&cr);
			cr.controller = tok + 8;
			cr.path = strchr(tok + 8, ':');
			*cr.path++ = 0;
			o->cg_root = crs;
			o->n_cg_root = 1;
		} else if (!strncmp(tok, "inherit_fd=", 11) && strrchr(tok + 11, ':') &&
			   !o->n_inherit_fd) {
			/* inherit_fd=KEY:FD, one (FD: the worker's) */
			static RpcInheritFd h, *hs[1] = {&h};

			rpc_inherit_fd__init(&h);
			h.key = tok + 11;
			*strrchr(tok + 11, ':') = 0;
			h.fd = atoi(h.key + strlen(h.key) + 1);
			o->inherit_fd = hs;
			o->n_inherit_fd = 1;
		} else {
			printf("unknown option %s\n", tok);
			return -1;
		}
	}
	return 0;
}

static int step(char *s)
{
	RpcRequest req = RPC_REQUEST__INIT;
	RpcOpts o = RPC_OPTS__INIT;
	RpcFeatures f = RPC_FEATURES__INIT;
	char *arg = strchr(s, '=');
	unsigned char buf[256];

	if (arg)
		*arg++ = 0;
	if (!strcmp(s, "version")) {
		req.type = RPC_TYPE__RPC_VERSION;
	} else if (!strcmp(s, "features")) {
		req.type = RPC_TYPE__RPC_FEATURE_CHECK;
		f.has_mem_track = f.mem_track = true;
		f.has_lazy_pages = f.lazy_pages = true;
		f.has_pidfd_store = f.pidfd_store = true;
		req.features = &f;
	} else if (!strcmp(s, "check")) {
		req.type = RPC_TYPE__RPC_CHECK;
	} else if (!strcmp(s, "badtype")) {
		req.type = 99;
	} else if (!strcmp(s, "pre_dump") && arg) {
		req.type = RPC_TYPE__RPC_PRE_DUMP;
		if (parse_opts(arg, true, &o))
			return -1;
		req.opts = &o;
	} else if ((!strcmp(s, "dump") || !strcmp(s, "dump_close")) && arg) {
		req.type = RPC_TYPE__RPC_DUMP;
		if (parse_opts(arg, true, &o))
			return -1;
		req.opts = &o;
	} else if (!strcmp(s, "restore") && arg) {
		req.type = RPC_TYPE__RPC_RESTORE;
		if (parse_opts(arg, false, &o))
			return -1;
		req.opts = &o;
	} else if (!strcmp(s, "garbage")) {
		/* fixed "random" bytes: field 15, wire type 7 (no such type) */
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = (unsigned char)(0x7f ^ (i * 37));
		return send_raw(buf, sizeof(buf)) ? -1 : finish("garbage");
	} else if (!strcmp(s, "truncated")) {
		size_t n;

		o.images_dir_fd = 0;
		o.log_file = "a-name-long-enough-to-cut";
		req.type = RPC_TYPE__RPC_DUMP;
		req.opts = &o;
		n = rpc_request__get_packed_size(&req);
		rpc_request__pack(&req, buf);
		return send_raw(buf, n - 5) ? -1 : finish("truncated");
	} else if (!strcmp(s, "oversized")) {
		size_t n = (1 << 20) + 1;
		int size = 4 << 20;
		char *big = calloc(1, n);
		int ret;

		/* root may grow its buffer past wmem_max: a packet must fit in it whole */
		if (setsockopt(sk, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)))
			printf("SO_SNDBUFFORCE: %s\n", strerror(errno));
		ret = send_raw(big, n);
		free(big);
		return ret ? -1 : finish("oversized");
	} else {
		printf("unknown step %s\n", s);
		return -1;
	}
	if (send_req(&req))
		return -1;
	if (!strcmp(s, "dump_close")) {
		printf("dump_close sent\n");
		return 1; /* close now */
	}
	return finish(s);
}

int main(int argc, char **argv)
{
	struct timeval tv = {.tv_sec = 180};
	int sv[2], c, status, ret = 0;
	char fdstr[16];
	pid_t worker;

	while ((c = getopt(argc, argv, "n:F:")) != -1) {
		if (c == 'n')
			notify_log = optarg;
		else if (c == 'F')
			fail_stage = optarg;
		else
			return 2;
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: rpc_client [-n LOG] [-F STAGE] AMBER STEP...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	snprintf(fdstr, sizeof(fdstr), "%d", sv[1]);
	worker = fork();
	if (worker < 0) {
		perror("fork");
		return 1;
	}
	if (!worker) {
		fcntl(sv[1], F_SETFD, 0);
		execl(argv[optind], argv[optind], "swrk", fdstr, (char *)NULL);
		perror("exec");
		_exit(127);
	}
	close(sv[1]);
	sk = sv[0];
	setsockopt(sk, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (int i = optind + 1; i < argc && !ret; i++)
		ret = step(argv[i]);
	close(sk);
	while (waitpid(worker, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status))
		printf("worker exit %d\n", WEXITSTATUS(status));
	else
		printf("worker signal %d\n", WTERMSIG(status));
	return ret < 0 ? 1 : 0;
}
