# Special memory: memfd_secret() memory (tests/e2e/progs/secretmem.c), which no
# process but its own can read, and shared huge pages (progs/hugetlb.c) are
# refused at dump naming them, the process running on; private huge pages
# come back as huge pages.
TESTS+=(secretmem_fd_refused secretmem_map_refused hugetlb_private hugetlb_shared_refused)

specialmem_refused() { # PATTERN PROG ARGS...
	local pat=$1
	shift
	if [ $SELFTEST = 1 ]; then
		selftest_cycle "" "$@"
		return
	fi
	start_prog "$@" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v --ghost-limit 64M &&
		{ fail "amber dump succeeded"; return 1; }
	grep -q -- "$pat" "$W/dump.log" ||
		{ fail "the refusal does not say '$pat'"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img" ] || { fail "the refused dump left $W/img"; return 1; }
	note "amber said: $(grep -m1 -- "$pat" "$W/dump.log")"
	runs_on "the refused dump"
}
t_secretmem_fd_refused() {
	specialmem_refused "pid [0-9]*: fd 3 is secret memory (memfd_secret)" "$PROGS/secretmem" "$T" fd
}
t_secretmem_map_refused() {
	specialmem_refused "pid [0-9]*: /secretmem (/proc/[0-9]*/map_files/[0-9a-f]*-[0-9a-f]*) is secret memory (memfd_secret)" \
		"$PROGS/secretmem" "$T" map
}

# huge pages for the test (2 MiB): enough for the program and its restored
# copy, given back after; runs "$@"
with_hugepages() {
	local before rc
	before=$(cat /proc/sys/vm/nr_hugepages)
	echo $((before + 6)) >/proc/sys/vm/nr_hugepages
	"$@"
	rc=$?
	echo "$before" >/proc/sys/vm/nr_hugepages
	return $rc
}
# private huge pages come back as huge pages, with their bytes (the program
# checks KernelPageSize)
t_hugetlb_private() { with_hugepages cycle -- "$PROGS/hugetlb" "$T" private; }
# shared ones are refused
t_hugetlb_shared_refused() {
	with_hugepages specialmem_refused \
		"pid [0-9]*: /anon_hugepage (/proc/[0-9]*/map_files/[0-9a-f]*-[0-9a-f]*) is hugetlb memory" \
		"$PROGS/hugetlb" "$T" shared
}

# An image whose huge-page VMA has a size the kernel has not, a shared kind,
# or bounds off the huge page is refused before anything is made; the
# unedited image restores with its huge pages.
TESTS+=(hugetlb_image_refused)
hugetlb_image_refused() {
	local ok=0 k
	start_prog "$PROGS/hugetlb" "$T" private || return 1
	dump_and_gone || return 1
	k=$("$AMBER" show "$W/img" | jq '.tasks[0].mm.vmas | map(has("hugetlb_kib")) | index(true)')
	[ "$k" != null ] || { fail "no VMA of huge pages in the image"; return 1; }
	refused hl_size "bad mapping table" "mm-$PID.img" "vmas.$k.hugetlb_kib=4" || ok=1
	refused hl_shared "bad mapping table" "mm-$PID.img" "vmas.$k.kind=VMA_ANON_SHARED" "vmas.$k.shmem_id=1" || ok=1
	refused hl_bounds "bad mapping table" "mm-$PID.img" "vmas.$k.hugetlb_kib=1048576" || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores
}
t_hugetlb_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	with_hugepages hugetlb_image_refused
}
