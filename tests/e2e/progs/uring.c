// SPDX-License-Identifier: MIT
/*
 * uring: two idle io_urings (raw syscalls).
 *  A (fd 40): 8 SQEs, 16 CQEs, no flags; 1000 NOPs and 200 reads of data.txt
 *     submitted and reaped (its positions wrapped many times), one NOP run by an
 *     io-wq worker (IOSQE_ASYNC: the worker stays, idle), two CQEs sent by
 *     another ring (MSG_RING, one not reaped), then 3 reads completed and not
 *     reaped, and 2 SQEs queued and not submitted (a read and a NOP),
 *     its mappings made by the program with liburing's sizes; 3 buffers
 *     registered (the middle one empty) and an empty table of 3 files.
 *  B (fd 41): SINGLE_ISSUER | DEFER_TASKRUN | SQE128 | CQE32, 4 SQEs and 32
 *     CQEs (CQSIZE); 77 NOPs, a message from another ring (reaped) and one SQE
 *     dropped (an index outside the ring), one NOP completed and not reaped.
 *  C (fd 42): NO_SQARRAY | SQE128, 64 SQEs; 100 NOPs, one completed and not
 *     reaped, one queued.
 *  D (fd 44): IOPOLL, 8 SQEs; 30 NOPs and a message from another ring reaped,
 *     one NOP completed and not reaped.
 *
 * After "go": the rings' positions in the shared memory and fdinfo's counters
 * are as before; the unreaped CQEs come with their user_data, res and bytes
 * read; the queued SQEs run when submitted; new requests work, also a read
 * through a file put in the table now, and into a registered buffer (the
 * table has 3 slots still); B is still SINGLE_ISSUER (another process's
 * io_uring_register fails EEXIST) with the main thread as its issuer, and its
 * CQEs and SQEs have their big sizes (else user_data would not match); D is
 * still IOPOLL (io_uring_enter refuses a registered wait argument: EINVAL, not
 * the EFAULT of a ring without IOPOLL for one out of range).
 *
 * With "busy": A has a read in flight on an empty pipe (fd 100); the dump must
 * be refused.  After "go" the program writes to the pipe and reaps it.
 *
 * With "worker", "files", "sockclosed", "eventfd", "provide", "ringfd", "sqpoll",
 * "nosqarray", "shared": A (fd 40) has what amber refuses: an open of a FIFO
 * without a writer run by an io-wq worker (IOSQE_ASYNC), the pipe registered
 * as a file (on kernels without KCMP_IOURING_FILE), a socket registered whose
 * fd was closed, an eventfd registered, buffers provided (PROVIDE_BUFFERS),
 * the ring registered by index 5 (IORING_REGISTER_RING_FDS),
 * an SQ polling thread, no SQ array in a ring of 8 SQEs, a child process
 * holding it too.  After "go" a NOP goes through A (the worker's open completes
 * once the FIFO has a writer).
 */
#include <arpa/inet.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/eventfd.h>
#include <sys/wait.h>

#ifndef IORING_SETUP_NO_SQARRAY
#define IORING_SETUP_NO_SQARRAY (1U << 16)
#endif

#include "prog.h"

struct ring {
	int fd;
	unsigned sqe_size, cqe_size;
	struct io_uring_params p;
	char *sq, *cq;
	struct io_uring_sqe *sqes;
};

#define U32(base, off) ((volatile unsigned *)((base) + (off)))

static int setup(struct ring *r, unsigned entries, unsigned flags, unsigned cq, int at)
{
	size_t sqlen, cqlen;
	int fd;

	memset(r, 0, sizeof(*r));
	r->p.flags = flags;
	r->p.cq_entries = cq;
	fd = (int)syscall(SYS_io_uring_setup, entries, &r->p);
	if (fd < 0)
		prog_die("io_uring_setup");
	if (dup2(fd, at) != at)
		prog_die("dup2");
	close(fd);
	r->fd = at;
	r->sqe_size = flags & IORING_SETUP_SQE128 ? 128 : 64;
	r->cqe_size = flags & IORING_SETUP_CQE32 ? 32 : 16;
	sqlen = r->p.sq_off.array + r->p.sq_entries * 4;
	cqlen = r->p.cq_off.cqes + r->p.cq_entries * r->cqe_size;
	r->sq = mmap(NULL, sqlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, at,
		     IORING_OFF_SQ_RING);
	r->cq = mmap(NULL, cqlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, at,
		     IORING_OFF_CQ_RING);
	r->sqes = mmap(NULL, r->p.sq_entries * r->sqe_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, at, IORING_OFF_SQES);
	if (r->sq == MAP_FAILED || r->cq == MAP_FAILED || r->sqes == MAP_FAILED)
		prog_die("mmap");
	return 0;
}

