# Private memory inherited over fork() keeps its copy-on-write sharing (the
# program compares PFNs in /proc/PID/pagemap before the dump and after restore).
TESTS+=(cow)
t_cow() { cycle -- "$PROGS/cow" "$T"; }

# A dump that leaves the tree running (-R) reads the pages without taking
# them apart: the processes still share A's pages as before (process_vm_readv
# would unshare a page mapped copy-on-write in two; amber reads those
# through /proc/PID/mem), and hold what they held.
TESTS+=(cow_leave_running)
t_cow_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/cow" "$T" || return 1
	dump_leave_running "$W/dump.log" "$W/img" || return 1
	runs_on "the dump with -R"
}
