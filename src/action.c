// SPDX-License-Identifier: MIT
/*
 * Action scripts, CRIU's way: each --action-script runs at each stage, in
 * the order given, with the stage in CRTOOLS_SCRIPT_ACTION (pre-dump,
 * network-lock, post-dump, network-unlock, pre-restore, setup-namespaces
 * (a tree with namespaces of its own, once they and its processes exist),
 * post-restore, pre-resume, post-resume), the image directory in
 * CRTOOLS_IMAGE_DIR and the root process's pid in CRTOOLS_INIT_PID.  A script that fails stops
 * the dump or restore at that stage (post-resume: the processes run on).
 * Under amber swrk with notify_scripts, each stage is first a NOTIFY message
 * to the client (rpc/notify.c), whose refusal counts as a failing script.
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "action.h"
#include "amber.h"
#include "log.h"
#include "rpc/rpc.h"

extern char **environ;

static int run_one(const struct opts *o, const char *script, const char *action, pid_t pid)
{
	char *argv[] = {(char *)script, NULL};
	char pidstr[16];
	pid_t child;
	int status, ret;

	snprintf(pidstr, sizeof(pidstr), "%d", pid);
	setenv("CRTOOLS_SCRIPT_ACTION", action, 1);
	setenv("CRTOOLS_IMAGE_DIR", o->dir ? o->dir : "", 1);
	if (pid > 0)
		setenv("CRTOOLS_INIT_PID", pidstr, 1);
	else
		unsetenv("CRTOOLS_INIT_PID");
	ret = posix_spawn(&child, script, NULL, NULL, argv, environ);
	unsetenv("CRTOOLS_SCRIPT_ACTION");
	unsetenv("CRTOOLS_IMAGE_DIR");
	unsetenv("CRTOOLS_INIT_PID");
	if (ret) {
		pr_err("action script %s (%s): cannot run it: %s", script, action, strerror(ret));
		return -ret;
	}
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR) {
			pr_err("action script %s (%s): cannot wait for it: %m", script, action);
			return -errno;
		}
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return 0;
	if (WIFEXITED(status))
		pr_err("action script %s failed at %s (exit status %d)", script, action,
		       WEXITSTATUS(status));
	else
		pr_err("action script %s was killed by signal %d at %s", script, WTERMSIG(status),
		       action);
	return -ECANCELED;
}

int action_run(const struct opts *o, const char *action, pid_t init_pid)
{
	/* amber swrk with notify_scripts: the client is told first, and may stop it */
	if (o->rpc_notify) {
		int ret = rpc_notify(o->rpc_sk, action, init_pid);

		if (ret)
			return ret;
	}
	for (int i = 0; i < o->nr_scripts; i++) {
		int ret = run_one(o, o->scripts[i], action, init_pid);

		if (ret)
			return ret;
		pr_info("action script %s: %s done", o->scripts[i], action);
	}
	return 0;
}
