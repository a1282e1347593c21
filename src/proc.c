// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include "log.h"
#include "proc.h"
#include "sys.h"

static int parse_stat(const char *path, struct proc_stat *st)
{
	char *buf, *p, *close;
	unsigned long v[64];
	int ret, n = 0;

	ret = sys_read_file(path, &buf, NULL);
	if (ret)
		return ret;
	/* comm may hold spaces and parens: it ends at the last ')' */
	p = strchr(buf, '(');
	close = strrchr(buf, ')');
	if (!p || !close) {
		free(buf);
		return -EINVAL;
	}
	memset(st, 0, sizeof(*st));
	snprintf(st->comm, sizeof(st->comm), "%.*s", (int)(close - p - 1), p + 1);
	p = close + 2;
	st->state = *p;
	p += 2;
	/* v[0] is field 4 (ppid) */
	while (n < 64 && *p) {
		char *end;

		v[n++] = strtoul(p, &end, 10);
		if (*end == '-') /* negative numbers (nice, priority) */
			v[n - 1] = strtol(p, &end, 10);
		if (end == p)
			break;
		p = end;
		while (*p == ' ' || *p == '\n')
			p++;
	}
	free(buf);
	if (n < 49) {
		pr_err("%s has %d fields; amber needs the C/R fields up to exit_code "
		       "(arg_start...: kernel 3.5+)",
		       path, n + 3);
		return -EINVAL;
	}
#define F(i) v[(i)-4]
	st->ppid = (int)F(4);
	st->pgrp = (int)F(5);
	st->session = (int)F(6);
	st->tty_nr = (unsigned)F(7);
	st->tpgid = (int)F(8);
	st->nice = (long)F(19);
	st->num_threads = (long)F(20);
	st->start_code = F(26);
	st->end_code = F(27);
	st->start_stack = F(28);
	st->start_data = F(45);
	st->end_data = F(46);
	st->start_brk = F(47);
	st->arg_start = F(48);
	st->arg_end = F(49);
	st->env_start = F(50);
	st->env_end = F(51);
	st->exit_code = (int)F(52);
	st->flags = F(9);
#undef F
	return 0;
}

int proc_parse_stat(pid_t pid, struct proc_stat *st)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	return parse_stat(path, st);
}

/* One thread's own: /proc/PID/stat sums the CPU times of every thread (O(threads)). */
int proc_parse_task_stat(pid_t pid, pid_t tid, struct proc_stat *st)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	return parse_stat(path, st);
}

int proc_status_name(const char *status, char *out, size_t len)
{
	const char *l = strstr(status, "Name:\t");
	size_t n = 0;

	if (l != status && (!l || l[-1] != '\n'))
		return -ENOENT;
	/* the kernel escapes a name's newlines and backslashes there, and only those */
	for (l += 6; *l && *l != '\n' && n + 1 < len; l++) {
		if (*l == '\\' && (l[1] == 'n' || l[1] == '\\'))
			out[n++] = *++l == 'n' ? '\n' : '\\';
		else
			out[n++] = *l;
	}
	out[n] = 0;
	return 0;
}

bool proc_status_shstk(const char *status)
{
	static const char key[] = "x86_Thread_features:";
	const char *l = status;

	if (strncmp(l, key, strlen(key))) {
		l = strstr(status, "\nx86_Thread_features:");
		if (!l)
			return false;
		l++;
	}
	l += strlen(key);
	while (*l && *l != '\n') {
		size_t n;

		l += strspn(l, " \t");
		n = strcspn(l, " \t\n");
		if (n == 5 && !strncmp(l, "shstk", 5))
			return true;
		l += n;
	}
	return false;
}

/*
 * One "Key:\tvalues" line of /proc/PID/status, by the key's name: a
 * dump reads it for every thread (sscanf tried each field on each line).
 */
