// SPDX-License-Identifier: MIT
/*
 * Resource limits.  Read from /proc/PID/limits (prlimit() on another
 * process needs CAP_SYS_RESOURCE), set last in the restore child: a lowered
 * RLIMIT_NOFILE must not stop amber from placing the fds first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "amber.h"
#include "log.h"
#include "sys.h"

#define NR_RLIMITS 16

static const char *const rlimit_names[NR_RLIMITS] = {
	"Max cpu time",	      "Max file size",	   "Max data size",	    "Max stack size",
	"Max core file size", "Max resident set",  "Max processes",	    "Max open files",
	"Max locked memory",  "Max address space", "Max file locks",	    "Max pending signals",
	"Max msgqueue size",  "Max nice priority", "Max realtime priority", "Max realtime timeout",
};

static uint64_t parse_limit(const char *s)
{
	return !strncmp(s, "unlimited", 9) ? RLIM_INFINITY : strtoull(s, NULL, 10);
}

/* prlimit() on another process needs CAP_SYS_RESOURCE; /proc/PID/limits does not. */
static int dump_rlimits(struct dump_ctx *ctx)
{
	char path[64], *buf, *line, *save;
	TaskCore *c = ctx->core;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/limits", ctx->pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	c->rlimits = calloc(NR_RLIMITS, sizeof(*c->rlimits));
	if (!c->rlimits) {
		free(buf);
		return -ENOMEM;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		for (int i = 0; i < NR_RLIMITS; i++) {
			size_t n = strlen(rlimit_names[i]);
			char soft[32], hard[32];
			RlimitEntry *e;

			if (strncmp(line, rlimit_names[i], n) || line[n] != ' ')
				continue;
			if (sscanf(line + 26, "%31s %31s", soft, hard) != 2)
				break;
			e = malloc(sizeof(*e));
			if (!e) {
				free(buf);
				return -ENOMEM;
			}
			rlimit_entry__init(e);
			e->resource = i;
			e->cur = parse_limit(soft);
			e->max = parse_limit(hard);
			c->rlimits[c->n_rlimits++] = e;
			break;
		}
	}
	free(buf);
	return 0;
}

static int rlimits_restore_read(struct restore_ctx *ctx)
{
	for (size_t i = 0; i < ctx->core->n_rlimits; i++)
		if (ctx->core->rlimits[i]->resource >= NR_RLIMITS) {
			pr_err("core-%d.img: bad rlimit entry; the image is corrupt", ctx->pid);
			return -EBADMSG;
		}
	return 0;
}

static int rlimits_restore_child(struct restore_ctx *ctx)
{
	TaskCore *c = ctx->core;
	int ret;

	for (size_t i = 0; i < c->n_rlimits; i++) {
		RlimitEntry *e = c->rlimits[i];
		struct rlimit rl = {e->cur, e->max};

		if (setrlimit(e->resource, &rl)) {
			ret = -errno;
			pr_err("pid %d: cannot set limit '%s' to %llu/%llu: %m%s", ctx->pid,
			       rlimit_names[e->resource], (unsigned long long)e->cur,
			       (unsigned long long)e->max,
			       ret == -EPERM ? " (raising a hard limit needs CAP_SYS_RESOURCE; "
					       "raise amber's own limit first, e.g. ulimit -H)"
					     : "");
			return ret;
		}
	}
	return 0;
}

const struct resource_ops rlimits_ops = {
	.name = "rlimits",
	.dump = dump_rlimits,
	.restore_read = rlimits_restore_read,
	.restore_child = rlimits_restore_child,
};
