// SPDX-License-Identifier: MIT
/*
 * Terminals.  The job's terminal with --shell-job (FILE_TTY): its termios
 * (struct termios2: flags, line discipline, special characters, speeds) and
 * window size are saved in reg_file.tty and put on the terminal amber
 * restore runs in before the job runs again, so that a raw-mode program (an
 * editor, top) does not come back in cooked mode.  A failed restore gives
 * the terminal its own settings back.
 *
 * Pseudo-terminals whose master (/dev/ptmx) is in the tree, with their
 * slaves (/dev/pts/N), paired by the pts number (TIOCGPTN of the master, the
 * minor of the slave): the pair's termios and window size, packet mode and
 * lock state of the master, exclusive mode of each end, and the number.
 * Restore opens /dev/ptmx until the kernel hands out that number (it gives
 * the lowest free one: a higher one means the number is taken), then the
 * slaves through the master (TIOCGPTPEER, no path lookup).  A slave whose
 * master is elsewhere is refused, but for the job's terminal with -j.
 * The controlling terminal of a session on such a pty is taken again by
 * its leader; /dev/tty on it is opened again by each process that held it,
 * once the process has its controlling terminal back.
 * Through RPC (runc's console), the root may lead a session on the job's
 * terminal: the restore makes a new pty in the tree's devpts for it, its
 * master sent to the client (orphan_pts_master, CRIU's protocol).
 */
#include <asm/termbits.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "amber.h"
#include "ns/ns.h"
#include "files.h"
#include "log.h"
#include "proc.h"
#include "rpc/rpc.h"
#include "sys.h"
#include "tty.h"

#define NR_LDISCS 30	    /* the kernel's N_* line disciplines: 0..29 */
#define PTS_MAJOR 136	    /* UNIX98_PTY_SLAVE_MAJOR: /dev/pts/N is (136, N) */
#define PTS_MAX	  (1 << 20) /* NR_UNIX98_PTY_MAX */

/* The termios and window size of the terminal fd is on, into a new entry. */
static int state_dump(int fd, TtyEntry **out)
{
	TtyEntry *e = calloc(1, sizeof(*e));
	TermiosEntry *te = calloc(1, sizeof(*te));
	WinsizeEntry *we = calloc(1, sizeof(*we));
	uint8_t *cc = malloc(NCCS);
	struct termios2 tio;
	struct winsize ws;
	int ret;

	if (!e || !te || !we || !cc) {
		ret = -ENOMEM;
		goto free_all;
	}
	if (ioctl(fd, TCGETS2, &tio) || ioctl(fd, TIOCGWINSZ, &ws)) {
		ret = -errno;
		goto free_all;
	}
	tty_entry__init(e);
	termios_entry__init(te);
	winsize_entry__init(we);
	te->iflag = tio.c_iflag;
	te->oflag = tio.c_oflag;
	te->cflag = tio.c_cflag;
	te->lflag = tio.c_lflag;
	te->line = tio.c_line;
	memcpy(cc, tio.c_cc, NCCS);
	te->cc.data = cc;
	te->cc.len = NCCS;
	te->ispeed = tio.c_ispeed;
	te->ospeed = tio.c_ospeed;
	we->row = ws.ws_row;
	we->col = ws.ws_col;
	we->xpixel = ws.ws_xpixel;
	we->ypixel = ws.ws_ypixel;
	e->termios = te;
	e->winsize = we;
	*out = e;
	return 0;
free_all:
	free(cc);
	free(we);
	free(te);
	free(e);
	return ret;
}

int tty_dump_job(struct dump_ctx *ctx, int fd, RegFile *f)
{
	int dup = sys_pidfd_getfd(ctx->pidfd, fd), ret;

	if (dup < 0) {
		pr_err("pid %d: cannot get a copy of fd %d (the terminal %s): %s", ctx->pid, fd,
		       f->path, strerror(-dup));
		return dup;
	}
	ret = state_dump(dup, &f->tty);
	close(dup);
	if (ret)
		pr_err("pid %d: cannot read the termios and window size of fd %d (the terminal "
		       "%s): %s",
		       ctx->pid, fd, f->path, strerror(-ret));
	return ret;
}

/* The pts number of a slave (its device), or -1. */
static int pts_index(const struct stat *st)
{
	if (!S_ISCHR(st->st_mode) || major(st->st_rdev) != PTS_MAJOR)
		return -1;
	return (int)minor(st->st_rdev);
}

static bool is_ptmx(const char *link, const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(5, 2) &&
	       (!strcmp(link, "/dev/ptmx") || !strcmp(link, "/dev/pts/ptmx"));
}

static bool pty_master_match(const char *link, const struct stat *st)
{
	return is_ptmx(link, st);
}

static bool pty_slave_match(const char *link, const struct stat *st)
{
	return pts_index(st) >= 0;
}

/* The pts numbers of every master the tree holds, found once per dump. */
static struct {
	bool scanned;
	int *index;
	size_t n;
	int job; /* the root's controlling terminal: its pts number, or -1 */
} masters = {.job = -1};

static void masters_forget(void)
{
	free(masters.index);
	masters.index = NULL;
	masters.n = 0;
	masters.scanned = false;
	masters.job = -1;
}

