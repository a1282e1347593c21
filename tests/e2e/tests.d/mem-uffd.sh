# Large private anonymous VMAs are filled with UFFDIO_COPY (src/mem-uffd.c):
# 1 GiB takes that path by default; AMBER_UFFD=1 forces it for every writable
# private anonymous VMA of the mem program (whose checks cover every kind).
TESTS+=(bigmem mem_uffd)
uffd_used() {
	grep -q "copied in with userfaultfd" "$W/restore.log" ||
		{ fail "the restore did not take the userfaultfd path"; attach "$W/restore.log"; return 1; }
}
t_bigmem() { cycle -f "maps vmflags" -A uffd_used -- "$PROGS/bigmem" "$T"; }
t_mem_uffd() { AMBER_UFFD=1 cycle -f "maps vmflags fds" -A uffd_used -- "$PROGS/mem" "$T"; }

# Two threads fill a process's pages where amber has a second CPU: sparse
# runs and holes, the halves meeting inside a dense run (progs/sparsemem.c).
TESTS+=(mem_uffd_split)
uffd_split_used() {
	uffd_used || return 1
	[ "$(nproc)" -lt 2 ] && return 0
	grep -q "copied in by two threads" "$W/restore.log" ||
		{ fail "the pages were not copied in by two threads"; attach "$W/restore.log"; return 1; }
}
t_mem_uffd_split() { cycle -f "maps vmflags" -A uffd_split_used -- "$PROGS/sparsemem" "$T"; }
