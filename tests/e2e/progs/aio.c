// SPDX-License-Identifier: MIT
/*
 * aio: AIO contexts (io_setup).  Context A (16 events asked) went round its ring
 * once: 140 reads were submitted and reaped, so head and tail wrapped, and two more
 * reads of data.txt completed and are not reaped when the program is ready.  Context
 * B (300 events asked, a ring of several pages) holds one unreaped read.
 *
 * After "go": each ring's header (nr, head, tail) is as before; io_getevents returns
 * the unreaped completions with their results and data; a new read on context A
 * completes; A takes the 16 requests at once that io_setup promised; io_destroy knows
 * both ids.
 *
 * With "inflight": instead, a poll request (IOCB_CMD_POLL) on a pipe (fd 100) is in
 * flight, and 512 MiB of memory make the dump long; the test writes to the pipe while
 * the process is frozen, the request completes during the dump, and amber must refuse
 * the dump.  After "go" the poll's completion is reaped (the program writes to the
 * pipe too, for a run without amber).
 */
#include <linux/aio_abi.h>
#include <poll.h>
#include <sys/syscall.h>

#include "prog.h"

static long io_setup(unsigned nr, aio_context_t *ctx)
{
	return syscall(SYS_io_setup, nr, ctx);
}

static long io_submit(aio_context_t ctx, long n, struct iocb **iocbs)
{
	return syscall(SYS_io_submit, ctx, n, iocbs);
}

static long io_getevents(aio_context_t ctx, long min, long max, struct io_event *ev,
			 struct timespec *ts)
{
	return syscall(SYS_io_getevents, ctx, min, max, ev, ts);
}

static void read_at(struct iocb *cb, int fd, char *buf, size_t len, off_t off, uint64_t data)
{
	memset(cb, 0, sizeof(*cb));
	cb->aio_lio_opcode = IOCB_CMD_PREAD;
	cb->aio_fildes = (uint32_t)fd;
	cb->aio_buf = (uintptr_t)buf;
	cb->aio_nbytes = len;
	cb->aio_offset = off;
	cb->aio_data = data;
}

struct ring {
	unsigned id, nr, head, tail;
};

static long io_destroy(aio_context_t ctx)
{
	return syscall(SYS_io_destroy, ctx);
}

/* How many 1-byte reads context ctx takes at once before io_submit says EAGAIN. */
static int capacity(aio_context_t ctx, int fd, char *buf)
{
	struct iocb cb, *cbp = &cb;
	struct io_event ev[64];
	int n = 0;

	read_at(&cb, fd, buf, 1, 0, 0x9999);
	while (n < 4096 && io_submit(ctx, 1, &cbp) == 1)
		n++;
	for (int got = 0; got < n;) {
		long r = io_getevents(ctx, 1, 64, ev, NULL);

		if (r <= 0)
			prog_die("reaping the capacity probe");
		got += (int)r;
	}
	return n;
}

static int inflight(void)
{
	struct iocb cb, *cbp = &cb;
	struct io_event ev;
	struct timespec ts = {10, 0};
	aio_context_t ctx = 0;
	size_t len = 512UL << 20;
	char *mem = malloc(len);
	int fd = 100, p[2], n;

	/* a pipe (a FIFO's poll is refused by aio): the test writes to /proc/PID/fd/100 */
	if (!mem || pipe(p) || dup2(p[0], fd) != fd)
		prog_die("pipe");
	for (size_t i = 0; i < len; i += 4096)
		mem[i] = (char)(i >> 12) | 1;
	if (io_setup(4, &ctx))
		prog_die("io_setup");
	memset(&cb, 0, sizeof(cb));
	cb.aio_lio_opcode = IOCB_CMD_POLL;
	cb.aio_fildes = (uint32_t)fd;
	cb.aio_buf = POLLIN;
	cb.aio_data = 0x5555;
	if (io_submit(ctx, 1, &cbp) != 1)
		prog_die("io_submit poll");
	prog_ready();
	prog_wait_go();
	/* the test wrote already, unless it ran without amber (--selftest) */
	if (!prog_sabotage() && write(p[1], "y", 1) != 1)
		prog_die("write");
	ts.tv_sec = 2;
	n = (int)io_getevents(ctx, 1, 1, &ev, &ts);
	CHECK(n == 1 && ev.data == 0x5555 && (ev.res & POLLIN),
	      "the poll request completed (%d, res %#llx)", n, (unsigned long long)ev.res);
	return prog_done();
}

