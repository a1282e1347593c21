# A tree that is its own pid namespace (src/ns/pidns.c): the dumped root is
# the init of a pid namespace below amber's; the restore makes a new one, the
# root pid 1 in it again and every process with its namespace pid.
TESTS+=(pidns_own_tree pidns_own_refused pidns_own_image_refused)

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
	local h
	pidns_own_start || return 1
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v || { fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$INIT" || { fail "pid $INIT still there after the dump"; return 1; }
	amber_to "$W/restore.log" 60 restore -d --pidfile "$W/pidfile" -D "$W/img" -v ||
		{ fail "restore failed"; attach "$W/restore.log"; return 1; }
	h=$(cat "$W/pidfile")
	echo "$h" >>"$W/pids"
	[ "$(awk '/^NSpid:/ {print $3}' "/proc/$h/status")" = 1 ] ||
		{ fail "the restored root $h is not pid 1 of its namespace"; return 1; }
	# (the dumped namespace ended with its init: a new one may get its inode number)
	[ "$(readlink "/proc/$h/ns/pid")" != "$(readlink /proc/self/ns/pid)" ] ||
		{ fail "the restored root is in amber's pid namespace"; return 1; }
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

# a crafted pstree.img (namespace pids duplicated, 0, above pid_max; the init
# flag on another process than the root) and a non-root owner's image are
# refused before any process is made (no "restoring" step in the log)
pidns_own_crafted() { # NAME PATTERN [EDIT...]
	local name=$1 pat=$2
	shift 2
	rm -rf "$W/$name"
	cp -a "$W/img" "$W/$name"
	[ $# = 0 ] || "$IMGEDIT" "$W/$name" "$@" 2>>"$W/log" || { fail "$name: imgedit failed"; return 1; }
	[ "$name" = owner ] && chown -R 65534:65534 "$W/$name"
	amber_to "$W/$name.log" 30 restore -d -D "$W/$name" -v &&
		{ fail "$name: the image was restored"; return 1; }
	grep -q -- "$pat" "$W/$name.log" || { fail "$name: refused, but not for '$pat'"; attach "$W/$name.log"; return 1; }
	grep -q "restoring task" "$W/$name.log" && { fail "$name: refused only once processes were made"; attach "$W/$name.log"; return 1; }
	note "$name: refused ($(grep -m1 error "$W/$name.log"))"
}

t_pidns_own_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 l
	pidns_own_start || return 1
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v || { fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$INIT" || { fail "pid $INIT still there after the dump"; return 1; }
	[ "$("$AMBER" show "$W/img" | jq -c '[.pstree[0].pid, .pstree[0].pid_ns_init]')" = '[1,true]' ] ||
		{ fail "pstree.img does not mark its root, pid 1, as the namespace's init"; return 1; }
	# the last entry: no process is its child (parents come first)
	l=$(("$("$AMBER" show "$W/img" | jq '.pstree | length')" - 1))
	pidns_own_crafted dup "bad entry" pstree.img "$l.pid=1" || ok=1
	pidns_own_crafted zero "bad entry" pstree.img "$l.pid=0" || ok=1
	pidns_own_crafted pid_max "above pid_max" pstree.img "$l.pid=$(cat /proc/sys/kernel/pid_max)" || ok=1
	pidns_own_crafted init_flag "only the root, pid 1" pstree.img "$l.pid_ns_init=true" || ok=1
	pidns_own_crafted owner "uid 65534's image may not make namespaces" || ok=1
	return $ok
}
