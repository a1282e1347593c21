# memfd_secret() memory (tests/e2e/progs/secretmem.c): no process but its own
# can read it, so the dump is refused naming it, and the process runs on.
TESTS+=(secretmem_fd_refused secretmem_map_refused)

secretmem_refused() { # MODE PATTERN
	if [ $SELFTEST = 1 ]; then
		selftest_cycle "" "$PROGS/secretmem" "$T" "$1"
		return
	fi
	start_prog "$PROGS/secretmem" "$T" "$1" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded"; return 1; }
	grep -q -- "$2" "$W/dump.log" ||
		{ fail "the refusal does not say '$2'"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img" ] || { fail "the refused dump left $W/img"; return 1; }
	note "amber said: $(grep -m1 "secret memory" "$W/dump.log")"
	runs_on "the refused dump"
}
t_secretmem_fd_refused() {
	secretmem_refused fd "pid [0-9]*: fd 3 is secret memory (memfd_secret)"
}
t_secretmem_map_refused() {
	secretmem_refused map "pid [0-9]*: /secretmem (/proc/[0-9]*/map_files/[0-9a-f]*-[0-9a-f]*) is secret memory (memfd_secret)"
}
