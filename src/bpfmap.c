// SPDX-License-Identifier: MIT
/*
 * BPF maps ("anon_inode:bpf-map"): array and hash maps and their per-CPU
 * kinds.  Their attributes come from BPF_OBJ_GET_INFO_BY_FD (the fdinfo's
 * "frozen:" says whether BPF_MAP_FREEZE was called), their contents from
 * BPF_MAP_LOOKUP_ELEM (for a hash map, of every key BPF_MAP_GET_NEXT_KEY
 * walks).  Restore makes the map with BPF_MAP_CREATE as the image's owner,
 * fills it (hash keys with BPF_NOEXIST: a key given twice is refused) and
 * freezes it again.
 *
 * Refused at dump, naming the fd: other map types, maps with BTF type
 * information, offloaded maps, map flags other than those below (a map the
 * syscall side may not read or write, BPF_F_MMAPABLE), more than MAX_ENTRIES
 * entries, and a map that a loaded BPF program uses (it would come back
 * apart from the program).  BPF programs, links and other BPF objects are
 * no fd type of amber's: refused by files.c with their kind.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anonfd.h"

#define MAX_ENTRIES   (1u << 20) /* image.c's LIM_BPF */
#define MAX_KEY	      512	 /* MAX_BPF_STACK: the kernel's bound on a hash key */
#define MAX_VALUE     (1u << 20) /* per CPU */
#define MAX_CPUS      8192
#define ALLOWED_FLAGS (BPF_F_NO_PREALLOC | BPF_F_ZERO_SEED | BPF_F_RDONLY_PROG | BPF_F_WRONLY_PROG)

static bool bpfmap_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:bpf-map");
}

static bool is_array(uint32_t t)
{
	return t == BPF_MAP_TYPE_ARRAY || t == BPF_MAP_TYPE_PERCPU_ARRAY;
}

static bool is_percpu(uint32_t t)
{
	return t == BPF_MAP_TYPE_PERCPU_HASH || t == BPF_MAP_TYPE_PERCPU_ARRAY;
}

static bool type_ok(uint32_t t)
{
	return t == BPF_MAP_TYPE_HASH || t == BPF_MAP_TYPE_ARRAY || is_percpu(t);
}

/* The possible CPUs (/sys/devices/system/cpu/possible, "0-N"): a per-CPU value's count. */
static int possible_cpus(void)
{
	char *buf, *p;
	int n = 0, ret;

	ret = sys_read_file("/sys/devices/system/cpu/possible", &buf, NULL);
	if (ret)
		return ret;
	for (p = buf; *p && *p != '\n';) {
		long a = strtol(p, &p, 10), b = a;

		if (*p == '-')
			b = strtol(p + 1, &p, 10);
		n += (int)(b - a + 1);
		if (*p == ',')
			p++;
		else
			break;
	}
	free(buf);
	return n > 0 && n <= MAX_CPUS ? n : -EINVAL;
}

/* The bytes a lookup gives (and an update takes) for one entry. */
static size_t value_len(uint32_t type, uint32_t value_size, int cpus)
{
	return is_percpu(type) ? (((size_t)value_size + 7) & ~(size_t)7) * (size_t)cpus
			       : value_size;
}

/* Is map id used by a loaded BPF program?  0 no, 1 yes, -errno unknown. */
static int used_by_prog(uint32_t map_id, uint32_t *prog)
{
	union bpf_attr a;
	uint32_t id = 0;

	for (;;) {
		struct bpf_prog_info info;
		uint32_t ids[256];
		long fd;
		int ret;

		memset(&a, 0, sizeof(a));
		a.start_id = id;
		ret = (int)sys_bpf(BPF_PROG_GET_NEXT_ID, &a, sizeof(a));
		if (ret == -ENOENT)
			return 0;
		if (ret)
			return ret;
		id = a.next_id;
		memset(&a, 0, sizeof(a));
		a.prog_id = id;
		fd = sys_bpf(BPF_PROG_GET_FD_BY_ID, &a, sizeof(a));
		if (fd == -ENOENT)
			continue; /* gone meanwhile */
		if (fd < 0)
			return (int)fd;
		memset(&info, 0, sizeof(info));
		info.nr_map_ids = 256;
		info.map_ids = (uintptr_t)ids;
		memset(&a, 0, sizeof(a));
		a.info.bpf_fd = (uint32_t)fd;
		a.info.info_len = sizeof(info);
		a.info.info = (uintptr_t)&info;
		ret = (int)sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a, sizeof(a));
		close((int)fd);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < info.nr_map_ids && i < 256; i++)
			if (ids[i] == map_id) {
				*prog = id;
				return 1;
			}
		if (info.nr_map_ids > 256)
			return -E2BIG;
	}
}

