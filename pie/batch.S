/* SPDX-License-Identifier: MIT */
/*
 * The syscall batch executor: the only code amber places in a process.
 * infect_batch() copies it into the task's scratch area with a table of
 * 64-byte entries {nr, a1..a6, ret}, ended by nr = -1, points %rip here and
 * %r15 at the table, and lets the task run: every syscall runs in turn, its
 * result goes into ret, and the int3 at the end hands control back.
 * Position independent; touches only %rax, %rdi..%r11 (syscall ABI) and %r15.
 */
	.text
	.globl batch
batch:
1:	mov	(%r15), %rax
	cmp	$-1, %rax
	je	2f
	mov	8(%r15), %rdi
	mov	16(%r15), %rsi
	mov	24(%r15), %rdx
	mov	32(%r15), %r10
	mov	40(%r15), %r8
	mov	48(%r15), %r9
	syscall
	mov	%rax, 56(%r15)
	add	$64, %r15
	jmp	1b
2:	int3