static int masters_add(int fd)
{
	int n, *ni;

	if (ioctl(fd, TIOCGPTN, &n))
		return -errno;
	ni = realloc(masters.index, (masters.n + 1) * sizeof(*ni));
	if (!ni)
		return -ENOMEM;
	masters.index = ni;
	masters.index[masters.n++] = n;
	return 0;
}

static int masters_scan_proc(struct dump_ctx *ctx)
{
	char path[320], link[64];
	struct dirent *de;
	struct stat st;
	int ret = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", ctx->pid);
	d = sys_opendir(path);
	if (!d)
		return -errno;
	while (!ret && (de = readdir(d))) {
		int dup;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd/%s", ctx->pid, de->d_name);
		if (sys_readlink(path, link, sizeof(link)) < 0 || sys_stat(path, &st) ||
		    !is_ptmx(link, &st))
			continue;
		dup = sys_pidfd_getfd(ctx->pidfd, atoi(de->d_name));
		if (dup < 0) {
			ret = dup;
			break;
		}
		ret = masters_add(dup);
		close(dup);
	}
	closedir(d);
	return ret;
}

/* Once: which pts numbers have their master in the tree, and the job's terminal. */
static int masters_scan(struct tree *t)
{
	struct proc_stat ps;
	int ret = 0;

	if (masters.scanned)
		return 0;
	masters.scanned = true;
	if (!proc_parse_stat(t->dprocs[0]->pid, &ps) && major(ps.tty_nr) == PTS_MAJOR)
		masters.job = (int)minor(ps.tty_nr);
	for (size_t p = 0; p < t->nr_procs && !ret; p++)
		ret = masters_scan_proc(t->dprocs[p]);
	if (ret)
		pr_err("cannot find the pseudo-terminal masters of the tree: %s", strerror(-ret));
	return ret;
}

static bool master_in_tree(int index)
{
	for (size_t i = 0; i < masters.n; i++)
		if (masters.index[i] == index)
			return true;
	return false;
}

/* Bytes queued in a pty end, which amber cannot save without reading them. */
static int refuse_queued(struct dump_ctx *ctx, int fd, int dup, RegFile *f, int index)
{
	int in = 0, out = 0;

	if (ioctl(dup, TIOCINQ, &in) || ioctl(dup, TIOCOUTQ, &out)) {
		pr_err("pid %d: fd %d (%s): cannot see what is queued in it: %m", ctx->pid, fd,
		       f->path);
		return -errno;
	}
	if (!in && !out)
		return 0;
	pr_err("pid %d: fd %d is the %s of /dev/pts/%d and %d byte(s) are queued in it "
	       "(%d unread, %d unsent); amber cannot save a terminal's queued data without "
	       "taking it from the process: let the program read (or flush) it and dump again",
	       ctx->pid, fd, f->kind == FILE_KIND__FILE_PTY_MASTER ? "master" : "slave", index,
	       in + out, in, out);
	return -EBUSY;
}

static int get_flag(struct dump_ctx *ctx, int fd, int dup, unsigned long req, const char *what,
		    RegFile *f, protobuf_c_boolean *v)
{
	int n = 0;

	if (ioctl(dup, req, &n)) {
		pr_err("pid %d: fd %d (%s): cannot read its %s: %m", ctx->pid, fd, f->path, what);
		return -errno;
	}
	*v = n != 0;
	return 0;
}

static int pty_master_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	int index, ret;

	if (ioctl(dup, TIOCGPTN, &index)) {
		pr_err("pid %d: fd %d (%s): cannot read its pts number: %m", ctx->pid, fd, f->path);
		return -errno;
	}
	ret = refuse_queued(ctx, fd, dup, f, index);
	if (ret)
		return ret;
	ret = state_dump(dup, &f->tty);
	if (ret) {
		pr_err("pid %d: fd %d (master of /dev/pts/%d): cannot read its termios: %s",
		       ctx->pid, fd, index, strerror(-ret));
		return ret;
	}
	f->tty->has_index = f->tty->has_packet = f->tty->has_locked = f->tty->has_exclusive = 1;
	f->tty->index = (uint32_t)index;
	ret = get_flag(ctx, fd, dup, TIOCGPKT, "packet mode", f, &f->tty->packet);
	if (!ret)
		ret = get_flag(ctx, fd, dup, TIOCGPTLCK, "lock state", f, &f->tty->locked);
	if (!ret)
		ret = get_flag(ctx, fd, dup, TIOCGEXCL, "exclusive mode", f, &f->tty->exclusive);
	pr_debug("pid %d: fd %d: master of /dev/pts/%d%s%s%s", ctx->pid, fd, index,
		 f->tty->packet ? ", packet mode" : "", f->tty->locked ? ", locked" : "",
		 f->tty->exclusive ? ", exclusive" : "");
	return ret;
}

