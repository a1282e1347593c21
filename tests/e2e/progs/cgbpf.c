// SPDX-License-Identifier: MIT
/*
 * cgbpf CGROUP: attach a BPF device program that allows every device to the
 * v2 cgroup directory CGROUP and exit (the attachment keeps it); what a
 * container runtime does with a real filter.  Exit 77 where BPF device
 * programs cannot be loaded.
 */
#include <linux/bpf.h>
#include <sys/syscall.h>

#include "prog.h"

int main(int argc, char **argv)
{
	struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1},
		{.code = BPF_JMP | BPF_EXIT},
	};
	union bpf_attr a;
	int prog, cg;

	if (argc != 2) {
		fprintf(stderr, "usage: cgbpf CGROUP\n");
		return 2;
	}
	cg = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		prog_die("open %s", argv[1]);
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	a.insns = (uintptr_t)insns;
	a.insn_cnt = 2;
	a.license = (uintptr_t) "GPL";
	prog = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	if (prog < 0) {
		fprintf(stderr, "cgbpf: cannot load a device program: %s\n", strerror(errno));
		return 77;
	}
	memset(&a, 0, sizeof(a));
	a.target_fd = (__u32)cg;
	a.attach_bpf_fd = (__u32)prog;
	a.attach_type = BPF_CGROUP_DEVICE;
	if (syscall(SYS_bpf, BPF_PROG_ATTACH, &a, sizeof(a)))
		prog_die("attach to %s", argv[1]);
	return 0;
}
