// SPDX-License-Identifier: MIT
/*
 * fuzz_rpc: one packet of `amber swrk`'s socket, as a container runtime's
 * would come (src/rpc/): rpc_recv sizes, reads and decodes it; a DUMP or
 * RESTORE request's options are mapped onto amber's (rpc_opts_map: refusals,
 * cgroup and network-lock modes, pids); the answer is packed and sent as the
 * worker sends it, and must fit the client's buffer.
 *
 * Input: the packet, whole.
 */
#include <sys/socket.h>

#include "amber.h"
#include "fuzz.h"
#include "rpc/rpc.h"

static int sv[2] = {-1, -1};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int big = 4 << 20;

	fuzz_setup();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) ||
	    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) ||
	    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big))) {
		perror("fuzz_rpc: socketpair");
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	RpcResponse resp = RPC_RESPONSE__INIT;
	RpcRequest *req = NULL;
	struct opts o = {0};
	char why[256], back[RPC_RESP_MAX + 1];
	ssize_t n;
	int ret;

	if (send(sv[0], data, size, MSG_DONTWAIT) != (ssize_t)size)
		return 0; /* larger than the socket takes */
	ret = rpc_recv(sv[1], &req, why, sizeof(why));
	if (ret == 0 || (ret < 0 && ret != -EBADMSG)) {
		fprintf(stderr, "fuzz_rpc: rpc_recv returned %d on a packet of %zu bytes\n", ret,
			size);
		abort();
	}
	resp.type = RPC_TYPE__RPC_EMPTY;
	if (ret == 1) {
		resp.type = req->type;
		if (req->opts &&
		    (req->type == RPC_TYPE__RPC_DUMP || req->type == RPC_TYPE__RPC_RESTORE))
			ret = rpc_opts_map(req->opts, req->type, getpid(), &o);
	}
	resp.success = ret == 1 || !ret;
	if (!resp.success) {
		resp.has_cr_errno = true;
		resp.cr_errno = -ret;
		resp.cr_errmsg = why;
	}
	if (rpc_send(sv[1], &resp)) {
		fprintf(stderr, "fuzz_rpc: the answer was not sent\n");
		abort();
	}
	n = recv(sv[0], back, sizeof(back), MSG_DONTWAIT | MSG_TRUNC);
	if (n <= 0 || n > RPC_RESP_MAX) {
		fprintf(stderr, "fuzz_rpc: an answer of %zd bytes (the client reads %d)\n", n,
			RPC_RESP_MAX);
		abort();
	}
	if (req)
		rpc_request__free_unpacked(req, NULL);
	return 0;
}