static int pty_slave_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	struct stat st;
	int index, ret;

	if (fstat(dup, &st)) {
		pr_err("pid %d: fd %d (%s): cannot stat it: %m", ctx->pid, fd, f->path);
		return -errno;
	}
	index = pts_index(&st);
	ret = masters_scan(ctx->tree);
	if (ret)
		return ret;
	if (!master_in_tree(index)) {
		/* the job's terminal (the root's, or any without one) is amber's at restore */
		if (ctx->o->shell_job && (masters.job < 0 || masters.job == index)) {
			f->kind = FILE_KIND__FILE_TTY;
			return tty_dump_job(ctx, fd, f);
		}
		if (ctx->o->shell_job)
			pr_err("pid %d: fd %d is /dev/pts/%d, a pseudo-terminal whose master is "
			       "outside the dumped tree and which is not the job's terminal "
			       "(/dev/pts/%d); amber cannot restore it (not supported)",
			       ctx->pid, fd, index, masters.job);
		else
			pr_err("pid %d: fd %d is /dev/pts/%d, a pseudo-terminal whose master is "
			       "outside the dumped tree; if it is the terminal of a shell job, "
			       "dump it with --shell-job (-j) and restore it with -j in a "
			       "terminal; otherwise amber cannot restore it (not supported)",
			       ctx->pid, fd, index);
		return -EOPNOTSUPP;
	}
	ret = refuse_queued(ctx, fd, dup, f, index);
	if (ret)
		return ret;
	f->tty = calloc(1, sizeof(*f->tty));
	if (!f->tty)
		return -ENOMEM;
	tty_entry__init(f->tty);
	f->tty->has_index = f->tty->has_exclusive = 1;
	f->tty->index = (uint32_t)index;
	return get_flag(ctx, fd, dup, TIOCGEXCL, "exclusive mode", f, &f->tty->exclusive);
}

static bool devtty_match(const char *link, const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(5, 0) && !strcmp(link, "/dev/tty");
}

/*
 * /dev/tty: the terminal it is on (TIOCGDEV) must be the process's
 * controlling terminal still and a pty of the tree (reopened at restore),
 * or the job's with -j (amber's terminal at restore, as FILE_TTY).
 */
static int devtty_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	struct proc_stat ps;
	unsigned int dev;
	int index, ret;

	if (ioctl(dup, TIOCGDEV, &dev)) {
		pr_err("pid %d: fd %d (/dev/tty): cannot find the terminal it is on: %m", ctx->pid,
		       fd);
		return -errno;
	}
	ret = dump_stat(ctx, &ps);
	if (!ret)
		ret = masters_scan(ctx->tree);
	if (ret)
		return ret;
	index = major(dev) == PTS_MAJOR ? (int)minor(dev) : -1;
	if (index >= 0 && master_in_tree(index) && ps.tty_nr == dev) {
		f->tty = calloc(1, sizeof(*f->tty));
		if (!f->tty)
			return -ENOMEM;
		tty_entry__init(f->tty);
		f->tty->has_index = 1;
		f->tty->index = (uint32_t)index;
		return 0;
	}
	if (ctx->o->shell_job && !(index >= 0 && master_in_tree(index))) {
		f->kind = FILE_KIND__FILE_TTY;
		return tty_dump_job(ctx, fd, f);
	}
	pr_err("pid %d: fd %d is /dev/tty on the terminal %u:%u, %s; amber can restore /dev/tty "
	       "only on the process's controlling terminal when that is a pseudo-terminal of "
	       "the tree, or with --shell-job (-j) on the job's terminal",
	       ctx->pid, fd, major(dev), minor(dev),
	       ps.tty_nr == dev ? "outside the dumped tree"
				: "which is not its controlling terminal any more");
	return -EOPNOTSUPP;
}

/* A group of the tree (one of its processes is in it). */
static bool tree_has_pgrp(const struct tree *t, int pgrp)
{
	for (size_t i = 0; i < t->nr_pstree; i++)
		if (t->pstree[i]->pgid == (uint32_t)pgrp)
			return true;
	return false;
}

/*
 * The controlling terminal: a pty of the tree is its session leader's to
 * take again, with the foreground group; the job's terminal with -j stays
 * the shell's session's; any other is refused.
 */
