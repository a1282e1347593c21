// SPDX-License-Identifier: MIT
/*
 * amber show DIR ps|fds|mems: the views of an image crit's `x` gives,
 * as text tables: the tree, each process's fds, each process's mappings
 * with the pages saved.  Read through the same unchecked layer as the
 * JSON output (img_dir_browse), so they work on broken images too; what
 * cannot be read is said in the table and makes the exit status 1.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "amber.h"
#include "image.h"
#include "log.h"
#include "mem.h"
#include "show.h"

struct view {
	FILE *out;
	struct img_dir *img;
	PstreeEntry **ps;
	size_t nr_ps;
	RegFile **files;
	size_t nr_files;
	int bad; /* something could not be read */
};

/* An enum value's name, lower case, without its prefix ("FILE_PIPE" -> "pipe"). */
static const char *enum_name(const ProtobufCEnumDescriptor *d, int v, const char *prefix, char *buf,
			     size_t len)
{
	const ProtobufCEnumValue *e = protobuf_c_enum_descriptor_get_value(d, v);
	const char *n;
	size_t i;

	if (!e) {
		snprintf(buf, len, "%d?", v);
		return buf;
	}
	n = e->name;
	if (!strncmp(n, prefix, strlen(prefix)))
		n += strlen(prefix);
	for (i = 0; n[i] && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)n[i]);
	buf[i] = 0;
	return buf;
}

static const RegFile *file_by_id(const struct view *v, uint32_t id)
{
	for (size_t i = 0; i < v->nr_files; i++)
		if (v->files[i]->id == id)
			return v->files[i];
	return NULL;
}

static size_t depth_of(const struct view *v, const PstreeEntry *e)
{
	size_t d = 0;

	/* parents come first in pstree.img; a loop in a broken image ends at nr_ps */
	while (d < v->nr_ps) {
		const PstreeEntry *p = NULL;

		for (size_t i = 0; i < v->nr_ps && !p; i++)
			if (v->ps[i]->pid == e->ppid && v->ps[i] != e)
				p = v->ps[i];
		if (!p)
			break;
		e = p;
		d++;
	}
	return d;
}

static void view_ps(struct view *v)
{
	fprintf(v->out, "%7s %7s %7s %7s %-8s %7s  %s\n", "PID", "PPID", "PGID", "SID", "STATE",
		"THREADS", "COMM");
	for (size_t i = 0; i < v->nr_ps; i++) {
		const PstreeEntry *e = v->ps[i];
		TaskCore *core = NULL;
		const char *state = "zombie";
		char threads[16] = "-";

		if (!e->zombie) {
			if (img_read_one(v->img, IMG_CORE, &task_core__descriptor,
					 (ProtobufCMessage **)&core, "core-%u.img", e->pid)) {
				v->bad = 1;
				state = "?";
			} else {
				state = core->has_stop_signal && core->stop_signal ? "stopped"
										   : "running";
				snprintf(threads, sizeof(threads), "%zu", core->n_threads + 1);
			}
		}
		fprintf(v->out, "%7u %7u %7u %7u %-8s %7s  %*s%s\n", e->pid, e->ppid, e->pgid,
			e->sid, state, threads, (int)(2 * depth_of(v, e)), "",
			core	    ? core->comm
			: e->zombie ? "<defunct>"
				    : "?");
		if (core)
			task_core__free_unpacked(core, NULL);
	}
}

/* What an fd's file is, as /proc/PID/fd shows it where that is short. */
static void print_target(struct view *v, const RegFile *f)
{
	if (f->kind == FILE_KIND__FILE_PIPE)
		fprintf(v->out, "pipe:[%llu]", (unsigned long long)f->pipe_id);
	else
		fputs(f->path, v->out);
	if (f->ghost)
		fputs(" (deleted)", v->out);
}

static int cmp_fd(const void *a, const void *b)
{
	uint32_t x = (*(FdEntry *const *)a)->fd, y = (*(FdEntry *const *)b)->fd;

	return x < y ? -1 : x > y;
}

static void view_fds(struct view *v)
{
	char kind[32];

	fprintf(v->out, "%7s %5s %-10s %-8s  %s\n", "PID", "FD", "KIND", "FLAGS", "FILE");
	for (size_t i = 0; i < v->nr_ps; i++) {
		const PstreeEntry *e = v->ps[i];
		FdEntry **fds = NULL;
		FsEntry *fs = NULL;
		size_t n = 0;

		if (e->zombie)
			continue;
		if (img_read_all(v->img, IMG_FDS, &fd_entry__descriptor, &fds, &n, "fds-%u.img",
				 e->pid)) {
			fprintf(v->out, "%7u     ? (fds-%u.img unreadable)\n", e->pid, e->pid);
			v->bad = 1;
		}
		if (n)
			qsort(fds, n, sizeof(*fds), cmp_fd);
		for (size_t k = 0; k < n; k++) {
			const RegFile *f = file_by_id(v, fds[k]->file_id);

			if (!f) {
				fprintf(v->out, "%7u %5u ? (file %u not in files.img)\n", e->pid,
					fds[k]->fd, fds[k]->file_id);
				v->bad = 1;
				continue;
			}
			fprintf(v->out, "%7u %5u %-10s %#-8o  ", e->pid, fds[k]->fd,
				enum_name(&file_kind__descriptor, f->kind, "FILE_", kind,
					  sizeof(kind)),
				f->flags);
			print_target(v, f);
			fputc('\n', v->out);
		}
		for (size_t k = 0; k < n; k++)
			fd_entry__free_unpacked(fds[k], NULL);
		free(fds);
		if (!img_read_one(v->img, IMG_FS, &fs_entry__descriptor, (ProtobufCMessage **)&fs,
				  "fs-%u.img", e->pid)) {
			fprintf(v->out, "%7u %5s %-10s %-8s  %s\n", e->pid, "cwd", "dir", "-",
				fs->cwd);
			fprintf(v->out, "%7u %5s %-10s %-8s  %s\n", e->pid, "root", "dir", "-",
				fs->root);
			fs_entry__free_unpacked(fs, NULL);
		} else {
			v->bad = 1;
		}
	}
}