static int add_bytes(ProtobufCBinaryData **arr, size_t *n, const void *data, size_t len)
{
	ProtobufCBinaryData *na = realloc(*arr, (*n + 1) * sizeof(**arr));

	if (!na)
		return -ENOMEM;
	*arr = na;
	na[*n].data = malloc(len ? len : 1);
	if (!na[*n].data)
		return -ENOMEM;
	memcpy(na[*n].data, data, len);
	na[*n].len = len;
	(*n)++;
	return 0;
}

static int lookup(int fd, const void *key, void *value)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)fd;
	a.key = (uintptr_t)key;
	a.value = (uintptr_t)value;
	return (int)sys_bpf(BPF_MAP_LOOKUP_ELEM, &a, sizeof(a));
}

static int dump_contents(struct dump_ctx *ctx, int fd, int dup, BpfMapEntry *e, int cpus)
{
	size_t vlen = value_len(e->map_type, e->value_size, cpus);
	unsigned char *key = calloc(1, e->key_size), *next = calloc(1, e->key_size);
	unsigned char *val = malloc(vlen);
	int ret = 0;

	if (!key || !next || !val) {
		ret = -ENOMEM;
		goto free_all;
	}
	if (is_array(e->map_type)) {
		for (uint32_t i = 0; i < e->max_entries && !ret; i++) {
			memcpy(key, &i, sizeof(i));
			ret = lookup(dup, key, val);
			if (!ret)
				ret = add_bytes(&e->values, &e->n_values, val, vlen);
		}
	} else {
		union bpf_attr a;
		bool first = true;

		for (;;) {
			memset(&a, 0, sizeof(a));
			a.map_fd = (uint32_t)dup;
			a.key = first ? 0 : (uintptr_t)key;
			a.next_key = (uintptr_t)next;
			ret = (int)sys_bpf(BPF_MAP_GET_NEXT_KEY, &a, sizeof(a));
			if (ret == -ENOENT) {
				ret = 0;
				break;
			}
			if (ret)
				break;
			first = false;
			memcpy(key, next, e->key_size);
			ret = lookup(dup, key, val);
			if (ret == -ENOENT) /* only a BPF program could have removed it */
				ret = -EAGAIN;
			if (!ret && e->n_keys >= e->max_entries)
				ret = -E2BIG;
			if (!ret)
				ret = add_bytes(&e->keys, &e->n_keys, key, e->key_size);
			if (!ret)
				ret = add_bytes(&e->values, &e->n_values, val, vlen);
			if (ret)
				break;
		}
	}
	if (ret)
		pr_err("pid %d: fd %d: cannot read the contents of BPF map '%s': %s", ctx->pid, fd,
		       e->name ? e->name : "", strerror(-ret));
free_all:
	free(key);
	free(next);
	free(val);
	return ret;
}

