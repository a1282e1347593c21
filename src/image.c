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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "image.h"
#include "log.h"
#include "sys.h"

#define IMG_MAGIC_BASE 0xa3be0000u
#define IMG_MAX_RECORD (64u << 20) /* img_put() writes none larger */

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
	[IMG_STATS] = "stats",
	[IMG_IPC] = "ipc",
	[IMG_SHM] = "shm",
	[IMG_NS] = "ns",
	[IMG_CGROUP] = "cgroup",
	[IMG_NETNS] = "netns",
	[IMG_MNT] = "mnt",
	[IMG_TMPFS] = "tmpfs",
	[IMG_THREADS] = "threads",
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
	free(img->wb);
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

#define IMG_WB (64 << 10)

static int write_out(struct img *img, const void *buf, size_t len)
{
	ssize_t r = sys_write_full(img->fd, buf, len);

	if (r < 0) {
		pr_err("cannot write image file %s: %s%s", img->name, strerror((int)-r),
		       r == -ENOSPC ? " (free some space in the image directory)" : "");
		return (int)r;
	}
	return 0;
}

static int img_flush(struct img *img)
{
	int ret = img->wb_len ? write_out(img, img->wb, img->wb_len) : 0;

	img->wb_len = 0;
	return ret;
}

/*
 * Small writes are gathered (a pagemap has a record per run of pages, a
 * write each cost a dump of sparse memory as much as its pages); big ones
 * go out at once, after what was gathered.
 */
int img_write_raw(struct img *img, const void *buf, size_t len)
{
	int ret;

	if (len >= IMG_WB / 2 || (!img->wb && !(img->wb = malloc(IMG_WB)))) {
		ret = img_flush(img);
		return ret ? ret : write_out(img, buf, len);
	}
	if (img->wb_len + len > IMG_WB) {
		ret = img_flush(img);
		if (ret)
			return ret;
	}
	memcpy(img->wb + img->wb_len, buf, len);
	img->wb_len += len;
	return 0;
}

void img_account(struct img *img, const void *buf, size_t len)
{
	hash_update(img->hash, buf, len);
	img->size += len;
}

int img_write(struct img *img, const void *buf, size_t len)
{
	int ret = img_write_raw(img, buf, len);

	if (!ret)
		img_account(img, buf, len);
	return ret;
}

int img_put(struct img *img, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t stackbuf[4096], *buf = len + 12 <= sizeof(stackbuf) ? stackbuf : malloc(len + 12);
	uint32_t len32 = (uint32_t)len;
	uint64_t h;
	int ret;

	if (len > IMG_MAX_RECORD) {
		pr_err("image file %s: a record of %zu bytes, more than the image format allows "
		       "(%u)",
		       img->name, len, IMG_MAX_RECORD);
		return -EFBIG;
	}
	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf + 12);
	h = hash_buf(buf + 12, len);
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
	free(img->wb);
	free(img);
}

void img_abort(struct img *img)
{
	if (!img)
		return;
	close(img->fd);
	unlinkat(img->set->dirfd, img->name, 0);
	img_free(img);
}

/*
 * An image file is complete: its name, size and hash go to the set.  It is
 * synced by img_set_commit(), all files together: a file's fsync right
 * after it is written forces a journal commit of its own (thousands for a
 * big tree), while the first of many at the end commits them all.
 */
int img_finish(struct img *img)
{
	int ret = img_flush(img);

	if (ret) {
		img_abort(img);
		return ret;
	}
	close(img->fd);
	ret = set_add(img->set, img->name, img->size, XXH3_64bits_digest(img->hash));
	img_free(img);
	return ret;
}

static int sync_file(int dirfd, const char *name)
{
	int fd = sys_openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0), ret;

	ret = fd < 0 ? fd : sys_fsync(fd);
	if (fd >= 0)
		close(fd);
	if (ret)
		pr_err("cannot sync image file %s: %s", name, strerror(-ret));
	return ret;
}

#define IMG_SYNC_EACH_MAX 16 /* files synced one by one; more: their file system at once */

