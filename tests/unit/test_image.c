// SPDX-License-Identifier: MIT
/*
 * Image files: a set written with img_create/img_put/img_finish and
 * img_set_commit reads back, verifies, and every kind of damage (a flipped
 * byte, a truncated or missing file, no inventory) is refused, and so is
 * what restore must not trust: files not listed, links, files of another
 * owner or writable by others, records larger or more numerous than a
 * process can have.  Write and read faults are injected through AMBER_FAULT.
 * A dump writes only files it creates: a name planted in the directory (a
 * link to a file elsewhere) is never written through, and the directory
 * itself must be new, or empty and the user's alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "hash.h"
#include "image.h"
#include "log.h"
#include "sys.h"
#include "unit.h"

#define ROOT_PID 4321
#define NR_PM	 3

struct fixture {
	char dir[64];
	int dirfd;
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	fx->dirfd = unit_mkdir(fx->dir);
	if (fx->dirfd < 0)
		return -1;
	set_faults(NULL);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	set_faults(NULL);
	close(fx->dirfd);
	if (unit_remove(fx->dir, NULL))
		return -1;
	free(fx);
	return 0;
}

static bool exists(struct fixture *fx, const char *name)
{
	return !faccessat(fx->dirfd, name, F_OK, 0);
}

static int nr_rfiles = 1; /* records of files.img */

/* fs-, pagemap- (NR_PM records), pages-, fds-PID.img, files.img; no inventory yet. */
static int write_files(struct img_set *set)
{
	static char page[4096];
	PagemapEntry pm;
	FdEntry fd;
	FsEntry fs;
	RegFile rf;
	struct img *img;
	char name[64];
	int ret;

	fs_entry__init(&fs);
	fs.cwd = "/tmp/work dir";
	fs.root = "/";
	ret = img_create(set, IMG_FS, &img, "fs-%d.img", ROOT_PID);
	if (ret)
		return ret;
	ret = img_put(img, &fs.base);
	if (ret) {
		img_abort(img);
		return ret;
	}
	ret = img_finish(img);
	if (ret)
		return ret;

	ret = img_create(set, IMG_PAGEMAP, &img, "pagemap-%d.img", ROOT_PID);
	if (ret)
		return ret;
	for (int i = 0; i < NR_PM; i++) {
		pagemap_entry__init(&pm);
		pm.vaddr = 0x7f0000000000ULL + (uint64_t)i * 0x10000;
		pm.nr_pages = i + 1;
		pm.offset = (uint64_t)i * 4096;
		ret = img_put(img, &pm.base);
		if (ret) {
			img_abort(img);
			return ret;
		}
	}
	ret = img_finish(img);
	if (ret)
		return ret;

	/* the runs' pages, after the header padded to a page */
	ret = img_create(set, IMG_PAGES, &img, "pages-%d.img", ROOT_PID);
	if (ret)
		return ret;
	memset(page, 0, sizeof(page));
	ret = img_write(img, page, PAGES_DATA_OFF - IMG_HDR_SIZE);
	for (int i = 0; !ret && i < NR_PM * (NR_PM + 1) / 2 + 2; i++) {
		memset(page, 'a' + i, sizeof(page));
		ret = img_write(img, page, sizeof(page));
	}
	if (ret) {
		img_abort(img);
		return ret;
	}
	ret = img_finish(img);
	if (ret)
		return ret;

	reg_file__init(&rf);
	rf.id = 0;
	rf.kind = FILE_KIND__FILE_REG;
	rf.path = "/etc/hostname";
	rf.size = 12;
	rf.mode = 0100644;
	ret = img_create(set, IMG_FILES, &img, "files.img");
	for (int i = 0; !ret && i < nr_rfiles; i++) {
		rf.id = i;
		ret = img_put(img, &rf.base);
		if (ret)
			img_abort(img);
	}
	if (!ret)
		ret = img_finish(img);
	if (ret)
		return ret;

	/* the open file's fd: files.img holds no more files than fds and mappings use */
	fd_entry__init(&fd);
	fd.fd = 3;
	snprintf(name, sizeof(name), "fds-%d.img", ROOT_PID);
	return unit_put_one(set, IMG_FDS, name, &fd.base);
}

static int commit(struct img_set *set)
{
	Inventory inv;
	int ret;

	inventory__init(&inv);
	inv.image_version = IMG_VERSION;
	inv.root_pid = ROOT_PID;
	inv.kernel = "6.18-test";
	inv.dump_time_ns = 1;
	ret = img_set_commit(set, &inv);
	img_set_free(set);
	return ret;
}

