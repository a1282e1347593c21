// SPDX-License-Identifier: MIT
/*
 * The packets of amber swrk, and the NOTIFY round trip of a stage.  A packet
 * is one message; its size is asked first (MSG_PEEK | MSG_TRUNC) so that a
 * request of any size is read whole or refused whole, never cut.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "rpc/rpc.h"

int rpc_recv(int sk, RpcRequest **req, char *why, size_t len)
{
	unsigned char *buf;
	ssize_t n, got;
	char c;

	*req = NULL;
	do
		n = recv(sk, NULL, 0, MSG_PEEK | MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == ECONNRESET)
			return 0;
		pr_err("swrk: cannot read the next request: %m");
		return -errno;
	}
	/* no bytes: the end when the client hung up, else an empty packet (consumed) */
	if (!n) {
		struct pollfd p = {.fd = sk, .events = POLLIN | POLLRDHUP};

		if (poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) ||
		    recv(sk, &c, 1, MSG_TRUNC | MSG_DONTWAIT) < 0)
			return 0;
		snprintf(why, len, "an empty packet is no request");
		return -EBADMSG;
	}
	if (n > RPC_REQ_MAX) {
		/* reading one byte consumes the whole packet */
		if (recv(sk, &c, 1, MSG_TRUNC) < 0) {
			pr_err("swrk: cannot drop an oversized request: %m");
			return -errno;
		}
		snprintf(why, len, "request of %zd bytes refused: larger than amber's limit of %d",
			 n, RPC_REQ_MAX);
		return -EBADMSG;
	}
	buf = malloc(n);
	if (!buf) {
		pr_err("swrk: no memory for a request of %zd bytes", n);
		return -ENOMEM;
	}
	do
		got = recv(sk, buf, n, MSG_TRUNC);
	while (got < 0 && errno == EINTR);
	if (got != n) {
		int err = got < 0 ? errno : EIO;

		free(buf);
		if (got == 0 || err == ECONNRESET)
			return 0;
		pr_err("swrk: reading a request of %zd bytes: %s", n,
		       got < 0 ? strerror(err) : "its size changed");
		return -err;
	}
	*req = rpc_request__unpack(NULL, n, buf);
	free(buf);
	if (!*req) {
		snprintf(why, len,
			 "malformed request: %zd bytes that are not a whole request message", n);
		return -EBADMSG;
	}
	return 1;
}

/* An answer, with fd attached (SCM_RIGHTS) when it is not -1. */
static int send_fd(int sk, RpcResponse *resp, int fd)
{
	size_t n = rpc_response__get_packed_size(resp);
	unsigned char *buf;
	ssize_t sent;

	/* the client's buffer: the message is what gives, cut to fit */
	if (n > RPC_RESP_MAX && resp->cr_errmsg) {
		size_t over = n - RPC_RESP_MAX + 16, l = strlen(resp->cr_errmsg);

		resp->cr_errmsg[l > over ? l - over : 0] = 0;
		n = rpc_response__get_packed_size(resp);
	}
	if (n > RPC_RESP_MAX) {
		pr_err("swrk: an answer of %zu bytes is larger than the client's %d", n,
		       RPC_RESP_MAX);
		return -EMSGSIZE;
	}
	buf = malloc(n ? n : 1);
	if (!buf) {
		pr_err("swrk: no memory for an answer of %zu bytes", n);
		return -ENOMEM;
	}
	rpc_response__pack(resp, buf);
	do {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = {.iov_base = buf, .iov_len = n};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

		if (fd >= 0) {
			struct cmsghdr *c;

			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.buf;
			mh.msg_controllen = sizeof(ctl.buf);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof(int));
		}
		sent = sendmsg(sk, &mh, MSG_NOSIGNAL);
	} while (sent < 0 && errno == EINTR);
	free(buf);
	if (sent < 0 && (errno == EPIPE || errno == ECONNRESET))
		return -EPIPE; /* the client went away: not an error of amber's */
	if (sent < 0) {
		pr_err("swrk: cannot send an answer of %zu bytes: %m", n);
		return -errno;
	}
	return 0;
}

int rpc_send(int sk, RpcResponse *resp)
{
	return send_fd(sk, resp, -1);
}

int rpc_notify_fd(int sk, const char *stage, pid_t pid, int fd)
{
	RpcResponse resp = RPC_RESPONSE__INIT;
	RpcNotify nt = RPC_NOTIFY__INIT;
	RpcRequest *ans;
	char why[256];
	int ret;

	resp.type = RPC_TYPE__RPC_NOTIFY;
	resp.success = true;
	resp.notify = &nt;
	nt.script = (char *)stage;
	/* CRIU names the root only once it exists and before it runs */
	if (pid > 0 && !strcmp(stage, "post-restore")) {
		nt.has_pid = true;
		nt.pid = pid;
	}
	ret = send_fd(sk, &resp, fd);
	if (ret == -EPIPE) {
		pr_err("the client closed the socket before stage %s", stage);
		return -ECONNRESET;
	}
	if (ret)
		return ret;
	ret = rpc_recv(sk, &ans, why, sizeof(why));
	if (ret == 0) {
		pr_err("the client closed the socket instead of answering stage %s", stage);
		return -ECONNRESET;
	}
	if (ret == -EBADMSG) {
		pr_err("the client's answer to stage %s: %s", stage, why);
		return ret;
	}
	if (ret < 0)
		return ret;
	if (ans->type != RPC_TYPE__RPC_NOTIFY) {
		pr_err("the client answered stage %s with a request of type %d, not NOTIFY", stage,
		       ans->type);
		ret = -EPROTO;
	} else if (!ans->has_notify_success || !ans->notify_success) {
		pr_err("the client refused stage %s (its NOTIFY answer is not a success)", stage);
		ret = -ECANCELED;
	} else {
		pr_info("stage %s: the client said go on", stage);
		ret = 0;
	}
	rpc_request__free_unpacked(ans, NULL);
	return ret;
}

int rpc_notify(int sk, const char *stage, pid_t pid)
{
	return rpc_notify_fd(sk, stage, pid, -1);
}
