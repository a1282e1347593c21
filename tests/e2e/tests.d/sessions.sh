# Sessions and process groups whose leaders are gone (progs/sessions.c): a
# daemon in the session its launcher made, and below it, members of another
# leaderless session and group; every process keeps its parent, group and
# session, the helpers that remake them leave nothing behind.
TESTS+=(sessions_leaderless sessions_image_refused sessions_outside_refused)

sessions_ids() { # the tree below PID: pid ppid pgid sid (not the root's ppid)
	local p=$1 kid
	echo "$p $([ "$p" = "$PID" ] && echo - || awk '{print $4}' "/proc/$p/stat") $(awk '{print $5, $6}' "/proc/$p/stat")"
	for kid in $(cat /proc/"$p"/task/*/children 2>/dev/null); do sessions_ids "$kid"; done
}
sessions_before() {
	sessions_ids "$PID" >"$W/ids.before"
	[ "$(wc -l <"$W/ids.before")" = 4 ] || { fail "expected 4 processes: $(cat "$W/ids.before")"; return 1; }
	awk -v r="$PID" '$1 == r && $4 == r {bad = 1} END {exit bad}' "$W/ids.before" ||
		{ fail "the daemon leads its session"; return 1; }
}
sessions_after() {
	local sid
	sessions_ids "$PID" >"$W/ids.after"
	if ! diff -u "$W/ids.before" "$W/ids.after" >"$W/ids.diff"; then
		fail "parents, groups or sessions differ after restore (- before, + after):"
		sed 's/^/    /' "$W/ids.diff" >>"$W/log"
		return 1
	fi
	for sid in $(awk '{print $3; print $4}' "$W/ids.after" | sort -u); do
		[ -e "/proc/$sid" ] && { fail "a helper, pid $sid, is still there"; return 1; }
	done
	return 0
}
t_sessions_leaderless() { cycle -D -P sessions_before -A sessions_after -- "$PROGS/sessions" "$T"; }

# An image that asks for a helper of a pid the tree has, or that leads the
# session it calls leaderless, is refused before any process exists.
t_sessions_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 n
	start_prog "$PROGS/sessions" "$T" || return 1
	PID=$(head -n1 "$T/ready")
	echo "$PID" >>"$W/pids"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	n=$("$AMBER" show "$W/img" | jq '[.pstree[] | select(.dead_sid_leader)] | length')
	[ "$n" -ge 3 ] || { fail "the image marks $n processes' sessions leaderless, want 3"; return 1; }
	refused ses_leads "leads the session" pstree.img "0.sid=$PID" || ok=1
	refused ses_tree_pid "a pid of the tree" pstree.img "1.sid=$PID" "1.pgid=$PID" \
		"1.dead_pgid_leader=0" || ok=1
	return $ok
}

# A member whose session leader lives outside the tree cannot be put back in
# that session: refused at dump, naming it, with the tree left running.
t_sessions_outside_refused() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PY" -c 'import os, sys, time
if os.fork() == 0:
    kid = os.fork()
    if kid == 0:
        time.sleep(120); os._exit(0)
    os.setsid()
    open(sys.argv[1] + "/ready", "w").write("%d %d\n" % (os.getpid(), kid))
    time.sleep(120); os._exit(0)
time.sleep(120)' "$T" || return 1
	read -r PID kid <"$T/ready"
	echo "$PID $kid" >>"$W/pids"
	if amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"; then
		fail "a member of a session led from outside the tree was dumped"
		return 1
	fi
	grep -q "pid $kid (session [0-9]*, group [0-9]*) cannot be recreated.*session leader is outside" "$W/dump.log" ||
		{ fail "refused, but not naming pid $kid and its session"; attach "$W/dump.log"; return 1; }
	is_alive "$PID" && is_alive "$kid" || { fail "the refused dump harmed the tree"; return 1; }
}

# Sessions and groups led by zombies (progs/zombielead.c): the zombies come
# back leading them, with their names and statuses, and the members made by a
# zombie session leader come back in its session, children of its parent.
TESTS+=(sessions_zombie_leaders)
zl_ids() { # the tree below PID: pid ppid pgid sid state comm (running counts as sleeping)
	local p=$1 kid
	echo "$p $(awk '{sub(/^[0-9]+ /, ""); c = $0; sub(/\) .*/, "", c); n = split($0, f, ") "); split(f[n], g, " "); s = g[1]; if (s == "R") s = "S"; print g[2], g[3], g[4], s, c ")"}' "/proc/$p/stat")"
	for kid in $(cat /proc/"$p"/task/*/children 2>/dev/null); do zl_ids "$kid"; done
}
zl_before() {
	zl_ids "$PID" | sed "1s/^$PID [0-9]*/$PID -/" | sort >"$W/ids.before"
	[ "$(grep -c ' Z ' "$W/ids.before")" = 3 ] && [ "$(wc -l <"$W/ids.before")" = 7 ] ||
		{ fail "expected 7 processes, 3 zombies: $(cat "$W/ids.before")"; return 1; }
}
zl_after() {
	zl_ids "$PID" | sed "1s/^$PID [0-9]*/$PID -/" | sort >"$W/ids.after"
	diff -u "$W/ids.before" "$W/ids.after" >"$W/ids.diff" && return 0
	fail "parents, groups, sessions, states or names differ after restore (- before, + after):"
	sed 's/^/    /' "$W/ids.diff" >>"$W/log"
	return 1
}
t_sessions_zombie_leaders() { cycle -P zl_before -A zl_after -- "$PROGS/zombielead" "$T"; }

# An image in which a process is a zombie's child, or a member of a zombie's
# session is not its sibling, or a zombie's name is too long, is refused
# before any process exists; the unedited image restores.
TESTS+=(sessions_zombie_image_refused)
t_sessions_zombie_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 z m n o
	start_prog "$PROGS/zombielead" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	"$AMBER" show "$W/img" | jq -c '.pstree' >"$W/pstree.json"
	# the index of the first zombie, of a member it made (parent the root,
	# session the zombie's) and of that member's child
	z=$(jq '[.[] | .zombie // false] | index(true)' "$W/pstree.json")
	m=$(jq --argjson r "$PID" 'map(.zombie != true and .ppid == $r and .sid != $r) | index(true)' "$W/pstree.json")
	n=$(jq --argjson r "$PID" 'map(.ppid != $r) | .[1:] | index(true) + 1' "$W/pstree.json")
	[ "$z" != null ] && [ "$m" != null ] && [ "$n" != null ] ||
		{ fail "no zombie, member or member's child in $(cat "$W/pstree.json")"; return 1; }
	refused zl_child "bad entry" pstree.img \
		"$m.ppid=$(jq ".[$z].pid" "$W/pstree.json")" || ok=1
	# a zombie leading another session than that of the member's child
	o=$(jq --argjson s "$(jq ".[$n].sid" "$W/pstree.json")" 'map(.zombie == true and .pid != $s) | index(true)' "$W/pstree.json")
	o=$(jq ".[$o].pid" "$W/pstree.json")
	refused zl_cousin "led by a zombie that is not its sibling" pstree.img "$n.sid=$o" "$n.pgid=$o" || ok=1
	refused zl_comm "bad entry" pstree.img "$z.comm=aaaaaaaaaaaaaaaaaaaa" || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores
}
