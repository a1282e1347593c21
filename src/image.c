// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "log.h"
#include "sys.h"

#define IMG_MAGIC_BASE 0xa3be0000u
#define IMG_MAX_RECORD (64u << 20)

static const char *const kind_names[IMG__COUNT] = {
	[IMG_INVENTORY] = "inventory",
	[IMG_CORE] = "core",
	[IMG_MM] = "mm",
	[IMG_PAGEMAP] = "pagemap",
	[IMG_PAGES] = "pages",
	[IMG_FILES] = "files",
	[IMG_FDS] = "fds",
	[IMG_FS] = "fs",
	[IMG_GHOST] = "ghost",
	[IMG_PSTREE] = "pstree",
};

uint32_t img_magic(enum img_kind kind)
{
	return IMG_MAGIC_BASE + 0x11 * (kind + 1);
}

const char *img_kind_name(enum img_kind kind)
{
	return kind < IMG__COUNT ? kind_names[kind] : "?";
}

static int set_add(struct img_set *set, const char *name, uint64_t size, uint64_t hash)
{
	InventoryFile *f;

	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 16;
		InventoryFile **nf = realloc(set->files, cap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		set->files = nf;
		set->cap = cap;
	}
	f = malloc(sizeof(*f));
	if (!f)
		return -ENOMEM;
	inventory_file__init(f);
	f->name = strdup(name);
	f->size = size;
	f->xxh3 = hash;
	set->files[set->n++] = f;
	return 0;
}

void img_set_free(struct img_set *set)
{
	for (size_t i = 0; i < set->n; i++) {
		free(set->files[i]->name);
		free(set->files[i]);
	}
	free(set->files);
	set->files = NULL;
	set->n = set->cap = 0;
	for (size_t i = 0; i < set->nr_created; i++)
		free(set->created[i]);
	free(set->created);
	set->created = NULL;
	set->nr_created = 0;
}

void img_set_discard(struct img_set *set)
{
	for (size_t i = 0; i < set->nr_created; i++)
		unlinkat(set->dirfd, set->created[i], 0);
}

static int set_created(struct img_set *set, const char *name)
{
	char **nc = realloc(set->created, (set->nr_created + 1) * sizeof(*nc));

	if (!nc)
		return -ENOMEM;
	set->created = nc;
	nc[set->nr_created] = strdup(name);
	if (!nc[set->nr_created])
		return -ENOMEM;
	set->nr_created++;
	return 0;
}

static int create_named(struct img_set *set, enum img_kind kind, const char *name, struct img **out)
{
	uint32_t hdr[2] = {img_magic(kind), IMG_VERSION};
	struct img *img = calloc(1, sizeof(*img));
	int ret;

	if (!img)
		return -ENOMEM;
	snprintf(img->name, sizeof(img->name), "%s", name);
	img->kind = kind;
	img->set = set;
	img->hash = XXH3_createState();
	XXH3_64bits_reset(img->hash);
	/* Only a file of our own making: never one planted (or linked) under its name. */
	img->fd = sys_openat(set->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     0600);
	if (img->fd < 0) {
		ret = img->fd;
		if (ret == -EEXIST)
			pr_err("cannot create image file %s: something of that name is already in "
			       "the image directory (only amber may write there); refusing to "
			       "write through it",
			       name);
		else
			pr_err("cannot create image file %s: %s", name, strerror(-ret));
		goto free_img;
	}
	ret = set_created(set, name);
	if (!ret)
		ret = img_write(img, hdr, sizeof(hdr));
	if (ret)
		goto close_fd;
	*out = img;
	return 0;

close_fd:
	close(img->fd);
	unlinkat(set->dirfd, name, 0);
free_img:
	XXH3_freeState(img->hash);
	free(img);
	return ret;
}

