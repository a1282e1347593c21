# A runc container with a terminal ("terminal": true): its init is an interactive
# busybox shell on the pty whose master runc hands to --console-socket (console_recv,
# which relays a FIFO to the master and the master to a file).  The shell turns echo
# off and sets a window size; runc checkpoint --shell-job ends it, runc restore -d
# --shell-job --console-socket hands the receiver a NEW master (amber's
# orphan-pts-master NOTIFY), and through it the restored shell answers as pid 1 on
# /dev/pts/0, its controlling terminal, with echo off and the window size it set.
TESTS+=(runc_tty tty_job_session_refused tty_job_orphan_refused)

CONSOLE_RECV=$ROOT/build/tools/console_recv

rtty_bundle() {
	rpc_runc_bundle || return 1
	mkdir -p "$W/bundle/rootfs/bin"
	cp /bin/busybox "$W/bundle/rootfs/bin/busybox" || { fail "no static busybox (busybox-static)"; return 1; }
	local a
	for a in sh echo tty stty grep cat; do ln -sf busybox "$W/bundle/rootfs/bin/$a"; done
	jq '.process.terminal = true | .process.env += ["PATH=/bin", "PS1=$ "] |
		.process.args = ["/bin/sh", "-i"]' \
		"$W/bundle/config.json" >"$W/config.json" && mv "$W/config.json" "$W/bundle/config.json" ||
		{ fail "cannot edit config.json"; return 1; }
}
# N: a receiver on $W/console-N.sock, its input FIFO $W/in-N, its output $W/out-N
rtty_recv() {
	rm -f "$W/console-$1.sock"
	mkfifo "$W/in-$1" && : >"$W/out-$1" || return 1
	# (--selftest: the receiver undoes the settings the restore must keep)
	AMBER_TEST_SABOTAGE=$SELFTEST "$CONSOLE_RECV" "$W/console-$1.sock" "$W/in-$1" "$W/out-$1" 2>>"$W/recv-$1.err" &
	RTTY_RECV=$!
	wait_for 10 test -S "$W/console-$1.sock" || { fail "console_recv did not listen"; attach "$W/recv-$1.err"; return 1; }
}
# FILE LINE: the terminal output in FILE has LINE (its carriage returns aside)
rtty_has() { tr -d '\r' <"$1" | grep -qxF -- "$2"; }
# N LINE EXPECTED: LINE typed at the terminal of receiver N; its output has a line EXPECTED
rtty_ask() {
	echo "$2" >"$W/in-$1"
	wait_for 10 rtty_has "$W/out-$1" "$3" ||
		{ fail "the shell did not answer '$3' to '$2' through the terminal"; attach "$W/out-$1"; attach "$W/recv-$1.err"; return 1; }
}
t_runc_tty() {
	command -v runc >/dev/null && [ -x /bin/busybox ] || { note "runc or busybox-static is not installed (make setup)"; return 77; }
	local id=amber-rtty-$$ rc
	rtty_bundle || return 1
	rtty_case "$id"
	rc=$?
	runc --root "$W/state" delete -f "$id" >>"$W/log" 2>&1
	[ -n "$RTTY_RECV" ] && kill "$RTTY_RECV" 2>/dev/null
	wait
	return $rc
}
rtty_case() {
	local id=$1 pid r1
	rtty_recv 1 || return 1
	r1=$RTTY_RECV
	rpc_runc_bg run.out run -d --console-socket "$W/console-1.sock" "$id"
	wait_for 15 eval '[ "$(rpc_runc_state "$id" .status)" = running ]' ||
		{ fail "runc run -d: the container is not running"; attach "$W/run.out"; return 1; }
	pid=$(rpc_runc_state "$id" .pid)
	# (the answers are computed: a line echoed back never matches; with echo off the
	# prompt is on the line the answer would start, hence a first empty line)
	rtty_ask 1 'stty -echo rows 45 cols 123; echo R$((40+2))' R42 || return 1
	rtty_ask 1 'echo; echo A $$ $(tty) $(stty size) $(stty -a | grep -o -- " -echo ")' \
		"A 1 /dev/pts/0 45 123 -echo" || return 1
	rpc_runc_ckpt "$id" img --shell-job ||
		{ fail "runc checkpoint --shell-job failed"; attach "$W/img.out"; attach "$W/work-img/dump.log" 20; return 1; }
	wait_for 10 eval '! kill -0 $pid 2>/dev/null' || { fail "the container's init $pid lives on after the checkpoint"; return 1; }
	# the first terminal is done with: its last slave went with the container
	wait "$r1" || { fail "console_recv 1 failed"; attach "$W/recv-1.err"; return 1; }
	rtty_recv 2 || return 1
	rpc_runc_bg restore.out restore -d --shell-job --console-socket "$W/console-2.sock" \
		--image-path "$W/img" --work-path "$W/work-img" "$id"
	wait_for 30 eval '[ "$(rpc_runc_state "$id" .status)" = running ]' ||
		{ fail "runc restore -d: the container is not running"; attach "$W/restore.out"; attach "$W/work-img/restore.log" 20; return 1; }
	pid=$(rpc_runc_state "$id" .pid)
	rtty_ask 2 'echo; echo B $$ $(tty) $(stty size) $(stty -a | grep -o -- " -echo ")' \
		"B 1 /dev/pts/0 45 123 -echo" || return 1
	# its controlling terminal: /dev/tty opens only on one
	rtty_ask 2 'echo; echo C $( (: </dev/tty) 2>/dev/null && echo ctty)' "C ctty" || return 1
	# echo is off: what was typed is not in the terminal's output
	! grep -q 'echo B' "$W/out-2" || { fail "the restored terminal echoes (echo was off)"; attach "$W/out-2"; return 1; }
	note "restored: pid $pid; the shell answers through the new master as pid 1 on /dev/pts/0, echo off, 45x123"
}

