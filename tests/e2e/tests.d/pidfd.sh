# pidfds (tests/e2e/progs/pidfd.c) of processes of the tree: they must refer to the
# restored processes (fdinfo Pid, waitid, pidfd_send_signal).  A pidfd of a process
# that was reaped is refused at dump, naming it, and the program runs on.
TESTS+=(pidfd pidfd_dead)

pidfd_state() { # PID
	local p f
	for p in $1 $(cat "/proc/$1/task/$1/children"); do
		for f in $(ls "/proc/$p/fd" | sort -n); do
			[ "$(readlink "/proc/$p/fd/$f")" = 'anon_inode:[pidfd]' ] &&
				echo "pid $p fd $f $(grep -E '^(flags|Pid):' "/proc/$p/fdinfo/$f" | tr -s '\t\n' '  ')"
		done
	done
}
pidfd_before() {
	pidfd_state "$PID" >"$W/pidfd.before"
	[ "$(grep -c 'fd ' "$W/pidfd.before")" = 4 ] || { fail "expected 4 pidfds, found: $(cat "$W/pidfd.before")"; return 1; }
}
pidfd_after() {
	pidfd_state "$PID" >"$W/pidfd.after"
	diff -u "$W/pidfd.before" "$W/pidfd.after" >"$W/pidfd.diff" && return 0
	fail "the pidfds differ after restore (- before, + after):"
	sed 's/^/    /' "$W/pidfd.diff" >>"$W/log"
	return 1
}
t_pidfd() { cycle -P pidfd_before -A pidfd_after -- "$PROGS/pidfd" "$T"; }

t_pidfd_dead() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/pidfd" "$T" dead || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of a pidfd of a reaped process exited 0"; attach "$W/dump.log"; return 1; }
	grep -q "fd 23 is a pidfd of a process that has died and was reaped" "$W/dump.log" ||
		{ fail "amber dump failed without naming the pidfd"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "the refused dump left an inventory.img"; return 1; }
	runs_on "the refused dump" 20 || return 1
	note "refused: $(grep -m1 'fd 23' "$W/dump.log")"
}