int img_create(struct img_set *set, enum img_kind kind, struct img **out, const char *fmt, ...)
{
	char name[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	return create_named(set, kind, name, out);
}

int img_write(struct img *img, const void *buf, size_t len)
{
	ssize_t r = sys_write_full(img->fd, buf, len);

	if (r < 0) {
		pr_err("cannot write image file %s: %s%s", img->name, strerror((int)-r),
		       r == -ENOSPC ? " (free some space in the image directory)" : "");
		return (int)r;
	}
	XXH3_64bits_update(img->hash, buf, len);
	img->size += len;
	return 0;
}

int img_put(struct img *img, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t stackbuf[4096], *buf = len + 12 <= sizeof(stackbuf) ? stackbuf : malloc(len + 12);
	uint32_t len32 = (uint32_t)len;
	uint64_t h;
	int ret;

	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf + 12);
	h = XXH3_64bits(buf + 12, len);
	memcpy(buf, &len32, 4);
	memcpy(buf + 4, &h, 8);
	ret = img_write(img, buf, len + 12);
	if (buf != stackbuf)
		free(buf);
	return ret;
}

static void img_free(struct img *img)
{
	if (img->hash)
		XXH3_freeState(img->hash);
	free(img);
}

int img_finish(struct img *img)
{
	int ret = sys_fsync(img->fd);

	if (ret) {
		pr_err("cannot sync image file %s: %s", img->name, strerror(-ret));
		img_abort(img);
		return ret;
	}
	close(img->fd);
	ret = set_add(img->set, img->name, img->size, XXH3_64bits_digest(img->hash));
	img_free(img);
	return ret;
}

void img_abort(struct img *img)
{
	if (!img)
		return;
	close(img->fd);
	unlinkat(img->set->dirfd, img->name, 0);
	img_free(img);
}

int img_set_commit(struct img_set *set, Inventory *inv)
{
	struct img_set inv_set = {.dirfd = set->dirfd};
	struct img *img;
	int ret, dfd;

	inv->n_files = set->n;
	inv->files = set->files;
	ret = create_named(&inv_set, IMG_INVENTORY, "inventory.img.tmp", &img);
	if (ret)
		goto free_set;
	ret = img_put(img, &inv->base);
	if (ret) {
		img_abort(img);
		goto free_set;
	}
	ret = img_finish(img);
	if (ret)
		goto free_set;
	/* NOREPLACE: the directory was empty, an inventory.img there is not ours */
	ret = sys_renameat(set->dirfd, "inventory.img.tmp", set->dirfd, "inventory.img",
			   RENAME_NOREPLACE);
	if (ret) {
		pr_err("cannot rename inventory.img.tmp into place: %s%s", strerror(-ret),
		       ret == -EEXIST ? " (an inventory.img appeared in the image directory)" : "");
		unlinkat(set->dirfd, "inventory.img.tmp", 0);
		goto free_set;
	}
	/* The rename must be durable before the target is killed. */
	dfd = dup(set->dirfd);
	if (dfd >= 0) {
		ret = sys_fsync(dfd);
		close(dfd);
		if (ret) {
			pr_err("cannot sync the image directory: %s", strerror(-ret));
			/* a failed dump leaves no complete image */
			unlinkat(set->dirfd, "inventory.img", 0);
		}
	}
free_set:
	img_set_free(&inv_set);
	return ret;
}

/* Nothing in the directory but what this dump will write. */
static int check_empty(int dirfd, const char *dir)
{
	int fd = sys_openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	const char *found = NULL;
	struct dirent *de;
	DIR *d;

	if (fd < 0) {
		pr_err("cannot list image directory %s: %s", dir, strerror(-fd));
		return fd;
	}
	d = fdopendir(fd);
	if (!d) {
		pr_err("cannot list image directory %s: %m", dir);
		close(fd);
		return -ENOMEM;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			found = de->d_name;
			break;
		}
	if (found)
		pr_err("image directory %s is not empty (it holds %s); amber writes an image only "
		       "into a new or empty directory: remove the old one (rm -r %s) or give "
		       "a new path",
		       dir, found, dir);
	closedir(d);
	return found ? -ENOTEMPTY : 0;
}

