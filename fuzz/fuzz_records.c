// SPDX-License-Identifier: MIT
/*
 * fuzz_records: one image file of any kind, read and checked as `amber
 * restore` reads and checks it before it creates anything (img_open,
 * img_get and the restore_read hooks of the resource table), then printed
 * as `amber show` prints it.
 *
 * Input: [kind][flags][files][u32 root pid][the file: header, records].
 * kind picks the file (modulo the table below); flags: bit 0 keeps the
 * records' checksums as they are (else they are made right first), bit 1
 * restores with --shell-job, bit 2 from an image whose files belong to
 * nobody (the credentials limit of creds.c); files is the number of open
 * files that fds and mappings may refer to, root pid the inventory's (for
 * pstree.img).
 *
 * What restore would read beside that file is there and valid, so that the
 * checks after it run too: an empty pagemap beside mm-PID.img, a mapping
 * table with room for any run beside pagemap-PID.img, no fds beside
 * files.img.
 */
#include <sys/mman.h>

#include "amber.h"
#include "fuzz.h"
#include "mem.h"
#include "mutate.h"
#include "restore.h"

#define HDR 7 /* kind, flags, files, root pid */

enum {
	KEEP_HASHES = 1 << 0,
	SHELL_JOB = 1 << 1,
	OWNED_BY_NOBODY = 1 << 2,
};

enum fkind { F_INVENTORY, F_CORE, F_MM, F_PAGEMAP, F_FILES, F_FDS, F_FS, F_GHOST, F_PSTREE };

/* Each kind's file has its own pid, so that the companions of one are not another's. */
static const struct {
	enum img_kind kind;
	const char *name;
	pid_t pid;
	const ProtobufCMessageDescriptor *desc; /* of its records (ghost files have none) */
} files[] = {
	[F_INVENTORY] = {IMG_INVENTORY, "inventory.img", 0, &inventory__descriptor},
	[F_CORE] = {IMG_CORE, "core-1.img", 1, &task_core__descriptor},
	[F_MM] = {IMG_MM, "mm-2.img", 2, &mm_entry__descriptor},
	[F_PAGEMAP] = {IMG_PAGEMAP, "pagemap-3.img", 3, &pagemap_entry__descriptor},
	[F_FILES] = {IMG_FILES, "files.img", 4, &reg_file__descriptor},
	[F_FDS] = {IMG_FDS, "fds-5.img", 5, &fd_entry__descriptor},
	[F_FS] = {IMG_FS, "fs-6.img", 6, &fs_entry__descriptor},
	[F_GHOST] = {IMG_GHOST, "ghost-0.img", 0, NULL},
	[F_PSTREE] = {IMG_PSTREE, "pstree.img", 0, &pstree_entry__descriptor},
};
#define NR_KINDS (sizeof(files) / sizeof(files[0]))

#define PAGES_SIZE (1UL << 20) /* pages-3.img: room for 255 pages of runs */

/* Room for the runs of any image: mm-3.img maps all of user space below 128 TiB, then
 * a part without pages and a vDSO. */
static const struct {
	uint64_t start, end;
	VmaKind kind;
} companion_vmas[] = {
	{0x1000UL, 0x800000000000UL, VMA_KIND__VMA_ANON_PRIVATE},
	{0x800000000000UL, 0x800000100000UL, VMA_KIND__VMA_VVAR},
	{0x800000100000UL, 0x800000102000UL, VMA_KIND__VMA_VDSO},
};
#define NR_VMAS (sizeof(companion_vmas) / sizeof(companion_vmas[0]))

/* The companions as the inventory lists them (written once), then the input's file. */
static struct img_set companions;

static void write_pages(const char *name, size_t size)
{
	static const uint8_t zero[4096];
	struct img *img;
	int ret = img_create(&companions, IMG_PAGES, &img, "%s", name);

	for (size_t done = IMG_HDR_SIZE; !ret && done < size; done += sizeof(zero))
		ret = img_write(img, zero, size - done < sizeof(zero) ? size - done : sizeof(zero));
	if (!ret)
		ret = img_finish(img);
	if (ret) {
		fprintf(stderr, "fuzz: cannot write %s: %s\n", name, strerror(-ret));
		abort();
	}
}

