// SPDX-License-Identifier: MIT
/*
 * amber show DIR: print an image directory as JSON (show-views.c: the
 * text views ps, fds and mems).
 *
 * The messages are printed by a generic emitter that walks the protobuf-c
 * descriptors, so new messages and fields need no code here.  It works on
 * incomplete or damaged images too (that is when it is most useful): what
 * cannot be read is reported on stderr and in "errors", the output is valid
 * JSON in every case, and the exit status is 1 if anything was wrong.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amber.h"
#include "image.h"
#include "log.h"
#include "show.h"
#include "stats.h"

struct show {
	FILE *out;
	int dirfd;
	struct img_dir *img; /* what is there, by name: show also shows broken images */
	const char *dir;
	char **errors;
	size_t nr_errors;
};

static void show_error(struct show *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Remember a problem for "errors" (it was logged where it was found). */
static void show_error(struct show *s, const char *fmt, ...)
{
	char **ne = realloc(s->errors, (s->nr_errors + 1) * sizeof(*ne));
	va_list ap;

	if (!ne)
		return;
	s->errors = ne;
	va_start(ap, fmt);
	if (vasprintf(&s->errors[s->nr_errors], fmt, ap) >= 0)
		s->nr_errors++;
	va_end(ap);
}

/* ---- JSON output ---- */

static void indent(FILE *out, int level)
{
	fprintf(out, "\n%*s", 2 * level, "");
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/* A JSON string; bytes that are not UTF-8 come out as \u00XX (Latin-1). */
static void json_string(FILE *out, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	fputc('"', out);
	while (i < n) {
		unsigned char c = s[i];
		size_t len;

		switch (c) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		default:
			if (c < 0x20 || c == 0x7f) {
				fprintf(out, "\\u%04x", c);
				break;
			}
			len = utf8_len(s + i, n - i);
			if (!len) {
				fprintf(out, "\\u%04x", c);
				break;
			}
			fwrite(s + i, 1, len, out);
			i += len;
			continue;
		}
		i++;
	}
	fputc('"', out);
}

static void json_cstr(FILE *out, const char *s)
{
	json_string(out, s, strlen(s));
}

static void json_hex(FILE *out, const uint8_t *p, size_t n)
{
	fputc('"', out);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%02x", p[i]);
	fputc('"', out);
}

static void json_double(FILE *out, double d)
{
	if (isfinite(d))
		fprintf(out, "%.17g", d);
	else
		fprintf(out, "\"%s\"", isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
}

static size_t type_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_FLOAT:
		return sizeof(float);
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	}
	return 0;
}

static void emit_message(FILE *out, const ProtobufCMessage *m, int level);

