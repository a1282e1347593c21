/* SPDX-License-Identifier: MIT */
/*
 * The PAGEMAP_SCAN ioctl on /proc/PID/pagemap (Linux 6.7+), as in the
 * kernel's include/uapi/linux/fs.h and Documentation/admin-guide/mm/pagemap.rst.
 * Debian 12's linux/fs.h predates it.  Every name is only defined if the
 * system headers did not already: include <linux/fs.h> first if you use both.
 */
#ifndef AMBER_UAPI_PAGEMAP_SCAN_H
#define AMBER_UAPI_PAGEMAP_SCAN_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* PAGE_IS_* categories: masks in struct pm_scan_arg, page_region.categories */
#ifndef PAGE_IS_WPALLOWED
#define PAGE_IS_WPALLOWED (1 << 0) /* async write-protect enabled (uffd WP_ASYNC) */
#endif
#ifndef PAGE_IS_WRITTEN
#define PAGE_IS_WRITTEN (1 << 1) /* written since it was write-protected */
#endif
#ifndef PAGE_IS_FILE
#define PAGE_IS_FILE (1 << 2)
#endif
#ifndef PAGE_IS_PRESENT
#define PAGE_IS_PRESENT (1 << 3)
#endif
#ifndef PAGE_IS_SWAPPED
#define PAGE_IS_SWAPPED (1 << 4)
#endif
#ifndef PAGE_IS_PFNZERO
#define PAGE_IS_PFNZERO (1 << 5)
#endif
#ifndef PAGE_IS_HUGE
#define PAGE_IS_HUGE (1 << 6)
#endif
#ifndef PAGE_IS_SOFT_DIRTY
#define PAGE_IS_SOFT_DIRTY (1 << 7)
#endif
#ifndef PAGE_IS_GUARD
#define PAGE_IS_GUARD (1 << 8) /* Linux 6.14+: MADV_GUARD_INSTALL region */
#endif

/* Flags for PAGEMAP_SCAN */
#ifndef PM_SCAN_WP_MATCHING
#define PM_SCAN_WP_MATCHING (1 << 0) /* write-protect the pages matched */
#endif
#ifndef PM_SCAN_CHECK_WPASYNC
#define PM_SCAN_CHECK_WPASYNC (1 << 1) /* abort on a page without async WP */
#endif

#ifndef PAGEMAP_SCAN
/* One run of pages [start, end) with the same categories. */
struct page_region {
	__u64 start;
	__u64 end;
	__u64 categories;
};

struct pm_scan_arg {
	__u64 size;		   /* sizeof(struct pm_scan_arg) */
	__u64 flags;		   /* PM_SCAN_* */
	__u64 start;		   /* range to scan, page aligned */
	__u64 end;
	__u64 walk_end;		   /* out: where the walk stopped (== end: all done) */
	__u64 vec;		   /* struct page_region array for the output */
	__u64 vec_len;		   /* entries in vec */
	__u64 max_pages;	   /* 0: no limit */
	__u64 category_inverted;   /* categories that match when 0 */
	__u64 category_mask;	   /* skip pages for which any of these does not match */
	__u64 category_anyof_mask; /* skip pages for which none of these matches */
	__u64 return_mask;	   /* categories to report in page_region */
};

#ifndef PROCFS_IOCTL_MAGIC
#define PROCFS_IOCTL_MAGIC 'f'
#endif
/* Returns the number of page_region entries filled, or -1 with errno. */
#define PAGEMAP_SCAN _IOWR(PROCFS_IOCTL_MAGIC, 16, struct pm_scan_arg)
#endif

#endif
