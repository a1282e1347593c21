# A tree that is its own pid namespace (src/ns/pidns.c): the dumped root is
# the init of a pid namespace below amber's; the restore makes a new one, the
# root pid 1 in it again and every process with its namespace pid.
TESTS+=(pidns_own_tree pidns_own_refused)

# pidnsinit's init: its host pid is in DIR/ready
pidns_own_start() {
	start_prog "$PROGS/pidnsinit" "$T" || return 1
	INIT=$(cat "$T/ready")
	echo "$INIT" >>"$W/pids"
	[ "$(awk '/^NSpid:/ {print $3}' "/proc/$INIT/status")" = 1 ] ||
		{ fail "pid $INIT is not the init of its pid namespace"; return 1; }
}

t_pidns_own_tree() {
	[ $SELFTEST = 1 ] && { selftest_cycle "" "$PROGS/pidnsinit" "$T"; return; }
	local h ns
	pidns_own_start || return 1
	ns=$(readlink "/proc/$INIT/ns/pid")
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v || { fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$INIT" || { fail "pid $INIT still there after the dump"; return 1; }
	amber_to "$W/restore.log" 60 restore -d --pidfile "$W/pidfile" -D "$W/img" -v ||
		{ fail "restore failed"; attach "$W/restore.log"; return 1; }
	h=$(cat "$W/pidfile")
	echo "$h" >>"$W/pids"
	[ "$(awk '/^NSpid:/ {print $3}' "/proc/$h/status")" = 1 ] ||
		{ fail "the restored root $h is not pid 1 of its namespace"; return 1; }
	[ "$(readlink "/proc/$h/ns/pid")" != "$(readlink /proc/self/ns/pid)" ] &&
		[ "$(readlink "/proc/$h/ns/pid")" != "$ns" ] ||
		{ fail "the restored root is not in a new pid namespace"; return 1; }
	note "the init $INIT came back as host pid $h, pid 1 of $(readlink "/proc/$h/ns/pid")"
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the restored program failed its checks"; attach "$T/err"; return 1; }
	wait_for 10 is_gone "$h" || { fail "the restored init $h did not end"; return 1; }
}

# refused, naming it, and the tree runs on: a process that entered the
# namespace from outside the tree; a root that is not the namespace's init
t_pidns_own_refused() {
	[ $SELFTEST = 1 ] && return 77
	local s a
	pidns_own_start || return 1
	nsenter -t "$INIT" -p sleep 300 &
	echo $! >>"$W/pids"
	wait_for 10 eval '[ -n "$(pgrep -P $! -x sleep)" ]' || { fail "no sleeper in the namespace"; return 1; }
	s=$(pgrep -P $! -x sleep)
	echo "$s" >>"$W/pids"
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v && { fail "a dump leaving $s in the namespace succeeded"; return 1; }
	grep -q "pid $s .*not in its tree" "$W/dump.log" || { fail "the refusal does not name pid $s"; attach "$W/dump.log"; return 1; }
	kill "$s"
	a=$(awk '{print $1}' "/proc/$INIT/task/$INIT/children")
	amber_to "$W/dump2.log" 60 dump -t "$a" -D "$W/img2" -v && { fail "a dump of the namespace's pid $a, not its init, succeeded"; return 1; }
	grep -q "not its init" "$W/dump2.log" || { fail "the refusal does not say $a is not the init"; attach "$W/dump2.log"; return 1; }
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the program failed its checks after the refused dumps"; attach "$T/err"; return 1; }
}
