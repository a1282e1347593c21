// SPDX-License-Identifier: MIT
/*
 * imgedit: edit an amber image as an attacker would, with valid checksums, so
 * that the security tests can show that restore refuses what the edit asks.
 *
 *   imgedit DIR FILE [INDEX.]FIELD=VALUE...   set fields of record INDEX (0) of
 *                                            FILE, then refresh the inventory
 *   imgedit DIR FILE -n                      print the number of records
 *   imgedit DIR --rehash                     refresh every inventory entry
 *   imgedit DIR --drop NAME | --add NAME     remove / add an inventory entry
 *
 * FIELD is a dotted path through submessages; a number in it indexes a
 * repeated message field ("vmas.3.start"; one past the last adds an element).  Repeated scalars
 * take a comma list ("creds.groups=0,6,27"; "" empties them), bytes take hex, enums a number or
 * their name; VALUE @FILE reads the value from FILE (lists longer than an argument may be).  Files
 * are rewritten in place: owner and mode stay.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"

struct kind {
	const char *prefix;
	enum img_kind kind;
	const ProtobufCMessageDescriptor *desc;
};

static const struct kind kinds[] = {
	{"inventory.img", IMG_INVENTORY, &inventory__descriptor},
	{"core-", IMG_CORE, &task_core__descriptor},
	{"threads-", IMG_THREADS, &task_core__descriptor},
	{"mm-", IMG_MM, &mm_entry__descriptor},
	{"pagemap-", IMG_PAGEMAP, &pagemap_entry__descriptor},
	{"files.img", IMG_FILES, &reg_file__descriptor},
	{"fds-", IMG_FDS, &fd_entry__descriptor},
	{"fs-", IMG_FS, &fs_entry__descriptor},
	{"pstree.img", IMG_PSTREE, &pstree_entry__descriptor},
	{"ns.img", IMG_NS, &ns_entry__descriptor},
	{"cgroup.img", IMG_CGROUP, &cgroup_entry__descriptor},
	{"netns.img", IMG_NETNS, &netns_entry__descriptor},
	{"mnt.img", IMG_MNT, &mnt_entry__descriptor},
	{"ipc.img", IMG_IPC, &ipc_entry__descriptor},
};

static void __attribute__((noreturn)) die(const char *fmt, const char *arg)
{
	fprintf(stderr, "imgedit: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (!p)
		die("%s", "out of memory");
	return p;
}

static uint8_t *read_file(int dirfd, const char *name, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY);
	struct stat st;
	uint8_t *buf;

	if (fd < 0 || fstat(fd, &st))
		die("cannot open %s", name);
	buf = xmalloc(st.st_size);
	if (read(fd, buf, st.st_size) != st.st_size)
		die("cannot read %s", name);
	close(fd);
	*len = st.st_size;
	return buf;
}

static void write_file(int dirfd, const char *name, const void *buf, size_t len)
{
	int fd = openat(dirfd, name, O_WRONLY | O_TRUNC);

	if (fd < 0 || write(fd, buf, len) != (ssize_t)len || close(fd))
		die("cannot rewrite %s", name);
}

static const struct kind *kind_of(const char *name)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strncmp(name, kinds[i].prefix, strlen(kinds[i].prefix)))
			return &kinds[i];
	die("%s: not a record file imgedit knows", name);
}

struct records {
	uint8_t hdr[IMG_HDR_SIZE];
	ProtobufCMessage **m;
	size_t n;
};

static void load(int dirfd, const char *name, const struct kind *k, struct records *r)
{
	size_t len, off = IMG_HDR_SIZE;
	uint8_t *buf = read_file(dirfd, name, &len);

	if (len < IMG_HDR_SIZE)
		die("%s: too short", name);
	memcpy(r->hdr, buf, IMG_HDR_SIZE);
	while (off + 12 <= len) {
		uint32_t rl;

		memcpy(&rl, buf + off, 4);
		if (rl > len - off - 12)
			die("%s: truncated record", name);
		r->m = realloc(r->m, (r->n + 1) * sizeof(*r->m));
		r->m[r->n] = protobuf_c_message_unpack(k->desc, NULL, rl, buf + off + 12);
		if (!r->m[r->n])
			die("%s: a record does not decode", name);
		r->n++;
		off += 12 + rl;
	}
	free(buf);
}

static void store(int dirfd, const char *name, struct records *r)
{
	size_t len = IMG_HDR_SIZE, off;
	uint8_t *buf;

	for (size_t i = 0; i < r->n; i++)
		len += 12 + protobuf_c_message_get_packed_size(r->m[i]);
	buf = xmalloc(len);
	memcpy(buf, r->hdr, IMG_HDR_SIZE);
	off = IMG_HDR_SIZE;
	for (size_t i = 0; i < r->n; i++) {
		uint32_t rl = protobuf_c_message_pack(r->m[i], buf + off + 12);
		uint64_t h = XXH3_64bits(buf + off + 12, rl);

		memcpy(buf + off, &rl, 4);
		memcpy(buf + off + 4, &h, 8);
		off += 12 + rl;
	}
	write_file(dirfd, name, buf, len);
	free(buf);
}

/* The address of a field's value in a message, and its quantifier. */
static void *field_ptr(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	return (char *)m + f->offset;
}

