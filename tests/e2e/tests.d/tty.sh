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

# A pseudo-terminal with both ends in the tree (progs/ptypair.c), without -j: the
# program checks the pair's termios, window size, packet mode, lock, exclusive mode,
# O_NONBLOCK and data both ways itself; /proc must show the same fds (the slave's
# /dev/pts/N among them).
pty_slave_link() { readlink "/proc/$PID/fd/$(cut -d' ' -f3 "$T/pts")"; }
pty_before() {
	pty_slave_link >"$W/pts.before"
	[ "$(cat "$W/pts.before")" = "$(cut -d' ' -f1 "$T/pts")" ] ||
		{ fail "the slave fd is $(cat "$W/pts.before"), the program says $(cat "$T/pts")"; return 1; }
}
pty_after() {
	local now
	now=$(pty_slave_link)
	[ "$now" = "$(cat "$W/pts.before")" ] || { fail "the slave fd is $now after the restore, was $(cat "$W/pts.before")"; return 1; }
	note "slave fd on $now before and after"
}
TESTS+=(tty_pty)
t_tty_pty() { cycle -f fds -P pty_before -A pty_after -- "$PROGS/ptypair" "$T"; }

# The same in a mount namespace of the tree with a devpts of its own (newinstance, as a
# container has): the pair comes back in that devpts, not the host's
TESTS+=(tty_pty_devpts)
pty_dev() { stat -L -c %d "/proc/$PID/root/dev/pts/$(basename "$(cat "$W/pts.before")")"; }
pty_devpts_before() {
	pty_before || return 1
	pty_dev >"$W/dev.before"
	[ "$(cat "$W/dev.before")" != "$(stat -c %d /dev/pts)" ] ||
		{ fail "the program's pty is in the host's devpts"; return 1; }
}
pty_devpts_after() {
	pty_after || return 1
	[ "$(pty_dev)" != "$(stat -c %d /dev/pts)" ] ||
		{ fail "the restored pty is in the host's devpts"; return 1; }
	nsenter -t "$PID" -m ls /dev/pts | grep -qx "$(basename "$(cat "$W/pts.before")")" ||
		{ fail "the tree's devpts does not list $(cat "$W/pts.before")"; return 1; }
}
t_tty_pty_devpts() {
	command -v unshare >/dev/null || return 77
	cycle -f fds -P pty_devpts_before -A pty_devpts_after -- unshare --mount --propagation private sh -c \
		'mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts && mount --bind /dev/pts/ptmx /dev/ptmx && exec "$0" "$@"' \
		"$PROGS/ptypair" "$T"
}

# The pts number is kept though a lower one is free (the program's spare pty, closed):
# restore must go past it.
TESTS+=(tty_pty_number_kept)
pty_gap_before() {
	pty_before || return
	[ "$(cut -d' ' -f1 "$T/pts")" != /dev/pts/0 ] || { fail "the pair got /dev/pts/0: no lower number left free"; return 1; }
}
t_tty_pty_number_kept() { cycle -f fds -P pty_gap_before -A pty_after -- "$PROGS/ptypair" "$T" gap; }

# The image's pts number held by another process at restore: refused naming it, nothing
# left running, the holder untouched; once it is gone the same image restores.
TESTS+=(tty_pty_number_taken)
t_tty_pty_number_taken() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/ptypair" "$T"; return; }
	local pts exe holder rc
	start_prog "$PROGS/ptypair" "$T" || return
	pts=$(cut -d' ' -f1 "$T/pts")
	exe=$(readlink "/proc/$PID/exe")
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	# takes ptys until it has $pts, keeps only that one
	"$PY" -c '
import os, sys, time
want, keep = sys.argv[1], []
while True:
    m, s = os.openpty()
    if os.ttyname(s) == want:
        break
    keep.append((m, s))
for m2, s2 in keep:
    os.close(m2); os.close(s2)
open(sys.argv[2], "w").write("held\n")
time.sleep(120)
' "$pts" "$W/held" "$W" &
	holder=$!
	echo "$holder" >>"$W/pids"
	wait_for 10 test -e "$W/held" || { fail "the holder did not get $pts"; return 1; }
	amber_to "$W/restore.log" 60 restore -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "restore succeeded while $pts was held by pid $holder"; return 1; }
	grep -q "$pts.*taken" "$W/restore.log" || { fail "the refusal does not name $pts as taken"; attach "$W/restore.log"; return 1; }
	is_gone "$PID" || { fail "pid $PID exists after the refused restore"; return 1; }
	is_alive "$holder" || { fail "the holder of $pts died"; return 1; }
	kill "$holder"
	wait "$holder" 2>/dev/null
	(exec timeout -k 5 120 "$AMBER" restore -D "$W/img" >>"$W/restore.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	wait_for 20 is_restored "$PID" "$exe" || { fail "pid $PID not restored once $pts was free"; attach_all; return 1; }
	touch "$T/go"
	wait "$RPID"
	rc=$?
	[ $rc = 0 ] || { fail "restore once $pts was free: exit $rc"; attach_all; return 1; }
}