static int tty_dump(struct dump_ctx *ctx)
{
	struct proc_stat ps;
	int ret, index;

	ret = dump_stat(ctx, &ps);
	if (ret) {
		pr_err("pid %d: cannot read its stat for its terminal: %s", ctx->pid,
		       strerror(-ret));
		return ret;
	}
	if (!ps.tty_nr)
		return 0;
	ret = masters_scan(ctx->tree);
	if (ret)
		return ret;
	index = major(ps.tty_nr) == PTS_MAJOR ? (int)minor(ps.tty_nr) : -1;
	if (index >= 0 && master_in_tree(index)) {
		if (ps.session != ctx->pid)
			return 0; /* its session leader's (of the tree: task.c) */
		if (pidns_nested_pid(ctx->tree, ctx->pid)) {
			pr_err("pid %d, in a nested pid namespace, leads a session whose "
			       "controlling terminal is /dev/pts/%d of the tree; amber does not "
			       "restore a terminal there yet: dump it without the terminal",
			       ctx->pid, index);
			return -EOPNOTSUPP;
		}
		if (ps.tpgid > 0 && !tree_has_pgrp(ctx->tree, ps.tpgid)) {
			pr_err("pid %d: the foreground process group of its terminal /dev/pts/%d "
			       "is %d, a group outside the dumped tree; dump from a process "
			       "that holds it",
			       ctx->pid, index, ps.tpgid);
			return -EOPNOTSUPP;
		}
		ctx->core->has_tty_index = 1;
		ctx->core->tty_index = (uint32_t)index;
		if (ps.tpgid > 0) {
			ctx->core->has_tty_fg_pgrp = 1;
			ctx->core->tty_fg_pgrp = (uint32_t)ps.tpgid;
		}
		pr_debug("pid %d: session leader with /dev/pts/%d, foreground group %d", ctx->pid,
			 index, ps.tpgid);
		return 0;
	}
	if (ctx->o->shell_job && ps.session != ctx->pid)
		return 0; /* the job's terminal: its session is the shell's */
	/*
	 * The root leading a session on the job's terminal (a container's init
	 * with runc's console): a new pty at restore, given to an RPC client
	 * that takes its master (orphan_pts_master); so only an RPC dump's.
	 */
	if (ctx->o->orphan_pts_master && index >= 0 && index == masters.job &&
	    ctx->pid == ctx->tree->dprocs[0]->pid) {
		if (ps.tpgid > 0 && ps.tpgid != ps.pgrp) {
			pr_err("pid %d leads a session on the job's terminal /dev/pts/%d whose "
			       "foreground group is %d, not its own; amber restores that "
			       "terminal with the session leader's group in the foreground only",
			       ctx->pid, index, ps.tpgid);
			return -EOPNOTSUPP;
		}
		ctx->core->has_tty_job = 1;
		ctx->core->tty_job = (uint32_t)index;
		pr_debug("pid %d: session leader on the job's terminal /dev/pts/%d", ctx->pid,
			 index);
		return 0;
	}
	if (ctx->o->shell_job)
		pr_err("pid %d leads a session whose controlling terminal (device %u:%u) is "
		       "outside the dumped tree; amber cannot give a restored session a terminal "
		       "it does not restore (not supported)",
		       ctx->pid, major(ps.tty_nr), minor(ps.tty_nr));
	else
		pr_err("pid %d: its controlling terminal (%s%u, device %u:%u) is outside the "
		       "dumped tree; if it is the terminal of a shell job, dump it with "
		       "--shell-job (-j) and restore it with -j in a terminal",
		       ctx->pid, index >= 0 ? "/dev/pts/" : "tty number ",
		       index >= 0 ? (unsigned)index : ps.tty_nr, major(ps.tty_nr),
		       minor(ps.tty_nr));
	return -EOPNOTSUPP;
}

static int tty_dump_tree_late(struct tree *t)
{
	masters_forget();
	return 0;
}

static void tty_dump_undo(struct tree *t)
{
	masters_forget();
}

/* ---- restore ---- */

/* Nothing the kernel would take in another sense than the dump's. */
static bool state_ok(const TtyEntry *e)
{
	if (e->termios && (e->termios->cc.len != NCCS || e->termios->line >= NR_LDISCS))
		return false;
	if (e->winsize && (e->winsize->row > 0xffff || e->winsize->col > 0xffff ||
			   e->winsize->xpixel > 0xffff || e->winsize->ypixel > 0xffff))
		return false;
	return true;
}

/* Put e's termios and window size on fd; what: the terminal, for the log. */
static int state_restore(int fd, const TtyEntry *e, const char *what)
{
	struct termios2 tio;
	struct winsize ws;

	if (e->termios) {
		memset(&tio, 0, sizeof(tio));
		tio.c_iflag = e->termios->iflag;
		tio.c_oflag = e->termios->oflag;
		tio.c_cflag = e->termios->cflag;
		tio.c_lflag = e->termios->lflag;
		tio.c_line = (cc_t)e->termios->line;
		memcpy(tio.c_cc, e->termios->cc.data, NCCS);
		tio.c_ispeed = e->termios->ispeed;
		tio.c_ospeed = e->termios->ospeed;
		if (ioctl(fd, TCSETS2, &tio)) {
			pr_err("cannot give %s its termios back: %m", what);
			return -errno;
		}
	}
	if (e->winsize) {
		ws.ws_row = (unsigned short)e->winsize->row;
		ws.ws_col = (unsigned short)e->winsize->col;
		ws.ws_xpixel = (unsigned short)e->winsize->xpixel;
		ws.ws_ypixel = (unsigned short)e->winsize->ypixel;
		if (ioctl(fd, TIOCSWINSZ, &ws)) {
			pr_err("cannot give %s its window size back: %m", what);
			return -errno;
		}
	}
	return 0;
}

static const RegFile *master_of(const struct tree *t, uint32_t index)
{
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		const RegFile *m = t->rfiles[i];

		if (m->kind == FILE_KIND__FILE_PTY_MASTER && m->tty && m->tty->index == index)
			return m;
	}
	return NULL;
}

/* The most ptys this kernel hands out (kernel.pty.max). */
static uint32_t pty_max(void)
{
	unsigned long v = PTS_MAX;
	char *buf;

	if (!sys_read_file("/proc/sys/kernel/pty/max", &buf, NULL)) {
		v = strtoul(buf, NULL, 10);
		free(buf);
	}
	return v < PTS_MAX ? (uint32_t)v : PTS_MAX;
}

