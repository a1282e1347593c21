# pidfds (tests/e2e/progs/pidfd.c) of processes of the tree: they must refer to the
# restored processes (fdinfo Pid, waitid, pidfd_send_signal).  pidfd_dead: also a
# pidfd of a process that was reaped (dead again after the restore), one of a
# zombie of the tree and one of a grandchild (made after the holder's fds).
TESTS+=(pidfd pidfd_dead pidfd_outside_refused)
pidfd_state() { # PID
	local p f
	for p in $1 $(cat "/proc/$1/task/$1/children"); do
		for f in $(ls "/proc/$p/fd" 2>/dev/null | sort -n); do
			[ "$(readlink "/proc/$p/fd/$f")" = 'anon_inode:[pidfd]' ] &&
				echo "pid $p fd $f $(grep -E '^(flags|Pid):' "/proc/$p/fdinfo/$f" | tr -s '\t\n' '  ')"
		done
	done
}
pidfd_before() { # [N]: how many pidfds (4)
	pidfd_state "$PID" >"$W/pidfd.before"
	[ "$(grep -c 'fd ' "$W/pidfd.before")" = "${1:-4}" ] || { fail "expected ${1:-4} pidfds, found: $(cat "$W/pidfd.before")"; return 1; }
}
pidfd_after() {
	pidfd_state "$PID" >"$W/pidfd.after"
	diff -u "$W/pidfd.before" "$W/pidfd.after" >"$W/pidfd.diff" && return 0
	fail "the pidfds differ after restore (- before, + after):"
	sed 's/^/    /' "$W/pidfd.diff" >>"$W/log"
	return 1
}
t_pidfd() { cycle -P pidfd_before -A pidfd_after -- "$PROGS/pidfd" "$T"; }

pidfd_before_dead() {
	pidfd_before 8 || return
	grep -q 'fd 23 .*Pid: -1' "$W/pidfd.before" || { fail "fd 23 is not a pidfd of a reaped process"; return 1; }
}
t_pidfd_dead() { cycle -P pidfd_before_dead -A pidfd_after -- "$PROGS/pidfd" "$T" dead; }

# A pidfd of a process outside the tree is refused at dump, naming it, and the
# program runs on.
t_pidfd_outside_refused() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/pidfd" "$T" outside || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump of a pidfd of a process outside the tree exited 0"; return 1; }
	grep -q "fd 26 is a pidfd of pid $(status_field "$PID" PPid), which is outside the dumped tree" "$W/dump.log" ||
		{ fail "amber dump failed without naming the pidfd"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "the refused dump left an inventory.img"; return 1; }
	runs_on "the refused dump" 20 || return 1
	note "refused: $(grep -m1 'fd 26' "$W/dump.log")"
}