# Bytes queued in the pty: the dump is refused naming the fd and the pts, and the
# program runs on unharmed (its queued bytes still there).
TESTS+=(tty_pty_queued)
t_tty_pty_queued() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/ptypair" "$T" queued; return; }
	local pts sfd
	start_prog "$PROGS/ptypair" "$T" queued || return
	pts=$(cut -d' ' -f1 "$T/pts")
	sfd=$(cut -d' ' -f3 "$T/pts")
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded with bytes queued in $pts"; return 1; }
	grep -q "fd $sfd is the slave of $pts.*queued" "$W/dump.log" ||
		{ fail "the refusal does not name fd $sfd and $pts"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}

# A slave whose master is outside the dumped tree (the child of ptypair outside holds
# it, its parent the master): refused naming the fd, the pts and -j; both run on.
TESTS+=(tty_slave_outside)
t_tty_slave_outside() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/ptypair" "$T" outside; return; }
	local pts sfd kid
	start_prog "$PROGS/ptypair" "$T" outside || return
	pts=$(cut -d' ' -f1 "$T/pts")
	sfd=$(cut -d' ' -f3 "$T/pts")
	kid=$(cat "$T/child")
	amber_to "$W/dump.log" 60 dump -t "$kid" -D "$W/img" -v &&
		{ fail "amber dump of pid $kid succeeded though the master of $pts is outside"; return 1; }
	grep -q "pid $kid: fd $sfd is $pts, a pseudo-terminal whose master is outside the dumped tree.*--shell-job (-j)" "$W/dump.log" ||
		{ fail "the refusal does not name fd $sfd, $pts and -j"; attach "$W/dump.log"; return 1; }
	wait_for 5 is_free_running "$kid" || { fail "pid $kid is not running freely after the refused dump"; return 1; }
	runs_on "the refused dump"
}

# A crafted files.img (build/tools/imgedit, valid checksums) about a pty is refused
# before anything is made: no process, no /dev/pts/N.  refused() is security-owner.sh's.
TESTS+=(tty_pty_image_refused)
pty_rec() { # KIND: files.img record index of the first file of that kind
	"$AMBER" show "$W/img" | "$PY" -c '
import json, sys
for f in json.load(sys.stdin)["files"]:
    if f["kind"] == sys.argv[1]:
        print(f["id"]); break' "$1"
}
pty_index() { echo "${pts#/dev/pts/}"; }
pty_refused() { # NAME PATTERN EDITS...
	refused "$@" || return
	[ ! -e "$pts" ] || { fail "$1: $pts exists after the refused restore"; return 1; }
}
t_tty_pty_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local m s pts rc=0
	start_prog "$PROGS/ptypair" "$T" || return
	pts=$(cut -d' ' -f1 "$T/pts")
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	m=$(pty_rec FILE_PTY_MASTER)
	s=$(pty_rec FILE_PTY_SLAVE)
	[ -n "$m" ] && [ -n "$s" ] || { fail "no pty master ($m) or slave ($s) in files.img"; return 1; }
	[ ! -e "$pts" ] || { fail "$pts is in use by someone else: cannot see whether a restore makes it"; return 1; }
	pty_refused orphan_slave "no master of the image has that number" files.img "$s.tty.index=77" || rc=1
	pty_refused beyond_max "beyond the" files.img "$m.tty.index=1000000" "$s.tty.index=1000000" || rc=1
	pty_refused two_masters "a second master" files.img "$s.kind=FILE_PTY_MASTER" "$s.path=/dev/ptmx" || rc=1
	pty_refused master_path "or not /dev/ptmx" files.img "$m.path=/etc/shadow" || rc=1
	pty_refused short_cc "terminal state no terminal can have" files.img "$m.tty.termios.cc=0102" || rc=1
	pty_refused bad_line "terminal state no terminal can have" files.img "$m.tty.termios.line=200" || rc=1
	pty_refused big_winsize "terminal state no terminal can have" files.img "$m.tty.winsize.row=70000" || rc=1
	pty_refused ctty_no_master "a controlling terminal /dev/pts/77" "core-$PID.img" tty_index=77 || rc=1
	pty_refused ctty_fg_stray "no group" "core-$PID.img" "tty_index=$(pty_index)" tty_fg_pgrp=1 || rc=1
	pty_refused fg_without_ctty "the image is corrupt" "core-$PID.img" tty_fg_pgrp="$PID" || rc=1
	# the unedited image restores
	(exec timeout -k 5 120 "$AMBER" restore -D "$W/img" >>"$W/restore.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	wait_for 20 is_alive "$PID" || { fail "the unedited image did not restore"; attach_all; return 1; }
	touch "$T/go"
	wait "$RPID" || { fail "the unedited image: restore exit $?"; attach_all; return 1; }
	return $rc
}