static struct io_uring_sqe *sqe_at(struct ring *r, unsigned i)
{
	return (void *)((char *)r->sqes + (i & (r->p.sq_entries - 1)) * r->sqe_size);
}

/* Queue one SQE (not submitted); index: its SQ array entry. */
static struct io_uring_sqe *queue(struct ring *r, unsigned index)
{
	unsigned tail = *U32(r->sq, r->p.sq_off.tail);
	unsigned slot = tail & (r->p.sq_entries - 1);
	struct io_uring_sqe *sqe = sqe_at(r, slot);

	memset(sqe, 0, r->sqe_size);
	if (!(r->p.flags & IORING_SETUP_NO_SQARRAY))
		U32(r->sq, r->p.sq_off.array)[slot] = index == ~0u ? slot : index;
	__atomic_store_n(U32(r->sq, r->p.sq_off.tail), tail + 1, __ATOMIC_RELEASE);
	return sqe;
}

static struct io_uring_sqe *nop(struct ring *r, uint64_t data)
{
	struct io_uring_sqe *sqe = queue(r, ~0u);

	sqe->opcode = IORING_OP_NOP;
	sqe->user_data = data;
	return sqe;
}

static struct io_uring_sqe *rd(struct ring *r, int fd, void *buf, unsigned len, uint64_t off,
			       uint64_t data)
{
	struct io_uring_sqe *sqe = queue(r, ~0u);

	sqe->opcode = IORING_OP_READ;
	sqe->fd = fd;
	sqe->addr = (uintptr_t)buf;
	sqe->len = len;
	sqe->off = off;
	sqe->user_data = data;
	return sqe;
}

static int enter(struct ring *r, unsigned n, unsigned wait)
{
	unsigned flags = wait ? IORING_ENTER_GETEVENTS : 0;

	/* an SQ polling thread asleep is woken up; it returns n at once */
	if (r->p.flags & IORING_SETUP_SQPOLL)
		flags |= IORING_ENTER_SQ_WAKEUP;
	return (int)syscall(SYS_io_uring_enter, r->fd, n, wait, flags, NULL, 0);
}

/* The next CQE, or NULL; consumed. */
static int reap(struct ring *r, struct io_uring_cqe *out)
{
	unsigned head = *U32(r->cq, r->p.cq_off.head);
	unsigned tail = __atomic_load_n(U32(r->cq, r->p.cq_off.tail), __ATOMIC_ACQUIRE);

	if (head == tail)
		return 0;
	memcpy(out, r->cq + r->p.cq_off.cqes + (head & (r->p.cq_entries - 1)) * r->cqe_size,
	       sizeof(*out));
	__atomic_store_n(U32(r->cq, r->p.cq_off.head), head + 1, __ATOMIC_RELEASE);
	return 1;
}

/* The counters of fdinfo amber must bring back, one line each (and the buffers). */
static void counters(int fd, char *out, size_t len)
{
	static const char *keys[] = {
		"SqMask:", "SqHead:",	    "SqTail:", "CachedSqHead:", "CqMask:",    "CqHead:",
		"CqTail:", "CachedCqTail:", "SQEs:",   "CQEs:",		"UserFiles:", "UserBufs:"};
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		prog_die("fdinfo");
	*out = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned idx;
		char rest[8];

		/* a registered buffer: "    N: 0xADDR/LEN" or "    N: <none>" */
		if (sscanf(line, "%u: %7s", &idx, rest) == 2 &&
		    (!strncmp(rest, "0x", 2) || !strcmp(rest, "<none>")) &&
		    strlen(out) + strlen(line) < len)
			strcat(out, line);
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (!strncmp(line, keys[i], strlen(keys[i])) &&
			    strlen(out) + strlen(line) < len)
				strcat(out, line);
	}
	fclose(f);
}

/* io_uring_enter with a registered wait argument out of range: EINVAL for IOPOLL */
static int enter_reg_wait(int fd)
{
	return (int)syscall(SYS_io_uring_enter, fd, 0, 0,
			    IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG | (1U << 6),
			    (void *)(1UL << 40), 64);
}