static int write_image(struct fixture *fx)
{
	struct img_set set = {.dirfd = fx->dirfd};
	int ret = write_files(&set);

	if (ret) {
		img_set_free(&set);
		return ret;
	}
	return commit(&set);
}

/* img_dir_open and img_dir_wait: the checks restore makes. */
static int verify(struct fixture *fx, struct img_dir **d)
{
	int ret = img_dir_open(fx->dirfd, fx->dir, d);

	if (ret) {
		assert_null(*d);
		return ret;
	}
	ret = img_dir_wait(*d);
	if (ret) {
		img_dir_close(*d);
		*d = NULL;
	}
	return ret;
}

static int verify_close(struct fixture *fx)
{
	struct img_dir *d;
	int ret = verify(fx, &d);

	img_dir_close(d);
	return ret;
}

static struct img_dir *browse(struct fixture *fx)
{
	struct img_dir *d;

	assert_int_equal(img_dir_browse(fx->dirfd, fx->dir, &d), 0);
	return d;
}

/* Read pagemap-PID.img and check every record. */
static void check_pagemap(struct img_dir *d)
{
	ProtobufCMessage *m;
	struct img *img;
	int n = 0, ret;

	assert_int_equal(img_open(d, IMG_PAGEMAP, &img, "pagemap-%d.img", ROOT_PID), 0);
	while ((ret = img_get(img, &pagemap_entry__descriptor, &m)) == 1) {
		PagemapEntry *pm = (PagemapEntry *)m;

		assert_true(n < NR_PM);
		assert_int_equal(pm->vaddr, 0x7f0000000000ULL + (uint64_t)n * 0x10000);
		assert_int_equal(pm->nr_pages, n + 1);
		assert_int_equal(pm->offset, (uint64_t)n * 4096);
		pagemap_entry__free_unpacked(pm, NULL);
		n++;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(n, NR_PM);
	img_close(img);
}

static void check_image(struct fixture *fx)
{
	struct img_dir *d = NULL;
	FsEntry *fs = NULL;
	Inventory *inv;

	assert_int_equal(verify(fx, &d), 0);
	inv = d->inv;
	assert_non_null(inv);
	assert_int_equal(inv->root_pid, ROOT_PID);
	assert_int_equal(inv->image_version, IMG_VERSION);
	assert_string_equal(inv->kernel, "6.18-test");
	assert_int_equal(inv->n_files, 5);
	assert_int_equal(d->uid, geteuid());

	assert_int_equal(img_read_one(d, IMG_FS, &fs_entry__descriptor, (ProtobufCMessage **)&fs,
				      "fs-%d.img", ROOT_PID),
			 0);
	assert_string_equal(fs->cwd, "/tmp/work dir");
	assert_string_equal(fs->root, "/");
	fs_entry__free_unpacked(fs, NULL);
	check_pagemap(d);
	img_dir_close(d);
}

static void flip_byte(struct fixture *fx, const char *name, off_t off)
{
	int fd = openat(fx->dirfd, name, O_RDWR);
	unsigned char c;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, off), 1);
	c ^= 0x40;
	assert_int_equal(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

static off_t file_size(struct fixture *fx, const char *name)
{
	struct stat st;

	assert_int_equal(fstatat(fx->dirfd, name, &st, 0), 0);
	return st.st_size;
}

/* ---- tests ---- */

static void test_roundtrip(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(write_image(fx), 0);
	assert_true(exists(fx, "inventory.img"));
	assert_false(exists(fx, "inventory.img.tmp"));
	check_image(fx);
}

/* A kind released after reading is closed: reading it again fails, the others still read. */
static void test_release(void **state)
{
	struct fixture *fx = *state;
	struct img_dir *d = NULL;
	FsEntry *fs = NULL;
	struct img *img;

	assert_int_equal(write_image(fx), 0);
	assert_int_equal(verify(fx, &d), 0);
	img_dir_release(d, IMG_FS);
	assert_int_equal(img_read_one(d, IMG_FS, &fs_entry__descriptor, (ProtobufCMessage **)&fs,
				      "fs-%d.img", ROOT_PID),
			 -EBADF);
	assert_null(fs);
	assert_int_equal(img_open(d, IMG_FS, &img, "fs-%d.img", ROOT_PID), -EBADF);
	check_pagemap(d);
	img_dir_close(d);
}

static void test_flipped_byte(void **state)
{
	struct fixture *fx = *state;
	char name[64];
	ProtobufCMessage *m;
	struct img_dir *d;
	struct img *img;
	int ret;

	assert_int_equal(write_image(fx), 0);
	snprintf(name, sizeof(name), "pagemap-%d.img", ROOT_PID);
	/* in the last record's payload */
	flip_byte(fx, name, file_size(fx, name) - 2);
	assert_int_equal(verify_close(fx), -EBADMSG);

	/* Reading it record by record stops at the bad record. */
	d = browse(fx);
	assert_int_equal(img_open(d, IMG_PAGEMAP, &img, "%s", name), 0);
	for (int i = 0; i < NR_PM - 1; i++) {
		assert_int_equal(img_get(img, &pagemap_entry__descriptor, &m), 1);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	ret = img_get(img, &pagemap_entry__descriptor, &m);
	assert_int_equal(ret, -EBADMSG);
	img_close(img);
	img_dir_close(d);
}

static void test_flipped_inventory(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(write_image(fx), 0);
	flip_byte(fx, "inventory.img", file_size(fx, "inventory.img") - 3);
	assert_int_equal(verify_close(fx), -EBADMSG);
}

static void test_bad_header(void **state)
{
	struct fixture *fx = *state;
	struct img_dir *d;
	struct img *img;

	assert_int_equal(write_image(fx), 0);
	/* a file of another kind, or one with a damaged magic, is refused */
	assert_int_equal(verify(fx, &d), 0);
	assert_int_equal(img_open(d, IMG_MM, &img, "fs-%d.img", ROOT_PID), -EBADMSG);
	img_dir_close(d);
	d = browse(fx);
	assert_int_equal(img_open(d, IMG_MM, &img, "fs-%d.img", ROOT_PID), -EBADMSG);
	flip_byte(fx, "files.img", 1);
	assert_int_equal(img_open(d, IMG_FILES, &img, "files.img"), -EBADMSG);
	img_dir_close(d);
	assert_int_equal(verify_close(fx), -EBADMSG);
}

static void test_truncated(void **state)
{
	struct fixture *fx = *state;
	char name[64];
	int fd;

	assert_int_equal(write_image(fx), 0);
	snprintf(name, sizeof(name), "pagemap-%d.img", ROOT_PID);
	fd = openat(fx->dirfd, name, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, file_size(fx, name) - 5), 0);
	close(fd);
	assert_int_equal(verify_close(fx), -EBADMSG);
}

static void test_truncated_record(void **state)
{
	struct fixture *fx = *state;
	ProtobufCMessage *m;
	struct img_dir *d;
	struct img *img;
	char name[64];
	int fd, ret, n = 0;

	assert_int_equal(write_image(fx), 0);
	snprintf(name, sizeof(name), "pagemap-%d.img", ROOT_PID);
	fd = openat(fx->dirfd, name, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, file_size(fx, name) - 1), 0);
	close(fd);
	d = browse(fx);
	assert_int_equal(img_open(d, IMG_PAGEMAP, &img, "%s", name), 0);
	while ((ret = img_get(img, &pagemap_entry__descriptor, &m)) == 1) {
		protobuf_c_message_free_unpacked(m, NULL);
		n++;
	}
	assert_int_equal(ret, -EBADMSG);
	assert_int_equal(n, NR_PM - 1);
	img_close(img);
	img_dir_close(d);
}

