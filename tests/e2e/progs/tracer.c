// SPDX-License-Identifier: MIT
/*
 * tracer: another tracer than amber (as gdb or strace would be) on a process.
 *
 *   tracer DIR PID
 *
 * PTRACE_SEIZEs PID (which stops nothing), writes DIR/traced, and passes on
 * whatever stops the tracee (signals, group stops) so that it runs as if
 * untraced, until DIR/untrace appears or the tracee exits; its exit lets the
 * tracee go.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char traced[4096], untrace[4096];
	pid_t pid;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: tracer DIR PID\n");
		return 2;
	}
	snprintf(traced, sizeof(traced), "%s/traced", argv[1]);
	snprintf(untrace, sizeof(untrace), "%s/untrace", argv[1]);
	pid = atoi(argv[2]);
	if (ptrace(PTRACE_SEIZE, pid, NULL, NULL)) {
		perror("tracer: PTRACE_SEIZE");
		return 1;
	}
	fd = open(traced, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror("tracer: create DIR/traced");
		return 1;
	}
	close(fd);
	while (access(untrace, F_OK)) {
		int st;
		pid_t r = waitpid(pid, &st, __WALL | WNOHANG);

		if (r < 0 || (r == pid && (WIFEXITED(st) || WIFSIGNALED(st))))
			return 0;
		if (r == pid && WIFSTOPPED(st)) {
			if (st >> 16 == PTRACE_EVENT_STOP)
				ptrace(PTRACE_LISTEN, pid, NULL, NULL); /* a group stop stays one */
			else
				ptrace(PTRACE_CONT, pid, NULL, (void *)(long)WSTOPSIG(st));
			continue;
		}
		usleep(10 * 1000);
	}
	return 0;
}