static void write_companions(void)
{
	VmaEntry v[NR_VMAS], *pv[NR_VMAS];
	MmEntry mm = MM_ENTRY__INIT;
	const ProtobufCMessage *msg = &mm.base;

	for (size_t i = 0; i < NR_VMAS; i++) {
		vma_entry__init(&v[i]);
		v[i].start = companion_vmas[i].start;
		v[i].end = companion_vmas[i].end;
		v[i].kind = companion_vmas[i].kind;
		v[i].prot = PROT_READ | PROT_WRITE;
		pv[i] = &v[i];
	}
	mm.n_vmas = NR_VMAS;
	mm.vmas = pv;
	companions.dirfd = fuzz_dirfd;
	fuzz_write_records(&companions, "mm-3.img", IMG_MM, &msg, 1);
	write_pages("pages-3.img", PAGES_SIZE);
	fuzz_write_records(&companions, "pagemap-2.img", IMG_PAGEMAP, NULL, 0);
	write_pages("pages-2.img", PAGES_DATA_OFF);
	fuzz_write_records(&companions, "fds-4.img", IMG_FDS, NULL, 0);
}

/*
 * inventory.img listing the companions and name (len bytes of buf), as dump
 * would write it, so that img_dir_open() checks the input's file as it
 * checks a real one: framing, record sizes and counts.
 */