/* A pty end of the image: a number, a master for it, one master per number. */
static int pty_check(const struct tree *t, const RegFile *f, uint32_t max)
{
	const RegFile *m;

	if (!f->tty || !f->tty->has_index) {
		pr_err("files.img: entry %u (%s) is a pseudo-terminal without its pts number; the "
		       "image is corrupt",
		       f->id, f->path);
		return -EBADMSG;
	}
	if (f->tty->index >= max) {
		pr_err("files.img: entry %u (%s) is /dev/pts/%u, beyond the %u this kernel "
		       "allows (kernel.pty.max); the image is corrupt",
		       f->id, f->path, f->tty->index, max);
		return -EBADMSG;
	}
	m = master_of(t, f->tty->index);
	if (f->kind == FILE_KIND__FILE_PTY_SLAVE && !m) {
		pr_err("files.img: entry %u (%s) is the slave /dev/pts/%u, but no master of the "
		       "image has that number; the image is corrupt",
		       f->id, f->path, f->tty->index);
		return -EBADMSG;
	}
	if (f->kind == FILE_KIND__FILE_PTY_MASTER &&
	    (m != f || (strcmp(f->path, "/dev/ptmx") && strcmp(f->path, "/dev/pts/ptmx")))) {
		pr_err("files.img: entry %u (%s) is a second master of /dev/pts/%u, or not "
		       "/dev/ptmx; the image is corrupt",
		       f->id, f->path, f->tty->index);
		return -EBADMSG;
	}
	return 0;
}

/* A session leader's terminal: a master of the image, a group of its session. */
static int ctty_check(const struct restore_ctx *ctx)
{
	const TaskCore *c = ctx->core;
	const PstreeEntry *fg;

	if (!c->has_tty_index) {
		if (!c->has_tty_fg_pgrp)
			return 0;
	} else if (c->sid == (uint32_t)ctx->pid && master_of(ctx->tree, c->tty_index)) {
		if (!c->has_tty_fg_pgrp)
			return 0;
		fg = tree_entry(ctx->tree, c->tty_fg_pgrp);
		if (fg && fg->pgid == fg->pid && fg->sid == c->sid)
			return 0;
	}
	pr_err("core-%d.img: a controlling terminal /dev/pts/%u with foreground group %u, but "
	       "no session it leads, no master of the image with that number or no group "
	       "of its session leading it; the image is corrupt",
	       ctx->pid, c->tty_index, c->tty_fg_pgrp);
	return -EBADMSG;
}

/* The job's terminal of a session leader: only the root, and only for orphan_pts_master. */
static int job_ctty_check(const struct restore_ctx *ctx)
{
	const TaskCore *c = ctx->core;

	if (!c->has_tty_job)
		return 0;
	if (c->has_tty_index || c->sid != (uint32_t)ctx->pid ||
	    (uint32_t)ctx->pid != ctx->tree->pstree[0]->pid || !ctx->inv->shell_job) {
		pr_err("core-%d.img: the job's terminal as the controlling terminal of a process "
		       "that is not the root leading its session, or of an image dumped "
		       "without -j; the image is corrupt",
		       ctx->pid);
		return -EBADMSG;
	}
	if (!ctx->o->orphan_pts_master) {
		pr_err("pid %d leads a session whose controlling terminal was the job's "
		       "(/dev/pts/%u, its master outside the tree); amber gives it a new "
		       "pseudo-terminal only for an RPC client that takes its master "
		       "(orphan_pts_master, as runc restore does), not from the command line",
		       ctx->pid, c->tty_job);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int tty_restore_read(struct restore_ctx *ctx)
{
	struct tree *t = ctx->tree;
	uint32_t max = pty_max();
	int ret = ctty_check(ctx);

	if (!ret)
		ret = job_ctty_check(ctx);
	if (ret || (t->rprocs && ctx != t->rprocs[0]))
		return ret;

	/* the tree's terminals, once: with the first process read (200 x 10000 files otherwise) */
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		RegFile *f = t->rfiles[i];

		if (f->tty && !state_ok(f->tty)) {
			pr_err("files.img: entry %u (%s) has a terminal state no terminal can have "
			       "(special characters, line discipline or window size); the image "
			       "is corrupt",
			       f->id, f->path);
			return -EBADMSG;
		}
		if (f->kind == FILE_KIND__FILE_DEVTTY &&
		    (!f->tty || !f->tty->has_index || !master_of(t, f->tty->index))) {
			pr_err("files.img: entry %u (%s) is /dev/tty on no pseudo-terminal of the "
			       "image; the image is corrupt",
			       f->id, f->path);
			return -EBADMSG;
		}
		if (f->kind != FILE_KIND__FILE_PTY_MASTER && f->kind != FILE_KIND__FILE_PTY_SLAVE)
			continue;
		ret = pty_check(t, f, max);
		if (ret)
			return ret;
	}
	return 0;
}

static int cmp_index(const void *a, const void *b)
{
	const RegFile *x = *(RegFile *const *)a, *y = *(RegFile *const *)b;

	return x->tty->index < y->tty->index ? -1 : x->tty->index > y->tty->index;
}

/*
 * Every master, with its number: the kernel gives the lowest free number,
 * so in increasing order each open gets either a lower one (kept open
 * meanwhile, so that the next open goes past it), the one wanted, or a
 * higher one (the number is taken by someone else).  Unlocked until the
 * slaves are open (pty_post_open locks again).
 */
static int pty_master_prepare(struct tree *t, RegFile **files, size_t n, int *fds)
{
	int *extra = NULL, ret = 0;
	size_t nr_extra = 0;

	qsort(files, n, sizeof(*files), cmp_index);
	for (size_t k = 0; k < n && !ret; k++) {
		RegFile *f = files[k];
		int flags = (int)(f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC));
		int fd, got, zero = 0;

		for (;;) {
			int *ne;

			fd = open(f->path, flags | O_NOCTTY | O_CLOEXEC);
			if (fd < 0) {
				ret = -errno;
				pr_err("cannot open %s for /dev/pts/%u: %m", f->path,
				       f->tty->index);
				break;
			}
			if (ioctl(fd, TIOCGPTN, &got)) {
				ret = -errno;
				pr_err("%s: cannot read the pts number of a new pty: %m", f->path);
				close(fd);
				break;
			}
			if ((uint32_t)got >= f->tty->index)
				break;
			ne = realloc(extra, (nr_extra + 1) * sizeof(*ne));
			if (!ne) {
				ret = -ENOMEM;
				close(fd);
				break;
			}
			extra = ne;
			extra[nr_extra++] = fd;
		}
		if (ret)
			break;
		if ((uint32_t)got != f->tty->index) {
			pr_err("/dev/pts/%u, a pseudo-terminal of the image, is taken by another "
			       "process (the restored one must keep its number): close what holds "
			       "it (fuser /dev/pts/%u) and restore again",
			       f->tty->index, f->tty->index);
			close(fd);
			ret = -EBUSY;
			break;
		}
		fds[k] = fd;
		if (ioctl(fd, TIOCSPTLCK, &zero)) {
			ret = -errno;
			pr_err("cannot unlock /dev/pts/%u: %m", f->tty->index);
			break;
		}
		/* termios first: a change of IXON in packet mode would queue a status */
		ret = state_restore(fd, f->tty, f->path);
		if (!ret && f->tty->packet && ioctl(fd, TIOCPKT, &(int){1})) {
			ret = -errno;
			pr_err("cannot put the master of /dev/pts/%u in packet mode: %m",
			       f->tty->index);
		}
		pr_debug("%s: /dev/pts/%u", f->path, f->tty->index);
	}
	for (size_t i = 0; i < nr_extra; i++)
		close(extra[i]);
	free(extra);
	for (size_t k = 0; k < n && ret; k++)
		if (fds[k] >= 0) {
			close(fds[k]);
			fds[k] = -1;
		}
	return ret;
}

