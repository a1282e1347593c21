// SPDX-License-Identifier: MIT
/* amber: command line entry point.  Flag names follow CRIU's. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "amber.h"
#include "log.h"
#include "sys.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: amber COMMAND [OPTIONS]   (amber help COMMAND: its options)\n\n"
		   "commands:\n"
		   "  dump      checkpoint a process tree into an image directory\n"
		   "  restore   recreate the processes of an image\n"
		   "  check     probe the kernel features amber uses\n"
		   "  show      print an image (JSON, or the ps, fds and mems views)\n"
		   "  swrk FD   serve CRIU's RPC on the SOCK_SEQPACKET socket FD (runc, crun)\n"
		   "  help      the options of a command\n"
		   "  version   amber's version (also -V, --version)\n");
	for (int c = 0; c < CMD__COUNT; c++) {
		fputc('\n', f);
		opts_usage(f, c);
	}
}

static int help(int argc, char **argv)
{
	int cmd = argc > 1 ? opts_cmd(argv[1]) : -1;

	if (argc > 1 && !strcmp(argv[1], "--options")) { /* every option: the man page's test */
		opts_list(stdout);
		return 0;
	}
	if (argc < 2) {
		usage(stdout);
		return 0;
	}
	if (cmd < 0) {
		pr_err("help: no command '%s' (dump, restore, check, show)", argv[1]);
		return 2;
	}
	opts_usage(stdout, cmd);
	return 0;
}

/* Run as criu (make install-criu-alias): what callers of CRIU run and parse. */
static bool as_criu(const char *argv0)
{
	const char *base = strrchr(argv0, '/');

	return !strcmp(base ? base + 1 : argv0, "criu");
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	sys_fault_init();
	log_catch_crashes();
	/* callers parse CRIU's "Version: X.Y" line (runc, when the RPC's VERSION fails) */
	if (cmd && as_criu(argv[0]) && (!strcmp(cmd, "--version") || !strcmp(cmd, "-V"))) {
		printf("Version: %s\namber: %s\n", CRIU_VERSION, AMBER_VERSION);
		return 0;
	}
	sys_proc_init(); /* without it, "/proc/..." is whatever the mount namespace has */
	if (!cmd || !strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		usage(cmd ? stdout : stderr);
		return cmd ? 0 : 2;
	}
	if (!strcmp(cmd, "help"))
		return help(argc - 1, argv + 1);
	if (!strcmp(cmd, "dump"))
		return cmd_dump(argc - 1, argv + 1);
	if (!strcmp(cmd, "restore"))
		return cmd_restore(argc - 1, argv + 1);
	if (!strcmp(cmd, "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "show"))
		return cmd_show(argc - 1, argv + 1);
	if (!strcmp(cmd, "swrk"))
		return cmd_swrk(argc - 1, argv + 1);
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V") || !strcmp(cmd, "version")) {
		printf("amber %s\n", AMBER_VERSION);
		return 0;
	}
	pr_err("unknown command '%s'; run 'amber --help' for the list", cmd);
	return 2;
}
