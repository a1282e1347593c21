/* SPDX-License-Identifier: MIT */
/*
 * amber swrk FD: CRIU's RPC worker (images/rpc.proto), as container runtimes
 * run it: requests and answers are protobuf messages, one per packet of the
 * SOCK_SEQPACKET socket FD.  swrk.c: the loop and the requests; opts.c: a
 * request's options as amber's struct opts; notify.c: the packets, and the
 * NOTIFY round trips of an operation's stages.
 */
#ifndef AMBER_RPC_H
#define AMBER_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "rpc.pb-c.h"

struct opts;

/* runc reads an answer into 40960 bytes: none may be larger. */
#define RPC_RESP_MAX (10 * 4096)
/* A request larger than this is refused unread (the options are a few KiB). */
#define RPC_REQ_MAX (1 << 20)

/*
 * The next request on sk: 1 and *req (free with rpc_request__free_unpacked),
 * 0 when the client closed the socket, -EBADMSG for a packet that is not a
 * request (consumed, the reason in why), or another -errno (logged).
 */
int rpc_recv(int sk, RpcRequest **req, char *why, size_t len);
/* One answer; 0, -EPIPE when the client is gone, or another -errno (logged). */
int rpc_send(int sk, RpcResponse *resp);

/* The stage's NOTIFY to the client and its answer: 0 if it said go on, else -errno. */
int rpc_notify(int sk, const char *stage, pid_t pid);
/* The same, with fd passed to the client (SCM_RIGHTS): CRIU's orphan-pts-master. */
int rpc_notify_fd(int sk, const char *stage, pid_t pid, int fd);

/*
 * The options of a DUMP or RESTORE request into o: the log first (work_dir_fd,
 * log_file, log_level: the refusals are logged there), then the rest.  Fds are
 * the client's (peer), opened through /proc.  0, or -errno with the option
 * that amber cannot honour named in the log.
 */
int rpc_opts_log(const RpcOpts *ro, pid_t peer, struct opts *o);
int rpc_opts_map(const RpcOpts *ro, int type, pid_t peer, struct opts *o);

#endif
