// SPDX-License-Identifier: MIT
/* What the anonymous-inode kinds (anonfd.h) share. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anonfd.h"

int anonfd_dump_start(struct dump_ctx *ctx, int fd, int dup, const char *what,
		      const ProtobufCMessageDescriptor *desc, char **buf, void **msg)
{
	char path[64];
	int ret;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", dup);
	ret = sys_read_file(path, buf, NULL);
	if (ret) {
		pr_err("pid %d: cannot read the fdinfo of fd %d (%s): %s", ctx->pid, fd, what,
		       strerror(-ret));
		return ret;
	}
	*msg = malloc(desc->sizeof_message);
	if (!*msg) {
		free(*buf);
		return -ENOMEM;
	}
	protobuf_c_message_init(desc, *msg);
	return 0;
}
