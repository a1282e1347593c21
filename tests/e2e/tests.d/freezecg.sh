# dump --freeze-cgroup PATH (src/freezer.c): the tree frozen through its cgroup's
# freezer (v2 cgroup.freeze, v1 freezer.state), seized frozen, the cgroup thawed
# again; refused, naming the process, when the cgroup is not exactly the tree;
# any failure or interruption leaves the cgroup as it was and the tree running.
TESTS+=(freezecg_v2 freezecg_forks freezecg_refused freezecg_fault freezecg_interrupted
	freezecg_leave_running freezecg_leave_stopped freezecg_user_frozen freezecg_v1
	freezecg_v1_forks freezecg_v1_user_frozen freezecg_user_frozen_killed
	freezecg_v1_user_frozen_killed)

# FZ: the test's cgroup (v2 unless fz_mk v1); made here, removed by fz_rm
fz_mk() { # [v1]
	local root
	if [ "${1:-}" = v1 ]; then
		root=$(findmnt -rn -t cgroup -o TARGET,OPTIONS | awk '$2 ~ /(^|,)freezer(,|$)/ {print $1; exit}')
	else
		root=$(findmnt -rn -t cgroup2 -o TARGET | head -1)
	fi
	[ -n "$root" ] || return 77
	FZ=$root/amber-fz-$(basename "$W")
	mkdir -p "$FZ" || { fail "cannot make $FZ"; return 1; }
	echo "$FZ" >"$W/cgroup"
	[ -e "$FZ/cgroup.freeze" ] || [ -e "$FZ/freezer.state" ] || { fail "$FZ has no freezer file"; return 1; }
}
# kill what is left in it (only our own processes are ever put there), then remove it
fz_rm() {
	local p
	[ -n "${FZ:-}" ] && [ -d "$FZ" ] || return 0
	fz_thaw
	for p in $(cat "$FZ"/cgroup.procs "$FZ"/*/cgroup.procs 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	wait_for 10 rmdir "$FZ" 2>/dev/null || note "could not remove $FZ"
	true
}
fz_thaw() {
	if [ -e "$FZ/cgroup.freeze" ]; then echo 0 >"$FZ/cgroup.freeze"; else echo THAWED >"$FZ/freezer.state"; fi
}
fz_freeze() {
	if [ -e "$FZ/cgroup.freeze" ]; then echo 1 >"$FZ/cgroup.freeze"; else echo FROZEN >"$FZ/freezer.state"; fi
}
# what the kernel says: frozen or thawed (v1 FREEZING counts as neither)
fz_state() {
	if [ -e "$FZ/cgroup.freeze" ]; then
		grep -q '^frozen 1' "$FZ/cgroup.events" && echo frozen || echo thawed
	else
		case $(cat "$FZ/freezer.state") in FROZEN) echo frozen ;; THAWED) echo thawed ;; *) echo other ;; esac
	fi
}
fz_is() { [ "$(fz_state)" = "$1" ]; }
fz_thawed() { # WHEN
	fz_is thawed || { fail "after $1 cgroup $FZ is $(fz_state), not thawed"; return 1; }
}
# start CMD... inside $FZ from its first instruction on
fz_start() {
	start_prog sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$FZ" "$@"
}
# every process below pid $1 (not itself), through each thread's children
tree_pids() {
	local k
	for k in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		echo "$k"
		tree_pids "$k"
	done
}
fz_dump() { # LOG OPTS...
	local log=$1
	shift
	amber_to "$log" 120 dump -t "$PID" -D "$W/img" -v --freeze-cgroup "$FZ" "$@"
}
# the dump log says the tree was frozen through the cgroup
fz_used() {
	grep -q "froze cgroup $FZ" "$W/dump.log" || { fail "the dump did not freeze through $FZ"; attach "$W/dump.log"; return 1; }
}
fz_after_dump() { fz_used && fz_thawed "the dump"; }
fz_back() { # the restored root is back in the cgroup, thawed
	grep -q "$(basename "$FZ")" "/proc/$PID/cgroup" || { fail "the restored pid $PID is not in $FZ: $(tr '\n' ' ' <"/proc/$PID/cgroup")"; return 1; }
	fz_thawed "the restore"
}

# A tree (groups, sessions, a zombie, pipes, shared memory) in a v2 cgroup.
t_freezecg_v2() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/tree" "$T"; return; }
	local rc
	fz_mk || return
	cycle -d "--freeze-cgroup $FZ" -B fz_after_dump -A fz_back -P fz_moved -- "$PROGS/tree" "$T"
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
# cycle starts the program itself: move the whole tree in before the dump
fz_moved() {
	local p
	for p in "$PID" $(tree_pids "$PID"); do
		[ "$(proc_state "$p")" = Z ] && continue
		echo "$p" >"$FZ/cgroup.procs" || { fail "cannot move pid $p into $FZ"; return 1; }
	done
}

# A tree forking all along is dumped as it was at one instant: the restored
# tree is exactly the image's processes, every process that had started (and
# written its pid) is in the image, and the program's own invariants hold.
t_freezecg_forks() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/forker" "$T"; return; }
	local rc
	fz_mk || return
	fz_forks
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
fz_forks() {
	local p missing=0 n
	fz_start "$PROGS/forker" "$T" || return 1
	fz_dump "$W/dump.log" || { fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	fz_used || return 1
	wait_for 20 eval '[ -z "$(cat "$FZ/cgroup.procs")" ]' || { fail "processes left in $FZ after the dump"; return 1; }
	"$AMBER" show "$W/img" ps >"$W/ps" 2>&1 || { fail "amber show ps failed"; attach "$W/ps"; return 1; }
	awk 'NR > 1 {print $1}' "$W/ps" | sort -n >"$W/image.pids"
	n=$(wc -l <"$W/image.pids")
	note "the image holds $n processes; $(wc -l <"$T/started") had written their pid at the dump"
	[ "$n" -ge 21 ] || { fail "the image holds $n processes, fewer than the 21 the program had"; attach "$W/ps"; return 1; }
	for p in $(cat "$T/started"); do
		grep -qx "$p" "$W/image.pids" || { note "pid $p had started but is not in the image"; missing=1; }
	done
	[ $missing = 0 ] || { fail "processes of the tree are missing from the image"; return 1; }
	sort -n "$T/started" | uniq -d | grep -q . && { fail "a pid started twice"; return 1; }
	amber_to "$W/restore.log" 120 restore -d -s -D "$W/img" || { fail "amber restore failed"; attach "$W/restore.log"; return 1; }
	{ echo "$PID"; tree_pids "$PID"; } | sort -n >"$W/restored.pids"
	tree_pids "$PID" >"$W/pids.more"
	cat "$W/pids.more" >>"$W/pids"
	diff -u "$W/image.pids" "$W/restored.pids" >>"$W/log" ||
		{ fail "the restored tree is not the image's processes (- image, + restored)"; return 1; }
	for p in $(cat "$W/restored.pids"); do kill -CONT "$p"; done
	fz_back || return 1
	touch "$T/go"
	wait_for 60 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the restored program failed its checks"; attach "$T/err"; attach "$T/out"; return 1; }
	note "$(tail -n 1 "$T/out")"
}

# Refused, naming the process, before anything is frozen: a process of the
# tree outside the cgroup, a stranger inside, a path that is no cgroup; the
# tree runs on.
t_freezecg_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk || return
	fz_refused
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
fz_refusal() { # WHAT PATTERN [DUMP OPTIONS]
	local what=$1 want=$2 log=$W/refused-$((++NREFUSED)).log
	shift 2
	fz_dump "$log" "$@" && { fail "$what: the dump succeeded"; return 1; }
	set -- "$what" "$want"
	grep -q -- "$2" "$log" || { fail "$1: the error does not say '$2'"; attach "$log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "$1: an image was written"; return 1; }
	is_free_running "$PID" || { fail "$1: pid $PID is not running freely"; return 1; }
	fz_thawed "$1" || return 1
	note "$1: $(grep -m1 -i error "$log")"
}
fz_refused() {
	local kid stranger sub NREFUSED=0
	fz_start "$PROGS/tree" "$T" || return 1
	kid=$(for p in $(tree_pids "$PID"); do [ "$(proc_state "$p")" != Z ] && echo "$p"; done | head -1)
	[ -n "$kid" ] || { fail "the tree has no live child"; return 1; }
	# a member outside: moved to the hierarchy's root
	echo "$kid" >"$(dirname "$FZ")/cgroup.procs" || { fail "cannot move $kid out"; return 1; }
	fz_refusal "a member outside" "pid $kid ([^)]*) of the tree of pid $PID is not in cgroup $FZ" || return 1
	echo "$kid" >"$FZ/cgroup.procs"
	# a stranger below it: a cgroup inside, with a process of ours not of the tree
	sub=$FZ/inner
	mkdir "$sub" || { fail "cannot make $sub"; return 1; }
	sleep 300 &
	stranger=$!
	echo "$stranger" >>"$W/pids"
	echo "$stranger" >"$sub/cgroup.procs" || { fail "cannot move $stranger into $sub"; return 1; }
	fz_refusal "a stranger in a cgroup below" "pid $stranger (sleep) is in cgroup $FZ but not in the tree of pid $PID" || return 1
	kill -9 "$stranger"
	wait "$stranger" 2>/dev/null
	wait_for 10 rmdir "$sub" || { fail "cannot remove $sub"; return 1; }
	fz_refusal "not a cgroup" "not a cgroup v2 directory" --freeze-cgroup "$W" || return 1
	fz_refusal "no such path" "$W/none: No such file or directory" --freeze-cgroup "$W/none" || return 1
	# and with all that undone, the same dump works (the refusals were not a broken setup)
	fz_dump "$W/dump.log" -R || { fail "the dump of the cgroup's tree failed"; attach "$W/dump.log"; return 1; }
	fz_after_dump && runs_on "the dump -R"
}

# The seize fails while the cgroup is frozen: the cgroup is thawed and the
# tree released, running as before.
t_freezecg_fault() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk || return
	fz_fault
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
fz_fault() {
	fz_start "$PROGS/tree" "$T" || return 1
	# ptrace 1, 2: the root's seize and interrupt; 3: its child's seize
	AMBER_FAULT=ptrace:3:EPERM fz_dump "$W/dump.log" && { fail "the dump succeeded despite the fault"; return 1; }
	fz_used || return 1
	note "$(grep -m1 -i error "$W/dump.log")"
	[ ! -e "$W/img/inventory.img" ] || { fail "the failed dump left an image"; return 1; }
	fz_thawed "the failed dump" && runs_on "the failed dump"
}

# SIGTERM and SIGINT once amber froze the cgroup: it is thawed, the tree runs on.
t_freezecg_interrupted() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk || return
	fz_interrupted TERM && fz_interrupted INT
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
fz_interrupted() { # SIGNAL
	local apid rc i=0
	rm -rf "$T" "$W/img"
	fz_start "$PROGS/widetree" "$T" 300 || return 1
	"$AMBER" dump -t "$PID" -D "$W/img" -v --freeze-cgroup "$FZ" >"$W/dump-$1.log" 2>&1 &
	apid=$!
	while ! fz_is frozen && [ $i -lt 20000 ] && kill -0 "$apid" 2>/dev/null; do i=$((i + 1)); done
	kill "-$1" "$apid"
	wait "$apid"
	rc=$?
	note "SIG$1 after $i looks at the cgroup: amber exited $rc"
	[ $rc != 0 ] || { fail "amber dump finished before SIG$1 came, or ignored it"; attach "$W/dump-$1.log"; return 1; }
	grep -q "froze cgroup $FZ" "$W/dump-$1.log" || { fail "SIG$1 came before the freeze"; attach "$W/dump-$1.log"; return 1; }
	grep -q "interrupted" "$W/dump-$1.log" || { fail "no word of the interruption"; attach "$W/dump-$1.log"; return 1; }
	fz_thawed "SIG$1" && runs_on "the dump interrupted by SIG$1" 60
}

# -R: the tree runs on after the dump, the cgroup thawed.
t_freezecg_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk || return
	fz_start "$PROGS/tree" "$T" && fz_dump "$W/dump.log" -R &&
		fz_after_dump && [ -e "$W/img/inventory.img" ] && runs_on "dump -R"
	rc=$?
	[ $rc = 0 ] || attach "$W/dump.log"
	cleanup_test
	fz_rm
	return $rc
}

# -s: every process of the tree stopped (SIGSTOP) after the dump, the cgroup thawed.
t_freezecg_leave_stopped() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk || return
	fz_leave_stopped
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
fz_leave_stopped() {
	local p
	fz_start "$PROGS/tree" "$T" || return 1
	fz_dump "$W/dump.log" -s || { fail "amber dump -s failed"; attach "$W/dump.log"; return 1; }
	fz_after_dump || return 1
	for p in $(cat "$FZ/cgroup.procs"); do
		wait_for 5 eval '[ "$(proc_state "$p")" = T ]' ||
			{ fail "after dump -s pid $p is in state $(proc_state "$p"), not T"; return 1; }
	done
	for p in $(cat "$FZ/cgroup.procs"); do kill -CONT "$p"; done
	runs_on "dump -s and SIGCONT"
}

# A cgroup its user froze before the dump is frozen again after it (-R), and
# after a failed one; thawed, the tree runs on.
t_freezecg_user_frozen() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk || return
	fz_user_frozen
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
fz_user_frozen() {
	fz_start "$PROGS/tree" "$T" || return 1
	fz_freeze
	wait_for 10 fz_is frozen || { fail "the test could not freeze $FZ"; return 1; }
	fz_dump "$W/dump.log" -R || { fail "the dump of a frozen cgroup failed"; attach "$W/dump.log"; return 1; }
	fz_used || return 1
	fz_is frozen || { fail "after the dump -R the cgroup its user froze is $(fz_state)"; return 1; }
	[ "$(status_field "$PID" TracerPid)" = 0 ] || { fail "pid $PID is still traced"; return 1; }
	rm -rf "$W/img"
	AMBER_FAULT=ptrace:3:EPERM fz_dump "$W/failed.log" && { fail "the dump succeeded despite the fault"; return 1; }
	fz_is frozen || { fail "after a failed dump the cgroup its user froze is $(fz_state)"; return 1; }
	fz_thaw
	runs_on "the dumps of a frozen cgroup, thawed"
}

# A v1 freezer cgroup (where the v1 freezer hierarchy is mounted): a full cycle.
t_freezecg_v1() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk v1 || return
	cycle -d "--freeze-cgroup $FZ" -B fz_after_dump -A fz_back -P fz_moved -- "$PROGS/tree" "$T"
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}

# The same on v1: the tasks stop only as they leave the refrigerator.
t_freezecg_v1_forks() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk v1 || return
	fz_forks
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
t_freezecg_v1_user_frozen() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk v1 || return
	fz_user_frozen
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}

# A cgroup its user froze, dumped and killed: every process dies (none held
# frozen while dying) and the cgroup ends frozen again, as its user left it.
t_freezecg_user_frozen_killed() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk || return
	fz_frozen_killed
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
t_freezecg_v1_user_frozen_killed() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fz_mk v1 || return
	fz_frozen_killed
	rc=$?
	cleanup_test
	fz_rm
	return $rc
}
fz_frozen_killed() {
	local pids
	fz_start "$PROGS/tree" "$T" || return 1
	pids="$PID $(tree_pids "$PID")"
	fz_freeze
	wait_for 10 fz_is frozen || { fail "the test could not freeze $FZ"; return 1; }
	fz_dump "$W/dump.log" || { fail "the dump of a frozen cgroup failed"; attach "$W/dump.log"; return 1; }
	fz_used || return 1
	wait_for 20 eval '[ -z "$(cat "$FZ/cgroup.procs")" ]' ||
		{ fail "processes held in $FZ after the dump killed them: $(cat "$FZ/cgroup.procs" | tr '\n' ' ')"; return 1; }
	fz_is frozen || { fail "after the dump the cgroup its user froze is $(fz_state)"; return 1; }
	note "pids $pids gone; $FZ frozen again"
}