/* Pages saved for [start, end), and of those shared with the parent. */
static void pages_in(PagemapEntry **pm, size_t n, uint64_t start, uint64_t end, uint64_t *saved,
		     uint64_t *cow)
{
	*saved = *cow = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t s = pm[i]->vaddr, len = pm[i]->nr_pages, e;

		if (len > (UINT64_MAX - s) / PAGE_SIZE)
			continue; /* a broken run: restore refuses it */
		e = s + len * PAGE_SIZE;
		if (e <= start || s >= end)
			continue;
		s = s < start ? start : s;
		e = e > end ? end : e;
		if (pm[i]->in_parent)
			*cow += (e - s) / PAGE_SIZE;
		else
			*saved += (e - s) / PAGE_SIZE;
	}
}

static void view_mems(struct view *v)
{
	char kind[32];

	fprintf(v->out, "%7s %-33s %-4s %-15s %8s %8s  %s\n", "PID", "VMA", "PROT", "KIND", "PAGES",
		"COW", "FILE");
	for (size_t i = 0; i < v->nr_ps; i++) {
		const PstreeEntry *e = v->ps[i];
		PagemapEntry **pm = NULL;
		MmEntry *mm = NULL;
		size_t n = 0;

		if (e->zombie)
			continue;
		if (e->clone_vm) {
			fprintf(v->out, "%7u (shares the memory of %u)\n", e->pid, e->ppid);
			continue;
		}
		if (img_read_one(v->img, IMG_MM, &mm_entry__descriptor, (ProtobufCMessage **)&mm,
				 "mm-%u.img", e->pid)) {
			fprintf(v->out, "%7u ? (mm-%u.img unreadable)\n", e->pid, e->pid);
			v->bad = 1;
			continue;
		}
		if (img_read_all(v->img, IMG_PAGEMAP, &pagemap_entry__descriptor, &pm, &n,
				 "pagemap-%u.img", e->pid))
			v->bad = 1;
		for (size_t k = 0; k < mm->n_vmas; k++) {
			const VmaEntry *m = mm->vmas[k];
			const RegFile *f = m->has_file_id ? file_by_id(v, m->file_id) : NULL;
			uint64_t saved, cow;
			char range[40];

			pages_in(pm, n, m->start, m->end, &saved, &cow);
			snprintf(range, sizeof(range), "%012llx-%012llx",
				 (unsigned long long)m->start, (unsigned long long)m->end);
			fprintf(v->out, "%7u %-33s %c%c%c  %-15s %8llu %8llu  %s\n", e->pid, range,
				m->prot & PROT_READ ? 'r' : '-', m->prot & PROT_WRITE ? 'w' : '-',
				m->prot & PROT_EXEC ? 'x' : '-',
				enum_name(&vma_kind__descriptor, m->kind, "VMA_", kind,
					  sizeof(kind)),
				(unsigned long long)saved, (unsigned long long)cow,
				f ? f->path : "");
		}
		for (size_t k = 0; k < n; k++)
			pagemap_entry__free_unpacked(pm[k], NULL);
		free(pm);
		mm_entry__free_unpacked(mm, NULL);
	}
}

static const struct {
	const char *name;
	void (*show)(struct view *v);
	bool files; /* needs files.img */
} views[] = {
	{"ps", view_ps, false},
	{"fds", view_fds, true},
	{"mems", view_mems, true},
};

bool show_is_view(const char *name)
{
	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
		if (!strcmp(views[i].name, name))
			return true;
	return false;
}

int show_view(struct img_dir *img, const char *dir, const char *name, FILE *out)
{
	struct view v = {.out = out, .img = img};
	size_t i;

	for (i = 0; strcmp(views[i].name, name); i++)
		;
	if (img_read_all(img, IMG_PSTREE, &pstree_entry__descriptor, &v.ps, &v.nr_ps,
			 "pstree.img")) {
		pr_err("show: %s: pstree.img is unreadable: no process list to show", dir);
		return 1;
	}
	if (views[i].files &&
	    img_read_all(img, IMG_FILES, &reg_file__descriptor, &v.files, &v.nr_files, "files.img"))
		v.bad = 1;
	views[i].show(&v);
	for (size_t k = 0; k < v.nr_ps; k++)
		pstree_entry__free_unpacked(v.ps[k], NULL);
	free(v.ps);
	for (size_t k = 0; k < v.nr_files; k++)
		reg_file__free_unpacked(v.files[k], NULL);
	free(v.files);
	if (fflush(out) || ferror(out)) {
		pr_err("show: cannot write the output: %s", strerror(errno));
		return 1;
	}
	return v.bad;
}