int main(int argc, char **argv)
{
	static char a[16], b[16], c[16], d[16], probe[1];
	struct timespec ts = {5, 0};
	struct iocb cb[4], *cbs[4] = {&cb[0], &cb[1], &cb[2], &cb[3]};
	struct io_event ev[4];
	aio_context_t ctx = 0, ctx2 = 0;
	struct ring before, before2, *ring, *ring2;
	int fd, n, ok;

	n = prog_init(argc, argv);
	if (n < argc && !strcmp(argv[n], "inflight"))
		return inflight();
	fd = open("data.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0123456789abcdefghijklmnopqrstuvwxyz", 36) != 36)
		prog_die("data.txt");
	if (io_setup(16, &ctx) || io_setup(300, &ctx2))
		prog_die("io_setup");
	ring = (void *)ctx;
	ring2 = (void *)ctx2;
	/* once round the ring: head and tail wrap */
	for (int i = 0; i < 140; i++) {
		read_at(&cb[0], fd, a, 1, 0, 0x100 + i);
		if (io_submit(ctx, 1, cbs) != 1 || io_getevents(ctx, 1, 1, ev, &ts) != 1)
			prog_die("round %d", i);
	}
	read_at(&cb[0], fd, a, 10, 0, 0x1111);
	read_at(&cb[1], fd, b, 16, 10, 0x2222);
	read_at(&cb[3], fd, d, 4, 20, 0x4444);
	if (io_submit(ctx, 2, cbs) != 2 || io_submit(ctx2, 1, &cbs[3]) != 1)
		prog_die("io_submit");
	/* completed (buffered reads are done by io_submit itself), not reaped */
	for (n = 0; n < 500 && ((ring->tail - ring->head + ring->nr) % ring->nr != 2 ||
				ring2->tail - ring2->head != 1);
	     n++)
		usleep(10000);
	if ((ring->tail - ring->head + ring->nr) % ring->nr != 2 || ring2->tail != 1)
		prog_die("the reads did not complete");
	before = *ring;
	before2 = *ring2;

	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		memset(b, 0, sizeof(b));

	CHECK(ring->nr == before.nr && ring->head == before.head && ring->tail == before.tail,
	      "ring A: nr %u head %u tail %u (before: %u %u %u)", ring->nr, ring->head, ring->tail,
	      before.nr, before.head, before.tail);
	CHECK(ring2->nr == before2.nr && ring2->head == before2.head && ring2->tail == before2.tail,
	      "ring B: nr %u head %u tail %u (before: %u %u %u)", ring2->nr, ring2->head,
	      ring2->tail, before2.nr, before2.head, before2.tail);
	n = (int)io_getevents(ctx, 2, 4, ev, &ts);
	CHECK(n == 2, "io_getevents: the 2 completed reads (got %d)", n);
	ok = n == 2;
	for (int i = 0; ok && i < 2; i++)
		ok = (ev[i].data == 0x1111 && ev[i].res == 10 && !memcmp(a, "0123456789", 10)) ||
		     (ev[i].data == 0x2222 && ev[i].res == 16 &&
		      !memcmp(b, "abcdefghijklmnop", 16));
	CHECK(ok, "each with its data, result and bytes");
	n = (int)io_getevents(ctx2, 1, 1, ev, &ts);
	CHECK(n == 1 && ev[0].data == 0x4444 && ev[0].res == 4 && !memcmp(d, "klmn", 4),
	      "context B's completed read (%d)", n);
	read_at(&cb[2], fd, c, 10, 26, 0x3333);
	n = (int)io_submit(ctx, 1, &cbs[2]);
	CHECK(n == 1, "io_submit on the same context (%d)", n);
	n = (int)io_getevents(ctx, 1, 1, ev, &ts);
	CHECK(n == 1 && ev[0].data == 0x3333 && ev[0].res == 10 && !memcmp(c, "qrstuvwxyz", 10),
	      "the new read completes with its data (%d)", n);
	/* io_setup(16) promises 16 at once; how many more depends on the CPUs the
	 * slots were last freed on (per-CPU caches), so no exact count */
	n = capacity(ctx, fd, probe);
	CHECK(n >= 16, "requests in flight at once: %d (16 asked)", n);
	CHECK(io_destroy(ctx) == 0 && io_destroy(ctx2) == 0, "io_destroy knows both contexts");
	return prog_done();
}
