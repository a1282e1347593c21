# Terminals (src/tty.c).

# A raw-mode job (progs/ttyraw.c) in a tmux pane, as a new user would run it: dumped
# with -j, the pane's terminal put back to cooked mode and its own size (as bash does
# when the job dies), restored with -j in the pane.  A single key without Enter must
# reach the program (only raw mode delivers it alone), and the program checks its
# whole termios2 and window size itself.
TESTS+=(shell_job_termios)
t_shell_job_termios() {
	[ $SELFTEST = 1 ] && return 77
	command -v tmux >/dev/null || return 77
	local rc=0 exe pane
	mkdir -p "$T"
	chmod 0777 "$T"
	tm_shell || return 1
	tm send-keys -t e2e "cd $T && $PROGS/ttyraw $T" Enter
	if ! wait_for 10 test -e "$T/ready"; then
		fail "the job did not start in the pane"
		tm capture-pane -p -t e2e | sed 's/^/    /' >>"$W/log"
		tm kill-server
		return 1
	fi
	PID=$(cat "$T/ready")
	echo "$PID" >>"$W/pids"
	exe=$(readlink "/proc/$PID/exe")
	pane=$(readlink "/proc/$PID/fd/0")
	note "job pid $PID on $pane: $(stty -F "$pane" -a | head -n 2 | tr '\n' ' ')"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -j -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump -j exited with $rc"; attach "$W/dump.log"; tm kill-server; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; tm kill-server; return 1; }
	sleep 0.3
	tm send-keys -t e2e "stty sane rows 50 cols 160; stty -a >$W/stty.before; echo RESTORE-MARK; $AMBER restore -D $W/img -j 2>>$W/restore.log; echo RESTORE-RC=\$?" Enter
	if ! wait_for 20 is_restored "$PID" "$exe"; then
		fail "pid $PID not restored in the pane"
		rc=1
	else
		grep -q icanon "$W/stty.before" && ! grep -q -- -icanon "$W/stty.before" ||
			{ fail "the pane was not in cooked mode before the restore: $(head -n 4 "$W/stty.before")"; rc=1; }
		note "after the restore: $(stty -F "$pane" -a | head -n 2 | tr '\n' ' ')"
		tm send-keys -t e2e x
		wait_for 5 grep -q '^key x$' "$T/keys" ||
			{ fail "a single x typed without Enter did not reach the restored program (keys: $(cat "$T/keys"))"; rc=1; }
	fi
	touch "$T/go"
	if ! wait_for 15 eval 'tm capture-pane -p -t e2e -S -2000 | grep -q "^RESTORE-RC=[0-9]"'; then
		fail "amber restore -j did not finish after go"
		rc=1
	elif ! tm capture-pane -p -t e2e -S -2000 | grep -q "^RESTORE-RC=0"; then
		fail "amber restore -j: $(tm capture-pane -p -t e2e -S -2000 | grep "^RESTORE-RC")"
		rc=1
	fi
	[ "$(cat "$T/result" 2>/dev/null)" = 0 ] || { fail "the program's own checks: $(cat "$T/result" 2>/dev/null || echo none)"; rc=1; }
	if [ $rc != 0 ]; then
		tm capture-pane -p -t e2e -S -2000 | grep -v '^$' | tail -n 30 | sed 's/^/    /' >>"$W/log"
		attach_all
	fi
	tm kill-server 2>/dev/null
	return $rc
}