/* The directory is the dumping user's alone: nobody else can put a name in it. */
static int check_private(int dirfd, const char *dir)
{
	uid_t me = geteuid();
	struct stat sb;

	if (fstat(dirfd, &sb)) {
		pr_err("cannot stat image directory %s: %m", dir);
		return -errno;
	}
	if (sb.st_uid != me) {
		pr_err("image directory %s belongs to uid %u, not to uid %u who dumps: another "
		       "user could have planted links in it; give a path that does not exist "
		       "yet (amber creates it)",
		       dir, (unsigned)sb.st_uid, (unsigned)me);
		return -EPERM;
	}
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		pr_err("image directory %s is writable by %s (mode %04o): they could plant links "
		       "in it; chmod go-w %s, or give a path that does not exist yet",
		       dir, sb.st_mode & S_IWOTH ? "everyone" : "its group",
		       (unsigned)(sb.st_mode & 07777), dir);
		return -EPERM;
	}
	return 0;
}

int img_dir_create(const char *dir, bool *created)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);
	int fd, ret;

	*created = false;
	if (!len || len >= sizeof(path)) {
		pr_err("image directory '%s': bad path", dir);
		return -EINVAL;
	}
	/* "link/" would make open() follow the link that O_NOFOLLOW refuses */
	memcpy(path, dir, len + 1);
	while (len > 1 && path[len - 1] == '/')
		path[--len] = 0;
	if (!mkdir(path, 0700)) {
		*created = true;
	} else if (errno != EEXIST) {
		ret = -errno;
		pr_err("cannot create image directory %s: %s", dir, strerror(-ret));
		return ret;
	}
	fd = sys_open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0) {
		struct stat sb;

		/* (O_DIRECTORY makes a link ENOTDIR rather than ELOOP) */
		if (fd == -ELOOP || (!lstat(path, &sb) && S_ISLNK(sb.st_mode))) {
			fd = -ELOOP;
			pr_err("image directory %s is a symbolic link; amber does not follow one "
			       "(whoever can change it would choose where the image goes): give "
			       "the directory itself, or a path that does not exist yet",
			       dir);
		} else if (fd == -ENOTDIR) {
			pr_err("image directory %s exists and is not a directory; give a path "
			       "that does not exist yet",
			       dir);
		} else {
			pr_err("cannot open image directory %s: %s", dir, strerror(-fd));
		}
		return fd;
	}
	/* Checked on the fd: what was made or found, not what the path names now. */
	ret = check_private(fd, dir);
	if (!ret)
		ret = check_empty(fd, dir);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int img_open(int dirfd, enum img_kind kind, struct img **out, const char *fmt, ...)
{
	struct img *img = calloc(1, sizeof(*img));
	uint32_t hdr[2];
	va_list ap;
	ssize_t r;

	if (!img)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(img->name, sizeof(img->name), fmt, ap);
	va_end(ap);
	img->kind = kind;
	img->fd = sys_openat(dirfd, img->name, O_RDONLY | O_CLOEXEC, 0);
	if (img->fd < 0) {
		int ret = img->fd;

		pr_err("cannot open image file %s: %s", img->name, strerror(-ret));
		free(img);
		return ret;
	}
	r = sys_read_full(img->fd, hdr, sizeof(hdr));
	if (r != sizeof(hdr) || hdr[0] != img_magic(kind) || hdr[1] != IMG_VERSION) {
		pr_err("image file %s is not a %s image of version %d (corrupt, or written by "
		       "another amber version)",
		       img->name, img_kind_name(kind), IMG_VERSION);
		close(img->fd);
		free(img);
		return -EBADMSG;
	}
	*out = img;
	return 0;
}

