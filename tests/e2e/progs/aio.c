// SPDX-License-Identifier: MIT
/*
 * aio: an AIO context (io_setup, 16 events) with two reads (io_submit) of data.txt that
 * have completed but are not reaped yet when the program is ready.
 *
 * After "go": io_getevents returns both completions with their results and the data
 * read, and a new read submitted on the same context id completes too.  amber refuses
 * the dump of this program (README, Limits): the test checks the refusal and that the
 * program then runs on unharmed.
 */
#include <linux/aio_abi.h>
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

int main(int argc, char **argv)
{
	static char a[16], b[16], c[16];
	struct timespec ts = {5, 0};
	struct iocb cb[3], *cbs[3] = {&cb[0], &cb[1], &cb[2]};
	struct io_event ev[4];
	aio_context_t ctx = 0;
	int fd, n, ok;

	prog_init(argc, argv);
	fd = open("data.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0123456789abcdefghijklmnopqrstuvwxyz", 36) != 36)
		prog_die("data.txt");
	if (io_setup(16, &ctx))
		prog_die("io_setup");
	read_at(&cb[0], fd, a, 10, 0, 0x1111);
	read_at(&cb[1], fd, b, 16, 10, 0x2222);
	if (io_submit(ctx, 2, cbs) != 2)
		prog_die("io_submit");
	{ /* completed (buffered reads are done by io_submit itself), not reaped */
		struct aio_ring {
			unsigned id, nr, head, tail;
		} *ring = (void *)ctx;

		for (n = 0; n < 500 && ring->tail - ring->head != 2; n++)
			usleep(10000);
		if (ring->tail - ring->head != 2)
			prog_die("the two reads did not complete");
	}

	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		memset(b, 0, sizeof(b));

	n = (int)io_getevents(ctx, 2, 4, ev, &ts);
	CHECK(n == 2, "io_getevents: the 2 completed reads (got %d)", n);
	ok = n == 2;
	for (int i = 0; ok && i < 2; i++)
		ok = (ev[i].data == 0x1111 && ev[i].res == 10 && !memcmp(a, "0123456789", 10)) ||
		     (ev[i].data == 0x2222 && ev[i].res == 16 &&
		      !memcmp(b, "abcdefghijklmnop", 16));
	CHECK(ok, "each with its data, result and bytes");
	read_at(&cb[2], fd, c, 10, 26, 0x3333);
	n = (int)io_submit(ctx, 1, &cbs[2]);
	CHECK(n == 1, "io_submit on the same context (%d)", n);
	n = (int)io_getevents(ctx, 1, 1, ev, &ts);
	CHECK(n == 1 && ev[0].data == 0x3333 && ev[0].res == 10 && !memcmp(c, "qrstuvwxyz", 10),
	      "the new read completes with its data (%d)", n);
	return prog_done();
}