static int busy(void)
{
	struct ring a;
	struct io_uring_cqe cqe;
	static char buf[8];
	int p[2], n;

	if (pipe(p) || dup2(p[0], 100) != 100)
		prog_die("pipe");
	setup(&a, 8, 0, 0, 40);
	rd(&a, 100, buf, sizeof(buf), 0, 0xb5);
	if (enter(&a, 1, 0) != 1)
		prog_die("submit");
	prog_ready();
	prog_wait_go();
	if (!prog_sabotage() && write(p[1], "busy", 4) != 4)
		prog_die("write");
	/* at once, but for a run without amber's dump that wrote nothing (--selftest) */
	for (int i = 0; i < 200 && !(n = reap(&a, &cqe)); i++)
		if (enter(&a, 0, 0) < 0 || usleep(10000))
			prog_die("io_uring_enter");
	CHECK(n && cqe.user_data == 0xb5 && cqe.res == 4 && !memcmp(buf, "busy", 4),
	      "the read in flight completed (%d, res %d)", n, n ? cqe.res : 0);
	return prog_done();
}

static int refused(const char *mode)
{
	struct io_uring_cqe cqe;
	uint64_t want = 0x77;
	unsigned flags = 0;
	struct ring a;
	int p[2], efd, n = 0, st;
	pid_t child = 0;

	if (pipe(p) || dup2(p[0], 100) != 100)
		prog_die("pipe");
	if (!strcmp(mode, "sqpoll"))
		flags = IORING_SETUP_SQPOLL;
	else if (!strcmp(mode, "nosqarray"))
		flags = IORING_SETUP_NO_SQARRAY;
	setup(&a, 8, flags, 0, 40);
	if (!strcmp(mode, "files") &&
	    syscall(SYS_io_uring_register, 40, IORING_REGISTER_FILES, &p[0], 1))
		prog_die("registering the pipe");
	if (!strcmp(mode, "sockclosed")) { /* a socket in slot 1, its fd closed */
		int s[2] = {-1, socket(AF_INET, SOCK_DGRAM, 0)};

		if (s[1] < 0 || syscall(SYS_io_uring_register, 40, IORING_REGISTER_FILES, s, 2))
			prog_die("registering a socket");
		close(s[1]);
	}
	if (!strcmp(mode, "provide")) { /* 4 buffers of 16 bytes in group 0, not a ring */
		static char pool[64];
		struct io_uring_sqe *sqe = nop(&a, 0x79);

		sqe->opcode = IORING_OP_PROVIDE_BUFFERS;
		sqe->fd = 4;
		sqe->addr = (uintptr_t)pool;
		sqe->len = 16;
		sqe->buf_group = 0;
		if (enter(&a, 1, 1) != 1 || !reap(&a, &cqe) || cqe.res)
			prog_die("providing buffers");
	}
	if (!strcmp(mode,
		    "ringfd")) { /* ring A registered by index (liburing's register_ring_fd) */
		struct io_uring_rsrc_update up = {.offset = 5, .data = 40};

		if (syscall(SYS_io_uring_register, 40, IORING_REGISTER_RING_FDS, &up, 1) != 1)
			prog_die("registering the ring by index");
	}
	efd = eventfd(0, 0);
	if (!strcmp(mode, "eventfd") &&
	    (efd < 0 || syscall(SYS_io_uring_register, 40, IORING_REGISTER_EVENTFD, &efd, 1)))
		prog_die("registering an eventfd");
	if (!strcmp(mode, "worker")) { /* an open of a FIFO without a writer blocks */
		struct io_uring_sqe *sqe = nop(&a, 0x78);

		if (mkfifo(prog_path("fifo"), 0600))
			prog_die("mkfifo");
		sqe->opcode = IORING_OP_OPENAT;
		sqe->flags = IOSQE_ASYNC;
		sqe->fd = AT_FDCWD;
		sqe->addr = (uintptr_t)prog_path("fifo");
		sqe->open_flags = O_RDONLY;
		if (enter(&a, 1, 0) != 1)
			prog_die("the worker's open");
	}
	if (!strcmp(mode, "shared")) {
		child = fork();
		if (child < 0)
			prog_die("fork");
		if (!child) { /* holds fd 40 until "go" */
			while (access(prog_path("go"), F_OK))
				usleep(10000);
			_exit(0);
		}
	}
	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		want = 0x76;
	if (!strcmp(mode, "worker")) {
		int w = open(prog_path("fifo"), O_WRONLY | O_NONBLOCK);

		for (int i = 0; i < 200 && !(n = reap(&a, &cqe)); i++)
			if (enter(&a, 0, 0) < 0 || usleep(10000))
				prog_die("io_uring_enter");
		CHECK(w >= 0 && n && cqe.user_data == 0x78 && cqe.res >= 0,
		      "the worker's open completed (%d)", n ? cqe.res : 0);
	}
	nop(&a, 0x77);
	n = enter(&a, 1, 1) == 1 && reap(&a, &cqe) && cqe.user_data == want;
	CHECK(n, "a NOP through ring A (%s)", mode);
	if (child)
		CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
		      "the child holding ring A too");
	return prog_done();
}

