# A pid namespace nested one level in the tree's (src/ns/pidns.c): a process
# of the tree is the init of a further pid namespace; the restore makes it
# with CLONE_NEWPID and its descendants with their pids in both namespaces.
TESTS+=(pidns_nest_tree pidns_nest_refused pidns_nest_zombie_refused pidns_nest_fown_refused
	pidns_nest_image_refused)

# pidnsnest's init I: its host pid is in DIR/ready
pidns_nest_start() {
	start_prog "$PROGS/pidnsnest" "$T" || return 1
	INIT=$(cat "$T/ready")
	echo "$INIT" >>"$W/pids"
}

# I and its descendants, host pids
pidns_nest_pids() { # PID
	local c
	echo "$1"
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		pidns_nest_pids "$c"
	done
}

# every task's NSpid, NSpgid and NSsid but their host level (its first field),
# and its pid_for_children namespace named by the task whose namespace it is
pidns_nest_facts() {
	local p t f
	for p in $(pidns_nest_pids "$INIT"); do
		for t in /proc/"$p"/task/*; do
			f=$(awk '/^NS(pid|pgid|sid):/ {s = $1; for (i = 3; i <= NF; i++) s = s " " $i; printf "%s ", s}' "$t/status")
			echo "$f children-ns:$(pidns_nest_owner "$(readlink "/proc/$p/ns/pid_for_children")")"
		done
	done | sort
}

# the NSpid (but the host's) of I's descendant that is the init of namespace $1, or "own"
pidns_nest_owner() {
	local p
	for p in $(pidns_nest_pids "$INIT"); do
		[ "$(readlink "/proc/$p/ns/pid")" = "$1" ] && [ "$(awk '/^NSpid:/ {print $NF}' "/proc/$p/status")" = 1 ] &&
			{ awk '/^NSpid:/ {s = $3; for (i = 4; i <= NF; i++) s = s "," $i; print s}' "/proc/$p/status"; return; }
	done
	echo none
}

t_pidns_nest_tree() {
	[ $SELFTEST = 1 ] && { selftest_cycle "" "$PROGS/pidnsnest" "$T"; return; }
	local h
	pidns_nest_start || return 1
	pidns_nest_facts >"$W/facts.before"
	grep -q '^NSpid: [0-9]* 1 NSpgid' "$W/facts.before" ||
		{ fail "no task is pid 1 of a nested namespace"; attach "$W/facts.before"; return 1; }
	[ "$(grep -c '^NSpid: [0-9]* [0-9]* NSpgid' "$W/facts.before")" = 9 ] ||
		{ fail "not 9 tasks at three levels (P, Q, Z, B, its thread, B1, B2; V, V1)"; attach "$W/facts.before"; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v || { fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$INIT" || { fail "pid $INIT still there after the dump"; return 1; }
	amber_to "$W/restore.log" 60 restore -d --pidfile "$W/pidfile" -D "$W/img" -v ||
		{ fail "restore failed"; attach "$W/restore.log"; return 1; }
	h=$(cat "$W/pidfile")
	echo "$h" >>"$W/pids"
	INIT=$h
	pidns_nest_facts >"$W/facts.after"
	diff -u "$W/facts.before" "$W/facts.after" >"$W/facts.diff" ||
		{ fail "the tasks' pids in their namespaces differ after the restore:"; attach "$W/facts.diff"; return 1; }
	note "the tasks' NSpid/NSpgid/NSsid and children's namespaces are as before: $(tr '\n' ';' <"$W/facts.after")"
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the restored program failed its checks"; attach "$T/err"; return 1; }
	wait_for 10 is_gone "$h" || { fail "the restored init $h did not end"; return 1; }
}

# refused, naming it, and the tree runs on: a pid namespace two levels below
# the tree's (B1 unshares one more and forks D); a process that entered the
# nested namespace from outside the tree; B1's pid_for_children once D, its
# init, is gone
t_pidns_nest_refused() {
	[ $SELFTEST = 1 ] && return 77
	local d b s p
	local PENV=(PIDNSNEST_DEEP=1)
	pidns_nest_start || return 1
	for p in $(pidns_nest_pids "$INIT"); do
		[ "$(awk '/^NSpid:/ {print NF}' "/proc/$p/status")" = 5 ] && d=$p
		[ "$(awk '/^NSpid:/ {print NF}' "/proc/$p/status")" = 4 ] &&
			[ "$(awk '/^NSsid:/ {print $NF}' "/proc/$p/status")" = "$(awk '/^NSpid:/ {print $NF}' "/proc/$p/status")" ] && b=$p
	done
	[ -n "$d" ] && [ -n "$b" ] || { fail "no D two levels down or no B (the nested session leader)"; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v && { fail "a dump with a namespace two levels down succeeded"; return 1; }
	grep -q "pid $d is in pid namespace .*2 levels below" "$W/dump.log" || { fail "the refusal does not name D $d two levels down"; attach "$W/dump.log"; return 1; }
	note "refused: $(grep -m1 error "$W/dump.log")"
	touch "$T/d.go"
	wait_for 10 is_gone "$d" || { fail "D $d did not end"; return 1; }
	nsenter -t "$b" -p sleep 300 &
	echo $! >>"$W/pids"
	wait_for 10 eval '[ -n "$(pgrep -P $! -x sleep)" ]' || { fail "no sleeper in the nested namespace"; return 1; }
	s=$(pgrep -P $! -x sleep)
	echo "$s" >>"$W/pids"
	amber_to "$W/dump2.log" 60 dump -t "$INIT" -D "$W/img2" -v && { fail "a dump leaving $s in the nested namespace succeeded"; return 1; }
	grep -q "pid $s .*not in its tree" "$W/dump2.log" || { fail "the refusal does not name pid $s"; attach "$W/dump2.log"; return 1; }
	note "refused: $(grep -m1 error "$W/dump2.log")"
	kill "$s"
	wait_for 10 is_gone "$s" || { fail "the sleeper $s did not end"; return 1; }
	amber_to "$W/dump3.log" 60 dump -t "$INIT" -D "$W/img3" -v && { fail "a dump with a pid_for_children whose init is gone succeeded"; return 1; }
	grep -q "unshare()d pid namespace .* for its children" "$W/dump3.log" || { fail "the refusal does not name the pid_for_children"; attach "$W/dump3.log"; return 1; }
	note "refused: $(grep -m1 error "$W/dump3.log")"
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the program failed its checks after the refused dumps"; attach "$T/err"; return 1; }
}

# a process of the nested namespace in a session led by a zombie (its
# sibling, which makes it at restore): refused, naming it, and the tree runs on
t_pidns_nest_zombie_refused() {
	[ $SELFTEST = 1 ] && return 77
	local p m s
	local PENV=(PIDNSNEST_ZOMBIE=1)
	pidns_nest_start || return 1
	for p in $(pidns_nest_pids "$INIT"); do
		s=$(awk '/^NSsid:/ {print $2}' "/proc/$p/status")
		[ "$s" != "$p" ] && [ "$(awk '/^State:/ {print $2}' "/proc/$s/status" 2>/dev/null)" = Z ] && m=$p
	done
	[ -n "$m" ] || { fail "no M in a zombie's session"; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v && { fail "a dump with a zombie's session in the nested namespace succeeded"; return 1; }
	grep -q "pid $m .*in a session led by a zombie" "$W/dump.log" || { fail "the refusal does not name M $m"; attach "$W/dump.log"; return 1; }
	note "refused: $(grep -m1 error "$W/dump.log")"
	touch "$T/z.go" "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the program failed its checks after the refused dump"; attach "$T/err"; return 1; }
}

# an owner of signals (F_SETOWN) in a tree with a nested namespace: refused
# (its pid is the holder's view; the restore's holder may have another)
t_pidns_nest_fown_refused() {
	[ $SELFTEST = 1 ] && return 77
	local PENV=(PIDNSNEST_FOWN=1)
	pidns_nest_start || return 1
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v && { fail "a dump with an owner of signals in a nested namespace succeeded"; return 1; }
	grep -q "owners of signals in a tree with a nested pid namespace" "$W/dump.log" || { fail "the refusal does not name the owner of signals"; attach "$W/dump.log"; return 1; }
	note "refused: $(grep -m1 error "$W/dump.log")"
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the program failed its checks after the refused dump"; attach "$T/err"; return 1; }
}

# crafted nested pids in pstree.img and threads' cores are refused before
# any process is made (pidns_own_crafted: no "restoring" step in the log)
t_pidns_nest_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 show i p b u th bpid
	pidns_nest_start || return 1
	amber_to "$W/dump.log" 60 dump -t "$INIT" -D "$W/img" -v || { fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$INIT" || { fail "pid $INIT still there after the dump"; return 1; }
	show=$("$AMBER" show "$W/img")
	# the entries of P (the nested init, U's child), B (its live child), and B's thread
	p=$(jq '[.pstree[] | .nested_init == true and .ppid != 1] | index(true)' <<<"$show")
	b=$(jq ".pstree[$p].pid as \$p | [.pstree[] | .ppid == \$p and .zombie != true] | index(true)" <<<"$show")
	[ "$p" != null ] && [ "$b" != null ] || { fail "pstree.img has no nested init or no child of it"; return 1; }
	[ "$(jq ".pstree[$p].nested_pid" <<<"$show")" = 1 ] || { fail "the nested init is not nested pid 1"; return 1; }
	th=$(jq -r ".pstree[$b].pid as \$b | .tasks[] | select(.pid == \$b) | .core.threads[0]" <<<"$show")
	[ -n "$th" ] && [ "$th" != null ] || { fail "B has no thread in its core"; return 1; }
	i=$(jq ".pstree[$b].pid as \$b | [.pstree[] | .ppid == \$b] | index(true)" <<<"$show")
	u=$(jq ".pstree[$p].ppid as \$u | [.pstree[] | .pid == \$u] | index(true)" <<<"$show")
	pidns_own_crafted no_init "its parent is not in" pstree.img "$p.nested_init=false" "$p.nested_pid=3" "$u.pid_ns_for_children=0" || ok=1
	pidns_own_crafted dup "nested pid of another" pstree.img "$i.nested_pid=$(jq ".pstree[$b].nested_pid" <<<"$show")" || ok=1
	pidns_own_crafted zero "pid 0 in its nested" pstree.img "$b.nested_pid=0" || ok=1
	pidns_own_crafted pid_max "above pid_max" pstree.img "$b.nested_pid=$(cat /proc/sys/kernel/pid_max)" || ok=1
	pidns_own_crafted two_inits "parent is not in the tree's" pstree.img "$b.nested_init=true" "$b.nested_pid=1" || ok=1
	bpid=$(jq ".pstree[$b].pid" <<<"$show")
	pidns_own_crafted thread_dup "another task of its namespace" "threads-$bpid.img" "0.nested_tid=1" || ok=1
	pidns_own_crafted thread_none "nested tid" "threads-$bpid.img" "0.nested_tid=0" || ok=1
	return $ok
}
