// SPDX-License-Identifier: MIT
/*
 * membarrier(2) registrations of a process's mm: the expedited commands a
 * program registered for (MEMBARRIER_CMD_REGISTER_*) work only while its mm
 * keeps them, and an unregistered PRIVATE_EXPEDITED barrier fails with EPERM,
 * which liburcu and the JVMs treat as fatal or fall back on a slower path.
 * Dumped by asking the process (MEMBARRIER_CMD_GET_REGISTRATIONS, Linux 6.3),
 * restored by the child registering the same commands for its own mm, which
 * amber's restore keeps (no execve).  Registering needs no privilege.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amber.h"
#include "infect.h"
#include "log.h"
#include "sys.h"

/* The registration commands, as GET_REGISTRATIONS reports them. */
static const struct {
	unsigned cmd;
	const char *name;
} regs[] = {
	{MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, "GLOBAL_EXPEDITED"},
	{MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, "PRIVATE_EXPEDITED"},
	{MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, "PRIVATE_EXPEDITED_SYNC_CORE"},
	{MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, "PRIVATE_EXPEDITED_RSEQ"},
};

static unsigned known_bits(void)
{
	unsigned m = 0;

	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		m |= regs[i].cmd;
	return m;
}

static int membarrier_dump(struct dump_ctx *ctx)
{
	long r;
	int ret;

	if (ctx->shares_vm)
		return 0; /* the mm's registrations are its parent's to dump */
	ret = proc_probe(ctx);
	if (ret)
		return ret;
	r = ctx->probe.ret[PP_MEMBARRIER];
	if (r == -ENOSYS || r == -EINVAL) {
		/* No membarrier, or a kernel before 6.3: nothing can be read.  The
		 * private commands still tell whether they were registered. */
		long p = 0, s = 0;

		ret = infect_ask(&ctx->inf, &p, SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0,
				 0);
		if (!ret)
			ret = infect_ask(&ctx->inf, &s, SYS_membarrier,
					 MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
		if (ret)
			return ret;
		r = (p == 0 ? MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED : 0) |
		    (s == 0 ? MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE : 0);
		pr_debug("pid %d: no MEMBARRIER_CMD_GET_REGISTRATIONS: GLOBAL_EXPEDITED and RSEQ "
			 "registrations are not seen",
			 ctx->pid);
	} else if (r < 0) {
		pr_err("pid %d: membarrier(GET_REGISTRATIONS): %s", ctx->pid, strerror((int)-r));
		return (int)r;
	}
	/* Registering SYNC_CORE or RSEQ sets the private-expedited state too, not
	 * its readiness: GET_REGISTRATIONS then reports PRIVATE_EXPEDITED, whose
	 * barrier still fails with EPERM.  The barrier itself tells. */
	if ((r & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) &&
	    (r & (MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE |
		  MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ))) {
		long p;

		ret = infect_ask(&ctx->inf, &p, SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0,
				 0);
		if (ret)
			return ret;
		if (p == -EPERM)
			r &= ~(long)MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
	}
	if ((unsigned long)r & ~(unsigned long)known_bits()) {
		pr_err("pid %d: membarrier registrations %#lx include ones amber does not know; "
		       "they cannot be restored",
		       ctx->pid, r);
		return -EOPNOTSUPP;
	}
	if (r) {
		ctx->core->has_membarrier = 1;
		ctx->core->membarrier = (uint32_t)r;
	}
	return 0;
}

static int membarrier_restore_read(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;

	if (c->has_membarrier && (c->membarrier & ~known_bits())) {
		pr_err("core-%d.img: membarrier registrations %#x include unknown commands; the "
		       "image is corrupt",
		       ctx->pid, c->membarrier);
		return -EBADMSG;
	}
	return 0;
}

static int membarrier_restore_child(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;

	for (size_t i = 0; c->has_membarrier && i < sizeof(regs) / sizeof(regs[0]); i++) {
		int ret;

		if (!(c->membarrier & regs[i].cmd))
			continue;
		ret = sys_membarrier((int)regs[i].cmd, 0);
		if (ret) {
			pr_err("pid %d: cannot register for membarrier %s: %s", ctx->pid,
			       regs[i].name, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

const struct resource_ops membarrier_ops = {
	.name = "membarrier",
	.dump = membarrier_dump,
	.restore_read = membarrier_restore_read,
	.restore_child = membarrier_restore_child,
};