# A session leader on a terminal whose master is outside the tree (ptysession's S, the
# foreground group its child J's): amber dump -j refuses it (no RPC client to take a
# new terminal), and so does a DUMP through RPC with shell_job, which takes such a
# terminal only with the leader's own group in the foreground; S runs on unharmed.
t_tty_job_session_refused() {
	[ $SELFTEST = 1 ] && return 77
	local s j pts
	start_prog "$PROGS/ptysession" "$T" closed || return
	read -r s j pts <"$T/info"
	amber_to "$W/dump.log" 60 dump -j -t "$s" -D "$W/img" -v &&
		{ fail "amber dump -j of pid $s succeeded though it leads a session on $pts"; return 1; }
	grep -q "pid $s leads a session whose controlling terminal .* is outside the dumped tree" "$W/dump.log" ||
		{ fail "amber dump -j: the refusal does not name pid $s's session"; attach "$W/dump.log"; return 1; }
	wait_for 5 is_free_running "$s" || { fail "pid $s is not running freely after the refused dump"; return 1; }
	rpc_img
	rpc_to "$W/out" "$AMBER" "dump=$W/img,$s,shell_job,work=$W/work,log=dump.log" ||
		{ fail "rpc_client failed"; attach "$W/rpc.err"; return 1; }
	has_line "$W/out" "^dump fail errno=95 msg=.*pid $s leads a session on the job's terminal $pts whose foreground group is $j, not its own" \
		"DUMP with shell_job of a session whose foreground group is another" || { attach "$W/work/dump.log"; return 1; }
	runs_on "the refused dumps"
}

# The counter leading a session on script(1)'s pty (its own group in the foreground):
# a DUMP through RPC with shell_job takes it (--leave-running), and a RESTORE without
# orphan_pts_master, as amber restore -j, is refused before anything is made, naming
# the terminal and orphan_pts_master; the counter runs on and passes its checks.
t_tty_job_orphan_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v script >/dev/null || return 77
	local c pts
	start_prog script -qfec "exec $PROGS/counter $T" /dev/null || return
	c=$(pgrep -P "$PID") || { fail "script's child is gone"; return 1; }
	pts=$(readlink "/proc/$c/fd/0")
	case $pts in /dev/pts/*) ;; *) fail "the counter's stdin is $pts, not script's pty"; return 1 ;; esac
	rpc_img
	rpc_to "$W/out" "$AMBER" "dump=$W/img,$c,shell_job,leave_running,work=$W/work,log=dump.log" \
		"restore=$W/img,shell_job,work=$W/work,log=restore.log" ||
		{ fail "rpc_client failed"; attach "$W/rpc.err"; return 1; }
	has_line "$W/out" '^dump ok type=1$' "DUMP with shell_job" || { attach "$W/work/dump.log"; return 1; }
	has_line "$W/out" "^restore fail errno=95 msg=pid $c leads a session whose controlling terminal was the job's \\($pts.*orphan_pts_master" \
		"RESTORE without orphan_pts_master" || { attach "$W/work/restore.log"; return 1; }
	amber_to "$W/restore.log" 60 restore -j -D "$W/img" </dev/null &&
		{ fail "amber restore -j of the session on $pts succeeded"; return 1; }
	grep -q "pid $c leads a session whose controlling terminal was the job's ($pts.*orphan_pts_master" "$W/restore.log" ||
		{ fail "amber restore -j: the refusal does not name $pts and orphan_pts_master"; attach "$W/restore.log"; return 1; }
	runs_on "the refused restores"
}
