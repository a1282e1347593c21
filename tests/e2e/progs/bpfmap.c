// SPDX-License-Identifier: MIT
/*
 * bpfmap: BPF maps and their contents.
 *
 *   fd 30  hash map "hmap": 8-byte keys, 16-byte values, 64 entries at most, 5 in it
 *   fd 31  array map "arr": 10 entries of 12 bytes, then frozen (BPF_MAP_FREEZE)
 *   fd 32  per-CPU array "pca": 4 entries of 8 bytes, each CPU its own value
 *   fd 33  per-CPU hash "pch" (BPF_F_NO_PREALLOC): 4-byte keys and values, 3 entries
 *
 * After restore: every map has exactly its entries with their values (each CPU's for
 * the per-CPU ones), the array is still frozen (an update fails with EPERM), and the
 * hash map takes a new key but not an existing one with BPF_NOEXIST.
 *
 * Arguments: "drop": the program becomes nobody once its maps exist (an image of
 * nobody's holding maps); "lru": fd 34 is also an LRU hash map (refused at dump).
 */
#include <grp.h>
#include <linux/bpf.h>
#include <sys/syscall.h>

#include "prog.h"

#define HMAP 30
#define ARR  31
#define PCA  32
#define PCH  33
#define LRU  34

static int ncpus;

static long bpf(int cmd, union bpf_attr *a)
{
	return syscall(SYS_bpf, cmd, a, sizeof(*a));
}

static void at(int fd, int want)
{
	if (fd < 0)
		prog_die("creating fd %d", want);
	if (dup2(fd, want) != want)
		prog_die("dup2 %d", want);
	close(fd);
}

static int create(int type, unsigned ks, unsigned vs, unsigned max, unsigned flags,
		  const char *name)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = type;
	a.key_size = ks;
	a.value_size = vs;
	a.max_entries = max;
	a.map_flags = flags;
	snprintf(a.map_name, sizeof(a.map_name), "%s", name);
	return (int)bpf(BPF_MAP_CREATE, &a);
}

static int update(int fd, const void *k, const void *v, unsigned long long flags)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = fd;
	a.key = (uintptr_t)k;
	a.value = (uintptr_t)v;
	a.flags = flags;
	return bpf(BPF_MAP_UPDATE_ELEM, &a) ? -errno : 0;
}

static int lookup(int fd, const void *k, void *v)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = fd;
	a.key = (uintptr_t)k;
	a.value = (uintptr_t)v;
	return bpf(BPF_MAP_LOOKUP_ELEM, &a) ? -errno : 0;
}

static int count_keys(int fd, size_t ks)
{
	unsigned char key[64], next[64];
	union bpf_attr a;
	int n = 0;

	for (;;) {
		memset(&a, 0, sizeof(a));
		a.map_fd = fd;
		a.key = n ? (uintptr_t)key : 0;
		a.next_key = (uintptr_t)next;
		if (bpf(BPF_MAP_GET_NEXT_KEY, &a))
			return errno == ENOENT ? n : -1;
		memcpy(key, next, ks);
		n++;
	}
}

static void hval(uint64_t k, uint64_t v[2])
{
	v[0] = prog_pat(k, 0);
	v[1] = prog_pat(k, 1);
}

