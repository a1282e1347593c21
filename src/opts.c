// SPDX-License-Identifier: MIT
/* Command line options of dump and restore: one table, CRIU's names. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "amber.h"
#include "log.h"

enum { FOR_DUMP = 1, FOR_RESTORE = 2, FOR_BOTH = 3 };

static const struct {
	struct option opt;
	int cmds;
} table[] = {
	{{"tree", required_argument, NULL, 't'}, FOR_DUMP},
	{{"leave-running", no_argument, NULL, 'R'}, FOR_DUMP},
	{{"restore-detached", no_argument, NULL, 'd'}, FOR_RESTORE},
	{{"pidfile", required_argument, NULL, 'p'}, FOR_RESTORE},
	{{"images-dir", required_argument, NULL, 'D'}, FOR_BOTH},
	{{"shell-job", no_argument, NULL, 'j'}, FOR_BOTH},
	{{"tcp-established", no_argument, NULL, 'E'}, FOR_BOTH},
	{{"network-lock", required_argument, NULL, 'N'}, FOR_BOTH},
	{{"verbose", no_argument, NULL, 'v'}, FOR_BOTH},
	{{"display-stats", no_argument, NULL, 'S'}, FOR_BOTH},
};

#define NR_OPTS (sizeof(table) / sizeof(table[0]))

int opts_parse(int argc, char **argv, struct opts *o, bool restore)
{
	int cmd = restore ? FOR_RESTORE : FOR_DUMP, n = 0, c;
	struct option lopts[NR_OPTS + 1];
	char shorts[2 * NR_OPTS + 1];
	size_t s = 0;

	for (size_t i = 0; i < NR_OPTS; i++) {
		if (!(table[i].cmds & cmd))
			continue;
		lopts[n++] = table[i].opt;
		if (table[i].opt.val == 'p' || table[i].opt.val == 'E' || table[i].opt.val == 'N' ||
		    table[i].opt.val == 'S')
			continue; /* long only, as in CRIU */
		shorts[s++] = (char)table[i].opt.val;
		if (table[i].opt.has_arg)
			shorts[s++] = ':';
	}
	memset(&lopts[n], 0, sizeof(lopts[n]));
	shorts[s] = 0;
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		switch (c) {
		case 't':
			o->pid = atoi(optarg);
			break;
		case 'R':
			o->leave_running = true;
			break;
		case 'd':
			o->detached = true;
			break;
		case 'p':
			o->pidfile = optarg;
			break;
		case 'D':
			o->dir = optarg;
			break;
		case 'j':
			o->shell_job = true;
			break;
		case 'E':
			o->tcp_established = true;
			break;
		case 'N':
			if (strcmp(optarg, "nft") && strcmp(optarg, "skip")) {
				pr_err("--network-lock takes nft (the default) or skip, not '%s'",
				       optarg);
				return -EINVAL;
			}
			o->network_lock_skip = !strcmp(optarg, "skip");
			break;
		case 'v':
			log_level++;
			break;
		case 'S':
			o->display_stats = true;
			break;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		pr_err("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	if (!restore && (o->pid <= 0 || !o->dir)) {
		pr_err("dump needs -t PID and -D DIR (e.g. amber dump -t 1234 -D /tmp/img)");
		return -EINVAL;
	}
	if (restore && !o->dir) {
		pr_err("restore needs -D DIR (the image directory written by amber dump)");
		return -EINVAL;
	}
	return 0;
}
