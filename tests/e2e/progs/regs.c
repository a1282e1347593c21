// SPDX-License-Identifier: MIT
/*
 * regs: general purpose and extended (x87, SSE, AVX, AVX-512) registers and TLS.
 *
 * One inline-asm block loads known values into rbx, rdx, r8-r10, r12-r15, the vector
 * registers (ymm0-15 with -mavx2; zmm0-31 and k0-k7 when built as regs-avx512 with
 * -mavx512f), the x87 stack (8 values) with a non-default control word, and MXCSR; then
 * it renames DIR/ready.tmp to DIR/ready and waits for DIR/go using only raw syscalls
 * (which clobber rax, rcx and r11 only, plus rdi/rsi that the loop reloads), and finally
 * stores every register back to memory.  The test dumps and restores the program while it
 * sits in that loop; all values must come back bit for bit.
 *
 *   regs DIR          waits in nanosleep(): the dump catches it inside a syscall
 *   regs DIR spin     waits in a pause loop: the dump catches it in user mode
 */
#include <asm/prctl.h>
#include <stddef.h>

#include "prog.h"

#ifdef __AVX512F__
#define NVEC   32
#define VLEN   64
#define HAVE_K 1
#else
#define NVEC   16
#define VLEN   32
#define HAVE_K 0
#endif

#define NGP 9
static const char *const gp_names[NGP] = {"rbx", "rdx", "r8",  "r9", "r10",
					  "r12", "r13", "r14", "r15"};

struct regstate {
	uint64_t gp[NGP];
	uint32_t mxcsr;
	uint16_t fcw;
	uint16_t k[8];
	unsigned char x87[8][16];
	unsigned char vec[32][64] __attribute__((aligned(64)));
};

/* Globals, addressed %rip-relative from the asm so no register holds a pointer. */
struct regstate rs_in, rs_out;
struct timespec rs_ts = {0, 10 * 1000 * 1000};
char rs_go[4096], rs_tmp[4096], rs_ready[4096];
long rs_budget = PROG_GO_STEPS;
int rs_spin; /* "spin" mode: wait in user space (pause loop), not in nanosleep */
uint32_t rs_saved_mxcsr;
uint16_t rs_saved_fcw;

static __thread uint64_t tls_var = 1;

/* clang-format off: the asm building blocks read best one per line */
#define S_(x)	    #x
#define S(x)	    S_(x)
#define GPL(reg, i) "mov rs_in+" S(i) "*8(%%rip), %%" reg "\n\t"
#define GPS(reg, i) "mov %%" reg ", rs_out+" S(i) "*8(%%rip)\n\t"
#define GP_ALL(M)                                                                                  \
	M("rbx", 0)                                                                                \
	M("rdx", 1)                                                                                \
	M("r8", 2) M("r9", 3) M("r10", 4) M("r12", 5) M("r13", 6) M("r14", 7) M("r15", 8)

#define X87L(i) "fldt rs_in+%c[ox]+" S(i) "*16(%%rip)\n\t"
#define X87S(i) "fstpt rs_out+%c[ox]+" S(i) "*16(%%rip)\n\t"

#ifdef __AVX512F__
#define VL(i) "vmovdqu64 rs_in+%c[ov]+" S(i) "*64(%%rip), %%zmm" S(i) "\n\t"
#define VS(i) "vmovdqu64 %%zmm" S(i) ", rs_out+%c[ov]+" S(i) "*64(%%rip)\n\t"
#define KL(i) "kmovw rs_in+%c[ok]+" S(i) "*2(%%rip), %%k" S(i) "\n\t"
#define KS(i) "kmovw %%k" S(i) ", rs_out+%c[ok]+" S(i) "*2(%%rip)\n\t"
#define V_HI(M)                                                                                    \
	M(16)                                                                                      \
	M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) M(25) M(26) M(27) M(28) M(29) M(30) M(31)
#define K_ALL(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#else
#define VL(i) "vmovdqu rs_in+%c[ov]+" S(i) "*64(%%rip), %%ymm" S(i) "\n\t"
#define VS(i) "vmovdqu %%ymm" S(i) ", rs_out+%c[ov]+" S(i) "*64(%%rip)\n\t"
#define V_HI(M)
#define K_ALL(M)
#endif
#define V_LO(M)                                                                                    \
	M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)