int img_get(struct img *img, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg)
{
	uint8_t head[12], *buf;
	uint32_t len;
	uint64_t h;
	ssize_t r = sys_read_full(img->fd, head, sizeof(head));

	if (r == 0)
		return 0;
	if (r < 0)
		return (int)r;
	if (r != sizeof(head))
		goto corrupt;
	memcpy(&len, head, 4);
	memcpy(&h, head + 4, 8);
	if (len > IMG_MAX_RECORD)
		goto corrupt;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	r = sys_read_full(img->fd, buf, len);
	if (r != (ssize_t)len || XXH3_64bits(buf, len) != h) {
		free(buf);
		goto corrupt;
	}
	*msg = protobuf_c_message_unpack(desc, NULL, len, buf);
	free(buf);
	if (!*msg)
		goto corrupt;
	return 1;
corrupt:
	pr_err("image file %s is corrupt (bad record); re-dump the process", img->name);
	return -EBADMSG;
}

void img_close(struct img *img)
{
	if (!img)
		return;
	close(img->fd);
	free(img);
}

int img_read_one(int dirfd, enum img_kind kind, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **msg, const char *fmt, ...)
{
	char name[64];
	struct img *img;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	ret = img_open(dirfd, kind, &img, "%s", name);
	if (ret)
		return ret;
	ret = img_get(img, desc, msg);
	img_close(img);
	if (ret == 0) {
		pr_err("image file %s is empty; re-dump the process", name);
		return -EBADMSG;
	}
	return ret < 0 ? ret : 0;
}

int img_read_all(int dirfd, enum img_kind kind, const ProtobufCMessageDescriptor *desc, void *out,
		 size_t *n, const char *fmt, ...)
{
	ProtobufCMessage **arr = NULL, *m;
	size_t nr = 0, cap = 0;
	struct img *img;
	char name[64];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	ret = img_open(dirfd, kind, &img, "%s", name);
	if (ret)
		return ret;
	while ((ret = img_get(img, desc, &m)) == 1) {
		if (nr == cap) {
			ProtobufCMessage **na;

			cap = cap ? cap * 2 : 16;
			na = realloc(arr, cap * sizeof(*na));
			if (!na) {
				ret = -ENOMEM;
				break;
			}
			arr = na;
		}
		arr[nr++] = m;
	}
	img_close(img);
	if (ret < 0) {
		for (size_t i = 0; i < nr; i++)
			protobuf_c_message_free_unpacked(arr[i], NULL);
		free(arr);
		return ret;
	}
	*(ProtobufCMessage ***)out = arr;
	*n = nr;
	return 0;
}

static int hash_file(int dirfd, const char *name, uint64_t *size, uint64_t *hash)
{
	static char buf[1 << 20];
	XXH3_state_t *st;
	struct stat sb;
	int fd = sys_openat(dirfd, name, O_RDONLY | O_CLOEXEC, 0);
	ssize_t r;

	if (fd < 0)
		return fd;
	if (fstat(fd, &sb)) {
		close(fd);
		return -errno;
	}
	*size = sb.st_size;
	st = XXH3_createState();
	XXH3_64bits_reset(st);
	while ((r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			r = -errno;
			XXH3_freeState(st);
			close(fd);
			return (int)r;
		}
		XXH3_64bits_update(st, buf, r);
	}
	*hash = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	close(fd);
	return 0;
}

/* A large file is hashed through a read-only mapping: no copy, no malloc. */
static int hash_mapped(int dirfd, const char *name, uint64_t size, uint64_t *hash)
{
	int fd = sys_openat(dirfd, name, O_RDONLY | O_CLOEXEC, 0);
	void *p;

	if (fd < 0)
		return fd;
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	/* the processes amber forks meanwhile need not inherit it */
	madvise(p, size, MADV_DONTFORK);
	madvise(p, size, MADV_SEQUENTIAL);
	*hash = XXH3_64bits(p, size);
	munmap(p, size);
	return 0;
}

#define ASYNC_MIN (16UL << 20) /* files this large are hashed in the background */

struct img_verify {
	pthread_t thread;
	int dirfd;
	const char *dir;
	Inventory *inv;
	int ret;
	const char *bad; /* the file that did not hash right */
};