static size_t *count_ptr(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	return (size_t *)((char *)m + f->quantifier_offset);
}

static void mark_present(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
	    f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
		*(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
}

static size_t scalar_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	default:
		return 4;
	}
}

static void set_scalar(const ProtobufCFieldDescriptor *f, void *p, const char *v)
{
	unsigned long long u;
	char *end;

	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING:
		*(char **)p = strdup(v);
		return;
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *b = p;
		size_t n = strlen(v) / 2;

		b->data = xmalloc(n);
		b->len = n;
		for (size_t i = 0; i < n; i++)
			sscanf(v + 2 * i, "%2hhx", &b->data[i]);
		return;
	}
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)p = !strcmp(v, "1") || !strcmp(v, "true");
		return;
	case PROTOBUF_C_TYPE_ENUM:
		if (!isdigit((unsigned char)*v) && *v != '-') {
			const ProtobufCEnumValue *ev =
				protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, v);

			if (!ev)
				die("no enum value %s", v);
			*(int *)p = ev->value;
			return;
		}
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		die("%s is a message: name a field inside it", f->name);
	default:
		break;
	}
	errno = 0;
	u = strtoull(v, &end, 0);
	if (*v == '-')
		u = (unsigned long long)strtoll(v, &end, 0);
	if (errno || *end)
		die("not a number: %s", v);
	if (scalar_size(f->type) == 8)
		*(uint64_t *)p = u;
	else
		*(uint32_t *)p = (uint32_t)u;
}

/* Set path (a.b.2.c) = value in m. */
static void set_path(ProtobufCMessage *m, char *path, const char *value)
{
	char *dot = strchr(path, '.');
	const ProtobufCFieldDescriptor *f;

	if (dot)
		*dot = 0;
	f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, path);
	if (!f)
		die("no field %s", path);
	if (f->type == PROTOBUF_C_TYPE_MESSAGE && dot) {
		char *rest = dot + 1;
		ProtobufCMessage **sub;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t idx = strtoul(rest, &rest, 10), *n = count_ptr(m, f);

			if (*rest != '.' || idx > *n)
				die("index out of range in %s", dot + 1);
			if (idx == *n) { /* one past the end: a new element */
				ProtobufCMessage ***arr = field_ptr(m, f);

				*arr = realloc(*arr, (*n + 1) * sizeof(**arr));
				if (!*arr)
					die("%s", "out of memory");
				(*arr)[(*n)++] = NULL;
			}
			sub = &(*(ProtobufCMessage ***)field_ptr(m, f))[idx];
			rest++;
		} else {
			sub = field_ptr(m, f);
		}
		if (!*sub) {
			const ProtobufCMessageDescriptor *d = f->descriptor;

			*sub = xmalloc(d->sizeof_message);
			d->message_init(*sub);
		}
		set_path(*sub, rest, value);
		return;
	}
	if (dot)
		die("%s is not a message", path);
	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t esz = scalar_size(f->type), n = 0, *cnt = count_ptr(m, f);
		char *list = strdup(value), *save, *tok;
		uint8_t *arr = xmalloc(esz * (strlen(value) / 2 + 1));

		for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			set_scalar(f, arr + esz * n++, tok);
		*(void **)field_ptr(m, f) = arr;
		*cnt = n;
		return;
	}
	set_scalar(f, field_ptr(m, f), value);
	mark_present(m, f);
}