#define X_ALL(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
/* fstpt pops st(0) = the last value loaded, so store in reverse order. */
#define X_REV(M) M(7) M(6) M(5) M(4) M(3) M(2) M(1) M(0)

/* clang-format on */

static void hold_registers(void)
{
	/* clang-format off */
	asm volatile(
		/* save the caller's x87 control word and MXCSR */
		"fnstcw rs_saved_fcw(%%rip)\n\t"
		"stmxcsr rs_saved_mxcsr(%%rip)\n\t"
		/* load */
		GP_ALL(GPL)
		V_LO(VL) V_HI(VL) K_ALL(KL)
		"fninit\n\t"
		"fldcw rs_in+%c[oc](%%rip)\n\t"
		X_ALL(X87L)
		"ldmxcsr rs_in+%c[om](%%rip)\n\t"
		/* rename(ready.tmp, ready) */
		"mov $" S(__NR_rename) ", %%eax\n\t"
		"lea rs_tmp(%%rip), %%rdi\n\t"
		"lea rs_ready(%%rip), %%rsi\n\t"
		"syscall\n"
		/* while (access(go, F_OK) != 0 && --budget) nanosleep(10 ms) or spin */
		"1:\n\t"
		"cmpl $0, rs_spin(%%rip)\n\t"
		"je 4f\n\t"
		"mov $200000, %%ecx\n"
		"3:\n\t"
		"pause\n\t"
		"dec %%ecx\n\t"
		"jnz 3b\n"
		"4:\n\t"
		"mov $" S(__NR_access) ", %%eax\n\t"
		"lea rs_go(%%rip), %%rdi\n\t"
		"xor %%esi, %%esi\n\t"
		"syscall\n\t"
		"test %%rax, %%rax\n\t"
		"jz 2f\n\t"
		"decq rs_budget(%%rip)\n\t"
		"jz 2f\n\t"
		"cmpl $0, rs_spin(%%rip)\n\t"
		"jne 1b\n\t"
		"mov $" S(__NR_nanosleep) ", %%eax\n\t"
		"lea rs_ts(%%rip), %%rdi\n\t"
		"xor %%esi, %%esi\n\t"
		"syscall\n\t"
		"jmp 1b\n"
		"2:\n\t"
		/* store */
		GP_ALL(GPS)
		V_LO(VS) V_HI(VS) K_ALL(KS)
		"stmxcsr rs_out+%c[om](%%rip)\n\t"
		"fnstcw rs_out+%c[oc](%%rip)\n\t"
		X_REV(X87S)
		"fldcw rs_saved_fcw(%%rip)\n\t"
		"ldmxcsr rs_saved_mxcsr(%%rip)\n\t"
		"vzeroupper\n\t"
		:
		: [ov] "i"(offsetof(struct regstate, vec)), [ox] "i"(offsetof(struct regstate, x87)),
		  [ok] "i"(offsetof(struct regstate, k)), [oc] "i"(offsetof(struct regstate, fcw)),
		  [om] "i"(offsetof(struct regstate, mxcsr))
		: "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
		  "r14", "r15", "memory", "cc", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)",
		  "st(6)", "st(7)", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
		  "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"
#ifdef __AVX512F__
		  ,
		  "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",
		  "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k0", "k1", "k2",
		  "k3", "k4", "k5", "k6", "k7"
#endif
	);
	/* clang-format on */
}

static void hex(char *out, const unsigned char *p, int n)
{
	int i;

	for (i = 0; i < n && i < 64; i++)
		sprintf(out + 2 * i, "%02x", p[n - 1 - i]);
}