static void test_missing_inventory(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};

	/* a dump that stopped before the commit */
	assert_int_equal(write_files(&set), 0);
	img_set_free(&set);
	assert_int_equal(verify_close(fx), -ENOENT);
}

static void test_missing_file(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(write_image(fx), 0);
	assert_int_equal(unlinkat(fx->dirfd, "files.img", 0), 0);
	assert_int_equal(verify_close(fx), -ENOENT);
}

static void test_enospc(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	PagemapEntry pm;
	struct img *img;

	/* the header and the records are gathered: the one write is img_finish's */
	set_faults("write:1:ENOSPC");
	pagemap_entry__init(&pm);
	assert_int_equal(img_create(&set, IMG_PAGEMAP, &img, "pagemap-1.img"), 0);
	assert_true(exists(fx, "pagemap-1.img"));
	assert_int_equal(img_put(img, &pm.base), 0);
	assert_int_equal(img_put(img, &pm.base), 0);
	assert_int_equal(img_finish(img), -ENOSPC);
	assert_false(exists(fx, "pagemap-1.img"));
	assert_int_equal(set.n, 0);
	img_set_free(&set);
}

static void test_enospc_on_header(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	struct img *img = NULL;

	static uint8_t big[40000];

	/* a big write sends the gathered header first, and fails with it */
	set_faults("write:1:ENOSPC");
	assert_int_equal(img_create(&set, IMG_CORE, &img, "core-1.img"), 0);
	assert_int_equal(img_write(img, big, sizeof(big)), -ENOSPC);
	img_abort(img);
	assert_false(exists(fx, "core-1.img"));
	img_set_free(&set);
}

