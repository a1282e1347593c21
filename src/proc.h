/* SPDX-License-Identifier: MIT */
/* Parsers for the /proc/PID files amber reads. */
#ifndef AMBER_PROC_H
#define AMBER_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "amber.h"

struct proc_stat {
	char comm[64];
	char state;
	int ppid, pgrp, session;
	unsigned tty_nr; /* the controlling terminal, encoded as new_encode_dev() (0: none) */
	int tpgid;	 /* its foreground process group (-1: none) */
	long nice;
	long num_threads;
	unsigned long start_code, end_code, start_stack;
	unsigned long start_data, end_data, start_brk;
	unsigned long arg_start, arg_end, env_start, env_end;
	int exit_code;
	unsigned long flags; /* PF_* */
};

#define PF_IO_WORKER 0x10 /* an io_uring worker: the kernel's thread in the process */

struct proc_status {
	unsigned uid[4], gid[4];
	unsigned groups[256];
	int nr_groups;
	uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	int no_new_privs;
	unsigned umask;
	int seccomp;
	int tracer_pid;
	int threads;
};

int proc_parse_stat(pid_t pid, struct proc_stat *st);
/* The same of thread tid of process pid alone (cheap in a process of many threads). */
int proc_parse_task_stat(pid_t pid, pid_t tid, struct proc_stat *st);
int proc_parse_status(pid_t pid, struct proc_status *st);
/* The same from a status text already read (consumed: strtok). */
void proc_parse_status_text(char *text, struct proc_status *st);
/* From text (left as it is) where there is one, else from pid's status file. */
int proc_parse_status_of(const char *text, pid_t pid, struct proc_status *st);
/* The task's name (comm) from a status text's Name line, unescaped. */
int proc_status_name(const char *status, char *out, size_t len);
/* Whether a status text's x86_Thread_features line (or that line alone)
 * names shstk: the thread's shadow stack is on. */
bool proc_status_shstk(const char *status);
/* Reads maps + smaps VmFlags; caller frees with proc_free_vmas(). */
int proc_parse_vmas(pid_t pid, struct vma **vmas, size_t *nr);
/* The same without the smaps details (vmflags stay 0). */
int proc_parse_maps(pid_t pid, struct vma **vmas, size_t *nr);
void proc_free_vmas(struct vma *vmas, size_t nr);
/* One maps header line (NUL-terminated): the fields but path, and where the
 * name starts (the rest of the line); false if it is none. */
bool proc_maps_line(const char *line, struct vma *v, const char **name);
/* fdinfo pos/flags/mnt_id */
int proc_parse_fdinfo(pid_t pid, int fd, uint64_t *pos, unsigned *flags, bool *locked);
/* The same from an open /proc/PID/fdinfo (dirfd): no walk of the path per fd. */
int proc_parse_fdinfo_at(int dirfd, int fd, uint64_t *pos, unsigned *flags, bool *locked);
/* Children of a thread from /proc/PID/task/TID/children (the C/R children file). */
/* Fills *out (malloc()ed, every child however many) and returns the count, or -errno. */
int proc_children(pid_t pid, pid_t **out);

#endif
