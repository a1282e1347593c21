// SPDX-License-Identifier: MIT
/*
 * timerfd: clock, interval, remaining time and the expirations not yet read
 * (fdinfo: "clockid:", "ticks:", "settime flags:", "it_value:" which is the
 * time left, "it_interval:").  Restored relative to the restore: the time
 * the image spent on disk does not count, except for CLOCK_REALTIME timers
 * set with TFD_TIMER_ABSTIME, which keep their wall-clock deadline.  Ticks
 * come back with TFD_IOC_SET_TICKS (CONFIG_CHECKPOINT_RESTORE).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "anonfd.h"

#ifndef TFD_IOC_SET_TICKS
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif
#ifndef TFD_TIMER_CANCEL_ON_SET
#define TFD_TIMER_CANCEL_ON_SET (1 << 1)
#endif

#define NSEC 1000000000ull

static bool timerfd_match(const char *link, const struct stat *st)
{
	return !strcmp(link, "anon_inode:[timerfd]");
}

static bool is_realtime(int clockid)
{
	return clockid == CLOCK_REALTIME || clockid == CLOCK_REALTIME_ALARM;
}

/* "it_value: (SEC, NSEC)" */
static int parse_time(const char *p, uint64_t *ns)
{
	unsigned long long sec, nsec;

	if (!p || sscanf(p, " (%llu, %llu)", &sec, &nsec) != 2 || nsec >= NSEC)
		return -EINVAL;
	*ns = sec * NSEC + nsec;
	return 0;
}

static int timerfd_dump(struct dump_ctx *ctx, int fd, int dup, RegFile *f)
{
	const char *clk, *ticks, *sflags;
	struct itimerspec cur;
	TimerfdEntry *e;
	char *buf;
	int ret;

	/*
	 * A periodic timer that expired and was not read since is moved on by
	 * gettime, which also counts the periods it missed into its ticks (as a
	 * read() would), so that fdinfo then shows the true state.
	 */
	if (timerfd_gettime(dup, &cur)) {
		ret = -errno;
		pr_err("pid %d: fd %d: timerfd_gettime on its timerfd failed: %m", ctx->pid, fd);
		return ret;
	}
	ret = anonfd_dump_start(ctx, fd, dup, "timerfd", &timerfd_entry__descriptor, &buf,
				(void **)&e);
	if (ret)
		return ret;
	f->timerfd = e;
	clk = anonfd_field(buf, "clockid:");
	ticks = anonfd_field(buf, "ticks:");
	sflags = anonfd_field(buf, "settime flags:");
	if (!clk || !ticks || !sflags || parse_time(anonfd_field(buf, "it_value:"), &e->value_ns) ||
	    parse_time(anonfd_field(buf, "it_interval:"), &e->interval_ns)) {
		pr_err("pid %d: fd %d: cannot parse the fdinfo of its timerfd:\n%s", ctx->pid, fd,
		       buf);
		ret = -EINVAL;
		goto free_buf;
	}
	e->clockid = (int32_t)strtol(clk, NULL, 10);
	e->ticks = strtoull(ticks, NULL, 10);
	e->settime_flags = (uint32_t)strtoul(sflags, NULL, 8);
	/* Expired just now and not moved on yet: its tick is counted, next one a period on. */
	if (!e->value_ns && e->interval_ns)
		e->value_ns = e->interval_ns;
	if (e->value_ns && (e->settime_flags & TFD_TIMER_ABSTIME) && is_realtime(e->clockid)) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		e->has_deadline_ns = 1;
		e->deadline_ns = (uint64_t)now.tv_sec * NSEC + now.tv_nsec + e->value_ns;
	}
	pr_debug("pid %d: fd %d: timerfd clock %d, %llu ns left, interval %llu ns, %llu ticks",
		 ctx->pid, fd, e->clockid, (unsigned long long)e->value_ns,
		 (unsigned long long)e->interval_ns, (unsigned long long)e->ticks);
free_buf:
	free(buf);
	return ret;
}

static struct timespec ts_of(uint64_t ns)
{
	return (struct timespec){.tv_sec = (time_t)(ns / NSEC), .tv_nsec = (long)(ns % NSEC)};
}

static int timerfd_open(struct tree *t, RegFile *f)
{
	int flags = TFD_CLOEXEC, fd, ret;
	struct itimerspec its;
	TimerfdEntry *e = f->timerfd;

	if (!e) {
		pr_err("files.img: timerfd entry %u has no timerfd state; the image is corrupt",
		       f->id);
		return -EBADMSG;
	}
	if (f->flags & O_NONBLOCK)
		flags |= TFD_NONBLOCK;
	fd = timerfd_create(e->clockid, flags);
	if (fd < 0) {
		ret = -errno;
		pr_err("cannot create a timerfd on clock %d (entry %u): %m%s", e->clockid, f->id,
		       errno == EPERM ? " (alarm clocks need CAP_WAKE_ALARM)" : "");
		return ret;
	}
	if (e->value_ns) {
		int sflags = 0;

		its.it_interval = ts_of(e->interval_ns);
		its.it_value = ts_of(e->value_ns);
		if (e->has_deadline_ns) {
			its.it_value = ts_of(e->deadline_ns);
			sflags = TFD_TIMER_ABSTIME | (e->settime_flags & TFD_TIMER_CANCEL_ON_SET);
		}
		if (timerfd_settime(fd, sflags, &its, NULL)) {
			ret = -errno;
			pr_err("cannot arm the timerfd of entry %u (%llu ns left): %m", f->id,
			       (unsigned long long)e->value_ns);
			goto close_fd;
		}
	}
	if (e->ticks && ioctl(fd, TFD_IOC_SET_TICKS, &e->ticks)) {
		ret = -errno;
		pr_err("cannot give the timerfd of entry %u its %llu unread expirations: %m "
		       "(TFD_IOC_SET_TICKS needs CONFIG_CHECKPOINT_RESTORE)",
		       f->id, (unsigned long long)e->ticks);
		goto close_fd;
	}
	return fd;
close_fd:
	close(fd);
	return ret;
}

const struct fd_type timerfd_type = {
	.name = "timerfd",
	.kind = FILE_KIND__FILE_TIMERFD,
	.match = timerfd_match,
	.dump = timerfd_dump,
	.open = timerfd_open,
};