/* Many records: written and read through the buffers, back in order. */
static void test_many_records(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	ProtobufCMessage *m;
	struct img_dir *d;
	struct img *img;
	FdEntry fd;
	int n = 0, ret;

	assert_int_equal(img_create(&set, IMG_FDS, &img, "fds-1.img"), 0);
	for (int i = 0; i < 20000; i++) {
		fd_entry__init(&fd);
		fd.fd = (uint32_t)i;
		fd.file_id = (uint32_t)(i * 7);
		assert_int_equal(img_put(img, &fd.base), 0);
	}
	assert_int_equal(img_finish(img), 0);
	img_set_free(&set);
	d = browse(fx);
	assert_int_equal(img_open(d, IMG_FDS, &img, "fds-1.img"), 0);
	while ((ret = img_get(img, &fd_entry__descriptor, &m)) == 1) {
		FdEntry *e = (FdEntry *)m;

		assert_int_equal(e->fd, n);
		assert_int_equal(e->file_id, n * 7);
		fd_entry__free_unpacked(e, NULL);
		n++;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(n, 20000);
	img_close(img);
	img_dir_close(d);
}

/* Small writes gathered, a big one between them: the file has them in order. */
static void test_write_order(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	static uint8_t a[100], big[40000], c[300], back[sizeof(a) + sizeof(big) + sizeof(c)];
	struct img_dir *d;
	struct img *img;

	memset(a, 'a', sizeof(a));
	memset(big, 'b', sizeof(big));
	memset(c, 'c', sizeof(c));
	assert_int_equal(img_create(&set, IMG_GHOST, &img, "ghost-1.img"), 0);
	assert_int_equal(img_write(img, a, sizeof(a)), 0);
	assert_int_equal(img_write(img, big, sizeof(big)), 0);
	assert_int_equal(img_write(img, c, sizeof(c)), 0);
	assert_int_equal(img_finish(img), 0);
	img_set_free(&set);
	d = browse(fx);
	assert_int_equal(img_open(d, IMG_GHOST, &img, "ghost-1.img"), 0);
	assert_int_equal(img_read(img, back, sizeof(back)), sizeof(back));
	assert_memory_equal(back, a, sizeof(a));
	assert_memory_equal(back + sizeof(a), big, sizeof(big));
	assert_memory_equal(back + sizeof(a) + sizeof(big), c, sizeof(c));
	img_close(img);
	img_dir_close(d);
}

static void test_commit_fails(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};

	assert_int_equal(write_files(&set), 0);
	set_faults("rename:1:EIO");
	assert_int_equal(commit(&set), -EIO);
	set_faults(NULL);
	assert_false(exists(fx, "inventory.img"));
	assert_false(exists(fx, "inventory.img.tmp"));
	assert_int_equal(verify_close(fx), -ENOENT);
}

static void test_fsync_fails(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	struct img *img;
	FsEntry fs;

	fs_entry__init(&fs);
	fs.cwd = fs.root = "/";
	/* files are synced together at the commit: a failed sync leaves no inventory */
	set_faults("fsync:1:EIO");
	assert_int_equal(img_create(&set, IMG_FS, &img, "fs-1.img"), 0);
	assert_int_equal(img_put(img, &fs.base), 0);
	assert_int_equal(img_finish(img), 0);
	assert_int_equal(set.n, 1);
	assert_int_equal(commit(&set), -EIO);
	assert_false(exists(fx, "inventory.img"));
	assert_false(exists(fx, "inventory.img.tmp"));
}

/* more files than are synced one by one: one syncfs, whose failure leaves no inventory */
static void test_syncfs_fails(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	FsEntry fs;

	fs_entry__init(&fs);
	fs.cwd = fs.root = "/";
	for (int i = 0; i < 40; i++) {
		struct img *img;
		char name[32];

		snprintf(name, sizeof(name), "fs-%d.img", i + 1);
		assert_int_equal(img_create(&set, IMG_FS, &img, name), 0);
		assert_int_equal(img_put(img, &fs.base), 0);
		assert_int_equal(img_finish(img), 0);
	}
	set_faults("fsync:1:EIO");
	assert_int_equal(commit(&set), -EIO);
	assert_false(exists(fx, "inventory.img"));
	assert_false(exists(fx, "inventory.img.tmp"));
}