int main(int argc, char **argv)
{
	unsigned long fs_before = 0, fs_after = 0;
	char a[160], b[160];
	int i, fd;
	int first = prog_init(argc, argv);

	rs_spin = argc > first && !strcmp(argv[first], "spin");
	if (rs_spin)
		rs_budget = 100000; /* the spin loop checks for go about every 1 ms */
#ifdef __AVX512F__
	if (!__builtin_cpu_supports("avx512f")) {
		printf("SKIP: no AVX-512 on this CPU\n");
		return 77;
	}
#endif
	/* Known values.  GP values stay below 2^53 so JSON consumers read them exactly. */
	for (i = 0; i < NGP; i++)
		rs_in.gp[i] = 0x000101010101010ULL * (i + 1) + 0x0010000000000000ULL;
	for (i = 0; i < NVEC; i++)
		prog_fill(rs_in.vec[i], VLEN, 0xa000 + i);
	for (i = 0; i < 8; i++) {
		long double v = 3.14159265358979323846L * (i + 1) + 1.0L / (i + 3);

		memcpy(rs_in.x87[i], &v, 10);
		rs_in.k[i] = HAVE_K ? (uint16_t)(0x1357 * (i + 1)) : 0;
	}
	rs_in.fcw = 0x0f7f;   /* round toward zero, 64-bit precision, all masked */
	rs_in.mxcsr = 0xff80; /* FTZ, round toward zero, all masked */
	tls_var = 0x5eed5eed0000beefULL;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs_before);

	snprintf(rs_go, sizeof(rs_go), "%s", prog_path("go"));
	snprintf(rs_tmp, sizeof(rs_tmp), "%s", prog_path("ready.tmp"));
	snprintf(rs_ready, sizeof(rs_ready), "%s", prog_path("ready"));
	fd = open(rs_tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	if (fd < 0)
		prog_die("open %s", rs_tmp);
	dprintf(fd, "%d\n", (int)getpid());
	close(fd);

	hold_registers(); /* writes DIR/ready, waits for DIR/go */

	if (rs_budget == 0) {
		fprintf(stderr, "FAIL: timed out waiting for go\n");
		return 3;
	}
	if (prog_sabotage())
		rs_out.gp[5] ^= 1;

	for (i = 0; i < NGP; i++)
		CHECK(rs_out.gp[i] == rs_in.gp[i], "%s = %#llx (expected %#llx)", gp_names[i],
		      (unsigned long long)rs_out.gp[i], (unsigned long long)rs_in.gp[i]);
	for (i = 0; i < NVEC; i++) {
		hex(a, rs_out.vec[i], VLEN);
		hex(b, rs_in.vec[i], VLEN);
		CHECK(!memcmp(rs_out.vec[i], rs_in.vec[i], VLEN), "%s%d = %s%s%s",
		      VLEN == 64 ? "zmm" : "ymm", i, a, memcmp(a, b, VLEN * 2) ? " expected " : "",
		      memcmp(a, b, VLEN * 2) ? b : "");
	}
	for (i = 0; HAVE_K && i < 8; i++)
		CHECK(rs_out.k[i] == rs_in.k[i], "k%d = %#x (expected %#x)", i, rs_out.k[i],
		      rs_in.k[i]);
	for (i = 0; i < 8; i++) {
		hex(a, rs_out.x87[i], 10);
		hex(b, rs_in.x87[i], 10);
		CHECK(!memcmp(rs_out.x87[i], rs_in.x87[i], 10), "x87 st(%d) = %s (expected %s)",
		      7 - i, a, b);
	}
	CHECK(rs_out.fcw == rs_in.fcw, "x87 control word %#x (expected %#x)", rs_out.fcw,
	      rs_in.fcw);
	CHECK(rs_out.mxcsr == rs_in.mxcsr, "MXCSR %#x (expected %#x)", rs_out.mxcsr, rs_in.mxcsr);

	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs_after);
	CHECK(fs_after == fs_before, "fs_base %#lx (expected %#lx)", fs_after, fs_before);
	CHECK(tls_var == 0x5eed5eed0000beefULL, "__thread variable %#llx",
	      (unsigned long long)tls_var);
	CHECK((unsigned long)&tls_var - fs_after < 65536 ||
		      fs_after - (unsigned long)&tls_var < 65536,
	      "__thread variable at %p near fs_base %#lx", (void *)&tls_var, fs_after);
	{
		/* SSE arithmetic is back to round-to-nearest (1/10 rounds up, toward zero would
		 * not) */
		volatile double x = 1.0, y = 10.0;

		CHECK(x / y == 0.1, "1.0/10.0 = %.17g", x / y);
	}
	return prog_done();
}