static void write_inventory(const char *name, const uint8_t *buf, size_t len, uint32_t root)
{
	InventoryFile input = INVENTORY_FILE__INIT, *list[16];
	Inventory inv = INVENTORY__INIT;
	const ProtobufCMessage *msg = &inv.base;
	size_t n = 0;

	for (size_t i = 0; i < companions.n && n < 15; i++)
		list[n++] = companions.files[i];
	{
		input.name = (char *)name;
		input.size = len;
		input.xxh3 = XXH3_64bits(buf, len);
		list[n++] = &input;
	}
	inv.image_version = IMG_VERSION;
	inv.root_pid = root;
	inv.kernel = "fuzz";
	inv.n_files = n;
	inv.files = list;
	unlinkat(fuzz_dirfd, "inventory.img", 0);
	fuzz_write_records(NULL, "inventory.img", IMG_INVENTORY, &msg, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_setup();
	/* amber show prints to stdout; libFuzzer reports on stderr */
	if (!getenv("AMBER_FUZZ_LOG") && !freopen("/dev/null", "w", stdout))
		abort();
	write_companions();
	return 0;
}

struct run {
	struct opts o;
	struct tree t;
	struct restore_ctx ctx;
	RegFile fake_files[256], *fake_list[256];
};

/* The core and every restore_read hook that checks only what it holds. */
static int read_core(struct run *r)
{
	struct restore_ctx *ctx = &r->ctx;
	int ret = img_read_one(ctx->img, IMG_CORE, &task_core__descriptor,
			       (ProtobufCMessage **)&ctx->core, "core-%d.img", ctx->pid);

	for (const struct resource_ops *const *op = resources; !ret && *op; op++)
		if ((*op)->restore_read && *op != &files_ops && *op != &mem_ops &&
		    *op != &fs_ops) /* these read files of their own: other kinds */
			ret = (*op)->restore_read(ctx);
	return ret;
}

/* A ghost file is opened (header checked) and copied out whole. */
static int read_ghost(struct run *r)
{
	static char buf[1 << 16];
	struct img *img;
	ssize_t n;
	int ret = img_open(r->ctx.img, IMG_GHOST, &img, "%s", files[F_GHOST].name);

	if (ret)
		return ret;
	while ((n = read(img->fd, buf, sizeof(buf))) > 0)
		;
	img_close(img);
	return n < 0 ? -errno : 0;
}

static int restore_read(struct run *r, enum fkind k)
{
	struct restore_ctx *ctx = &r->ctx;

	switch (k) {
	case F_INVENTORY: /* decoded by img_dir_open(); its own checks: fuzz_inventory */
		return 0;
	case F_CORE:
		return read_core(r);
	case F_MM:
	case F_PAGEMAP:
		return mem_ops.restore_read(ctx);
	case F_FILES:
		return files_ops.restore_read(ctx);
	case F_FDS: /* files.img as if read already, with nr_files entries */
		r->t.rfiles = r->fake_list;
		r->t.nr_rfiles = ctx->nr_files;
		return files_ops.restore_read(ctx);
	case F_FS:
		return fs_ops.restore_read(ctx);
	case F_GHOST:
		return read_ghost(r);
	case F_PSTREE:
		return read_pstree(&r->t);
	}
	return -EINVAL;
}

static void free_run(struct run *r)
{
	struct restore_ctx *ctx = &r->ctx;
	struct tree *t = &r->t;

	/* threads_restore_read leaves a core it refused in the slot after the last */
	for (size_t i = 1; ctx->threads && ctx->core && i <= ctx->core->n_threads; i++) {
		if (ctx->threads[i].core)
			task_core__free_unpacked(ctx->threads[i].core, NULL);
		free(ctx->threads[i].inf);
	}
	free(ctx->threads);
	if (ctx->core)
		task_core__free_unpacked(ctx->core, NULL);
	if (ctx->mm)
		mm_entry__free_unpacked(ctx->mm, NULL);
	for (size_t i = 0; i < ctx->nr_pm; i++)
		pagemap_entry__free_unpacked(ctx->pm[i], NULL);
	free(ctx->pm);
	for (size_t i = 0; i < ctx->nr_fds; i++)
		fd_entry__free_unpacked(ctx->fds[i], NULL);
	free(ctx->fds);
	if (ctx->fs)
		fs_entry__free_unpacked(ctx->fs, NULL);
	if (t->rfiles != r->fake_list) {
		for (size_t i = 0; i < t->nr_rfiles; i++)
			reg_file__free_unpacked(t->rfiles[i], NULL);
		free(t->rfiles);
	}
	for (size_t i = 0; i < t->nr_pstree; i++)
		pstree_entry__free_unpacked(t->pstree[i], NULL);
	free(t->pstree);
	tree_index_free(t);
	free(t->helpers);
	free(t->creator);
}

/* amber show DIR, with a core file for the pid so that its other files are shown. */
static void show(enum fkind k)
{
	char core[32], *argv[] = {"show", fuzz_dir, NULL};

	snprintf(core, sizeof(core), "core-%d.img", files[k].pid);
	if (files[k].pid && k != F_CORE)
		fuzz_write(core, "", 0);
	cmd_show(2, argv);
	fflush(stdout);
	if (files[k].pid && k != F_CORE)
		unlinkat(fuzz_dirfd, core, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct img_dir *d = NULL;
	struct run *r;
	enum fkind k;
	uint8_t *file;
	size_t len;
	uint32_t root;
	int flags;

	if (size < HDR)
		return 0;
	k = (enum fkind)(data[0] % NR_KINDS);
	flags = data[1];
	memcpy(&root, data + 3, 4);
	len = size - HDR;
	file = malloc(len ? len : 1);
	r = calloc(1, sizeof(*r));
	if (!file || !r)
		abort();
	memcpy(file, data + HDR, len);
	if (!(flags & KEEP_HASHES))
		fuzz_fix_hashes(file, len);
	fuzz_write(files[k].name, file, len);
	if (k != F_INVENTORY)
		write_inventory(files[k].name, file, len, root);

	r->o.shell_job = flags & SHELL_JOB;
	for (size_t i = 0; i < 256; i++) {
		reg_file__init(&r->fake_files[i]);
		r->fake_files[i].id = i;
		r->fake_files[i].path = "/fuzz";
		r->fake_list[i] = &r->fake_files[i];
	}
	/* as restore: nothing is read that img_dir_open() has not checked */
	if (!img_dir_open(fuzz_dirfd, fuzz_dir, &d) && !img_dir_wait(d)) {
		r->t = (struct tree){.o = &r->o, .dirfd = fuzz_dirfd, .img = d, .inv = d->inv};
		/* the owner as owner_init() makes it, without the user database */
		if (flags & OWNED_BY_NOBODY)
			r->t.owner = (struct owner){.uid = 65534, .gid = 65534, .switches = true};
		else
			r->t.owner = (struct owner){.unbounded = true};
		r->t.image_uid = r->t.image_gid = r->t.owner.uid;
		r->ctx = (struct restore_ctx){.o = &r->o,
					      .tree = &r->t,
					      .img = d,
					      .inv = d->inv,
					      .pid = files[k].pid,
					      .pages_fd = -1,
					      .nr_files = data[2]};
		restore_read(r, k);
		free_run(r);
	}
	img_dir_close(d);
	show(k);

	unlinkat(fuzz_dirfd, files[k].name, 0);
	free(r);
	free(file);
	return 0;
}

/* Half of the time one record's fields (mutate.h), else libFuzzer's byte mutations. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed)
{
	uint64_t rs = seed * 0x9e3779b97f4a7c15ULL | 1;
	size_t pos = HDR + IMG_HDR_SIZE, at[64], n = 0, r, nsize;
	uint32_t len;

	if (size < pos || rnd_next(&rs) % 2 || !files[data[0] % NR_KINDS].desc)
		return LLVMFuzzerMutate(data, size, max_size);
	for (; n < 64 && size - pos >= 12; pos += 12 + len) {
		memcpy(&len, data + pos, 4);
		if (len > size - pos - 12)
			break;
		at[n++] = pos;
	}
	if (!n)
		return LLVMFuzzerMutate(data, size, max_size);
	r = at[rnd_next(&rs) % n];
	memcpy(&len, data + r, 4);
	nsize = mutate_record(data, size, max_size, r, r + 12, len, files[data[0] % NR_KINDS].desc,
			      &rs);
	return nsize ? nsize : LLVMFuzzerMutate(data, size, max_size);
}