int main(int argc, char **argv)
{
	int first = prog_init(argc, argv), ok, n;
	int drop = argc > first && !strcmp(argv[first], "drop");
	int lru = argc > first && !strcmp(argv[first], "lru");
	uint64_t k, v[2], got[2], *pv;
	uint32_t i, arrv[3], garr[3];

	ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	{ /* the possible CPUs, as the kernel counts a per-CPU value */
		char buf[64];
		int a, b;

		if (prog_read_file("/sys/devices/system/cpu/possible", buf, sizeof(buf)) > 0 &&
		    sscanf(buf, "%d-%d", &a, &b) == 2)
			ncpus = b - a + 1;
		else if (sscanf(buf, "%d", &a) == 1)
			ncpus = 1;
	}
	pv = calloc(ncpus, 8);

	at(create(BPF_MAP_TYPE_HASH, 8, 16, 64, 0, "hmap"), HMAP);
	for (k = 1; k <= 5; k++) {
		uint64_t key = k * 1000;

		hval(key, v);
		if (update(HMAP, &key, v, BPF_NOEXIST))
			prog_die("hmap update");
	}
	at(create(BPF_MAP_TYPE_ARRAY, 4, 12, 10, 0, "arr"), ARR);
	for (i = 0; i < 10; i++) {
		arrv[0] = i, arrv[1] = i * i, arrv[2] = 0xa0a0a0a0 + i;
		if (update(ARR, &i, arrv, BPF_ANY))
			prog_die("arr update");
	}
	{
		union bpf_attr a;

		memset(&a, 0, sizeof(a));
		a.map_fd = ARR;
		if (bpf(BPF_MAP_FREEZE, &a))
			prog_die("freeze");
	}
	at(create(BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 4, 0, "pca"), PCA);
	for (i = 0; i < 4; i++) {
		for (int c = 0; c < ncpus; c++)
			pv[c] = prog_pat(i, c);
		if (update(PCA, &i, pv, BPF_ANY))
			prog_die("pca update");
	}
	at(create(BPF_MAP_TYPE_PERCPU_HASH, 4, 4, 8, BPF_F_NO_PREALLOC, "pch"), PCH);
	for (i = 1; i <= 3; i++) {
		uint32_t key = i * 7;

		for (int c = 0; c < ncpus; c++)
			pv[c] = (uint32_t)prog_pat(key, c); /* 4-byte values, 8 apart */
		if (update(PCH, &key, pv, BPF_NOEXIST))
			prog_die("pch update");
	}
	if (lru)
		at(create(BPF_MAP_TYPE_LRU_HASH, 4, 4, 8, 0, "lru"), LRU);
	if (drop && (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		     setresuid(65534, 65534, 65534)))
		prog_die("becoming nobody");

	prog_ready();
	prog_wait_go();
	if (prog_sabotage()) {
		union bpf_attr a;

		k = 3000;
		memset(&a, 0, sizeof(a));
		a.map_fd = HMAP;
		a.key = (uintptr_t)&k;
		bpf(BPF_MAP_DELETE_ELEM, &a);
	}

	n = count_keys(HMAP, 8);
	CHECK(n == 5, "hmap: 5 keys (got %d)", n);
	for (ok = 1, k = 1; k <= 5; k++) {
		uint64_t key = k * 1000;

		hval(key, v);
		ok &= !lookup(HMAP, &key, got) && got[0] == v[0] && got[1] == v[1];
	}
	CHECK(ok, "hmap: each key with its 16-byte value");
	k = 6000;
	CHECK(!update(HMAP, &k, v, BPF_NOEXIST), "hmap: a new key goes in");
	k = 1000;
	CHECK(update(HMAP, &k, v, BPF_NOEXIST) == -EEXIST,
	      "hmap: an existing key is refused with BPF_NOEXIST");

	for (ok = 1, i = 0; i < 10; i++)
		ok &= !lookup(ARR, &i, garr) && garr[0] == i && garr[1] == i * i &&
		      garr[2] == 0xa0a0a0a0 + i;
	CHECK(ok, "arr: its 10 values");
	i = 0;
	n = update(ARR, &i, garr, BPF_ANY);
	CHECK(n == -EPERM, "arr: still frozen (update: %s)", strerror(-n));

	for (ok = 1, i = 0; i < 4; i++) {
		memset(pv, 0, ncpus * 8);
		ok &= !lookup(PCA, &i, pv);
		for (int c = 0; c < ncpus; c++)
			ok &= pv[c] == prog_pat(i, c);
	}
	CHECK(ok, "pca: each CPU's value of its 4 entries (%d CPUs)", ncpus);
	n = count_keys(PCH, 4);
	CHECK(n == 3, "pch: 3 keys (got %d)", n);
	for (ok = 1, i = 1; i <= 3; i++) {
		uint32_t key = i * 7;

		memset(pv, 0, ncpus * 8);
		ok &= !lookup(PCH, &key, pv);
		for (int c = 0; c < ncpus; c++)
			ok &= (uint32_t)pv[c] == (uint32_t)prog_pat(key, c);
	}
	CHECK(ok, "pch: each CPU's value of its 3 keys");
	return prog_done();
}