/* Each slave through its master (made before: fd_types lists it first). */
static int pty_slave_prepare(struct tree *t, RegFile **files, size_t n, int *fds)
{
	int ret = 0;

	for (size_t k = 0; k < n && !ret; k++) {
		RegFile *f = files[k];
		const RegFile *m = master_of(t, f->tty->index);
		int flags = (int)(f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC));

		/* O_CLOEXEC would stay in the description's flags: set on the fd after */
		fds[k] = ioctl(t->desc_fd[m->id], TIOCGPTPEER, flags | O_NOCTTY);
		if (fds[k] >= 0 && fcntl(fds[k], F_SETFD, FD_CLOEXEC)) {
			close(fds[k]);
			fds[k] = -1;
		}
		if (fds[k] < 0) {
			ret = -errno;
			pr_err("cannot open /dev/pts/%u through its master: %m", f->tty->index);
		}
	}
	for (size_t k = 0; k < n && ret; k++)
		if (fds[k] >= 0) {
			close(fds[k]);
			fds[k] = -1;
		}
	return ret;
}

/* Once every slave is open: what would have stopped opening them. */
static int pty_post_open(struct tree *t, RegFile *f, int fd)
{
	int one = 1;

	if (f->kind == FILE_KIND__FILE_PTY_MASTER && f->tty->locked &&
	    ioctl(fd, TIOCSPTLCK, &one)) {
		pr_err("cannot lock /dev/pts/%u again: %m", f->tty->index);
		return -errno;
	}
	if (f->tty->exclusive && ioctl(fd, TIOCEXCL)) {
		pr_err("cannot make the %s of /dev/pts/%u exclusive: %m",
		       f->kind == FILE_KIND__FILE_PTY_MASTER ? "master" : "slave", f->tty->index);
		return -errno;
	}
	return 0;
}

/*
 * orphan_pts_master: the job's terminal is a new pty of the tree's devpts
 * (amber is in its mount namespace by now), its master for the RPC client.
 */
static struct {
	int master, slave;
} orphan = {-1, -1};

/* The pts number the image says the job's terminal had, or -1 if none says. */
static int job_index(const struct tree *t, const RegFile **state)
{
	int index = -1;
	unsigned n;
	char c;

	*state = NULL;
	for (size_t i = 0; i < t->nr_rfiles; i++) {
		const RegFile *f = t->rfiles[i];

		if (f->kind != FILE_KIND__FILE_TTY)
			continue;
		if (f->tty && !*state)
			*state = f;
		if (sscanf(f->path, "/dev/pts/%u%c", &n, &c) == 1 && index < 0)
			index = (int)n;
	}
	for (size_t p = 0; p < t->nr_procs && index < 0; p++)
		if (t->rprocs[p]->core->has_tty_job)
			index = (int)t->rprocs[p]->core->tty_job;
	return index;
}