static int bpfmap_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	struct bpf_map_info info;
	union bpf_attr a;
	const char *p;
	BpfMapEntry *e;
	uint32_t prog = 0;
	int ret, cpus = 1;
	char *buf;

	ret = anonfd_dump_start(ctx, fd, dup, "BPF map", &bpf_map_entry__descriptor, &buf,
				(void **)&e);
	if (ret)
		return ret;
	f->bpf_map = e;
	memset(&info, 0, sizeof(info));
	memset(&a, 0, sizeof(a));
	a.info.bpf_fd = (uint32_t)dup;
	a.info.info_len = sizeof(info);
	a.info.info = (uintptr_t)&info;
	ret = (int)sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &a, sizeof(a));
	if (ret) {
		pr_err("pid %d: fd %d: cannot read the attributes of its BPF map: %s", ctx->pid, fd,
		       strerror(-ret));
		goto free_buf;
	}
	info.name[BPF_OBJ_NAME_LEN - 1] = 0;
	e->map_type = info.type;
	e->key_size = info.key_size;
	e->value_size = info.value_size;
	e->max_entries = info.max_entries;
	e->map_flags = info.map_flags;
	e->name = strdup(info.name);
	p = anonfd_field(buf, "frozen:");
	e->has_frozen = 1;
	e->frozen = p && strtoul(p, NULL, 10) != 0;
	ret = -EOPNOTSUPP;
	if (!e->name) {
		ret = -ENOMEM;
	} else if (!type_ok(info.type)) {
		pr_err("pid %d: fd %d is a BPF map of type %u ('%s'); amber restores only array "
		       "and hash maps (and their per-CPU kinds)",
		       ctx->pid, fd, info.type, info.name);
	} else if (info.btf_id || info.btf_vmlinux_value_type_id) {
		pr_err("pid %d: fd %d is a BPF map ('%s') with BTF type information (BTF id %u); "
		       "amber cannot make its BTF again",
		       ctx->pid, fd, info.name, info.btf_id);
	} else if (info.ifindex || info.map_extra) {
		pr_err("pid %d: fd %d is a BPF map ('%s') offloaded to a device or with extra "
		       "attributes; amber cannot make it again",
		       ctx->pid, fd, info.name);
	} else if (info.map_flags & ~ALLOWED_FLAGS) {
		pr_err("pid %d: fd %d is a BPF map ('%s') with flags 0x%x (read-only or "
		       "write-only for syscalls, mmapable, ...), which amber cannot restore",
		       ctx->pid, fd, info.name, info.map_flags);
	} else if ((f->flags & O_ACCMODE) != O_RDWR) {
		pr_err("pid %d: fd %d is a BPF map ('%s') opened read-only or write-only; amber "
		       "cannot restore such an fd",
		       ctx->pid, fd, info.name);
	} else if (info.max_entries > MAX_ENTRIES || info.key_size > MAX_KEY ||
		   info.value_size > MAX_VALUE) {
		pr_err("pid %d: fd %d is a BPF map ('%s') of %u entries of %u+%u bytes, more than "
		       "amber saves (%u entries, %u-byte keys, %u-byte values)",
		       ctx->pid, fd, info.name, info.max_entries, info.key_size, info.value_size,
		       MAX_ENTRIES, MAX_KEY, MAX_VALUE);
	} else {
		ret = used_by_prog(info.id, &prog);
		if (ret)
			pr_err("pid %d: fd %d is a BPF map ('%s') %s; amber cannot dump it",
			       ctx->pid, fd, info.name,
			       ret > 0 ? "that a loaded BPF program uses (it would come back apart "
					 "from the program)"
				       : "whose users amber cannot list (BPF_PROG_GET_NEXT_ID)");
		if (ret > 0) {
			pr_err("pid %d: fd %d: the BPF program is id %u", ctx->pid, fd, prog);
			ret = -EBUSY;
		}
	}
	if (ret)
		goto free_buf;
	if (is_percpu(e->map_type)) {
		cpus = possible_cpus();
		if (cpus < 0) {
			ret = cpus;
			pr_err("cannot read /sys/devices/system/cpu/possible: %s", strerror(-ret));
			goto free_buf;
		}
		e->has_nr_cpus = 1;
		e->nr_cpus = (uint32_t)cpus;
	}
	ret = dump_contents(ctx, fd, dup, e, cpus);
	pr_debug("pid %d: fd %d: BPF map '%s' type %u, %zu entries saved", ctx->pid, fd, e->name,
		 e->map_type, e->n_values);
free_buf:
	free(buf);
	return ret;
}

/* ---- restore ---- */

static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n >= BPF_OBJ_NAME_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

static int bpfmap_check(struct tree *t, const RegFile *f)
{
	const BpfMapEntry *e = f->bpf_map;
	bool percpu, bad;
	size_t vlen;

	if (!e) {
		pr_err("files.img: BPF map entry %u has no map state; the image is corrupt", f->id);
		return -EBADMSG;
	}
	percpu = is_percpu(e->map_type);
	bad = !type_ok(e->map_type) || !e->key_size || e->key_size > MAX_KEY || !e->value_size ||
	      e->value_size > MAX_VALUE || !e->max_entries || e->max_entries > MAX_ENTRIES ||
	      (e->map_flags & ~ALLOWED_FLAGS) || (e->name && !name_ok(e->name)) ||
	      percpu != (bool)e->has_nr_cpus ||
	      (percpu && (!e->nr_cpus || e->nr_cpus > MAX_CPUS)) ||
	      (is_array(e->map_type) &&
	       (e->key_size != 4 || e->n_keys || e->n_values != e->max_entries)) ||
	      (!is_array(e->map_type) && (e->n_keys != e->n_values || e->n_keys > e->max_entries));
	vlen = bad ? 0 : value_len(e->map_type, e->value_size, percpu ? (int)e->nr_cpus : 1);
	for (size_t i = 0; !bad && i < e->n_values; i++)
		bad = e->values[i].len != vlen || (i < e->n_keys && e->keys[i].len != e->key_size);
	if (bad) {
		pr_err("files.img: BPF map entry %u has bad attributes or contents (type %u, key "
		       "%u, value %u bytes, %u entries, %zu keys, %zu values); the image is "
		       "corrupt",
		       f->id, e->map_type, e->key_size, e->value_size, e->max_entries, e->n_keys,
		       e->n_values);
		return -EBADMSG;
	}
	return 0;
}