static void test_short_writes(void **state)
{
	struct fixture *fx = *state;

	set_faults("write:*:short");
	assert_int_equal(write_image(fx), 0);
	set_faults(NULL);
	check_image(fx);
}

static void test_short_reads(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(write_image(fx), 0);
	set_faults("read:*:short");
	check_image(fx);
}

static void test_eintr_reads(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(write_image(fx), 0);
	/* the check reads each file; then each record's head and payload: hit several */
	for (int nth = 1; nth <= 6; nth++) {
		char spec[64];

		snprintf(spec, sizeof(spec), "read:%d:EINTR,pread:%d:EINTR", nth, nth);
		set_faults(spec);
		check_image(fx);
	}
}

static void test_eintr_writes(void **state)
{
	struct fixture *fx = *state;

	set_faults("write:2:EINTR");
	assert_int_equal(write_image(fx), 0);
	set_faults(NULL);
	check_image(fx);
}

static void test_big_record(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	static uint8_t data[100000];
	SiginfoEntry si, *back = NULL;
	struct img_dir *d;
	struct img *img;

	/* bigger than img_put's stack buffer */
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	siginfo_entry__init(&si);
	si.signo = 10;
	si.info.data = data;
	si.info.len = sizeof(data);
	assert_int_equal(img_create(&set, IMG_CORE, &img, "core-1.img"), 0);
	assert_int_equal(img_put(img, &si.base), 0);
	assert_int_equal(img_finish(img), 0);
	img_set_free(&set);
	d = browse(fx);
	assert_int_equal(img_read_one(d, IMG_CORE, &siginfo_entry__descriptor,
				      (ProtobufCMessage **)&back, "core-1.img"),
			 0);
	img_dir_close(d);
	assert_int_equal(back->info.len, sizeof(data));
	assert_memory_equal(back->info.data, data, sizeof(data));
	siginfo_entry__free_unpacked(back, NULL);
}

static void test_empty_file(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	ProtobufCMessage *m = NULL;
	struct img_dir *d;
	struct img *img;

	assert_int_equal(img_create(&set, IMG_FS, &img, "fs-1.img"), 0);
	assert_int_equal(img_finish(img), 0);
	img_set_free(&set);
	d = browse(fx);
	assert_int_equal(img_read_one(d, IMG_FS, &fs_entry__descriptor, &m, "fs-1.img"), -EBADMSG);
	img_dir_close(d);
}

/* The fixture's files plus name holding n copies of m, all in the inventory. */
static int write_with(struct fixture *fx, enum img_kind kind, const char *name,
		      const ProtobufCMessage *m, int n)
{
	struct img_set set = {.dirfd = fx->dirfd};
	struct img *img;
	int ret = write_files(&set);

	if (!ret)
		ret = img_create(&set, kind, &img, "%s", name);
	for (int i = 0; !ret && i < n; i++) {
		ret = img_put(img, m);
		if (ret)
			img_abort(img);
	}
	if (!ret)
		ret = img_finish(img);
	if (ret) {
		img_set_free(&set);
		return ret;
	}
	return commit(&set);
}

static void test_unlisted(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	struct img_dir *d;
	struct img *img;
	FsEntry fs;

	assert_int_equal(write_image(fx), 0);
	/* a file beside the image that its inventory does not list */
	fs_entry__init(&fs);
	fs.cwd = fs.root = "/";
	assert_int_equal(unit_put_one(&set, IMG_FS, "fs-1.img", &fs.base), 0);
	img_set_free(&set);
	assert_int_equal(verify(fx, &d), 0);
	assert_int_equal(img_open(d, IMG_FS, &img, "fs-1.img"), -EBADMSG);
	assert_int_equal(img_open(d, IMG_FS, &img, "../fs-%d.img", ROOT_PID), -EBADMSG);
	/* nor one cut short to a listed name */
	assert_int_equal(img_open(d, IMG_FS, &img, "fs-%d.img%060d", ROOT_PID, 0), -EBADMSG);
	img_dir_close(d);
}

static void test_links_refused(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(write_image(fx), 0);
	/* a second name for a file: the other could be anyone's */
	assert_int_equal(linkat(fx->dirfd, "files.img", fx->dirfd, "files.link", 0), 0);
	assert_int_equal(verify_close(fx), -EPERM);
	assert_int_equal(unlinkat(fx->dirfd, "files.link", 0), 0);
	assert_int_equal(verify_close(fx), 0);
	/* a symbolic link in place of the file, even to the real one */
	assert_int_equal(renameat(fx->dirfd, "files.img", fx->dirfd, "files.real"), 0);
	assert_int_equal(symlinkat("files.real", fx->dirfd, "files.img"), 0);
	assert_int_equal(verify_close(fx), -ELOOP);
}

