/* SPDX-License-Identifier: MIT */
/*
 * Kernel ABI constants amber uses that Debian 12's headers (Linux 6.1, glibc
 * 2.36) lack or spread over headers that clash with glibc's.  Every name is
 * only defined if not already defined, so this can be included before or
 * after the system headers.
 */
#ifndef AMBER_UAPI_AMBER_KERNEL_H
#define AMBER_UAPI_AMBER_KERNEL_H

#include <linux/ioctl.h>
#include <linux/types.h>
#include <linux/kcmp.h> /* enum kcmp_type: KCMP_FILE, KCMP_VM, ... (no clash with glibc) */

/* prctl(2) */
#ifndef PR_SET_MM
#define PR_SET_MM 35
#endif
#ifndef PR_SET_MM_ARG_START
#define PR_SET_MM_ARG_START 8
#endif
#ifndef PR_SET_MM_ARG_END
#define PR_SET_MM_ARG_END 9
#endif
#ifndef PR_SET_MM_ENV_START
#define PR_SET_MM_ENV_START 10
#endif
#ifndef PR_SET_MM_ENV_END
#define PR_SET_MM_ENV_END 11
#endif
#ifndef PR_SET_MM_AUXV
#define PR_SET_MM_AUXV 12
#endif
#ifndef PR_SET_MM_MAP
#define PR_SET_MM_MAP 14
#endif
#ifndef PR_SET_MM_MAP_SIZE
#define PR_SET_MM_MAP_SIZE 15
#endif
/* Linux 6.16+: let timer_create() take the id from sigevent (C/R of POSIX timers) */
#ifndef PR_TIMER_CREATE_RESTORE_IDS
#define PR_TIMER_CREATE_RESTORE_IDS 77
#define PR_TIMER_CREATE_RESTORE_IDS_OFF 0
#define PR_TIMER_CREATE_RESTORE_IDS_ON 1
#define PR_TIMER_CREATE_RESTORE_IDS_GET 2
#endif

/*
 * kcmp(2) of amber's kernel series (kernel/patches/0008, not upstream): an
 * fd of pid1 (idx1) against slot index of the registered files of the ring
 * ring_fd of pid2 (idx2 points to the slot).  A kernel without it fails
 * EINVAL, as for any unknown type.
 */
#define AMBER_KCMP_IOURING_FILE 8
struct amber_kcmp_iouring_slot {
	__u32 ring_fd;
	__u32 index;
};

/*
 * ptrace(2) PTRACE_GET_RSEQ_CONFIGURATION: glibc 2.35+ has the request (an
 * enum in <sys/ptrace.h>, so it is not defined here) and the result as
 * struct __ptrace_rseq_configuration; <linux/ptrace.h> clashes with glibc.
 */
struct amber_rseq_configuration {
	__u64 rseq_abi_pointer;
	__u32 rseq_abi_size;
	__u32 signature;
	__u32 flags;
	__u32 pad;
};
#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

/* capabilities(7) */
#ifndef CAP_SYS_ADMIN
#define CAP_SYS_ADMIN 21
#endif
#ifndef CAP_SYS_RESOURCE
#define CAP_SYS_RESOURCE 24
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40 /* Linux 5.9+ */
#endif

/* /proc/PID/pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst) */
#ifndef PM_SOFT_DIRTY
#define PM_SOFT_DIRTY (1ULL << 55)
#endif
#ifndef PM_MMAP_EXCLUSIVE
#define PM_MMAP_EXCLUSIVE (1ULL << 56)
#endif
#ifndef PM_UFFD_WP
#define PM_UFFD_WP (1ULL << 57)
#endif
#ifndef PM_FILE
#define PM_FILE (1ULL << 61)
#endif
#ifndef PM_SWAP
#define PM_SWAP (1ULL << 62)
#endif
#ifndef PM_PRESENT
#define PM_PRESENT (1ULL << 63)
#endif

/* userfaultfd(2) features newer than Linux 6.1 */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
/* (spelled as in <linux/userfaultfd.h>, so that a later include is no redefinition) */
#ifndef USERFAULTFD_IOC
#define USERFAULTFD_IOC 0xAA
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(USERFAULTFD_IOC, 0x00) /* ioctl on /dev/userfaultfd */
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1<<13)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1<<14)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1<<15)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1<<16)
#endif

#endif