/* One value of field f stored at p. */
static void emit_value(FILE *out, const ProtobufCFieldDescriptor *f, const void *p, int level)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		fprintf(out, "%d", *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		fprintf(out, "%u", *(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		fprintf(out, "%lld", (long long)*(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		json_double(out, *(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		json_double(out, *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		fputs(*(const protobuf_c_boolean *)p ? "true" : "false", out);
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
			(const ProtobufCEnumDescriptor *)f->descriptor, v);

		if (ev)
			json_cstr(out, ev->name);
		else
			fprintf(out, "%d", v); /* a value newer than this amber */
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(const char *const *)p;

		if (s)
			json_cstr(out, s);
		else
			fputs("null", out);
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;

		json_hex(out, b->data, b->len);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		emit_message(out, *(const ProtobufCMessage *const *)p, level);
		break;
	}
}

static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *base = (const char *)m;

	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
	if (f->label != PROTOBUF_C_LABEL_OPTIONAL)
		return true;
	if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING) {
		const void *ptr = *(const void *const *)(base + f->offset);

		return ptr && ptr != f->default_value;
	}
	return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
}

/* A message as a JSON object; level is the indentation of its braces. */
static void emit_message(FILE *out, const ProtobufCMessage *m, int level)
{
	const ProtobufCMessageDescriptor *d;
	bool first = true;

	if (!m) {
		fputs("null", out);
		return;
	}
	d = m->descriptor;
	fputc('{', out);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *member = (const char *)m + f->offset;

		if (!field_present(m, f))
			continue;
		fputs(first ? "" : ",", out);
		first = false;
		indent(out, level + 1);
		json_cstr(out, f->name);
		fputs(": ", out);
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
			const char *arr = *(const char *const *)member;
			size_t sz = type_size(f->type);
			bool nested = f->type == PROTOBUF_C_TYPE_MESSAGE;

			fputc('[', out);
			for (size_t j = 0; j < n; j++) {
				if (j)
					fputs(nested ? "," : ", ", out);
				if (nested)
					indent(out, level + 2);
				emit_value(out, f, arr + j * sz, level + 2);
			}
			if (nested && n)
				indent(out, level + 1);
			fputc(']', out);
		} else {
			emit_value(out, f, member, level + 1);
		}
	}
	if (!first)
		indent(out, level);
	fputc('}', out);
}

/* ---- image files ---- */

static bool file_exists(struct show *s, const char *name)
{
	return !faccessat(s->dirfd, name, F_OK, 0);
}

/* The one message of a file, or null. */
static void emit_one(struct show *s, enum img_kind kind, const ProtobufCMessageDescriptor *desc,
		     const char *name, int level)
{
	ProtobufCMessage *m = NULL;
	int ret;

	if (!file_exists(s, name)) {
		pr_warn("%s: %s is missing", s->dir, name);
		show_error(s, "%s is missing", name);
		fputs("null", s->out);
		return;
	}
	ret = img_read_one(s->img, kind, desc, &m, "%s", name);
	if (ret) {
		show_error(s, "%s: %s", name, strerror(-ret));
		fputs("null", s->out);
		return;
	}
	emit_message(s->out, m, level);
	protobuf_c_message_free_unpacked(m, NULL);
}

/* All the messages of a file as an array (what could be read), or null. */
static void emit_all(struct show *s, enum img_kind kind, const ProtobufCMessageDescriptor *desc,
		     const char *name, int level)
{
	ProtobufCMessage *m;
	struct img *img;
	size_t n = 0;
	int ret;

	if (!file_exists(s, name)) {
		pr_warn("%s: %s is missing", s->dir, name);
		show_error(s, "%s is missing", name);
		fputs("null", s->out);
		return;
	}
	ret = img_open(s->img, kind, &img, "%s", name);
	if (ret) {
		show_error(s, "%s: %s", name, strerror(-ret));
		fputs("null", s->out);
		return;
	}
	fputc('[', s->out);
	while ((ret = img_get(img, desc, &m)) > 0) {
		fputs(n++ ? "," : "", s->out);
		indent(s->out, level + 1);
		emit_message(s->out, m, level + 1);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	if (ret < 0)
		show_error(s, "%s: record %zu: %s", name, n + 1, strerror(-ret));
	if (n)
		indent(s->out, level);
	fputc(']', s->out);
	img_close(img);
}

/* shared_vm: a CLONE_VM child, whose memory is in its parent's images */
static void emit_task(struct show *s, uint32_t pid, uint32_t shared_vm, int level)
{
	static const struct {
		const char *key, *fmt;
		enum img_kind kind;
		const ProtobufCMessageDescriptor *desc;
		bool many;
	} parts[] = {
		{"core", "core-%u.img", IMG_CORE, &task_core__descriptor, false},
		/* the other threads' cores; none for a process of one thread */
		{"threads", "threads-%u.img", IMG_THREADS, &task_core__descriptor, true},
		{"mm", "mm-%u.img", IMG_MM, &mm_entry__descriptor, false},
		{"pagemap", "pagemap-%u.img", IMG_PAGEMAP, &pagemap_entry__descriptor, true},
		{"fds", "fds-%u.img", IMG_FDS, &fd_entry__descriptor, true},
		{"fs", "fs-%u.img", IMG_FS, &fs_entry__descriptor, false},
	};
	char name[64];

	fputc('{', s->out);
	indent(s->out, level + 1);
	fprintf(s->out, "\"pid\": %u", pid);
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		fputc(',', s->out);
		indent(s->out, level + 1);
		fprintf(s->out, "\"%s\": ", parts[i].key);
		snprintf(name, sizeof(name), parts[i].fmt, pid);
		if (shared_vm && (parts[i].kind == IMG_MM || parts[i].kind == IMG_PAGEMAP))
			fprintf(s->out, "{\"shared_with\": %u}", shared_vm);
		else if (parts[i].kind == IMG_THREADS && !file_exists(s, name))
			fputs("[]", s->out);
		else if (parts[i].many)
			emit_all(s, parts[i].kind, parts[i].desc, name, level + 1);
		else
			emit_one(s, parts[i].kind, parts[i].desc, name, level + 1);
	}
	indent(s->out, level);
	fputc('}', s->out);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Without an inventory: the pids of the core-PID.img files there are. */
static size_t scan_pids(struct show *s, uint32_t **pids)
{
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd = dup(s->dirfd);

	*pids = NULL;
	if (fd < 0)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		unsigned pid;
		int end = 0;

		if (sscanf(de->d_name, "core-%u.img%n", &pid, &end) != 1 || !end || de->d_name[end])
			continue;
		if (n == cap) {
			uint32_t *np = realloc(*pids, (cap = cap ? 2 * cap : 8) * sizeof(*np));

			if (!np)
				break;
			*pids = np;
		}
		(*pids)[n++] = pid;
	}
	closedir(d);
	if (n)
		qsort(*pids, n, sizeof(**pids), cmp_u32);
	return n;
}

/* From pstree.img: the processes that have images (not zombies), and which
 * share their parent's memory.  Falls back to the root alone. */
static size_t tree_pids(struct show *s, uint32_t root, uint32_t **pids, uint32_t **vm)
{
	PstreeEntry **e = NULL;
	size_t n = 0, k = 0;

	*pids = *vm = NULL;
	if (!img_read_all(s->img, IMG_PSTREE, &pstree_entry__descriptor, &e, &n, "pstree.img") &&
	    n) {
		*pids = calloc(n, sizeof(**pids));
		*vm = calloc(n, sizeof(**vm));
		for (size_t i = 0; *pids && *vm && i < n; i++) {
			if (e[i]->zombie)
				continue;
			(*vm)[k] = e[i]->clone_vm ? e[i]->ppid : 0;
			(*pids)[k++] = e[i]->pid;
		}
	}
	for (size_t i = 0; i < n; i++)
		pstree_entry__free_unpacked(e[i], NULL);
	free(e);
	if (!k) {
		free(*pids);
		free(*vm);
		*pids = malloc(sizeof(**pids));
		*vm = calloc(1, sizeof(**vm));
		if (!*pids || !*vm)
			return 0;
		(*pids)[0] = root;
		k = 1;
	}
	return k;
}

static void show_image(struct show *s)
{
	Inventory *inv = NULL;
	uint32_t *pids = NULL, *vm = NULL;
	size_t nr_pids = 0;
	int ret;

	fputs("{\n  \"inventory\": ", s->out);
	if (!file_exists(s, "inventory.img")) {
		pr_warn("%s: inventory.img is missing: the image is incomplete (the dump did not "
			"finish); showing what is there",
			s->dir);
		show_error(s, "inventory.img is missing: the image is incomplete");
		fputs("null", s->out);
		nr_pids = scan_pids(s, &pids);
	} else {
		ret = img_read_one(s->img, IMG_INVENTORY, &inventory__descriptor,
				   (ProtobufCMessage **)&inv, "inventory.img");
		if (ret) {
			show_error(s, "inventory.img: %s", strerror(-ret));
			fputs("null", s->out);
			nr_pids = scan_pids(s, &pids);
		} else {
			emit_message(s->out, &inv->base, 1);
			nr_pids = tree_pids(s, inv->root_pid, &pids, &vm);
		}
	}
	fputs(",\n  \"pstree\": ", s->out);
	emit_all(s, IMG_PSTREE, &pstree_entry__descriptor, "pstree.img", 1);
	fputs(",\n  \"tasks\": [", s->out);
	for (size_t i = 0; i < nr_pids; i++) {
		fputs(i ? "," : "", s->out);
		indent(s->out, 2);
		emit_task(s, pids[i], vm ? vm[i] : 0, 2);
	}
	fputs(nr_pids ? "\n  ],\n  \"files\": " : "],\n  \"files\": ", s->out);
	emit_all(s, IMG_FILES, &reg_file__descriptor, "files.img", 1);
	/* the tree-wide files a dump writes when the tree has such things */
	static const struct {
		const char *key, *name;
		enum img_kind kind;
		const ProtobufCMessageDescriptor *desc;
	} extra[] = {
		{"mounts", "mnt.img", IMG_MNT, &mnt_entry__descriptor},
		{"namespaces", "ns.img", IMG_NS, &ns_entry__descriptor},
		{"netns", "netns.img", IMG_NETNS, &netns_entry__descriptor},
		{"cgroups", "cgroup.img", IMG_CGROUP, &cgroup_entry__descriptor},
		{"ipc", "ipc.img", IMG_IPC, &ipc_entry__descriptor},
	};
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		if (!file_exists(s, extra[i].name))
			continue;
		fprintf(s->out, ",\n  \"%s\": ", extra[i].key);
		emit_all(s, extra[i].kind, extra[i].desc, extra[i].name, 1);
	}
	if (inv) {
		struct img_dir *checked;

		/* What restore checks (ownership, sizes, checksums): logs what is wrong. */
		ret = img_dir_open(s->dirfd, s->dir, &checked);
		if (!ret)
			ret = img_dir_wait(checked);
		img_dir_close(checked);
		fprintf(s->out, ",\n  \"verified\": %s", ret ? "false" : "true");
		if (ret)
			show_error(s, "the image does not verify (see the messages above)");
		inventory__free_unpacked(inv, NULL);
	}
	free(pids);
	free(vm);
	if (s->nr_errors) {
		fputs(",\n  \"errors\": [", s->out);
		for (size_t i = 0; i < s->nr_errors; i++) {
			fputs(i ? ",\n    " : "\n    ", s->out);
			json_cstr(s->out, s->errors[i]);
		}
		fputs("\n  ]", s->out);
	}
	fputs("\n}\n", s->out);
}

