# Memory amber cannot restore yet, refused at dump naming it, the process
# running on: memfd_secret() memory (tests/e2e/progs/secretmem.c), which no
# process but its own can read, and huge pages (progs/hugetlb.c).
TESTS+=(secretmem_fd_refused secretmem_map_refused hugetlb_private_refused hugetlb_shared_refused)

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

# huge pages for the test: at least 4 MiB more than now, given back after
hugetlb_refused() { # MODE
	local before rc
	before=$(cat /proc/sys/vm/nr_hugepages)
	echo $((before + 4)) >/proc/sys/vm/nr_hugepages
	specialmem_refused "pid [0-9]*: /anon_hugepage (/proc/[0-9]*/map_files/[0-9a-f]*-[0-9a-f]*) is hugetlb memory" \
		"$PROGS/hugetlb" "$T" "$1"
	rc=$?
	echo "$before" >/proc/sys/vm/nr_hugepages
	return $rc
}
t_hugetlb_private_refused() { hugetlb_refused private; }
t_hugetlb_shared_refused() { hugetlb_refused shared; }
