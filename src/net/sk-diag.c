// SPDX-License-Identifier: MIT
/*
 * sock_diag (sk.h): what only the kernel's socket diagnostics tell about a
 * packet or netlink socket (its memberships, rings, fanout, queued bytes).
 * The request dumps every socket of the family in amber's network namespace;
 * the one with the inode asked for is kept.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sk.h"

int sk_diag_find(const void *req, size_t len, size_t ino_off, uint64_t ino, void **msg)
{
	struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
	struct nlmsghdr h = {
		.nlmsg_len = (uint32_t)(NLMSG_HDRLEN + len),
		.nlmsg_type = SOCK_DIAG_BY_FAMILY,
		.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
	};
	struct iovec iov[2] = {{&h, NLMSG_HDRLEN}, {(void *)req, len}};
	struct msghdr mh = {
		.msg_name = &nl, .msg_namelen = sizeof(nl), .msg_iov = iov, .msg_iovlen = 2};
	size_t size = 32768;
	char *buf = malloc(size);
	int s, ret = -ENOENT;
	bool done = false;

	*msg = NULL;
	if (!buf)
		return -ENOMEM;
	s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0) {
		ret = -errno;
		goto free_buf;
	}
	if (sendmsg(s, &mh, 0) < 0) {
		ret = -errno;
		goto close_sock;
	}
	while (!done) {
		ssize_t n = recv(s, buf, size, 0);
		struct nlmsghdr *m;

		if (n < 0) {
			ret = -errno;
			break;
		}
		for (m = (struct nlmsghdr *)buf; NLMSG_OK(m, (size_t)n); m = NLMSG_NEXT(m, n)) {
			uint32_t i;

			if (m->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(m);

				ret = e->error ? e->error : ret;
				done = true;
				break;
			}
			if (m->nlmsg_type == NLMSG_DONE) {
				done = true;
				break;
			}
			if (*msg || m->nlmsg_len < NLMSG_LENGTH(ino_off + sizeof(i)))
				continue;
			memcpy(&i, (char *)NLMSG_DATA(m) + ino_off, sizeof(i));
			if (i != ino)
				continue;
			*msg = malloc(m->nlmsg_len);
			if (!*msg) {
				ret = -ENOMEM;
				done = true;
				break;
			}
			memcpy(*msg, m, m->nlmsg_len);
			ret = 0;
		}
	}
	if (ret && *msg) {
		free(*msg);
		*msg = NULL;
	}
close_sock:
	close(s);
free_buf:
	free(buf);
	return ret;
}
