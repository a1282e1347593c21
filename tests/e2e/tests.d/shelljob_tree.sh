# A shell job that is a tree, in a tmux pane as a new user would run it: the job's
# root (a counter that an sh exec'd into) has a child counter; both write ticks to
# the terminal.  Dumped with -j, restored with -j in the same pane: both come back
# with their pids, keep writing to the pane, and pass their own checks.
TESTS+=(shell_job_tree)
t_shell_job_tree() {
	[ $SELFTEST = 1 ] && return 77
	command -v tmux >/dev/null || return 77
	local rc=0 kid
	mkdir -p "$T/a"
	chmod 0777 "$T" "$T/a"
	tm_shell || return 1
	tm send-keys -t e2e "cd $T && sh -c '$PROGS/counter $T/a tty & exec $PROGS/counter $T tty'" Enter
	if ! wait_for 10 eval 'test -e "$T/ready" && test -e "$T/a/ready"'; then
		fail "the job did not start in the pane"
		tm kill-server
		return 1
	fi
	PID=$(cat "$T/ready")
	kid=$(cat "$T/a/ready")
	echo "$PID $kid" >>"$W/pids"
	note "job root $PID, child $kid, on $(readlink "/proc/$PID/fd/1")"
	sleep 0.5
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -j -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump -j exited with $rc"; attach "$W/dump.log"; tm kill-server; return 1; }
	wait_for 10 eval 'is_gone $PID && is_gone $kid' || { fail "job still there after the dump"; tm kill-server; return 1; }
	sleep 0.3
	tm send-keys -t e2e "echo RESTORE-MARK; $AMBER restore -D $W/img -j 2>>$W/restore.log; echo RESTORE-RC=\$?" Enter
	if ! wait_for 20 eval 'is_alive $PID && is_alive $kid'; then
		fail "job ($PID, child $kid) not restored in the pane"
		rc=1
	elif [ "$(awk '{print $4}' /proc/$kid/stat)" != "$PID" ]; then
		fail "child $kid has parent $(awk '{print $4}' /proc/$kid/stat), not $PID"
		rc=1
	elif ! wait_for 10 eval '[ "$(ticks_after_mark | wc -l)" -ge 6 ]'; then
		fail "the restored job does not keep writing to the pane"
		rc=1
	fi
	touch "$T/a/go" "$T/go"
	if ! wait_for 15 eval 'tm capture-pane -p -t e2e -S -2000 | grep -q "^RESTORE-RC=[0-9]"'; then
		fail "amber restore -j did not finish after go"
		rc=1
	elif ! tm capture-pane -p -t e2e -S -2000 | grep -q "^RESTORE-RC=0"; then
		fail "amber restore -j: $(tm capture-pane -p -t e2e -S -2000 | grep "^RESTORE-RC")"
		rc=1
	fi
	wait_for 10 test -e "$T/a/result" && [ "$(cat "$T/a/result")" = 0 ] ||
		{ fail "the child's own checks: $(cat "$T/a/result" 2>/dev/null || echo none)"; rc=1; }
	if [ $rc != 0 ]; then
		tm capture-pane -p -t e2e -S -2000 | grep -v '^$' | tail -n 30 | sed 's/^/    /' >>"$W/log"
		attach_all
	fi
	tm kill-server 2>/dev/null
	return $rc
}