int tty_orphan_open(struct tree *t, int devpts)
{
	const RegFile *state;
	int want = job_index(t, &state), fd, got, zero = 0, ret;
	bool ctty = false;

	if (orphan.master >= 0)
		return 0; /* made already, for a mount of it (runc's /dev/console) */
	for (size_t p = 0; p < t->nr_procs; p++)
		ctty |= t->rprocs[p]->core->has_tty_job;
	if (!state && !ctty)
		return 0; /* no terminal in the image: none to make */
	if (!state || !state->tty) {
		pr_err("the image has no termios and window size of the job's terminal (dumped "
		       "by an older amber, or no process held it open); amber cannot give the "
		       "restored processes a terminal set as theirs was");
		return -EINVAL;
	}
	if (devpts >= 0)
		fd = openat(devpts, "ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	else
		fd = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		pr_err("cannot open /dev/ptmx in the tree's mount namespace for the job's new "
		       "terminal: %m");
		return -errno;
	}
	if (ioctl(fd, TIOCGPTN, &got) || ioctl(fd, TIOCSPTLCK, &zero)) {
		ret = -errno;
		pr_err("the job's new terminal: cannot read its number or unlock it: %m");
		goto close_master;
	}
	/* /dev/pts/N of the processes (a tty(1) answer, a saved path) must stay true */
	if (want >= 0 && got != want) {
		pr_err("the job's new terminal is /dev/pts/%d of the tree's devpts, the dumped "
		       "one was /dev/pts/%d (that number is taken there); amber does not restore "
		       "a job's terminal under another number",
		       got, want);
		ret = -EBUSY;
		goto close_master;
	}
	ret = state_restore(fd, state->tty, "the job's new terminal");
	if (ret)
		goto close_master;
	orphan.master = fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
	close(fd);
	if (orphan.master < 0) {
		pr_err("the job's new terminal: no fd for its master above %d: %m", tree_fd_floor(t));
		return -EMFILE;
	}
	fd = ioctl(orphan.master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		pr_err("cannot open the slave of the job's new terminal /dev/pts/%d: %m", got);
		return -errno;
	}
	orphan.slave = fcntl(fd, F_DUPFD_CLOEXEC, tree_fd_floor(t));
	close(fd);
	if (orphan.slave < 0) {
		pr_err("the job's new terminal: no fd for its slave above %d: %m", tree_fd_floor(t));
		return -EMFILE;
	}
	pr_info("the job's terminal is the new /dev/pts/%d", got);
	return 0;
close_master:
	close(fd);
	return ret;
}

int tty_orphan_peer(const RegFile *f)
{
	int flags = (int)(f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC));
	int fd;

	if (orphan.master < 0) {
		pr_err("files.img: entry %u (%s) is the job's terminal, which the image does "
		       "not have; the image is corrupt",
		       f->id, f->path);
		return -EBADMSG;
	}
	/* through the master: the tree's /proc and /dev may not be there yet */
	fd = ioctl(orphan.master, TIOCGPTPEER, flags | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		pr_err("cannot open the job's new terminal for entry %u (%s): %m", f->id, f->path);
		return -errno;
	}
	return fd;
}

/* amber's fd on the master of /dev/pts/index, inherited by every process. */
static int master_fd(const struct tree *t, uint32_t index)
{
	const RegFile *m = master_of(t, index);

	return m ? t->desc_fd[m->id] : -1;
}

/*
 * A session leader takes its terminal again (setsid is done: restore.c),
 * before it creates its children, which inherit it.  Through the master:
 * the kernel takes job control ioctls on it for its slave, and no slave
 * has to be open (or opened past TIOCEXCL) for it.
 */
static int tty_restore_prefork(struct restore_ctx *ctx)
{
	const TaskCore *c = ctx->core;

	if (c->has_tty_job && ioctl(orphan.slave, TIOCSCTTY, 0)) {
		pr_err("pid %d: cannot make the new /dev/pts/%u its controlling terminal: %m",
		       ctx->pid, c->tty_job);
		return -errno;
	}
	if (!c->has_tty_index)
		return 0;
	if (ioctl(master_fd(ctx->tree, c->tty_index), TIOCSCTTY, 0)) {
		pr_err("pid %d: cannot make /dev/pts/%u its controlling terminal again: %m",
		       ctx->pid, c->tty_index);
		return -errno;
	}
	return 0;
}

/*
 * The leader of the foreground group, in its own group by now: it sets
 * itself as the foreground (SIGTTOU is blocked in a restored process).
 */
static int tty_restore_child(struct restore_ctx *ctx)
{
	const PstreeEntry *e = tree_entry(ctx->tree, (uint32_t)ctx->pid);
	const struct restore_ctx *leader;

	if (!e || e->pgid != e->pid || e->sid == e->pid)
		return 0; /* a session leader's own group: TIOCSCTTY made it the foreground */
	leader = tree_rproc(ctx->tree, e->sid);
	if (!leader || !leader->core->has_tty_index || !leader->core->has_tty_fg_pgrp ||
	    leader->core->tty_fg_pgrp != e->pid)
		return 0;
	if (ioctl(master_fd(ctx->tree, leader->core->tty_index), TIOCSPGRP, &(pid_t){ctx->pid})) {
		pr_err("pid %d: cannot make its group the foreground of /dev/pts/%u again: %m",
		       ctx->pid, leader->core->tty_index);
		return -errno;
	}
	return 0;
}