int img_set_commit(struct img_set *set, Inventory *inv)
{
	struct img_set inv_set = {.dirfd = set->dirfd};
	struct img *img;
	int ret = 0, dfd;

	inv->n_files = set->n;
	inv->files = set->files;
	/*
	 * Every file the inventory lists is on disk before it is.  Many files
	 * (a tree, a process of many threads): one syncfs, since each fsync
	 * costs a flush of the disk's cache of its own (seconds for thousands).
	 */
	if (set->n > IMG_SYNC_EACH_MAX) {
		ret = sys_syncfs(set->dirfd);
		if (ret)
			pr_err("cannot sync the image's %zu files: %s", set->n, strerror(-ret));
	} else {
		for (size_t i = 0; i < set->n && !ret; i++)
			ret = sync_file(set->dirfd, set->files[i]->name);
	}
	if (!ret && set->go_on)
		ret = set->go_on();
	if (ret)
		goto free_set;
	ret = create_named(&inv_set, IMG_INVENTORY, "inventory.img.tmp", &img);
	if (ret)
		goto free_set;
	ret = img_put(img, &inv->base);
	if (!ret) {
		ret = sys_fsync(img->fd);
		if (ret)
			pr_err("cannot sync inventory.img.tmp: %s", strerror(-ret));
	}
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

/*
 * Nothing in the directory but what this dump will write.  An RPC client's
 * directory may hold the client's own files (runc writes descriptors.json
 * before the DUMP): regular files not named as amber names its own (*.img).
 */
/* The image directory dirfd (dir names it), listed; NULL with errno set, logged. */
static DIR *list_dir(int dirfd, const char *dir)
{
	int fd = sys_openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	DIR *d;

	if (fd < 0) {
		pr_err("cannot list image directory %s: %s", dir, strerror(-fd));
		errno = -fd;
		return NULL;
	}
	d = fdopendir(fd);
	if (!d) {
		pr_err("cannot list image directory %s: %m", dir);
		close(fd);
		errno = ENOMEM;
	}
	return d;
}

static bool client_file(const struct dirent *de)
{
	size_t len = strlen(de->d_name);

	return de->d_type == DT_REG && (len < 4 || strcmp(de->d_name + len - 4, ".img"));
}

static int check_empty(int dirfd, const char *dir, bool client_files)
{
	const char *found = NULL;
	struct dirent *de;
	DIR *d = list_dir(dirfd, dir);

	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    !(client_files && client_file(de))) {
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
		ret = check_empty(fd, dir, false);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * swrk: a complete image already in the client's directory is replaced, as
 * CRIU overwrites it (podman dumps into one checkpoint directory each time:
 * after checkpoint --leave-running, the next checkpoint finds the last
 * image there).  Only its regular *.img files go; anything else is refused
 * by check_empty().
 */
static int drop_old_image(int dirfd, const char *dir)
{
	int n = 0, ret = 0;
	struct dirent *de;
	DIR *d;

	if (faccessat(dirfd, "inventory.img", F_OK, AT_SYMLINK_NOFOLLOW))
		return 0;
	d = list_dir(dirfd, dir);
	if (!d)
		return -errno;
	while (!ret && (de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (de->d_type != DT_REG || len < 5 || strcmp(de->d_name + len - 4, ".img"))
			continue;
		if (unlinkat(dirfd, de->d_name, 0)) {
			ret = -errno;
			pr_err("cannot remove %s of the last image in %s: %m", de->d_name, dir);
		}
		n++;
	}
	closedir(d);
	if (!ret)
		pr_info("image directory %s held an image: its %d files removed, as CRIU "
			"overwrites one",
			dir, n);
	return ret;
}

/* swrk: a directory the client opened; checked as img_dir_create() checks one it found. */
int img_dir_adopt(int dirfd, const char *dir)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3), ret;

	if (fd < 0) {
		ret = -errno;
		pr_err("image directory %s: cannot duplicate its fd: %m", dir);
		return ret;
	}
	ret = check_private(fd, dir);
	if (!ret)
		ret = drop_old_image(fd, dir);
	if (!ret)
		ret = check_empty(fd, dir, true);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* ---- reading ---- */

#define OPEN_FLAGS (O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
#define ASYNC_MIN  (16UL << 20) /* raw files this large are hashed in the background */
#define IMG_PAGE   4096UL

static const struct {
	const char *name;   /* as the errors name it */
	const char *sysctl; /* the restoring kernel's value, if it has one */
	uint64_t value;	    /* else (or if unreadable) this */
} lims[LIM__COUNT] = {
	[LIM_NR_OPEN] = {"fs.nr_open", "/proc/sys/fs/nr_open", 1 << 20},
	[LIM_MAP_COUNT] = {"vm.max_map_count", "/proc/sys/vm/max_map_count", 65530},
	[LIM_THREADS_MAX] = {"kernel.threads-max", "/proc/sys/kernel/threads-max", 1 << 22},
	[LIM_PID_MAX] = {"kernel.pid_max", "/proc/sys/kernel/pid_max", 1 << 22},
	[LIM_SIGPENDING] = {"RLIMIT_SIGPENDING", NULL, 0},
	[LIM_INOTIFY] = {"fs.inotify.max_user_watches", "/proc/sys/fs/inotify/max_user_watches",
			 1 << 20},
	[LIM_NGROUPS] = {"NGROUPS_MAX", NULL, NGROUPS_MAX},
	[LIM_NSIG] = {"the 64 signals", NULL, 64},
	[LIM_RLIMITS] = {"RLIM_NLIMITS", NULL, RLIM_NLIMITS},
	[LIM_ITIMERS] = {"the 3 interval timers", NULL, 3},
	/* the kernel saves fewer (AT_VECTOR_SIZE); mem.c's MAX_AUXV */
	[LIM_AUXV] = {"amber's 128 auxv words", NULL, 128},
	/* sk-unix.c's MAX_QUEUED: dump refuses more (64 MiB decoded at most) */
	[LIM_QUEUED] = {"amber's 1048576 messages queued per socket", NULL, 1 << 20},
	/* locks.c's MAX_LOCKS: dump refuses more */
	[LIM_LOCKS] = {"amber's 65536 locks per open file", NULL, 65536},
	[LIM_DIRENTS] = {"the number of files in the image directory", NULL, 0},
	/* files.c's GHOST_MAX_EXTENTS pairs: dump merges the rest */
	[LIM_EXTENTS] = {"amber's 65536 extents per deleted file", NULL, 2 * 65536},
	/* src/ipc/'s MAX_IPC_ITEMS: dump refuses more */
	[LIM_IPC] = {"amber's 65536 semaphores or messages per IPC object", NULL, 65536},
	/* kernel.shmmni + semmni + msgmni: read_limits() */
	[LIM_IPC_OBJECTS] = {"kernel.shmmni, kernel.sem (semmni) and kernel.msgmni", NULL, 0},
	[LIM_FANOTIFY] = {"fs.fanotify.max_user_marks", "/proc/sys/fs/fanotify/max_user_marks",
			  1 << 20},
	/* bpfmap.c's MAX_ENTRIES: dump refuses more */
	[LIM_BPF] = {"amber's 1048576 entries per BPF map", NULL, 1 << 20},
};

/* Identifiers the kernel hands out for System V objects (IPCMNI, or 2^24 extended). */
static uint64_t ipc_objects_max(void)
{
	static const char *const mni[] = {"/proc/sys/kernel/shmmni", "/proc/sys/kernel/sem",
					  "/proc/sys/kernel/msgmni"};
	uint64_t n = 0;

	for (size_t i = 0; i < sizeof(mni) / sizeof(mni[0]); i++) {
		unsigned long long v = 32768;
		char *buf, *p;

		if (!sys_read_file(mni[i], &buf, NULL)) {
			p = buf;
			/* kernel.sem is "SEMMSL SEMMNS SEMOPM SEMMNI" */
			for (int f = 0; i == 1 && f < 3 && p; f++)
				p = strpbrk(p + strspn(p, " \t"), " \t");
			if (p)
				v = strtoull(p, NULL, 10);
			free(buf);
		}
		n += v < (1u << 24) ? v : (1u << 24);
	}
	return n;
}

static void read_limits(struct img_dir *d)
{
	struct rlimit rl;

	for (int i = 0; i < LIM__COUNT; i++) {
		char *buf;

		if (i == LIM_DIRENTS || i == LIM_IPC_OBJECTS)
			continue;
		d->lim[i] = lims[i].value;
		if (lims[i].sysctl && !sys_read_file(lims[i].sysctl, &buf, NULL)) {
			unsigned long long v = strtoull(buf, NULL, 10);

			if (v)
				d->lim[i] = v;
			free(buf);
		}
	}
	d->lim[LIM_IPC_OBJECTS] = ipc_objects_max();
	/* a restored process gets no higher limit than amber's own */
	d->lim[LIM_SIGPENDING] = d->lim[LIM_THREADS_MAX];
	if (!getrlimit(RLIMIT_SIGPENDING, &rl) && rl.rlim_max != RLIM_INFINITY)
		d->lim[LIM_SIGPENDING] = rl.rlim_max;
}

static bool has_records(enum img_kind kind)
{
	return kind != IMG_PAGES && kind != IMG_GHOST && kind != IMG_SHM;
}

/*
 * The largest record of a kind a real process can need, from the wire sizes
 * of its fields (a varint field takes at most 11 bytes with its tag).
 */
static uint64_t max_record(const struct img_dir *d, enum img_kind kind, const char **why)
{
	const uint64_t *l = d->lim;

	switch (kind) {
	case IMG_INVENTORY: /* a name of < 64 bytes, a size and a hash per file */
		*why = lims[LIM_DIRENTS].name;
		return 1024 + l[LIM_DIRENTS] * 96;
	case IMG_CORE: /* XSAVE, signals, timers, groups, threads */
	case IMG_THREADS:
		*why = "a task's state (RLIMIT_SIGPENDING, NGROUPS_MAX, kernel.threads-max)";
		return 4096 + 16384 + l[LIM_NSIG] * 64 + l[LIM_SIGPENDING] * (160 + 80) +
		       (l[LIM_RLIMITS] + l[LIM_ITIMERS]) * 40 + l[LIM_NGROUPS] * 6 +
		       l[LIM_THREADS_MAX] * 6;
	case IMG_MM:
		*why = "vm.max_map_count mappings and as many guard page ranges";
		return 4096 + l[LIM_AUXV] * 11 + l[LIM_MAP_COUNT] * (96 + 32) + 65536;
	case IMG_PAGEMAP:
		*why = "one run of pages";
		return 64;
	case IMG_FDS:
		*why = "one fd";
		return 32;
	case IMG_FS:
		*why = "two paths (PATH_MAX)";
		return 2 * PATH_MAX + 64;
	case IMG_PSTREE:
		*why = "one process";
		return 128;
	case IMG_STATS:
		*why = "the statistics";
		return 256;
	case IMG_NS:
		*why = "a namespace's names and sysctls, or a user namespace's two maps";
		return 4096 + 2 * 340 * 24; /* a map line: 3 varints and their tags */
	case IMG_CGROUP:
		*why = "a cgroup per hierarchy, or a cgroup's settings";
		return 32 * (PATH_MAX + 64);
	case IMG_NETNS: /* the nft ruleset is most of it */
		*why = "a network namespace's links, addresses, routes, sysctls and nft ruleset";
		return 4 << 20;
	case IMG_MNT:
		*why = "a mount's paths and options";
		return 4 * PATH_MAX + 8192;
	case IMG_TMPFS:
		*why = "a file's paths and a chunk of its data";
		return TMPFS_CHUNK + 3 * PATH_MAX + 256;
	case IMG_FILES: /* what is large in it (data, watches) is bounded by wire_rules */
	case IMG_IPC:	/* semaphores and messages: bounded by wire_rules */
		*why = "amber's image format";
		return IMG_MAX_RECORD;
	default:
		*why = "a raw file";
		return 0;
	}
}

/* How many records a file of a kind may hold, before the other files are known. */
static uint64_t max_count(const struct img_dir *d, enum img_kind kind, const char **why)
{
	switch (kind) {
	case IMG_INVENTORY:
	case IMG_CORE:
	case IMG_MM:
	case IMG_FS:
	case IMG_STATS:
		*why = "one";
		return 1;
	case IMG_FDS:
		*why = lims[LIM_NR_OPEN].name;
		return d->lim[LIM_NR_OPEN];
	case IMG_PSTREE:
		*why = lims[LIM_PID_MAX].name;
		return d->lim[LIM_PID_MAX];
	case IMG_THREADS:
		*why = lims[LIM_THREADS_MAX].name;
		return d->lim[LIM_THREADS_MAX];
	default: /* bounded by the other files: check_counts() */
		*why = "";
		return UINT64_MAX;
	}
}

/* Repeated fields that decode to far more than their wire size, and their bounds. */
static const struct {
	const ProtobufCMessageDescriptor *desc;
	const char *field; /* dotted through submessages */
	enum img_lim lim;
	const char *what;
} wire_rules[] = {
	{&inventory__descriptor, "files", LIM_DIRENTS, "files"},
	{&task_core__descriptor, "sigactions", LIM_NSIG, "signal actions"},
	{&task_core__descriptor, "pending", LIM_SIGPENDING, "pending signals"},
	{&task_core__descriptor, "itimers", LIM_ITIMERS, "interval timers"},
	{&task_core__descriptor, "posix_timers", LIM_SIGPENDING, "POSIX timers"},
	{&task_core__descriptor, "rlimits", LIM_RLIMITS, "resource limits"},
	{&task_core__descriptor, "creds.groups", LIM_NGROUPS, "supplementary groups"},
	{&task_core__descriptor, "threads", LIM_THREADS_MAX, "threads"},
	{&mm_entry__descriptor, "auxv", LIM_AUXV, "auxv words"},
	{&mm_entry__descriptor, "vmas", LIM_MAP_COUNT, "mappings"},
	{&reg_file__descriptor, "epoll.targets", LIM_NR_OPEN, "epoll watches"},
	{&reg_file__descriptor, "inotify.watches", LIM_INOTIFY, "inotify watches"},
	{&reg_file__descriptor, "unix_sk.rqueue", LIM_QUEUED, "queued messages"},
	{&reg_file__descriptor, "unix_sk.rqueue.fds", LIM_NR_OPEN, "descriptors in flight"},
	{&reg_file__descriptor, "unix_sk.pending", LIM_NR_OPEN, "connections not accepted"},
	{&reg_file__descriptor, "inet_sk.dgrams", LIM_QUEUED, "queued datagrams"},
	{&reg_file__descriptor, "locks", LIM_LOCKS, "file locks"},
	{&reg_file__descriptor, "ghost_extents", LIM_EXTENTS, "ghost file extents"},
	{&reg_file__descriptor, "fanotify.marks", LIM_FANOTIFY, "fanotify marks"},
	{&reg_file__descriptor, "bpf_map.keys", LIM_BPF, "BPF map keys"},
	{&reg_file__descriptor, "bpf_map.values", LIM_BPF, "BPF map values"},
	{&ipc_entry__descriptor, "sem.values", LIM_IPC, "semaphores"},
	{&ipc_entry__descriptor, "msq.msgs", LIM_IPC, "queued messages"},
	{&ipc_entry__descriptor, "mqueue.msgs", LIM_IPC, "queued messages"},
};

static int varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *off < len; shift += 7) {
		uint8_t b = p[(*off)++];

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -EBADMSG;
}

/*
 * Occurrences of field ids[0] (inside it, of ids[1]...) in an encoded
 * message; a packed varint field counts one per element.
 */
static int wire_count(const uint8_t *p, size_t len, const uint32_t *ids, int depth, bool packed,
		      uint64_t *n)
{
	size_t off = 0;

	while (off < len) {
		uint64_t tag, v;
		bool hit;
		int ret;

		if (varint(p, len, &off, &tag))
			return -EBADMSG;
		hit = tag >> 3 == ids[0];
		switch (tag & 7) {
		case 0:
			if (varint(p, len, &off, &v))
				return -EBADMSG;
			*n += hit && depth == 1;
			break;
		case 1:
		case 5:
			v = (tag & 7) == 1 ? 8 : 4;
			if (len - off < v)
				return -EBADMSG;
			off += v;
			*n += hit && depth == 1;
			break;
		case 2:
			if (varint(p, len, &off, &v) || v > len - off)
				return -EBADMSG;
			if (hit && depth > 1) {
				ret = wire_count(p + off, v, ids + 1, depth - 1, packed, n);
				if (ret)
					return ret;
			} else if (hit && packed) {
				for (size_t i = 0; i < v; i++)
					*n += !(p[off + i] & 0x80);
			} else {
				*n += hit;
			}
			off += v;
			break;
		default: /* groups: amber writes none */
			return -EBADMSG;
		}
	}
	return 0;
}

/* Before a record is decoded: its repeated fields within what a process can have. */
static int wire_check(const struct img *img, const ProtobufCMessageDescriptor *desc,
		      const uint8_t *buf, size_t len)
{
	for (size_t r = 0; r < sizeof(wire_rules) / sizeof(wire_rules[0]); r++) {
		const ProtobufCMessageDescriptor *m = desc;
		const ProtobufCFieldDescriptor *f = NULL;
		char path[64], *seg, *save;
		uint32_t ids[4];
		uint64_t n = 0;
		int depth = 0;

		if (wire_rules[r].desc != desc)
			continue;
		snprintf(path, sizeof(path), "%s", wire_rules[r].field);
		for (seg = strtok_r(path, ".", &save); seg && m && depth < 4;
		     seg = strtok_r(NULL, ".", &save)) {
			f = protobuf_c_message_descriptor_get_field_by_name(m, seg);
			if (!f)
				break;
			ids[depth++] = f->id;
			m = f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
		}
		if (!f || seg)
			continue; /* not in this schema */
		if (wire_count(buf, len, ids, depth, f->type != PROTOBUF_C_TYPE_MESSAGE, &n)) {
			pr_err("image file %s is corrupt (bad record); re-dump the process",
			       img->name);
			return -EBADMSG;
		}
		if (n > img->dir->lim[wire_rules[r].lim]) {
			pr_err("image file %s: record %llu lists %llu %s, more than %s (%llu) "
			       "allows; refusing",
			       img->name, (unsigned long long)img->nr + 1, (unsigned long long)n,
			       wire_rules[r].what, lims[wire_rules[r].lim].name,
			       (unsigned long long)img->dir->lim[wire_rules[r].lim]);
			return -EFBIG;
		}
	}
	return 0;
}

/* Files amber writes: inventory.img, files.img, pstree.img, stats-*.img and KIND-N.img. */
static int kind_of_name(const char *name, enum img_kind *kind)
{
	static const struct {
		const char *prefix;
		enum img_kind kind;
	} numbered[] = {
		{"core-", IMG_CORE},	   {"mm-", IMG_MM},   {"pagemap-", IMG_PAGEMAP},
		{"pages-", IMG_PAGES},	   {"fds-", IMG_FDS}, {"fs-", IMG_FS},
		{"ghost-", IMG_GHOST},	   {"shm-", IMG_SHM}, {"tmpfs-", IMG_TMPFS},
		{"threads-", IMG_THREADS},
	};

	if (!strcmp(name, "files.img") || !strcmp(name, "pstree.img")) {
		*kind = name[0] == 'f' ? IMG_FILES : IMG_PSTREE;
		return 0;
	}
	if (!strcmp(name, "ipc.img") || !strcmp(name, "ns.img")) {
		*kind = name[0] == 'i' ? IMG_IPC : IMG_NS;
		return 0;
	}
	if (!strcmp(name, "cgroup.img")) {
		*kind = IMG_CGROUP;
		return 0;
	}
	if (!strcmp(name, "netns.img")) {
		*kind = IMG_NETNS;
		return 0;
	}
	if (!strcmp(name, "mnt.img")) {
		*kind = IMG_MNT;
		return 0;
	}
	if (!strcmp(name, "stats-dump.img") || !strcmp(name, "stats-restore.img")) {
		*kind = IMG_STATS;
		return 0;
	}
	for (size_t i = 0; i < sizeof(numbered) / sizeof(numbered[0]); i++) {
		size_t pl = strlen(numbered[i].prefix), digits;

		if (strncmp(name, numbered[i].prefix, pl))
			continue;
		digits = strspn(name + pl, "0123456789");
		/* a segment of a namespace of the tree: shm-NS-ID.img */
		if (numbered[i].kind == IMG_SHM && digits && digits <= 10 &&
		    name[pl + digits] == '-') {
			size_t more = strspn(name + pl + digits + 1, "0123456789");

			if (more && more <= 10 && !strcmp(name + pl + digits + 1 + more, ".img")) {
				*kind = IMG_SHM;
				return 0;
			}
		}
		if (digits && digits <= 10 && !strcmp(name + pl + digits, ".img")) {
			*kind = numbered[i].kind;
			return 0;
		}
	}
	return -EINVAL;
}

static int cmp_file(const void *a, const void *b)
{
	return strcmp((*(struct img_file *const *)a)->name, (*(struct img_file *const *)b)->name);
}

static struct img_file *find_file(const struct img_dir *d, const char *name)
{
	struct img_file key, *kp = &key, **f;

	if (d->browse) { /* unsorted, and few */
		for (size_t i = 0; i < d->nr_files; i++)
			if (!strcmp(d->files[i]->name, name))
				return d->files[i];
		return NULL;
	}
	snprintf(key.name, sizeof(key.name), "%s", name);
	f = bsearch(&kp, d->files, d->nr_files, sizeof(*d->files), cmp_file);
	return f ? *f : NULL;
}

static int add_file(struct img_dir *d, const char *name, enum img_kind kind, struct img_file **out)
{
	struct img_file *f;

	if (d->nr_files == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 16;
		struct img_file **nf = realloc(d->files, cap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		d->files = nf;
		d->cap = cap;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->kind = kind;
	f->fd = -1;
	f->max_records = UINT64_MAX;
	d->files[d->nr_files++] = f;
	*out = f;
	return 0;
}

static int check_header(const struct img_dir *d, const struct img_file *f)
{
	uint32_t hdr[2];
	ssize_t r = sys_pread_full(f->fd, hdr, sizeof(hdr), 0);

	if (r < 0) {
		pr_err("%s: cannot read image file %s: %s", d->path, f->name, strerror((int)-r));
		return (int)r;
	}
	if (r != sizeof(hdr) || hdr[0] != img_magic(f->kind) || hdr[1] != IMG_VERSION ||
	    (f->kind == IMG_PAGES && f->size < PAGES_DATA_OFF)) {
		pr_err("image file %s is not a %s image of version %d (corrupt, or written by "
		       "another amber version)",
		       f->name, img_kind_name(f->kind), IMG_VERSION);
		return -EBADMSG;
	}
	return 0;
}

/*
 * An image is one user's: what it may grant is bounded by who owns it, so
 * every file must be that user's alone, as the directory is (st: fstat of
 * the open file; a name cannot be swapped underneath an fd).
 */
static int check_owned(const struct img_dir *d, const char *name, const struct stat *st)
{
	if (!S_ISREG(st->st_mode)) {
		pr_err("%s: image file %s is not a regular file; refusing", d->path, name);
		return -EPERM;
	}
	if (st->st_nlink != 1) {
		pr_err("%s: image file %s has %lu links: a file linked from elsewhere is not the "
		       "image's own; refusing (copy it instead)",
		       d->path, name, (unsigned long)st->st_nlink);
		return -EPERM;
	}
	if (st->st_uid != d->uid) {
		pr_err("%s: image file %s belongs to uid %u, the directory to uid %u: an image "
		       "must be one user's files; refusing",
		       d->path, name, st->st_uid, d->uid);
		return -EPERM;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		pr_err("%s: image file %s is writable by group or others; refusing (chmod go-w)",
		       d->path, name);
		return -EPERM;
	}
	return 0;
}

/* Open name once, relative to the directory, links not followed, and check it. */
static int open_checked(struct img_dir *d, const char *name, enum img_kind kind,
			struct img_file **out, struct stat *st)
{
	struct img_file *f;
	int ret = add_file(d, name, kind, &f);

	if (ret)
		return ret;
	f->fd = sys_openat(d->dirfd, name, OPEN_FLAGS, 0);
	if (f->fd < 0) {
		ret = f->fd;
		if (ret == -ELOOP)
			pr_err("%s: image file %s is a symbolic link; restore reads only the "
			       "directory's own files, refusing",
			       d->path, name);
		else if (ret == -EMFILE || ret == -ENFILE)
			pr_err("%s: cannot open image file %s: %s; amber keeps each of the "
			       "image's %zu files open while it restores: raise the fd limit "
			       "(ulimit -n; the hard limit needs CAP_SYS_RESOURCE)",
			       d->path, name, strerror(-ret),
			       d->inv ? d->inv->n_files : d->nr_files);
		else if (ret == -ENOENT && kind == IMG_INVENTORY)
			pr_err("%s is not a complete amber image: inventory.img is missing (the "
			       "dump did not finish, or this is not an image directory); dump "
			       "again",
			       d->path);
		else
			pr_err("%s: image file %s is missing or unreadable (%s); the image is "
			       "incomplete, dump again",
			       d->path, name, strerror(-ret));
		return ret;
	}
	if (fstat(f->fd, st)) {
		ret = -errno;
		pr_err("%s: cannot stat image file %s: %m", d->path, name);
		return ret;
	}
	f->size = st->st_size;
	*out = f;
	return d->browse ? 0 : check_owned(d, name, st);
}

/*
 * Hash a file through its fd; a record file's records are checked as they
 * stream by (length, count), so that a crafted one is refused before anything
 * of it is decoded or allocated.
 */
static int scan_file(const struct img_dir *d, struct img_file *f, uint64_t *hash)
{
	static uint8_t buf[1 << 20];
	const char *why, *cwhy;
	uint64_t max_len = max_record(d, f->kind, &why), max_nr = max_count(d, f->kind, &cwhy);
	uint64_t done = 0, skip = IMG_HDR_SIZE, nr = 0;
	bool records = has_records(f->kind);
	XXH3_state_t *st = XXH3_createState();
	uint8_t head[12];
	size_t have = 0;
	int ret = 0;

	if (!st)
		return -ENOMEM;
	XXH3_64bits_reset(st);
	for (;;) {
		ssize_t r = sys_read_full(f->fd, buf, sizeof(buf));

		if (r < 0) {
			ret = (int)r;
			pr_err("%s: cannot read image file %s: %s", d->path, f->name,
			       strerror(-ret));
			goto free_state;
		}
		if (done + r > f->size)
			break; /* grew meanwhile: refused below */
		hash_update(st, buf, r);
		for (size_t i = 0; records && i < (size_t)r;) {
			uint32_t len;
			size_t k;

			if (skip) {
				k = skip < r - i ? skip : r - i;
				skip -= k;
				i += k;
				continue;
			}
			k = sizeof(head) - have < r - i ? sizeof(head) - have : r - i;
			memcpy(head + have, buf + i, k);
			have += k;
			i += k;
			if (have < sizeof(head))
				continue;
			memcpy(&len, head, 4);
			have = 0;
			skip = len;
			if (len > max_len) {
				pr_err("%s: image file %s holds a record of %u bytes, more than %s "
				       "can need (%llu); refusing",
				       d->path, f->name, len, why, (unsigned long long)max_len);
				ret = -EFBIG;
				goto free_state;
			}
			if (++nr > max_nr) {
				pr_err("%s: image file %s holds more than %llu record(s) (%s); "
				       "refusing",
				       d->path, f->name, (unsigned long long)max_nr, cwhy);
				ret = -EFBIG;
				goto free_state;
			}
		}
		done += r;
		if ((size_t)r < sizeof(buf))
			break;
	}
	if (done != f->size) {
		pr_err("%s: image file %s changed size while it was checked; refusing", d->path,
		       f->name);
		ret = -EBADMSG;
	} else if (records && (have || skip)) {
		pr_err("%s: image file %s ends inside a record: it is truncated or altered; "
		       "refusing to restore, dump again",
		       d->path, f->name);
		ret = -EBADMSG;
	} else if (records && !nr && max_nr == 1) {
		pr_err("%s: image file %s is empty; re-dump the process", d->path, f->name);
		ret = -EBADMSG;
	}
	f->nr_records = nr;
	*hash = XXH3_64bits_digest(st);
free_state:
	XXH3_freeState(st);
	return ret;
}

/*
 * Counts that depend on the other files: every open file is some process's
 * fd, mapping or executable; every run of pages holds at least one page
 * saved in some pages file.
 */
static int check_counts(struct img_dir *d)
{
	uint64_t fds = 0, mms = 0, pages = 0, cores = 0;
	const char *why;

	for (size_t i = 0; i < d->nr_files; i++) {
		struct img_file *f = d->files[i];

		if (f->kind == IMG_CORE)
			cores++;
		else if (f->kind == IMG_THREADS)
			cores += f->nr_records; /* the threads' cores */
		else if (f->kind == IMG_FDS)
			fds += f->nr_records;
		else if (f->kind == IMG_MM)
			mms++;
		else if (f->kind == IMG_PAGES)
			pages += (f->size - PAGES_DATA_OFF) / IMG_PAGE;
	}
	for (size_t i = 0; i < d->nr_files; i++) {
		struct img_file *f = d->files[i];

		if (f->kind == IMG_FILES) {
			f->max_records = fds + mms * (d->lim[LIM_MAP_COUNT] + 1);
			why = "one per fd of fds-*.img, and per mapping (vm.max_map_count) and "
			      "executable of each process";
		} else if (f->kind == IMG_PAGEMAP) {
			f->max_records = pages;
			why = "one per page saved in pages-*.img at most";
		} else if (f->kind == IMG_IPC) {
			f->max_records = fds + d->lim[LIM_IPC_OBJECTS];
			why = "one per System V object (kernel.shmmni, semmni, msgmni) and per fd";
		} else if (f->kind == IMG_NS) {
			f->max_records = 5 * cores;
			why = "a UTS, IPC, time, cgroup and user namespace per thread of "
			      "core-*.img at "
			      "most";
		} else if (f->kind == IMG_CGROUP) {
			f->max_records = cores * (2 + 2 * 32);
			why = "per process of core-*.img: its set, itself, and 32 hierarchies' "
			      "cgroups at most";
		} else if (f->kind == IMG_NETNS) {
			f->max_records = cores;
			why = "a network namespace per thread of core-*.img at most";
		} else if (f->kind == IMG_MNT) {
			f->max_records = MNT_MAX;
			why = "the kernel's default fs.mount-max";
		} else {
			f->max_records = max_count(d, f->kind, &why);
		}
		if (f->nr_records > f->max_records) {
			pr_err("%s: image file %s holds %llu records, more than the image's other "
			       "files allow (%llu: %s); refusing",
			       d->path, f->name, (unsigned long long)f->nr_records,
			       (unsigned long long)f->max_records, why);
			return -EFBIG;
		}
	}
	return 0;
}

/* Entries of the directory: the inventory cannot list more files than that. */
static int count_dirents(struct img_dir *d)
{
	int fd = fcntl(d->dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);
	uint64_t n = 0;

	if (!dir) {
		int ret = -errno;

		pr_err("%s: cannot list the image directory: %m", d->path);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	rewinddir(dir);
	while (readdir(dir))
		n++;
	rewinddir(dir); /* the offset is shared with dirfd (amber show lists it again) */
	closedir(dir);
	d->lim[LIM_DIRENTS] = n;
	return 0;
}

static int dir_new(int dirfd, const char *path, bool browse, struct img_dir **out)
{
	struct img_dir *d = calloc(1, sizeof(*d));
	struct stat st;
	int ret;

	*out = d;
	if (!d)
		return -ENOMEM;
	d->dirfd = dirfd;
	d->path = path;
	d->browse = browse;
	if (fstat(dirfd, &st)) {
		ret = -errno;
		pr_err("cannot stat image directory %s: %m", path);
		return ret;
	}
	if (!S_ISDIR(st.st_mode)) {
		pr_err("%s is not a directory", path);
		return -ENOTDIR;
	}
	d->uid = st.st_uid;
	d->gid = st.st_gid;
	/* Anyone who may add or rename entries could swap the files in (sticky or not). */
	if (!browse && (st.st_mode & (S_IWGRP | S_IWOTH))) {
		pr_err("%s: the image directory is writable by group or others, who could swap "
		       "its files; refusing (chmod go-w %s)",
		       path, path);
		return -EPERM;
	}
	return count_dirents(d);
}

/* One fd per listed file, and what amber itself needs besides. */
static void raise_nofile(const struct img_dir *d, size_t n)
{
	int ret = sys_raise_nofile(n + 256);

	if (ret)
		pr_warn("%s: cannot raise RLIMIT_NOFILE to %zu for the image's %zu files: %s",
			d->path, n + 256, n, strerror(-ret));
}

bool img_kind_per_process(enum img_kind kind)
{
	return kind == IMG_CORE || kind == IMG_MM || kind == IMG_PAGEMAP || kind == IMG_PAGES ||
	       kind == IMG_FDS || kind == IMG_FS || kind == IMG_THREADS;
}

/* A file of one process (or an unknown name, refused when it is opened). */
static bool per_process(const char *name)
{
	enum img_kind kind;

	if (strlen(name) >= sizeof(((struct img_file *)0)->name) || kind_of_name(name, &kind))
		return true;
	return img_kind_per_process(kind);
}

static int open_listed(struct img_dir *d, const InventoryFile *lf)
{
	enum img_kind kind;
	struct img_file *f;
	struct stat st;
	int ret;

	if (strlen(lf->name) >= sizeof(f->name) || kind_of_name(lf->name, &kind)) {
		pr_err("%s: the inventory lists '%s', which is not a file amber writes; refusing",
		       d->path, lf->name);
		return -EBADMSG;
	}
	ret = open_checked(d, lf->name, kind, &f, &st);
	if (ret)
		return ret;
	if (f->size != lf->size) {
		pr_err("%s: image file %s is truncated or altered (%llu bytes, expected %llu); "
		       "refusing to restore, dump again",
		       d->path, f->name, (unsigned long long)f->size, (unsigned long long)lf->size);
		return -EBADMSG;
	}
	f->xxh3 = lf->xxh3;
	return 0;
}

static int hash_mapped(const struct img_file *f, uint64_t *hash)
{
	void *p = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	/* the processes amber forks meanwhile need not inherit it */
	madvise(p, f->size, MADV_DONTFORK);
	madvise(p, f->size, MADV_SEQUENTIAL);
	*hash = hash_buf(p, f->size);
	munmap(p, f->size);
	return 0;
}

struct img_verify {
	pthread_t thread;
	const struct img_dir *d;
	int ret;
	const char *bad; /* the file that did not hash right */
};

/* Large raw files (pages) through a read-only mapping: no copy, no malloc. */
static void *verify_large(void *arg)
{
	struct img_verify *v = arg;

	for (size_t i = 0; i < v->d->nr_files && !v->ret; i++) {
		const struct img_file *f = v->d->files[i];
		uint64_t hash = 0;

		if (!f->async)
			continue;
		v->ret = hash_mapped(f, &hash);
		if (!v->ret && hash != f->xxh3)
			v->ret = -EBADMSG;
		if (v->ret)
			v->bad = f->name;
	}
	return NULL;
}

/* Header, size, records and checksum of every listed file (large raw ones later). */
static int verify_listed(struct img_dir *d)
{
	for (size_t i = 0; i < d->nr_files; i++) {
		struct img_file *f = d->files[i];
		uint64_t hash;
		int ret;

		if (f->kind == IMG_INVENTORY)
			continue;
		ret = check_header(d, f);
		if (ret)
			return ret;
		if (!has_records(f->kind) && f->size >= ASYNC_MIN) {
			f->async = true;
			continue;
		}
		ret = scan_file(d, f, &hash);
		if (ret)
			return ret;
		if (hash != f->xxh3) {
			pr_err("%s: image file %s is corrupt (checksum mismatch); refusing to "
			       "restore, dump again",
			       d->path, f->name);
			return -EBADMSG;
		}
	}
	return check_counts(d);
}

int img_dir_open(int dirfd, const char *path, struct img_dir **out)
{
	struct img_file *inv;
	struct img_dir *d;
	struct img_verify *v;
	struct stat st;
	uint64_t hash;
	int ret;

	*out = NULL;
	ret = dir_new(dirfd, path, false, &d);
	if (!ret)
		ret = open_checked(d, "inventory.img", IMG_INVENTORY, &inv, &st);
	if (!ret)
		ret = check_header(d, inv);
	if (!ret)
		ret = scan_file(d, inv, &hash);
	if (ret)
		goto close_dir;
	d->gid = st.st_gid;
	inv->max_records = 1;
	ret = img_read_one(d, IMG_INVENTORY, &inventory__descriptor, (ProtobufCMessage **)&d->inv,
			   "inventory.img");
	if (ret)
		goto close_dir;
	raise_nofile(d, d->inv->n_files);
	/* the tree's own files first, at low fds: the per-process ones are
	 * closed before the tree is forked, and each fork copies the fd table
	 * up to the highest fd left open */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < d->inv->n_files && !ret; i++)
			if (per_process(d->inv->files[i]->name) == pass)
				ret = open_listed(d, d->inv->files[i]);
	if (ret)
		goto close_dir;
	qsort(d->files, d->nr_files, sizeof(*d->files), cmp_file);
	for (size_t i = 1; i < d->nr_files; i++) {
		if (strcmp(d->files[i - 1]->name, d->files[i]->name))
			continue;
		pr_err("%s: the inventory lists %s twice; the image is corrupt", path,
		       d->files[i]->name);
		ret = -EBADMSG;
		goto close_dir;
	}
	/* after the opens: AMBER_FAULT=open:N counts the image's files */
	read_limits(d);
	ret = verify_listed(d);
	if (ret)
		goto close_dir;
	v = calloc(1, sizeof(*v));
	if (!v) {
		ret = -ENOMEM;
		goto close_dir;
	}
	v->d = d;
	ret = sys_thread_start_own_fds(&v->thread, verify_large, v);
	if (ret) {
		pr_err("%s: cannot start the checksum thread: %s", path, strerror(-ret));
		free(v);
		goto close_dir;
	}
	d->job = v;
	*out = d;
	return 0;
close_dir:
	img_dir_close(d);
	return ret;
}

int img_dir_wait(struct img_dir *d)
{
	struct img_verify *v = d->job;

	if (!v)
		return d->job_ret;
	pthread_join(v->thread, NULL);
	d->job_ret = v->ret;
	if (v->ret == -EBADMSG)
		pr_err("%s: image file %s is corrupt (checksum mismatch); refusing to restore, "
		       "dump again",
		       d->path, v->bad);
	else if (v->ret)
		pr_err("%s: image file %s is unreadable (%s); the image is incomplete, dump again",
		       d->path, v->bad, strerror(-v->ret));
	free(v);
	d->job = NULL;
	return d->job_ret;
}

void img_dir_close(struct img_dir *d)
{
	if (!d)
		return;
	img_dir_wait(d);
	for (size_t i = 0; i < d->nr_files; i++) {
		if (d->files[i]->fd >= 0)
			close(d->files[i]->fd);
		free(d->files[i]);
	}
	free(d->files);
	if (d->inv)
		inventory__free_unpacked(d->inv, NULL);
	free(d);
}

void img_dir_release(struct img_dir *d, enum img_kind kind)
{
	for (size_t i = 0; i < d->nr_files; i++) {
		struct img_file *f = d->files[i];

		/* (the checksum thread reads only its own, async files) */
		if (f->kind != kind || f->async || f->fd < 0)
			continue;
		close(f->fd);
		f->fd = -1;
	}
}

int img_dir_browse(int dirfd, const char *path, struct img_dir **out)
{
	int ret = dir_new(dirfd, path, true, out);

	if (ret) {
		img_dir_close(*out);
		*out = NULL;
		return ret;
	}
	read_limits(*out);
	return 0;
}

/* The table's entry for name, of that kind; amber show opens it now. */
static int lookup(struct img_dir *d, enum img_kind kind, const char *name,
		  const struct img_file **out)
{
	struct img_file *f = find_file(d, name);
	struct stat st;
	const char *why;
	int ret;

	if (!f && d->browse) {
		ret = open_checked(d, name, kind, &f, &st);
		if (!ret && !S_ISREG(st.st_mode)) {
			pr_err("image file %s is not a regular file", name);
			ret = -EBADMSG;
		}
		if (!ret)
			ret = check_header(d, f);
		if (ret) { /* it was added last: forget it */
			f = d->files[--d->nr_files];
			if (f->fd >= 0)
				close(f->fd);
			free(f);
			return ret;
		}
		f->max_records = max_count(d, kind, &why);
	}
	if (!f) {
		pr_err("%s: %s is not listed in the image's inventory; refusing to read it (the "
		       "image was altered: dump again)",
		       d->path, name);
		return -EBADMSG;
	}
	if (f->kind != kind) {
		pr_err("image file %s is not a %s image", name, img_kind_name(kind));
		return -EBADMSG;
	}
	if (f->fd < 0) { /* img_dir_release()d: amber's own mistake, not the image's */
		pr_err("%s: image file %s is read again after it was closed", d->path, name);
		return -EBADF;
	}
	*out = f;
	return 0;
}

/* A name that does not fit is no image file (and must not match one cut short). */
static int format_name(char name[64], const char *fmt, va_list ap)
{
	int n = vsnprintf(name, 64, fmt, ap);

	if (n < 0 || n >= 64) {
		pr_err("image file name %s... is too long; the image is corrupt", name);
		return -EBADMSG;
	}
	return 0;
}

int img_dir_raw(struct img_dir *d, enum img_kind kind, const struct img_file **out, const char *fmt,
		...)
{
	char name[64];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = format_name(name, fmt, ap);
	va_end(ap);
	return ret ? ret : lookup(d, kind, name, out);
}

static int open_named(struct img_dir *d, enum img_kind kind, const char *name, struct img **out)
{
	const struct img_file *f;
	struct img *img;
	int ret = lookup(d, kind, name, &f);

	if (ret)
		return ret;
	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	snprintf(img->name, sizeof(img->name), "%s", name);
	img->kind = kind;
	img->fd = f->fd;
	img->dir = d;
	img->file = f;
	img->off = IMG_HDR_SIZE;
	img->end = f->size;
	*out = img;
	return 0;
}

/* The file named by fmt, opened for reading; name: that name, for messages. */
static int open_fmt(struct img_dir *d, enum img_kind kind, char name[64], struct img **out,
		    const char *fmt, va_list ap)
{
	int ret = format_name(name, fmt, ap);

	return ret ? ret : open_named(d, kind, name, out);
}

int img_open(struct img_dir *d, enum img_kind kind, struct img **out, const char *fmt, ...)
{
	char name[64];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = open_fmt(d, kind, name, out, fmt, ap);
	va_end(ap);
	return ret;
}

#define IMG_RA (64 << 10)

/*
 * len bytes at off of the file, through the reader's read-ahead buffer: a
 * pread of 12 bytes and another of a few per record cost a restore of
 * sparse memory more than its pages did.  Short: the file ends there.
 */
static ssize_t img_pread(struct img *img, void *buf, size_t len, uint64_t off)
{
	size_t at;
	ssize_t r;

	if (len > IMG_RA / 2)
		return sys_pread_full(img->fd, buf, len, off);
	if (!img->ra && !(img->ra = malloc(IMG_RA)))
		return -ENOMEM;
	if (off < img->ra_off || off + len > img->ra_off + img->ra_len) {
		r = sys_pread_full(img->fd, img->ra,
				   off < img->end && img->end - off < IMG_RA
					   ? (size_t)(img->end - off)
					   : IMG_RA,
				   off);
		if (r < 0)
			return r;
		img->ra_off = off;
		img->ra_len = (size_t)r;
	}
	at = (size_t)(off - img->ra_off);
	len = len < img->ra_len - at ? len : img->ra_len - at;
	memcpy(buf, img->ra + at, len);
	return (ssize_t)len;
}

/*
 * Through the checked fd, at this reader's own offset, up to the checked size:
 * the owner may still rewrite the file, so lengths and counts are checked
 * again here, before anything is allocated.
 */
int img_get(struct img *img, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg)
{
	uint8_t head[12], *buf;
	const char *why;
	uint64_t h, max;
	uint32_t len;
	ssize_t r;
	int ret;

	if (img->off >= img->end)
		return 0;
	if (img->end - img->off < sizeof(head))
		goto corrupt;
	r = img_pread(img, head, sizeof(head), img->off);
	if (r < 0) {
		pr_err("cannot read image file %s: %s", img->name, strerror((int)-r));
		return (int)r;
	}
	if (r != sizeof(head))
		goto corrupt;
	memcpy(&len, head, 4);
	memcpy(&h, head + 4, 8);
	if (len > img->end - img->off - sizeof(head))
		goto corrupt;
	max = max_record(img->dir, img->kind, &why);
	if (len > max) {
		pr_err("image file %s holds a record of %u bytes, more than %s can need (%llu); "
		       "refusing",
		       img->name, len, why, (unsigned long long)max);
		return -EFBIG;
	}
	if (img->nr >= img->file->max_records) {
		pr_err("image file %s holds more than %llu record(s); refusing", img->name,
		       (unsigned long long)img->file->max_records);
		return -EFBIG;
	}
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	r = img_pread(img, buf, len, img->off + sizeof(head));
	if (r < 0) {
		free(buf);
		pr_err("cannot read image file %s: %s", img->name, strerror((int)-r));
		return (int)r;
	}
	if (r != (ssize_t)len || hash_buf(buf, len) != h) {
		free(buf);
		goto corrupt;
	}
	ret = wire_check(img, desc, buf, len);
	if (ret) {
		free(buf);
		return ret;
	}
	*msg = protobuf_c_message_unpack(desc, NULL, len, buf);
	free(buf);
	if (!*msg)
		goto corrupt;
	img->off += sizeof(head) + len;
	img->nr++;
	return 1;
corrupt:
	pr_err("image file %s is corrupt (bad record); re-dump the process", img->name);
	return -EBADMSG;
}

ssize_t img_read(struct img *img, void *buf, size_t len)
{
	ssize_t r;

	if (len > img->end - img->off)
		len = img->end - img->off;
	if (!len)
		return 0;
	r = sys_pread_full(img->fd, buf, len, img->off);
	if (r < 0) {
		pr_err("cannot read image file %s: %s", img->name, strerror((int)-r));
		return r;
	}
	if ((size_t)r != len) {
		pr_err("image file %s is shorter than it was when checked; refusing", img->name);
		return -EBADMSG;
	}
	img->off += r;
	return r;
}

/* The fd is the table's: it stays open until img_dir_close(). */
void img_close(struct img *img)
{
	if (img)
		free(img->ra);
	free(img);
}

int img_read_one(struct img_dir *d, enum img_kind kind, const ProtobufCMessageDescriptor *desc,
		 ProtobufCMessage **msg, const char *fmt, ...)
{
	char name[64];
	struct img *img;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = open_fmt(d, kind, name, &img, fmt, ap);
	va_end(ap);
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

int img_read_all(struct img_dir *d, enum img_kind kind, const ProtobufCMessageDescriptor *desc,
		 void *out, size_t *n, const char *fmt, ...)
{
	ProtobufCMessage **arr = NULL, *m;
	size_t nr = 0, cap = 0;
	struct img *img;
	char name[64];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = open_fmt(d, kind, name, &img, fmt, ap);
	va_end(ap);
	if (ret)
		return ret;
	while ((ret = img_get(img, desc, &m)) == 1) {
		if (nr == cap) {
			ProtobufCMessage **na;

			cap = cap ? cap * 2 : 16;
			na = realloc(arr, cap * sizeof(*na));
			if (!na) {
				protobuf_c_message_free_unpacked(m, NULL);
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