static void test_writable_refused(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(write_image(fx), 0);
	assert_int_equal(fchmodat(fx->dirfd, "files.img", 0620, 0), 0);
	assert_int_equal(verify_close(fx), -EPERM);
	assert_int_equal(fchmodat(fx->dirfd, "files.img", 0602, 0), 0);
	assert_int_equal(verify_close(fx), -EPERM);
	assert_int_equal(fchmodat(fx->dirfd, "files.img", 0644, 0), 0);
	assert_int_equal(verify_close(fx), 0);
	/* the directory: sticky or not, others could put their files in */
	assert_int_equal(fchmod(fx->dirfd, 01777), 0);
	assert_int_equal(verify_close(fx), -EPERM);
	assert_int_equal(fchmod(fx->dirfd, 0770), 0);
	assert_int_equal(verify_close(fx), -EPERM);
	assert_int_equal(fchmod(fx->dirfd, 0755), 0);
	assert_int_equal(verify_close(fx), 0);
}

static void test_foreign_owner(void **state)
{
	struct fixture *fx = *state;
	struct img_dir *d;
	char cmd[128];

	if (geteuid() != 0)
		skip();
	assert_int_equal(write_image(fx), 0);
	/* one file of another user (here 65534) in root's directory */
	assert_int_equal(fchownat(fx->dirfd, "files.img", 65534, 65534, 0), 0);
	assert_int_equal(verify_close(fx), -EPERM);
	/* all of it that user's: fine, and that is who the image is */
	snprintf(cmd, sizeof(cmd), "chown -R 65534:65534 %s", fx->dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(verify(fx, &d), 0);
	assert_int_equal(d->uid, 65534);
	assert_int_equal(d->gid, 65534);
	img_dir_close(d);
	/* and root's file in that user's directory */
	assert_int_equal(fchownat(fx->dirfd, "inventory.img", 0, 0, 0), 0);
	assert_int_equal(verify_close(fx), -EPERM);
}

static void test_record_too_large(void **state)
{
	struct fixture *fx = *state;
	static char path[3 * PATH_MAX];
	FsEntry fs;

	memset(path, 'a', sizeof(path) - 1);
	fs_entry__init(&fs);
	fs.cwd = path;
	fs.root = "/";
	/* one fs record holds two paths */
	assert_int_equal(write_with(fx, IMG_FS, "fs-1.img", &fs.base, 1), 0);
	assert_int_equal(verify_close(fx), -EFBIG);
}

static void test_too_many_records(void **state)
{
	struct fixture *fx = *state;
	FsEntry fs;

	fs_entry__init(&fs);
	fs.cwd = fs.root = "/";
	assert_int_equal(write_with(fx, IMG_FS, "fs-1.img", &fs.base, 2), 0);
	assert_int_equal(verify_close(fx), -EFBIG);
}

static void test_too_many_files(void **state)
{
	struct fixture *fx = *state;

	/* files.img: one fd and no mappings need no second open file */
	nr_rfiles = 2;
	assert_int_equal(write_image(fx), 0);
	nr_rfiles = 1;
	assert_int_equal(verify_close(fx), -EFBIG);
}

static void test_too_many_vmas(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	ProtobufCMessage *m = NULL;
	unsigned long map_count = 65530;
	VmaEntry vma, **vmas;
	struct img_dir *d;
	struct img *img;
	MmEntry mm;
	FILE *f;

	f = fopen("/proc/sys/vm/max_map_count", "r");
	if (f) {
		assert_int_equal(fscanf(f, "%lu", &map_count), 1);
		fclose(f);
	}
	if (map_count > (1UL << 20))
		skip();
	/* one more VMA than a process can have: refused before it is decoded */
	vma_entry__init(&vma);
	vmas = calloc(map_count + 1, sizeof(*vmas));
	assert_non_null(vmas);
	for (size_t i = 0; i <= map_count; i++)
		vmas[i] = &vma;
	mm_entry__init(&mm);
	mm.vmas = vmas;
	mm.n_vmas = map_count + 1;
	assert_int_equal(write_files(&set), 0);
	assert_int_equal(img_create(&set, IMG_MM, &img, "mm-%d.img", ROOT_PID), 0);
	assert_int_equal(img_put(img, &mm.base), 0);
	assert_int_equal(img_finish(img), 0);
	assert_int_equal(commit(&set), 0);
	free(vmas);
	assert_int_equal(verify(fx, &d), 0);
	assert_int_equal(img_read_one(d, IMG_MM, &mm_entry__descriptor, &m, "mm-%d.img", ROOT_PID),
			 -EFBIG);
	assert_null(m);
	img_dir_close(d);
}

/* ---- files amber did not create are never written ---- */

#define PLANTED "planted target\n"

/* A file outside the image directory, for links to point at; its path in out. */
static void make_target(char dir[64], char out[128])
{
	int fd;

	assert_true(unit_mkdir(dir) >= 0);
	snprintf(out, 128, "%s/target", dir);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, PLANTED, strlen(PLANTED)), (ssize_t)strlen(PLANTED));
	close(fd);
}