static void status_line(char *line, struct proc_status *st)
{
	static const struct {
		const char *key;
		char base; /* 0: ids; 'g': groups; else the number's base */
		size_t off;
	} tab[] = {
		{"Uid", 0, offsetof(struct proc_status, uid)},
		{"Gid", 0, offsetof(struct proc_status, gid)},
		{"Groups", 'g', 0},
		{"CapInh", 16, offsetof(struct proc_status, cap_inh)},
		{"CapPrm", 16, offsetof(struct proc_status, cap_prm)},
		{"CapEff", 16, offsetof(struct proc_status, cap_eff)},
		{"CapBnd", 16, offsetof(struct proc_status, cap_bnd)},
		{"CapAmb", 16, offsetof(struct proc_status, cap_amb)},
		{"NoNewPrivs", 10, offsetof(struct proc_status, no_new_privs)},
		{"Umask", 8, offsetof(struct proc_status, umask)},
		{"Seccomp", 10, offsetof(struct proc_status, seccomp)},
		{"TracerPid", 10, offsetof(struct proc_status, tracer_pid)},
		{"Threads", 10, offsetof(struct proc_status, threads)},
	};
	char *colon = strchr(line, ':'), *p, *end;
	size_t i;

	if (!colon)
		return;
	*colon = 0;
	for (i = 0; i < sizeof(tab) / sizeof(tab[0]) && strcmp(line, tab[i].key); i++)
		;
	if (i == sizeof(tab) / sizeof(tab[0]))
		return;
	p = colon + 1;
	if (!tab[i].base) { /* real, effective, saved, fs */
		unsigned *v = (unsigned *)((char *)st + tab[i].off);

		for (int k = 0; k < 4; k++, p = end)
			v[k] = (unsigned)strtoul(p, &end, 10);
	} else if (tab[i].base == 'g') {
		for (;;) {
			unsigned long g = strtoul(p, &end, 10);

			if (end == p || st->nr_groups >= 256)
				break;
			st->groups[st->nr_groups++] = (unsigned)g;
			p = end;
		}
	} else if (tab[i].base == 16) {
		*(uint64_t *)((char *)st + tab[i].off) = strtoull(p, NULL, 16);
	} else if (tab[i].base == 8) {
		*(unsigned *)((char *)st + tab[i].off) = (unsigned)strtoul(p, NULL, 8);
	} else {
		*(int *)((char *)st + tab[i].off) = (int)strtol(p, NULL, 10);
	}
}

void proc_parse_status_text(char *text, struct proc_status *st)
{
	char *line, *save;

	memset(st, 0, sizeof(*st));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		status_line(line, st);
}

int proc_parse_status_of(const char *text, pid_t pid, struct proc_status *st)
{
	char *copy;

	if (!text)
		return proc_parse_status(pid, st);
	copy = strdup(text); /* strtok writes into it */
	if (!copy)
		return -ENOMEM;
	proc_parse_status_text(copy, st);
	free(copy);
	return 0;
}

int proc_parse_status(pid_t pid, struct proc_status *st)
{
	char path[64], *buf;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret)
		return ret;
	proc_parse_status_text(buf, st);
	free(buf);
	return 0;
}

static unsigned parse_vmflags(const char *s)
{
	static const struct {
		char name[3];
		unsigned bit;
	} tab[] = {
		{"gd", VMF_GROWSDOWN},	 {"dc", VMF_DONTFORK}, {"wf", VMF_WIPEONFORK},
		{"dd", VMF_DONTDUMP},	 {"hg", VMF_HUGEPAGE}, {"nh", VMF_NOHUGEPAGE},
		{"mg", VMF_MERGEABLE},	 {"lo", VMF_LOCKED},   {"sr", VMF_SEQ_READ},
		{"rr", VMF_RAND_READ},	 {"mw", VMF_MAYWRITE}, {"nr", VMF_NORESERVE},
		{"lf", VMF_LOCKONFAULT},
	};
	unsigned flags = 0;

	while (*s) {
		while (*s == ' ')
			s++;
		if (!s[0] || !s[1])
			break;
		for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
			if (s[0] == tab[i].name[0] && s[1] == tab[i].name[1])
				flags |= tab[i].bit;
		s += 2;
	}
	return flags;
}

void proc_free_vmas(struct vma *vmas, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		free(vmas[i].path);
	free(vmas);
}

/* Hex digits up to a non-digit; *end there (NULL: no digit). */
static unsigned long hex_field(const char *s, const char **end)
{
	unsigned long v = 0;
	const char *p = s;

	for (;; p++) {
		unsigned d = (unsigned char)*p - '0';

		if (d > 9) {
			d = ((unsigned char)*p | 0x20) - 'a';
			if (d > 5)
				break;
			d += 10;
		}
		v = v << 4 | d;
	}
	*end = p > s ? p : NULL;
	return v;
}

/*
 * A maps (or smaps) header line: "start-end perms pgoff maj:min ino   name".
 * By hand: smaps has some 25 lines a mapping, and sscanf() on each of them
 * was the dump's largest cost for a process with 10,000 mappings.
 */