int cmd_show(int argc, char **argv)
{
	struct show s = {.out = stdout};
	const char *view = NULL;
	struct opts o = {0};
	int ret, a = 0;

	if (opts_parse(argc, argv, &o, CMD_SHOW))
		return 2;
	ret = 0;
	if (o.help) {
		opts_usage(stdout, CMD_SHOW);
		goto free_opts;
	}
	ret = 2;
	s.dir = o.dir ? o.dir : a < o.nr_args ? o.args[a++] : NULL;
	if (a < o.nr_args && show_is_view(o.args[a]))
		view = o.args[a++];
	if (a < o.nr_args) {
		pr_err("show: '%s': more than one image directory, or not a view (ps, fds, mems); "
		       "usage: amber show DIR [ps|fds|mems]",
		       o.args[a]);
		goto free_opts;
	}
	if (!s.dir) {
		pr_err("show: no image directory given (usage: amber show DIR)");
		goto free_opts;
	}
	ret = 1;
	s.dirfd = open(s.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.dirfd < 0) {
		pr_err("show: cannot open image directory %s: %s", s.dir, strerror(errno));
		goto free_opts;
	}
	if (img_dir_browse(s.dirfd, s.dir, &s.img))
		goto close_dir;
	if (o.stats || view) {
		ret = o.stats ? stats_show(s.img, s.out) : show_view(s.img, s.dir, view, s.out);
		goto close_img;
	}
	show_image(&s);
	ret = fflush(s.out) || ferror(s.out) ? 1 : 0;
	if (ret)
		pr_err("show: cannot write the output: %s", strerror(errno));
	if (s.nr_errors)
		ret = 1;
	for (size_t i = 0; i < s.nr_errors; i++)
		free(s.errors[i]);
	free(s.errors);
close_img:
	img_dir_close(s.img);
close_dir:
	close(s.dirfd);
free_opts:
	opts_free(&o);
	return ret;
}