static void assert_target_intact(const char *path, nlink_t links)
{
	char buf[64] = "";
	struct stat st;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_true(read(fd, buf, sizeof(buf) - 1) >= 0);
	close(fd);
	assert_string_equal(buf, PLANTED);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_nlink, links);
}

static void test_create_planted_symlink(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	char other[64], target[128], back[128] = "";
	struct img *img = NULL;

	make_target(other, target);
	assert_int_equal(symlinkat(target, fx->dirfd, "core-1.img"), 0);
	assert_int_equal(img_create(&set, IMG_CORE, &img, "core-1.img"), -EEXIST);
	assert_target_intact(target, 1);
	/* the link is left as it was, not removed as a file of ours */
	assert_true(readlinkat(fx->dirfd, "core-1.img", back, sizeof(back) - 1) > 0);
	assert_string_equal(back, target);
	img_set_discard(&set);
	assert_true(readlinkat(fx->dirfd, "core-1.img", back, sizeof(back) - 1) > 0);
	img_set_free(&set);
	assert_int_equal(unit_remove(other, NULL), 0);
}

static void test_create_planted_hardlink(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	char other[64], target[128];
	struct img *img = NULL;

	make_target(other, target);
	assert_int_equal(linkat(AT_FDCWD, target, fx->dirfd, "fs-1.img", 0), 0);
	assert_int_equal(img_create(&set, IMG_FS, &img, "fs-1.img"), -EEXIST);
	assert_target_intact(target, 2);
	img_set_free(&set);
	assert_int_equal(unit_remove(other, NULL), 0);
}

/* inventory.img.tmp planted: the commit fails and writes nothing through it */
static void test_commit_planted_tmp(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	char other[64], target[128];

	make_target(other, target);
	assert_int_equal(symlinkat(target, fx->dirfd, "inventory.img.tmp"), 0);
	assert_int_equal(write_files(&set), 0);
	assert_int_equal(commit(&set), -EEXIST);
	assert_target_intact(target, 1);
	assert_false(exists(fx, "inventory.img"));
	assert_int_equal(unit_remove(other, NULL), 0);
}

/* an inventory.img that appeared meanwhile is not replaced */
static void test_commit_planted_inventory(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	char other[64], target[128], back[128] = "";

	make_target(other, target);
	assert_int_equal(write_files(&set), 0);
	assert_int_equal(symlinkat(target, fx->dirfd, "inventory.img"), 0);
	assert_int_equal(commit(&set), -EEXIST);
	assert_target_intact(target, 1);
	assert_true(readlinkat(fx->dirfd, "inventory.img", back, sizeof(back) - 1) > 0);
	assert_string_equal(back, target);
	assert_false(exists(fx, "inventory.img.tmp"));
	assert_int_equal(unit_remove(other, NULL), 0);
}

/* A failed dump removes the files it created, finished or not, and nothing else. */
static void test_discard(void **state)
{
	struct fixture *fx = *state;
	struct img_set set = {.dirfd = fx->dirfd};
	struct img *img;
	int fd = openat(fx->dirfd, "not-ours", O_WRONLY | O_CREAT | O_EXCL, 0600);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(write_files(&set), 0);
	assert_int_equal(img_create(&set, IMG_CORE, &img, "core-1.img"), 0);
	img_set_discard(&set);
	img_abort(img);
	img_set_free(&set);
	assert_false(exists(fx, "files.img"));
	assert_false(exists(fx, "fs-4321.img"));
	assert_false(exists(fx, "pagemap-4321.img"));
	assert_false(exists(fx, "core-1.img"));
	assert_true(exists(fx, "not-ours"));
}

