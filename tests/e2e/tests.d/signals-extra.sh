# A SIGTRAP handler survives the dump (in the live process with -R) and the restore.
TESTS+=(sigtrap sigtrap_leave_running)
t_sigtrap() { cycle -f "sigs" -- "$PROGS/sigtrap" "$T"; }
t_sigtrap_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/sigtrap" "$T" || return 1
	dump_leave_running "$W/dump.log" "$W/img" || return 1
	touch "$T/go"
	wait_for 10 test -e "$T/result" || { fail "no result from the running process"; return 1; }
	[ "$(cat "$T/result")" = 0 ] || { fail "the dumped process lost its SIGTRAP handler"; attach "$T/err"; return 1; }
}