/* The file /proc names in slot i of the registered-file table of fd ("" if none). */
static const char *slot_file(int fd, unsigned i)
{
	static char name[64];
	char path[64], line[256];
	int in = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		prog_die("fdinfo");
	name[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned idx;
		char rest[64];

		if (line[0] != ' ')
			in = !strncmp(line, "UserFiles:", 10);
		else if (in && sscanf(line, "%u: %63s", &idx, rest) == 2 && idx == i &&
			 strcmp(rest, "<none>")) /* an empty slot, listed before 6.13 */
			snprintf(name, sizeof(name), "%s", rest);
	}
	fclose(f);
	return name;
}

static const char *fd_link(int fd)
{
	static char target[64];
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = 0;
	return target;
}

/*
 * sockets: ring A (fd 40) with a table of 4 files: slot 0 one end of a
 * stream socket pair (fd 50, its peer fd 51), slot 2 a UDP socket on
 * 127.0.0.1 (fd 52), slots 1 and 3 empty.  After "go": each slot holds what
 * it held (fdinfo names fd 50's socket in slot 0, fd 52's in slot 2, nothing
 * in 1 and 3); a send through slot 0 arrives at fd 51, and a datagram sent to
 * fd 52's address is received through slot 2.
 */
static int sockets(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int sp[2], fds[4] = {50, -1, 52, -1}, u, c, n;
	char got[16] = {0}, dg[16] = {0};
	struct io_uring_sqe *sqe;
	struct io_uring_cqe cqe;
	struct ring r;

	u = socket(AF_INET, SOCK_DGRAM, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) || dup2(sp[0], 50) != 50 ||
	    dup2(sp[1], 51) != 51 || u < 0 || bind(u, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(u, (struct sockaddr *)&a, &al) || dup2(u, 52) != 52)
		prog_die("sockets");
	close(sp[0]);
	close(sp[1]);
	close(u);
	setup(&r, 8, 0, 0, 40);
	if (syscall(SYS_io_uring_register, 40, IORING_REGISTER_FILES, fds, 4))
		prog_die("registering the sockets");
	prog_ready();
	prog_wait_go();

	CHECK(!strcmp(slot_file(40, 0), fd_link(50)), "slot 0 holds fd 50's %s (%s)", fd_link(50),
	      slot_file(40, 0));
	CHECK(!strcmp(slot_file(40, 2), fd_link(52)), "slot 2 holds fd 52's %s (%s)", fd_link(52),
	      slot_file(40, 2));
	CHECK(!*slot_file(40, 1) && !*slot_file(40, 3), "slots 1 and 3 are empty (%s, %s)",
	      slot_file(40, 1), slot_file(40, 3));
	sqe = queue(&r, ~0u);
	sqe->opcode = IORING_OP_SEND;
	sqe->fd = prog_sabotage() ? 2 : 0;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->addr = (uintptr_t) "ring";
	sqe->len = 4;
	sqe->user_data = 0x91;
	n = enter(&r, 1, 1) == 1 && reap(&r, &cqe) && cqe.user_data == 0x91 && cqe.res == 4;
	CHECK(n && recv(51, got, sizeof(got), MSG_DONTWAIT) == 4 && !strcmp(got, "ring"),
	      "a send through slot 0 arrives at fd 51 (%d, %s)", n ? cqe.res : 0, got);
	c = socket(AF_INET, SOCK_DGRAM, 0);
	if (c < 0 || sendto(c, "dgram", 5, 0, (struct sockaddr *)&a, sizeof(a)) != 5)
		prog_die("sendto");
	sqe = queue(&r, ~0u);
	sqe->opcode = IORING_OP_RECV;
	sqe->fd = 2;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->addr = (uintptr_t)dg;
	sqe->len = sizeof(dg) - 1;
	sqe->user_data = 0x92;
	n = enter(&r, 1, 1) == 1 && reap(&r, &cqe) && cqe.user_data == 0x92 && cqe.res == 5;
	CHECK(n && !strcmp(dg, "dgram"), "the datagram to fd 52 received through slot 2 (%d, %s)",
	      n ? cqe.res : 0, dg);
	return prog_done();
}