/* Without CAP_BPF the owner may make maps only where unprivileged BPF is allowed. */
static int owner_may_bpf(struct tree *t, const RegFile *f)
{
	char *buf;
	long v = 1;

	if (!t->owner.switches)
		return 0;
	if (!sys_read_file("/proc/sys/kernel/unprivileged_bpf_disabled", &buf, NULL)) {
		v = strtol(buf, NULL, 10);
		free(buf);
	}
	if (!v)
		return 0;
	pr_err("BPF map entry %u ('%s'): the image's owner, uid %u, may not create BPF maps "
	       "(kernel.unprivileged_bpf_disabled is %ld; root's own image may)",
	       f->id, f->bpf_map->name ? f->bpf_map->name : "", t->owner.uid, v);
	return -EPERM;
}

static int bpfmap_open(struct tree *t, RegFile *f)
{
	BpfMapEntry *e = f->bpf_map;
	union bpf_attr a;
	int fd, ret, cpus;

	ret = bpfmap_check(t, f);
	if (!ret)
		ret = owner_may_bpf(t, f);
	if (ret)
		return ret;
	if (is_percpu(e->map_type)) {
		cpus = possible_cpus();
		if (cpus != (int)e->nr_cpus) {
			pr_err("BPF map entry %u ('%s') is per-CPU with %u CPUs, this machine has "
			       "%d possible CPUs",
			       f->id, e->name ? e->name : "", e->nr_cpus, cpus);
			return -EINVAL;
		}
	}
	memset(&a, 0, sizeof(a));
	a.map_type = e->map_type;
	a.key_size = e->key_size;
	a.value_size = e->value_size;
	a.max_entries = e->max_entries;
	a.map_flags = e->map_flags;
	if (e->name)
		memcpy(a.map_name, e->name, strlen(e->name));
	fd = (int)sys_bpf(BPF_MAP_CREATE, &a, sizeof(a));
	if (fd < 0) {
		pr_err("cannot create BPF map '%s' (entry %u, type %u): %s", e->name ? e->name : "",
		       f->id, e->map_type, strerror(-fd));
		return fd;
	}
	for (size_t i = 0; i < e->n_values; i++) {
		uint32_t idx = (uint32_t)i;

		memset(&a, 0, sizeof(a));
		a.map_fd = (uint32_t)fd;
		a.key = is_array(e->map_type) ? (uintptr_t)&idx : (uintptr_t)e->keys[i].data;
		a.value = (uintptr_t)e->values[i].data;
		a.flags = is_array(e->map_type) ? BPF_ANY : BPF_NOEXIST;
		ret = (int)sys_bpf(BPF_MAP_UPDATE_ELEM, &a, sizeof(a));
		if (ret) {
			pr_err("cannot fill BPF map '%s' (entry %u), element %zu: %s%s",
			       e->name ? e->name : "", f->id, i, strerror(-ret),
			       ret == -EEXIST ? " (a key given twice: the image is corrupt)" : "");
			goto close_fd;
		}
	}
	if (e->frozen) {
		memset(&a, 0, sizeof(a));
		a.map_fd = (uint32_t)fd;
		ret = (int)sys_bpf(BPF_MAP_FREEZE, &a, sizeof(a));
		if (ret) {
			pr_err("cannot freeze BPF map '%s' (entry %u): %s", e->name ? e->name : "",
			       f->id, strerror(-ret));
			goto close_fd;
		}
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) || fcntl(fd, F_SETFL, f->flags & O_NONBLOCK)) {
		ret = -errno;
		goto close_fd;
	}
	return fd;
close_fd:
	close(fd);
	return ret;
}

const struct fd_type bpfmap_type = {
	.name = "bpf-map",
	.kind = FILE_KIND__FILE_BPF_MAP,
	.match = bpfmap_match,
	.dump = bpfmap_dump,
	.check = bpfmap_check,
	.open = bpfmap_open,
};