/*
 * In the process, which has its controlling terminal again by now (its
 * session leader took it before making its children): /dev/tty anew.
 * Checked first: the image says it is that session's terminal.
 */
static int devtty_open_child(struct restore_ctx *ctx, RegFile *f)
{
	const PstreeEntry *e = tree_entry(ctx->tree, (uint32_t)ctx->pid);
	const struct restore_ctx *leader = e ? tree_rproc(ctx->tree, e->sid) : NULL;
	int fd;

	if (!f->tty || !leader || !leader->core->has_tty_index ||
	    leader->core->tty_index != f->tty->index) {
		pr_err("files.img: entry %u (/dev/tty) of pid %d is not on its session's "
		       "controlling terminal; the image is corrupt",
		       f->id, ctx->pid);
		return -EBADMSG;
	}
	fd = open("/dev/tty", (int)(f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC)) |
				      O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		pr_err("pid %d: cannot open /dev/tty (/dev/pts/%u) again: %m", ctx->pid,
		       f->tty->index);
		return -errno;
	}
	return fd;
}

/* The job's terminal (amber's own), as it was before the restore changed it. */
static struct {
	int fd;
	bool changed;
	struct termios2 tio;
	struct winsize ws;
} job = {.fd = -1};

/* Changing a terminal amber is in the background of must not stop amber. */
static void block_ttou(sigset_t *old)
{
	sigset_t ttou;

	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, old);
}

/* -j: the job's terminal settings, on amber's terminal, before the job runs. */
static int tty_restore_tree(struct tree *t)
{
	const RegFile *f = NULL;
	sigset_t old;
	int ret;

	/* the new pty's master goes to the client before any process runs */
	if (orphan.master >= 0)
		return rpc_notify_fd(t->o->rpc_sk, "orphan-pts-master", 0, orphan.master);
	for (size_t i = 0; t->o->shell_job && i < t->nr_rfiles && !f; i++)
		if (t->rfiles[i]->kind == FILE_KIND__FILE_TTY && t->rfiles[i]->tty)
			f = t->rfiles[i];
	if (!f)
		return 0; /* no terminal, or an image from before termios were saved */
	for (int fd = 0; fd < 3 && job.fd < 0; fd++)
		if (isatty(fd))
			job.fd = fd;
	if (job.fd < 0) {
		pr_err("the process used the terminal %s, but amber restore has no terminal on "
		       "stdin/stdout/stderr",
		       f->path);
		return -ENOTTY;
	}
	if (ioctl(job.fd, TCGETS2, &job.tio) || ioctl(job.fd, TIOCGWINSZ, &job.ws)) {
		pr_err("cannot read the termios of amber's terminal (fd %d): %m", job.fd);
		return -errno;
	}
	job.changed = true;
	block_ttou(&old);
	ret = state_restore(job.fd, f->tty, "the job's terminal");
	sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/* amber's ends of the job's new pty: the client and the processes have theirs */
static void orphan_close(void)
{
	if (orphan.master >= 0)
		close(orphan.master);
	if (orphan.slave >= 0)
		close(orphan.slave);
	orphan.master = orphan.slave = -1;
}

static void tty_restore_done(struct tree *t)
{
	orphan_close();
}

static void tty_restore_undo(struct tree *t)
{
	sigset_t old;

	orphan_close();

	if (!job.changed)
		return;
	block_ttou(&old);
	if (ioctl(job.fd, TCSETS2, &job.tio) || ioctl(job.fd, TIOCSWINSZ, &job.ws))
		pr_warn("cannot give amber's terminal its own termios and window size back: %m");
	sigprocmask(SIG_SETMASK, &old, NULL);
	job.changed = false;
}

const struct resource_ops tty_ops = {
	.name = "tty",
	.dump = tty_dump,
	.dump_tree_late = tty_dump_tree_late,
	.dump_undo = tty_dump_undo,
	.restore_read = tty_restore_read,
	.restore_prefork = tty_restore_prefork,
	.restore_child = tty_restore_child,
	.restore_tree = tty_restore_tree,
	.restore_done = tty_restore_done,
	.restore_undo = tty_restore_undo,
};

const struct fd_type pty_master_type = {
	.name = "pty master",
	.kind = FILE_KIND__FILE_PTY_MASTER,
	.match = pty_master_match,
	.dump = pty_master_dump,
	.prepare = pty_master_prepare,
	.post_open = pty_post_open,
};

const struct fd_type pty_slave_type = {
	.name = "pty slave",
	.kind = FILE_KIND__FILE_PTY_SLAVE,
	.match = pty_slave_match,
	.dump = pty_slave_dump,
	.prepare = pty_slave_prepare,
	.post_open = pty_post_open,
};

const struct fd_type devtty_type = {
	.name = "/dev/tty",
	.kind = FILE_KIND__FILE_DEVTTY,
	.match = devtty_match,
	.dump = devtty_dump,
	.open_child = devtty_open_child,
};