/* The ring's setup flags as fdinfo shows them (amber's kernel series), or -1. */
static long setup_flags(int fd)
{
	char path[64], line[256];
	long flags = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		prog_die("fdinfo");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "SetupFlags:", 11))
			flags = strtol(line + 11, NULL, 16);
	fclose(f);
	return flags;
}

/* One SQE on a fixed file (slot), submitted and reaped: its result, or -1000. */
static int fixed_rw(struct ring *r, int op, unsigned slot, void *buf, unsigned len, uint64_t data)
{
	struct io_uring_sqe *sqe = queue(r, ~0u);
	struct io_uring_cqe cqe;

	sqe->opcode = op;
	sqe->fd = (int)slot;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->off = -1ULL; /* the file's position (the description's) */
	sqe->addr = (uintptr_t)buf;
	sqe->len = len;
	sqe->user_data = data;
	if (enter(r, 1, 1) != 1 || !reap(r, &cqe) || cqe.user_data != data)
		return -1000;
	return cqe.res;
}

/*
 * regfiles: ring A (fd 40) set up with SUBMIT_ALL | COOP_TASKRUN |
 * TASKRUN_FLAG, a table of 5 files: slot 0 LONG_DIR/data.txt (fd 60, read-write, at
 * offset 5), slot 1 empty, slots 2 and 3 a pipe's read and write ends (fds 61,
 * 62), slot 4 an eventfd (fd 63, count 5).  Only a kernel
 * whose kcmp() compares registered files (amber's kernel series) tells which
 * open files they are; elsewhere the dump is refused.  After "go": the slots
 * hold the same open files as the fds (a read through slot 0 at the file's
 * position reads "5678" and moves fd 60's offset to 9; what slot 3 writes fd 61
 * reads, what fd 62 writes slot 2 reads; 7 written through slot 4 makes fd
 * 63 read 12) and the ring's setup flags, where fdinfo shows them, are as set up.
 */
#define LONG_DIR "a-directory-whose-name-alone-is-longer-than-sixty-four-characters-long"

static int regfiles(void)
{
	const unsigned want =
		IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	int fds[5] = {60, -1, 61, 62, 63}, pp[2], d, e, n;
	uint64_t add = 7, count = 0;
	char got[16] = {0}, fromfd[16] = {0};
	long before, after;
	struct ring r;
	off_t pos;

	/* a path longer than a short buffer for fdinfo's names holds */
	if (mkdir(LONG_DIR, 0755) && errno != EEXIST)
		prog_die("mkdir " LONG_DIR);
	d = open(LONG_DIR "/data.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (d < 0 || write(d, "0123456789abcdef", 16) != 16 || lseek(d, 5, SEEK_SET) != 5 ||
	    dup2(d, 60) != 60 || pipe(pp) || dup2(pp[0], 61) != 61 || dup2(pp[1], 62) != 62 ||
	    (e = eventfd(5, EFD_NONBLOCK)) < 0 || dup2(e, 63) != 63)
		prog_die("regfiles");
	close(d);
	close(pp[0]);
	close(pp[1]);
	close(e);
	setup(&r, 8, want, 0, 40);
	if (syscall(SYS_io_uring_register, 40, IORING_REGISTER_FILES, fds, 5))
		prog_die("registering the files");
	before = setup_flags(40);
	prog_ready();
	prog_wait_go();

	n = fixed_rw(&r, IORING_OP_READ, prog_sabotage() ? 3 : 0, got, 4, 0xa1);
	pos = lseek(60, 0, SEEK_CUR);
	CHECK(n == 4 && !strcmp(got, "5678") && pos == 9,
	      "slot 0 is fd 60's open file: read %d bytes (%s) at its offset, now %lld", n, got,
	      (long long)pos);
	n = fixed_rw(&r, IORING_OP_WRITE, 3, "ring", 4, 0xa2);
	CHECK(n == 4 && read(61, fromfd, sizeof(fromfd)) == 4 && !strcmp(fromfd, "ring"),
	      "what slot 3 writes (%d) fd 61 reads (%s)", n, fromfd);
	memset(got, 0, sizeof(got));
	n = write(62, "fd", 2) == 2 ? fixed_rw(&r, IORING_OP_READ, 2, got, sizeof(got) - 1, 0xa3)
				    : -1;
	CHECK(n == 2 && !strcmp(got, "fd"), "what fd 62 writes slot 2 reads (%d, %s)", n, got);
	n = fixed_rw(&r, IORING_OP_WRITE, 4, &add, sizeof(add), 0xa4);
	if (n == 8 && read(63, &count, sizeof(count)) != 8)
		count = 0;
	CHECK(n == 8 && count == 12, "7 written through slot 4 (%d) makes eventfd 63 read %llu", n,
	      (unsigned long long)count);
	CHECK(!*slot_file(40, 1), "slot 1 is empty (%s)", slot_file(40, 1));
	after = setup_flags(40);
	CHECK(before == -1 || (before == (long)want && after == before),
	      "the ring's setup flags: %#lx, %#lx before (%#x set up)", after, before, want);
	return prog_done();
}