static uint64_t hash_of(int dirfd, const char *name, uint64_t *size)
{
	size_t len;
	uint8_t *buf = read_file(dirfd, name, &len);
	uint64_t h = XXH3_64bits(buf, len);

	free(buf);
	*size = len;
	return h;
}

static void rehash(int dirfd, const char *drop, const char *add)
{
	struct records r = {0};
	Inventory *inv;
	size_t k = 0;

	load(dirfd, "inventory.img", kind_of("inventory.img"), &r);
	if (r.n != 1)
		die("%s", "inventory.img holds no single record");
	inv = (Inventory *)r.m[0];
	if (add) {
		InventoryFile *f = xmalloc(sizeof(*f));

		inventory_file__init(f);
		f->name = strdup(add);
		inv->files = realloc(inv->files, (inv->n_files + 1) * sizeof(*inv->files));
		inv->files[inv->n_files++] = f;
	}
	for (size_t i = 0; i < inv->n_files; i++) {
		InventoryFile *f = inv->files[i];

		if (drop && !strcmp(f->name, drop))
			continue;
		f->xxh3 = hash_of(dirfd, f->name, &f->size);
		inv->files[k++] = f;
	}
	if (drop && k == inv->n_files)
		die("%s is not in the inventory", drop);
	inv->n_files = k;
	store(dirfd, "inventory.img", &r);
}

int main(int argc, char **argv)
{
	const struct kind *k;
	struct records r = {0};
	int dirfd;

	if (argc < 3)
		die("%s", "usage: imgedit DIR FILE [INDEX.]FIELD=VALUE... | DIR FILE -n | "
			  "DIR --rehash | DIR --drop NAME | DIR --add NAME");
	dirfd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (dirfd < 0)
		die("cannot open %s", argv[1]);
	if (!strcmp(argv[2], "--rehash") || !strcmp(argv[2], "--drop") ||
	    !strcmp(argv[2], "--add")) {
		const char *name = argc > 3 ? argv[3] : NULL;

		if (argv[2][2] != 'r' && !name)
			die("%s needs a file name", argv[2]);
		rehash(dirfd, argv[2][2] == 'd' ? name : NULL, argv[2][2] == 'a' ? name : NULL);
		return 0;
	}
	k = kind_of(argv[2]);
	load(dirfd, argv[2], k, &r);
	if (argc == 4 && !strcmp(argv[3], "-n")) {
		printf("%zu\n", r.n);
		return 0;
	}
	for (int i = 3; i < argc; i++) {
		char *arg = strdup(argv[i]), *eq = strchr(arg, '='), *path = arg;
		size_t idx = 0;

		if (!eq)
			die("not FIELD=VALUE: %s", argv[i]);
		*eq = 0;
		if (isdigit((unsigned char)*path)) {
			idx = strtoul(path, &path, 10);
			if (*path++ != '.')
				die("bad field path %s", argv[i]);
		}
		if (idx >= r.n)
			die("no such record in %s", argv[i]);
		if (eq[1] == '@') {
			size_t len;
			int cwd = open(".", O_RDONLY | O_DIRECTORY);
			char *v = (char *)read_file(cwd, eq + 2, &len);

			v = realloc(v, len + 1);
			v[len] = 0;
			v[strcspn(v, "\n")] = 0;
			set_path(r.m[idx], path, v);
			continue;
		}
		set_path(r.m[idx], path, eq + 1);
	}
	store(dirfd, argv[2], &r);
	if (k->kind != IMG_INVENTORY)
		rehash(dirfd, NULL, NULL);
	return 0;
}