static void *verify_large(void *arg)
{
	struct img_verify *v = arg;

	for (size_t i = 0; i < v->inv->n_files && !v->ret; i++) {
		InventoryFile *f = v->inv->files[i];
		uint64_t hash = 0;

		if (f->size < ASYNC_MIN)
			continue;
		v->ret = hash_mapped(v->dirfd, f->name, f->size, &hash);
		if (!v->ret && hash != f->xxh3)
			v->ret = -EBADMSG;
		if (v->ret)
			v->bad = f->name;
	}
	return NULL;
}

int img_verify_start(int dirfd, const char *dir, Inventory **out, struct img_verify **job)
{
	Inventory *inv = NULL;
	struct img_verify *v;
	int ret;

	*job = NULL;
	if (faccessat(dirfd, "inventory.img", F_OK, 0)) {
		pr_err("%s is not a complete amber image: inventory.img is missing (the dump did "
		       "not finish, or this is not an image directory); dump again",
		       dir);
		return -ENOENT;
	}
	ret = img_read_one(dirfd, IMG_INVENTORY, &inventory__descriptor, (ProtobufCMessage **)&inv,
			   "inventory.img");
	if (ret)
		return ret;
	for (size_t i = 0; i < inv->n_files; i++) {
		InventoryFile *f = inv->files[i];
		uint64_t size = 0, hash = 0;
		struct stat sb;

		if (strchr(f->name, '/')) {
			pr_err("%s: inventory names a file outside the image (%s); refusing", dir,
			       f->name);
			ret = -EBADMSG;
			goto free_inv;
		}
		if (fstatat(dirfd, f->name, &sb, 0) || (uint64_t)sb.st_size < ASYNC_MIN ||
		    (uint64_t)sb.st_size != f->size)
			ret = hash_file(dirfd, f->name, &size, &hash);
		else
			size = sb.st_size, hash = f->xxh3; /* checked by verify_large() */
		if (ret) {
			pr_err("%s: image file %s is missing or unreadable (%s); the image is "
			       "incomplete, dump again",
			       dir, f->name, strerror(-ret));
			goto free_inv;
		}
		if (size != f->size) {
			pr_err("%s: image file %s is truncated or altered (%llu bytes, expected "
			       "%llu); refusing to restore, dump again",
			       dir, f->name, (unsigned long long)size, (unsigned long long)f->size);
			ret = -EBADMSG;
			goto free_inv;
		}
		if (hash != f->xxh3) {
			pr_err("%s: image file %s is corrupt (checksum mismatch); refusing to "
			       "restore, dump again",
			       dir, f->name);
			ret = -EBADMSG;
			goto free_inv;
		}
	}
	v = calloc(1, sizeof(*v));
	if (!v) {
		ret = -ENOMEM;
		goto free_inv;
	}
	*v = (struct img_verify){.dirfd = dirfd, .dir = dir, .inv = inv};
	ret = -pthread_create(&v->thread, NULL, verify_large, v);
	if (ret) {
		free(v);
		goto free_inv;
	}
	*job = v;
	*out = inv;
	return 0;
free_inv:
	inventory__free_unpacked(inv, NULL);
	return ret;
}

int img_verify_wait(struct img_verify *v)
{
	int ret;

	if (!v)
		return 0;
	pthread_join(v->thread, NULL);
	ret = v->ret;
	if (ret == -EBADMSG)
		pr_err("%s: image file %s is corrupt (checksum mismatch); refusing to restore, "
		       "dump again",
		       v->dir, v->bad);
	else if (ret)
		pr_err("%s: image file %s is unreadable (%s); the image is incomplete, dump again",
		       v->dir, v->bad, strerror(-ret));
	free(v);
	return ret;
}

int img_verify_dir(int dirfd, const char *dir, Inventory **out)
{
	struct img_verify *job;
	int ret = img_verify_start(dirfd, dir, out, &job);

	if (!ret)
		ret = img_verify_wait(job);
	if (ret && job) {
		inventory__free_unpacked(*out, NULL);
		*out = NULL;
	}
	return ret;
}
