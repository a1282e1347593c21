// SPDX-License-Identifier: MIT
/*
 * imgbloat: make an image file as large as an attacker likes, with valid
 * record checksums, to show that restore refuses it without decoding it.
 *
 *   imgbloat DIR FILE records SIZE   FILE becomes copies of its first record,
 *                                    SIZE bytes at least
 *   imgbloat DIR FILE FIELD SIZE     FILE's first record grows to SIZE bytes
 *                                    by repeating its first FIELD (a
 *                                    repeated field: "vmas" of mm-PID.img)
 *
 * The inventory is left as it is: refresh it with imgedit DIR --rehash.
 * The file is rewritten in place (owner and mode stay).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"

static void __attribute__((noreturn)) die(const char *what, const char *arg)
{
	fprintf(stderr, "imgbloat: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
	exit(2);
}

static const ProtobufCMessageDescriptor *desc_of(const char *name)
{
	static const struct {
		const char *prefix;
		const ProtobufCMessageDescriptor *desc;
	} kinds[] = {
		{"core-", &task_core__descriptor},	   {"mm-", &mm_entry__descriptor},
		{"pagemap-", &pagemap_entry__descriptor},  {"files.img", &reg_file__descriptor},
		{"fds-", &fd_entry__descriptor},	   {"fs-", &fs_entry__descriptor},
		{"pstree.img", &pstree_entry__descriptor},
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strncmp(name, kinds[i].prefix, strlen(kinds[i].prefix)))
			return kinds[i].desc;
	die("not a record file", name);
}

static size_t varint(const uint8_t *p, size_t len, size_t *off)
{
	size_t v = 0;

	for (int shift = 0; *off < len && shift < 64; shift += 7) {
		uint8_t b = p[(*off)++];

		v |= (size_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	die("bad varint in the record", NULL);
}

/* Where the first occurrence of field id (tag included) lies in a record. */
static void find_field(const uint8_t *p, size_t len, uint32_t id, size_t *start, size_t *end)
{
	size_t off = 0;

	while (off < len) {
		size_t at = off, tag = varint(p, len, &off);

		switch (tag & 7) {
		case 0:
			varint(p, len, &off);
			break;
		case 1:
			off += 8;
			break;
		case 2:
			off += varint(p, len, &off);
			break;
		case 5:
			off += 4;
			break;
		default:
			die("unknown wire type in the record", NULL);
		}
		if (off > len)
			die("truncated record", NULL);
		if (tag >> 3 == id) {
			*start = at;
			*end = off;
			return;
		}
	}
	die("the field is not in the first record", NULL);
}

static void put(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		die("cannot write", strerror(errno));
}

static void put_record(int fd, const uint8_t *payload, uint32_t len)
{
	uint64_t h = XXH3_64bits(payload, len);

	put(fd, &len, 4);
	put(fd, &h, 8);
	put(fd, payload, len);
}

int main(int argc, char **argv)
{
	uint8_t hdr[IMG_HDR_SIZE], head[12], *rec;
	unsigned long long size;
	uint32_t len;
	int dirfd, fd;

	if (argc != 5)
		die("usage: imgbloat DIR FILE records|FIELD SIZE", NULL);
	size = strtoull(argv[4], NULL, 0);
	dirfd = open(argv[1], O_RDONLY | O_DIRECTORY);
	fd = dirfd < 0 ? -1 : openat(dirfd, argv[2], O_RDWR);
	if (fd < 0)
		die("cannot open", argv[2]);
	if (read(fd, hdr, sizeof(hdr)) != sizeof(hdr) || read(fd, head, 12) != 12)
		die("no record in", argv[2]);
	memcpy(&len, head, 4);
	rec = malloc(len + 1);
	if (!rec || read(fd, rec, len) != (ssize_t)len)
		die("truncated record in", argv[2]);
	if (ftruncate(fd, 0) || lseek(fd, 0, SEEK_SET))
		die("cannot rewrite", argv[2]);
	put(fd, hdr, sizeof(hdr));
	if (!strcmp(argv[3], "records")) {
		for (unsigned long long done = sizeof(hdr); done < size; done += 12 + len)
			put_record(fd, rec, len);
	} else {
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field_by_name(desc_of(argv[2]), argv[3]);
		size_t start, end, n = len;
		uint8_t *big;

		if (!f || f->label != PROTOBUF_C_LABEL_REPEATED)
			die("no such repeated field", argv[3]);
		find_field(rec, len, f->id, &start, &end);
		if (size > UINT32_MAX || size < len)
			die("bad size", argv[4]);
		big = malloc(size + (end - start));
		if (!big)
			die("out of memory", NULL);
		memcpy(big, rec, len);
		/* a repeated field's occurrences add up: each copy is one more element */
		while (n < size) {
			memcpy(big + n, rec + start, end - start);
			n += end - start;
		}
		put_record(fd, big, (uint32_t)n);
	}
	if (close(fd))
		die("cannot write", strerror(errno));
	return 0;
}