/* ---- the image directory ---- */

static int dir_create(struct fixture *fx, const char *name, bool *created)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
	fd = img_dir_create(path, created);
	if (fd >= 0)
		close(fd);
	return fd < 0 ? fd : 0;
}

/*
 * hash.c's XXH3 (AVX2 where the CPU has it) is the library's: one shot and
 * streamed in uneven pieces, at lengths on each side of xxhash's stripe,
 * block and internal buffer sizes, from aligned and unaligned starts.
 */
static void test_hash_is_xxh3(void **state)
{
	static const size_t lens[] = {0,   1,	 3,    16,   17,   128,	  129,	  240,
				      241, 1024, 1025, 4095, 4096, 65537, 1 << 20};
	size_t max = (1 << 20) + 64;
	unsigned char *buf = malloc(max);

	assert_non_null(buf);
	for (size_t i = 0; i < max; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
		for (size_t at = 0; at < 2; at++) {
			const unsigned char *p = buf + at * 7;
			XXH3_state_t *st = XXH3_createState();
			uint64_t want = XXH3_64bits(p, lens[k]);

			assert_int_equal(hash_buf(p, lens[k]), want);
			assert_non_null(st);
			XXH3_64bits_reset(st);
			for (size_t off = 0, piece = 1; off < lens[k]; piece = piece * 3 + 5) {
				size_t n = lens[k] - off < piece ? lens[k] - off : piece;

				hash_update(st, p + off, n);
				off += n;
			}
			assert_int_equal(XXH3_64bits_digest(st), want);
			XXH3_freeState(st);
		}
	free(buf);
}

static void test_dir_new(void **state)
{
	struct fixture *fx = *state;
	bool created = false;
	struct stat st;
	mode_t old = umask(0);

	assert_int_equal(dir_create(fx, "new/", &created), 0);
	umask(old);
	assert_true(created);
	assert_int_equal(fstatat(fx->dirfd, "new", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_uid, geteuid());
	/* an empty one of our own, not writable by others, is taken as it is */
	assert_int_equal(dir_create(fx, "new", &created), 0);
	assert_false(created);
}

static void test_dir_refused(void **state)
{
	struct fixture *fx = *state;
	bool created = true;
	int fd;

	assert_int_equal(mkdirat(fx->dirfd, "full", 0700), 0);
	fd = openat(fx->dirfd, "full/old.img", O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(dir_create(fx, "full", &created), -ENOTEMPTY);
	assert_false(created);

	assert_int_equal(mkdirat(fx->dirfd, "real", 0700), 0);
	assert_int_equal(symlinkat("real", fx->dirfd, "link"), 0);
	assert_int_equal(dir_create(fx, "link", &created), -ELOOP);
	assert_int_equal(dir_create(fx, "link//", &created), -ELOOP);
	assert_int_equal(symlinkat("nowhere", fx->dirfd, "dangling"), 0);
	assert_int_equal(dir_create(fx, "dangling", &created), -ELOOP);
	assert_false(exists(fx, "nowhere"));

	assert_int_equal(mkdirat(fx->dirfd, "shared", 0700), 0);
	assert_int_equal(fchmodat(fx->dirfd, "shared", 0730, 0), 0);
	assert_int_equal(dir_create(fx, "shared", &created), -EPERM);
	assert_int_equal(fchmodat(fx->dirfd, "shared", 0703, 0), 0);
	assert_int_equal(dir_create(fx, "shared", &created), -EPERM);

	fd = openat(fx->dirfd, "file", O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(dir_create(fx, "file", &created), -ENOTDIR);

	/* another user's (only root can make one for the test) */
	if (geteuid() == 0) {
		assert_int_equal(mkdirat(fx->dirfd, "theirs", 0700), 0);
		assert_int_equal(fchownat(fx->dirfd, "theirs", 65534, 65534, 0), 0);
		assert_int_equal(dir_create(fx, "theirs", &created), -EPERM);
	}
	assert_false(created);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flipped_byte, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flipped_inventory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_header, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_inventory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_enospc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_enospc_on_header, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fsync_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syncfs_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eintr_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eintr_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlisted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_links_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writable_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record_too_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_many_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_many_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_many_vmas, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_planted_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_planted_hardlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_planted_tmp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_planted_inventory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discard, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_new, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_refused, setup, teardown),
		cmocka_unit_test(test_hash_is_xxh3),
	};

	/* the errors the tests provoke are expected: keep the output to the results */
	log_level = getenv("AMBER_TEST_VERBOSE") ? LOG_DEBUG : -1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