int main(int argc, char **argv)
{
	static const char data[] = "0123456789abcdefghijklmnopqrstuvwxyz";
	static char b1[8], b2[8], b3[8], q1[8], n1[8], f1[8];
	static char reg0[8192] __attribute__((aligned(4096))), reg2[100];
	struct iovec bufs[3] = {{reg0, sizeof(reg0)}, {NULL, 0}, {reg2, sizeof(reg2)}};
	struct io_uring_files_update up;
	int none[3] = {-1, -1, -1};
	char ca[1024], cb[1024], cc[1024], cd[1024], ca2[1024], cb2[1024], cc2[1024], cd2[1024];
	struct io_uring_cqe cqe;
	struct ring a, b, c, d, h;
	unsigned a_sq_tail, a_cq_head, b_dropped;
	uint64_t want_q = 0x51;
	int fd, n, st;
	pid_t child;

	n = prog_init(argc, argv);
	if (n < argc && !strcmp(argv[n], "busy"))
		return busy();
	if (n < argc && !strcmp(argv[n], "sockets"))
		return sockets();
	if (n < argc && !strcmp(argv[n], "regfiles"))
		return regfiles();
	if (n < argc)
		return refused(argv[n]);
	fd = open("data.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, data, 36) != 36)
		prog_die("data.txt");

	setup(&a, 8, 0, 0, 40);
	for (int i = 0; i < 1200; i++) {
		if (i % 6 == 5)
			rd(&a, fd, b1, 4, (unsigned)i % 30, 0x1000 + i);
		else
			nop(&a, 0x1000 + i);
		if (enter(&a, 1, 1) != 1 || !reap(&a, &cqe) || cqe.user_data != 0x1000u + i)
			prog_die("round %d", i);
	}
	nop(&a, 0x1f)->flags = IOSQE_ASYNC; /* an io-wq worker runs it, and stays */
	if (enter(&a, 1, 1) != 1 || !reap(&a, &cqe) || cqe.user_data != 0x1f)
		prog_die("the NOP run by a worker");
	if (syscall(SYS_io_uring_register, 40, IORING_REGISTER_BUFFERS, bufs, 3) ||
	    syscall(SYS_io_uring_register, 40, IORING_REGISTER_FILES, none, 3))
		prog_die("registering buffers and an empty file table");
	/* two CQEs without an SQE of A's: messages from another ring */
	setup(&h, 4, 0, 0, 43);
	for (int i = 0; i < 2; i++) {
		struct io_uring_sqe *sqe = nop(&h, 0xe0 + i);

		sqe->opcode = IORING_OP_MSG_RING; /* IORING_MSG_DATA */
		sqe->fd = 40;
		sqe->len = 41 + i;   /* the CQE's res */
		sqe->off = 0xd0 + i; /* its user_data */
	}
	if (enter(&h, 2, 2) != 2 || !reap(&h, &cqe) || !reap(&h, &cqe) || !reap(&a, &cqe) ||
	    cqe.user_data != 0xd0 || cqe.res != 41)
		prog_die("messages from another ring");
	rd(&a, fd, b1, 4, 0, 0xa1);
	rd(&a, fd, b2, 5, 10, 0xa2);
	rd(&a, fd, b3, 6, 20, 0xa3);
	if (enter(&a, 3, 3) != 3)
		prog_die("the three reads");
	rd(&a, fd, q1, 7, 3, 0x51);
	nop(&a, 0x52);
	a_sq_tail = *U32(a.sq, a.p.sq_off.tail);
	a_cq_head = *U32(a.cq, a.p.cq_off.head);

	setup(&b, 4,
	      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SQE128 |
		      IORING_SETUP_CQE32 | IORING_SETUP_CQSIZE,
	      32, 41);
	for (int i = 0; i < 77; i++) {
		struct io_uring_sqe *sqe = nop(&b, 0x2000 + i);

		/* the big SQE's second half: a plain NOP ignores it */
		memset((char *)sqe + 64, 0x5a, 64);
		if (enter(&b, 1, 1) != 1 || !reap(&b, &cqe) || cqe.user_data != 0x2000u + i)
			prog_die("ring B round %d", i);
	}
	/* a message too, posted by B's own task (DEFER_TASKRUN) when it waits */
	nop(&h, 0xe2)->opcode = IORING_OP_MSG_RING;
	sqe_at(&h, *U32(h.sq, h.p.sq_off.tail) - 1)->fd = 41;
	sqe_at(&h, *U32(h.sq, h.p.sq_off.tail) - 1)->off = 0xd2;
	if (enter(&h, 1, 1) != 1 || !reap(&h, &cqe) || enter(&b, 0, 1) < 0 || !reap(&b, &cqe) ||
	    cqe.user_data != 0xd2)
		prog_die("a message to ring B");
	setup(&d, 8, IORING_SETUP_IOPOLL, 0, 44);
	for (int i = 0; i < 30; i++)
		if (!nop(&d, 0x4000 + i) || enter(&d, 1, 1) != 1 || !reap(&d, &cqe) ||
		    cqe.user_data != 0x4000u + i)
			prog_die("ring D round %d", i);
	nop(&h, 0xe3)->opcode = IORING_OP_MSG_RING;
	sqe_at(&h, *U32(h.sq, h.p.sq_off.tail) - 1)->fd = 44;
	sqe_at(&h, *U32(h.sq, h.p.sq_off.tail) - 1)->off = 0xd3;
	if (enter(&h, 1, 1) != 1 || !reap(&h, &cqe) || enter(&d, 0, 1) < 0 || !reap(&d, &cqe) ||
	    cqe.user_data != 0xd3)
		prog_die("a message to ring D");
	nop(&d, 0xd4);
	if (enter(&d, 1, 1) != 1)
		prog_die("ring D's last NOP");
	close(43); /* its mappings stay: amber refuses them, so unmap them */
	munmap(h.sq, h.p.sq_off.array + h.p.sq_entries * 4);
	munmap(h.cq, h.p.cq_off.cqes + h.p.cq_entries * h.cqe_size);
	munmap(h.sqes, h.p.sq_entries * h.sqe_size);
	queue(&b, 99); /* dropped: no such SQE */
	if (enter(&b, 1, 0) < 0)
		prog_die("the dropped SQE");
	nop(&b, 0xb1);
	if (enter(&b, 1, 1) != 1)
		prog_die("ring B's last NOP");
	b_dropped = *U32(b.sq, b.p.sq_off.dropped);
	if (b_dropped != 1)
		prog_die("ring B dropped %u SQEs", b_dropped);
	setup(&c, 64, IORING_SETUP_NO_SQARRAY | IORING_SETUP_SQE128, 0, 42);
	for (int i = 0; i < 100; i++)
		if (!nop(&c, 0x3000 + i) || enter(&c, 1, 1) != 1 || !reap(&c, &cqe) ||
		    cqe.user_data != 0x3000u + i)
			prog_die("ring C round %d", i);
	nop(&c, 0xc1);
	if (enter(&c, 1, 1) != 1)
		prog_die("ring C's last NOP");
	nop(&c, 0xc2);
	counters(40, ca, sizeof(ca));
	counters(41, cb, sizeof(cb));
	counters(42, cc, sizeof(cc));
	counters(44, cd, sizeof(cd));
	if (enter_reg_wait(44) >= 0 || errno != EINVAL)
		prog_die("this kernel does not tell an IOPOLL ring (6.13 or later does)");

	prog_ready();
	prog_wait_go();
	if (prog_sabotage())
		want_q = 0x53;

	counters(40, ca2, sizeof(ca2));
	counters(41, cb2, sizeof(cb2));
	counters(42, cc2, sizeof(cc2));
	counters(44, cd2, sizeof(cd2));
	CHECK(!strcmp(cd, cd2), "ring D's fdinfo counters as before:\n%s", cd2);
	CHECK(!strcmp(cc, cc2), "ring C's fdinfo counters as before:\n%s", cc2);
	CHECK(!strcmp(ca, ca2), "ring A's fdinfo counters as before:\n%s", ca2);
	CHECK(!strcmp(cb, cb2), "ring B's fdinfo counters as before:\n%s", cb2);
	CHECK(*U32(a.sq, a.p.sq_off.tail) == a_sq_tail && *U32(a.cq, a.p.cq_off.head) == a_cq_head,
	      "ring A's SQ tail %u and CQ head %u in its mapping", *U32(a.sq, a.p.sq_off.tail),
	      *U32(a.cq, a.p.cq_off.head));
	CHECK(*U32(b.sq, b.p.sq_off.dropped) == 1, "ring B dropped one SQE (%u)",
	      *U32(b.sq, b.p.sq_off.dropped));

	n = 0;
	for (int i = 0; i < 4 && reap(&a, &cqe); i++) {
		static const uint64_t want[] = {0xd1, 0xa1, 0xa2, 0xa3};
		static const int res[] = {42, 4, 5, 6};

		n += cqe.user_data == want[i] && cqe.res == res[i];
	}
	CHECK(n == 4 && !memcmp(b1, "0123", 4) && !memcmp(b2, "abcde", 5) &&
		      !memcmp(b3, "klmnop", 6),
	      "ring A's four CQEs not reaped (a message, three reads), with their data (%d)", n);
	CHECK(!reap(&a, &cqe), "and no other");
	n = enter(&a, 2, 2);
	CHECK(n == 2, "the two queued SQEs submitted (%d)", n);
	n = reap(&a, &cqe) && cqe.user_data == want_q && cqe.res == 7 &&
	    !memcmp(q1, "3456789", 7) && reap(&a, &cqe) && cqe.user_data == 0x52 && !cqe.res;
	CHECK(n, "the queued read and NOP completed as queued");
	rd(&a, fd, n1, 3, 33, 0x61);
	n = enter(&a, 1, 1) == 1 && reap(&a, &cqe) && cqe.user_data == 0x61 && cqe.res == 3 &&
	    !memcmp(n1, "xyz", 3);
	CHECK(n, "a new read on ring A");
	up = (struct io_uring_files_update){.offset = 1, .fds = (uintptr_t)&fd};
	n = (int)syscall(SYS_io_uring_register, 40, IORING_REGISTER_FILES_UPDATE, &up, 1);
	CHECK(n == 1, "data.txt put in slot 1 of ring A's file table (%d)", n);
	up.offset = 3;
	n = (int)syscall(SYS_io_uring_register, 40, IORING_REGISTER_FILES_UPDATE, &up, 1);
	CHECK(n < 0 && errno == EINVAL, "a table of 3 slots: no slot 3 (%d)", n);
	rd(&a, 1, f1, 2, 1, 0x62)->flags = IOSQE_FIXED_FILE;
	n = enter(&a, 1, 1) == 1 && reap(&a, &cqe) && cqe.user_data == 0x62 && cqe.res == 2 &&
	    !memcmp(f1, "12", 2);
	CHECK(n, "a read through the registered file");
	{
		struct io_uring_sqe *sqe = rd(&a, fd, reg2 + 10, 5, 30, 0x63);

		sqe->opcode = IORING_OP_READ_FIXED;
		sqe->buf_index = 2;
	}
	n = enter(&a, 1, 1) == 1 && reap(&a, &cqe) && cqe.user_data == 0x63 && cqe.res == 5 &&
	    !memcmp(reg2 + 10, "uvwxy", 5);
	CHECK(n, "a read into registered buffer 2 (res %d)", cqe.res);

	n = reap(&b, &cqe) && cqe.user_data == 0xb1 && !cqe.res;
	CHECK(n, "ring B's CQE not reaped (32-byte CQEs)");
	nop(&b, 0xb2);
	n = enter(&b, 1, 1) == 1 && reap(&b, &cqe) && cqe.user_data == 0xb2;
	CHECK(n, "a new NOP on ring B (128-byte SQEs, DEFER_TASKRUN from the main thread)");
	n = reap(&c, &cqe) && cqe.user_data == 0xc1 && enter(&c, 1, 1) == 1 && reap(&c, &cqe) &&
	    cqe.user_data == 0xc2;
	CHECK(n, "ring C's CQE not reaped, then its queued SQE (no SQ array, 128-byte SQEs)");
	n = reap(&d, &cqe) && cqe.user_data == 0xd4 && !reap(&d, &cqe);
	CHECK(n, "ring D's CQE not reaped, and no other");
	n = enter_reg_wait(44);
	CHECK(n < 0 && errno == EINVAL, "ring D is still IOPOLL (%d, %s)", n, strerror(errno));
	n = nop(&d, 0xd5) && enter(&d, 1, 1) == 1 && reap(&d, &cqe) && cqe.user_data == 0xd5;
	CHECK(n, "a new NOP on ring D");
	child = fork();
	if (!child) {
		struct io_uring_probe pr[2];

		memset(pr, 0, sizeof(pr));
		_exit(syscall(SYS_io_uring_register, 41, IORING_REGISTER_PROBE, pr, 1) < 0 &&
				      errno == EEXIST
			      ? 0
			      : 1);
	}
	CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && !WEXITSTATUS(st),
	      "ring B is still SINGLE_ISSUER (another process is refused)");
	return prog_done();
}