bool proc_maps_line(const char *l, struct vma *v, const char **name)
{
	unsigned long maj, min;
	const char *p;
	char *e;

	v->start = hex_field(l, &p);
	if (!p || *p != '-')
		return false;
	v->end = hex_field(p + 1, &p);
	if (!p || p[0] != ' ' || !p[1] || !p[2] || !p[3] || !p[4] || p[5] != ' ')
		return false;
	v->prot = (p[1] == 'r' ? PROT_READ : 0) | (p[2] == 'w' ? PROT_WRITE : 0) |
		  (p[3] == 'x' ? PROT_EXEC : 0);
	v->shared = p[4] == 's';
	v->pgoff = hex_field(p + 6, &p); /* bytes in maps; converted by users */
	if (!p || *p != ' ')
		return false;
	maj = hex_field(p + 1, &p);
	if (!p || *p != ':')
		return false;
	min = hex_field(p + 1, &p);
	if (!p || *p != ' ' || p[1] < '0' || p[1] > '9')
		return false;
	v->dev = makedev(maj, min); /* as stat() gives it */
	v->ino = strtoul(p + 1, &e, 10);
	while (*e == ' ')
		e++;
	*name = e;
	return true;
}

static int parse_vmas(pid_t pid, const char *file, struct vma **out, size_t *nr_out)
{
	char path[64], *buf, *line, *save;
	struct vma *vmas = NULL, *cur = NULL;
	size_t nr = 0, cap = 0;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	ret = sys_read_file(path, &buf, NULL);
	if (ret) {
		pr_err("cannot read %s: %s", path, strerror(-ret));
		return ret;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct vma v = {0};
		const char *name;

		/* smaps' other lines start with a capital: "Size:", "VmFlags:" */
		if (*line >= 'A' && *line <= 'Z') {
			if (cur && !strncmp(line, "VmFlags:", 8))
				cur->vmflags = parse_vmflags(line + 8);
			continue;
		}
		if (!proc_maps_line(line, &v, &name))
			continue;
		if (nr == cap) {
			struct vma *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(vmas, cap * sizeof(*nv));
			if (!nv) {
				ret = -ENOMEM;
				goto free_all;
			}
			vmas = nv;
		}
		cur = &vmas[nr++];
		*cur = v;
		cur->file_id = -1;
		if (*name) {
			size_t len = strlen(name);

			if (len > 10 && !strcmp(name + len - 10, " (deleted)")) {
				cur->deleted = true;
				len -= 10;
			}
			cur->path = strndup(name, len);
		}
	}
	free(buf);
	*out = vmas;
	*nr_out = nr;
	return 0;
free_all:
	free(buf);
	proc_free_vmas(vmas, nr);
	return ret;
}

int proc_parse_vmas(pid_t pid, struct vma **out, size_t *nr_out)
{
	return parse_vmas(pid, "smaps", out, nr_out);
}

/* Ranges, protections and names only: /proc/PID/maps, much cheaper than smaps. */
int proc_parse_maps(pid_t pid, struct vma **out, size_t *nr_out)
{
	return parse_vmas(pid, "maps", out, nr_out);
}

static int parse_fdinfo(char *buf, uint64_t *pos, unsigned *flags, bool *locked)
{
	char *p = strstr(buf, "pos:");

	*pos = p ? strtoull(p + 4, NULL, 10) : 0;
	p = strstr(buf, "flags:");
	*flags = p ? (unsigned)strtoul(p + 6, NULL, 8) : 0;
	if (locked)
		*locked = strstr(buf, "\nlock:\t") != NULL;
	free(buf);
	return 0;
}

int proc_parse_fdinfo(pid_t pid, int fd, uint64_t *pos, unsigned *flags, bool *locked)
{
	char path[64], *buf;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", pid, fd);
	ret = sys_read_file(path, &buf, NULL);
	return ret ? ret : parse_fdinfo(buf, pos, flags, locked);
}

int proc_parse_fdinfo_at(int dirfd, int fd, uint64_t *pos, unsigned *flags, bool *locked)
{
	char name[16], *buf;
	int f, ret;

	snprintf(name, sizeof(name), "%d", fd);
	f = sys_openat(dirfd, name, O_RDONLY | O_CLOEXEC, 0);
	if (f < 0)
		return f;
	ret = sys_read_fd(f, &buf, NULL);
	close(f);
	return ret ? ret : parse_fdinfo(buf, pos, flags, locked);
}

int proc_children(pid_t pid, pid_t **out)
{
	char path[96], *buf, *p;
	pid_t *kids = NULL;
	size_t n = 0, cap = 0;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	ret = sys_read_file(path, &buf, NULL);
	if (ret)
		return ret;
	for (p = buf; *p;) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (n == cap) {
			pid_t *k = realloc(kids, (cap = cap ? 2 * cap : 64) * sizeof(*k));

			if (!k) {
				ret = -ENOMEM;
				goto free_kids;
			}
			kids = k;
		}
		kids[n++] = (pid_t)v;
		p = end;
		while (isspace((unsigned char)*p))
			p++;
	}
	free(buf);
	*out = kids;
	return (int)n;

free_kids:
	free(kids);
	free(buf);
	return ret;
}