# A session on a pty of the tree (progs/ptysession.c): the session leader S has the
# slave as its controlling terminal, its child J's group is the foreground.  After the
# restore /proc must show the same session, group, tty_nr and tpgid for both, and the
# programs check TIOCGSID, the foreground group and /dev/tty themselves.
ctty_facts() { # session, pgrp, tty_nr, tpgid of S and J
	local p
	for p in $(cut -d' ' -f1,2 "$T/info"); do
		echo "$p: $(sed 's/.*) //' "/proc/$p/stat" | cut -d' ' -f3-6)"
	done
}
ctty_before() {
	ctty_facts >"$W/ctty.before"
	note "S J: $(cat "$T/info"); $(tr '\n' ' ' <"$W/ctty.before")"
	[ "$(awk 'NR == 1 {print $4}' "$W/ctty.before")" != 0 ] || { fail "S has no controlling terminal"; return 1; }
}
ctty_after() {
	ctty_facts >"$W/ctty.after"
	diff -u "$W/ctty.before" "$W/ctty.after" >"$W/ctty.diff" && return 0
	fail "session, group, tty_nr or tpgid differ after the restore (- before, + after):"
	sed 's/^/    /' "$W/ctty.diff" >>"$W/log"
	return 1
}
TESTS+=(tty_pty_session tty_pty_session_closed)
t_tty_pty_session() { cycle -f fds -P ctty_before -A ctty_after -- "$PROGS/ptysession" "$T"; }
# the same, with no fd of S or J on the slave: only the master gives it back
t_tty_pty_session_closed() { cycle -P ctty_before -A ctty_after -- "$PROGS/ptysession" "$T" closed; }

# A controlling terminal outside the dumped tree, no fd on it (S of ptysession closed,
# dumped without its parent, which holds the master): refused naming -j; S runs on.
TESTS+=(tty_ctty_outside)
t_tty_ctty_outside() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/ptysession" "$T" closed; return; }
	local s pts
	start_prog "$PROGS/ptysession" "$T" closed || return
	s=$(cut -d' ' -f1 "$T/info")
	pts=$(cut -d' ' -f3 "$T/info")
	amber_to "$W/dump.log" 60 dump -t "$s" -D "$W/img" -v &&
		{ fail "amber dump of pid $s succeeded though its terminal's master is outside"; return 1; }
	grep -q "pid $s: its controlling terminal ($pts, .*) is outside the dumped tree.*--shell-job (-j)" "$W/dump.log" ||
		{ fail "the refusal does not name $pts and -j"; attach "$W/dump.log"; return 1; }
	wait_for 5 is_free_running "$s" || { fail "pid $s is not running freely after the refused dump"; return 1; }
	runs_on "the refused dump"
}

# /dev/tty held by the foreground job J of ptysession devtty (O_NONBLOCK): opened again
# in J once its session has the terminal back; /proc shows the same fds (/dev/tty among
# them) and J writes through it to the master.
TESTS+=(tty_devtty)
devtty_before() {
	ctty_before || return
	[ "$(readlink "/proc/$(cut -d' ' -f2 "$T/info")/fd/$(cat "$T/devtty")")" = /dev/tty ] ||
		{ fail "J's fd $(cat "$T/devtty") is not /dev/tty"; return 1; }
	facts "$(cut -d' ' -f2 "$T/info")" fds >"$W/j.before"
}
devtty_after() {
	ctty_after || return
	facts "$(cut -d' ' -f2 "$T/info")" fds >"$W/j.after"
	diff -u "$W/j.before" "$W/j.after" >"$W/j.diff" ||
		{ fail "J's fds differ (- before, + after):"; sed 's/^/    /' "$W/j.diff" >>"$W/log"; return 1; }
}
t_tty_devtty() { cycle -P devtty_before -A devtty_after -- "$PROGS/ptysession" "$T" devtty; }

# /dev/console is refused at dump, naming the fd, also with -j; the program runs on.
TESTS+=(tty_console_refused)
t_tty_console_refused() {
	[ $SELFTEST = 1 ] && return 77
	[ -c /dev/console ] || return 77
	start_prog bash -c "exec 3</dev/console && exec $PROGS/counter $T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -j -v &&
		{ fail "amber dump succeeded with /dev/console open"; return 1; }
	grep -q "pid $PID: fd 3 is /dev/console, the system console" "$W/dump.log" ||
		{ fail "the refusal does not name fd 3 and /dev/console"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}
