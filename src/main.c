// SPDX-License-Identifier: MIT
/* amber: command line entry point.  Flag names follow CRIU's. */
#include <stdio.h>
#include <string.h>

#include "amber.h"
#include "log.h"
#include "sys.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: amber COMMAND [OPTIONS]\n"
		"\n"
		"  dump -t PID -D DIR [-R|--leave-running] [-j|--shell-job] [-v]\n"
		"      checkpoint process PID into image directory DIR, then kill it\n"
		"      (or leave it running with -R)\n"
		"  restore -D DIR [-d|--restore-detached] [-j|--shell-job] [--pidfile FILE] [-v]\n"
		"      recreate the process from DIR with its original PID; without -d, wait\n"
		"      for it and exit with its status\n"
		"  check\n"
		"      list the kernel features amber uses and whether dump/restore can work here\n"
		"  show DIR\n"
		"      print the image in DIR as JSON\n");
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	sys_fault_init();
	if (!cmd || !strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		usage(cmd ? stdout : stderr);
		return cmd ? 0 : 2;
	}
	if (!strcmp(cmd, "dump"))
		return cmd_dump(argc - 1, argv + 1);
	if (!strcmp(cmd, "restore"))
		return cmd_restore(argc - 1, argv + 1);
	if (!strcmp(cmd, "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "show"))
		return cmd_show(argc - 1, argv + 1);
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("amber %s\n", AMBER_VERSION);
		return 0;
	}
	pr_err("unknown command '%s'; run 'amber --help' for the list", cmd);
	return 2;
}
