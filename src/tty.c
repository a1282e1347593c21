// SPDX-License-Identifier: MIT
/*
 * Terminals.  The job's terminal with --shell-job (FILE_TTY): its termios
 * (struct termios2: flags, line discipline, special characters, speeds) and
 * window size are saved in reg_file.tty and put on the terminal amber
 * restore runs in before the job runs again, so that a raw-mode program (an
 * editor, top) does not come back in cooked mode.  A failed restore gives
 * the terminal its own settings back.
 */
#include <asm/termbits.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "amber.h"
#include "files.h"
#include "log.h"
#include "sys.h"
#include "tty.h"

#define NR_LDISCS 30 /* the kernel's N_* line disciplines: 0..29 */

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

static int tty_restore_read(struct restore_ctx *ctx)
{
	struct tree *t = ctx->tree;

	for (size_t i = 0; i < t->nr_rfiles; i++) {
		RegFile *f = t->rfiles[i];

		if (f->tty && !state_ok(f->tty)) {
			pr_err("files.img: entry %u (%s) has a terminal state no terminal can have "
			       "(special characters, line discipline or window size); the image "
			       "is corrupt",
			       f->id, f->path);
			return -EBADMSG;
		}
	}
	return 0;
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

static void tty_restore_undo(struct tree *t)
{
	sigset_t old;

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
	.restore_read = tty_restore_read,
	.restore_tree = tty_restore_tree,
	.restore_undo = tty_restore_undo,
};
