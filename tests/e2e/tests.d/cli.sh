# The command line (src/opts.c, src/action.c, src/main.c): help generated from the option
# table, CRIU's options with CRIU's meanings, configuration files, action scripts,
# -s/--leave-stopped, and an error of its own for each kind of mistake.
TESTS+=(cli_help cli_errors cli_criu_command_lines cli_log_file_links cli_config_files)
TESTS+=(cli_action_scripts cli_action_scripts_netlock cli_action_script_fails cli_crash_logged cli_leave_stopped
	cli_man_page)

# Every option the table gives a command is in its help, both ways of asking for it.
t_cli_help() {
	[ $SELFTEST = 1 ] && return 77
	local cmd opt n=0
	"$AMBER" help --options >"$W/options" || { fail "amber help --options failed"; return 1; }
	[ "$(lines "$W/options")" -ge 15 ] || { fail "the table lists fewer than 15 options"; return 1; }
	for cmd in dump restore check show; do
		"$AMBER" help "$cmd" >"$W/help.$cmd" 2>&1 || { fail "amber help $cmd exited with $?"; return 1; }
		"$AMBER" "$cmd" --help >"$W/help2.$cmd" 2>&1 || { fail "amber $cmd --help exited with $?"; return 1; }
		cmp -s "$W/help.$cmd" "$W/help2.$cmd" || { fail "amber help $cmd and amber $cmd --help differ"; return 1; }
		for opt in $(awk -v c="$cmd" '{for (i = 2; i <= NF; i++) if ($i == c) print $1}' "$W/options"); do
			grep -q -- "$opt\b" "$W/help.$cmd" || { fail "amber help $cmd does not list $opt"; attach "$W/help.$cmd"; return 1; }
			n=$((n + 1))
		done
	done
	"$AMBER" --help >"$W/help" || { fail "amber --help exited with $?"; return 1; }
	for opt in --tcp-established --network-lock --json --stats --action-script; do
		grep -q -- "$opt" "$W/help" || { fail "amber --help omits $opt"; return 1; }
	done
	[ "$("$AMBER" --version)" = "$("$AMBER" -V)" ] && "$AMBER" --version | grep -qE '^amber [0-9]+\.[0-9]+' ||
		{ fail "amber --version / -V"; return 1; }
	note "$n option entries found in the commands' help"
}

# MESSAGE-REGEX EXIT ARGS...: amber ARGS fails with that status and that message.
cli_refused() {
	local want=$1 rc=$2 got
	shift 2
	"$AMBER" "$@" >"$W/err" 2>&1
	got=$?
	[ "$got" = "$rc" ] || { fail "amber $* exited with $got, not $rc"; attach "$W/err"; return 1; }
	grep -qE -- "$want" "$W/err" || { fail "amber $*: no message matching '$want'"; attach "$W/err"; return 1; }
}
t_cli_errors() {
	[ $SELFTEST = 1 ] && return 77
	cli_refused "-t takes a process id \(a positive number\), not 'abc'" 2 dump -t abc -D "$W/x" || return 1
	cli_refused "-t takes a process id" 2 dump -t 12x -D "$W/x" || return 1
	cli_refused "dump needs -D DIR" 2 dump -t 1234 || return 1
	cli_refused "dump needs -t PID" 2 dump -D "$W/x" || return 1
	cli_refused "image directory $W/missing: No such file" 2 restore -D "$W/missing" || return 1
	cli_refused "-R \(--leave-running\) and -s \(--leave-stopped\) contradict" 2 dump -t 1234 -D "$W/x" -R -s || return 1
	cli_refused "unknown option --tcp-establishment\b" 2 dump -t 1234 -D "$W/x" --tcp-establishment || return 1
	cli_refused "option -D needs a value" 2 restore -D || return 1
	cli_refused "--lazy-pages is CRIU's option; amber does not implement it" 2 restore -D "$W" --lazy-pages || return 1
	cli_refused "--network-lock takes nft or nftables \(the default\), iptables or skip, not 'iptable'" 2 dump -t 1234 -D "$W/x" --network-lock iptable || return 1
	cli_refused "-v takes a level from 0 to 4" 2 dump -t 1234 -D "$W/x" -v9 || return 1
	[ ! -e "$W/x" ] || { fail "a refused command line created $W/x"; return 1; }
}

# A CRIU user's command lines, unchanged: long names, -W and -o in the work dir, -v4,
# --display-stats, --restore-detached with --pidfile; the log file gets the messages.
cli_criu_dump() {
	mkdir -p "$W/work"
	"$AMBER" dump --tree "$PID" --images-dir "$W/img" -W "$W/work" -o dump.log -v4 --display-stats \
		>"$W/dump.out" 2>&1 || { fail "CRIU-style dump failed"; attach "$W/dump.out"; attach "$W/work/dump.log"; return 1; }
	grep -q 'amber: debug: \|amber: info: dumping task' "$W/work/dump.log" || { fail "-v4 -o dump.log: no info/debug lines in the work dir's dump.log"; return 1; }
	! grep -q 'amber: info' "$W/dump.out" || { fail "with -o, log lines still went to stderr"; return 1; }
	grep -q '^dump statistics:' "$W/dump.out" || { fail "--display-stats printed nothing"; attach "$W/dump.out"; return 1; }
}
t_cli_criu_command_lines() {
	[ $SELFTEST = 1 ] && return 77
	local exe
	start_prog "$PROGS/counter" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	cli_criu_dump || return 1
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	"$AMBER" restore --images-dir "$W/img" -W "$W/work" -o restore.log -v3 --restore-detached --pidfile "$W/pidfile" \
		>"$W/restore.out" 2>&1 || { fail "CRIU-style restore failed"; attach "$W/restore.out"; attach "$W/work/restore.log"; return 1; }
	echo "$PID" >>"$W/pids"
	wait_for 10 is_restored "$PID" "$exe" || { fail "pid $PID not restored"; return 1; }
	[ "$(cat "$W/pidfile")" = "$PID" ] || { fail "--pidfile holds '$(cat "$W/pidfile")', not $PID"; return 1; }
	grep -q "process(es) restored from" "$W/work/restore.log" || { fail "-v3 -o restore.log: no info lines"; attach "$W/work/restore.log"; return 1; }
	touch "$T/go"
	wait_for 30 test -e "$T/result" || { fail "the restored counter wrote no verdict"; return 1; }
	[ "$(cat "$T/result")" = 0 ] || { fail "the restored counter's checks failed"; return 1; }
}

# The work directory may be someone else's: the log is never written through a link, nor
# into a file that is not amber's; what the links point at stays as it was.
t_cli_log_file_links() {
	[ $SELFTEST = 1 ] && return 77
	mkdir -p "$W/work"
	echo precious >"$W/target"
	ln -s "$W/target" "$W/work/sym.log"
	ln "$W/target" "$W/work/hard.log"
	cli_refused "cannot open the log file .*sym.log.*symbolic link" 1 restore -D "$W/work" -W "$W/work" -o sym.log || return 1
	cli_refused "the log file hard.log is not amber's to write" 1 restore -D "$W/work" -W "$W/work" -o hard.log || return 1
	mkdir -p "$W/real"
	ln -s "$W/real" "$W/work/dirlink"
	cli_refused "cannot open the log file .*symbolic link" 1 restore -D "$W/work" -W "$W/work" -o dirlink/x.log || return 1
	[ ! -e "$W/real/x.log" ] || { fail "the log went through a linked directory"; return 1; }
	[ "$(cat "$W/target")" = precious ] || { fail "the link's target was written"; return 1; }
}

# Options from --config FILE and ~/.amber/default.conf (CRIU's format), the command line
# last; --no-default-config skips the default files.
t_cli_config_files() {
	[ $SELFTEST = 1 ] && return 77
	local exe
	mkdir -p "$W/home/.amber" "$W/work"
	printf '# CRIU-style\ndisplay-stats\n' >"$W/home/.amber/default.conf"
	printf 'leave-running\n\nlog-file cfg.log\nwork-dir %s\n' "$W/work" >"$W/amber.conf"
	start_prog "$PROGS/counter" "$T" || return
	HOME=$W/home "$AMBER" dump -t "$PID" -D "$W/img" --config "$W/amber.conf" -v >"$W/dump.out" 2>&1 ||
		{ fail "dump with --config failed"; attach "$W/dump.out"; return 1; }
	kill -0 "$PID" 2>/dev/null && [ "$(proc_state "$PID")" != Z ] || { fail "leave-running from the config file: the process is gone"; return 1; }
	grep -q '^dump statistics:' "$W/dump.out" || { fail "display-stats from ~/.amber/default.conf: no statistics"; attach "$W/dump.out"; return 1; }
	grep -q 'image of 1 process' "$W/work/cfg.log" || { fail "log-file and work-dir from the config file: no log in $W/work/cfg.log"; return 1; }
	HOME=$W/home "$AMBER" dump -t "$PID" -D "$W/img2" --no-default-config -R >"$W/dump2.out" 2>&1 ||
		{ fail "dump with --no-default-config failed"; attach "$W/dump2.out"; return 1; }
	! grep -q 'statistics' "$W/dump2.out" || { fail "--no-default-config still read ~/.amber/default.conf"; return 1; }
	printf 'no-such-option\n' >"$W/bad.conf"
	cli_refused "unknown option --no-such-option" 2 dump -t "$PID" -D "$W/img3" --config "$W/bad.conf" || return 1
	cli_refused "cannot read the configuration file $W/none.conf" 2 dump -t "$PID" -D "$W/img3" --config "$W/none.conf" || return 1
}

# The script sees CRIU's actions in CRIU's order, with the image dir and the root's pid.
cli_write_script() { # FILE [FAIL-AT]
	cat >"$1" <<EOF
#!/bin/sh
echo "\$CRTOOLS_SCRIPT_ACTION \${CRTOOLS_INIT_PID:-none} \$CRTOOLS_IMAGE_DIR" >>"$W/actions"
[ "\$CRTOOLS_SCRIPT_ACTION" != "${2:-none}" ]
EOF
	chmod +x "$1"
}
t_cli_action_scripts() {
	[ $SELFTEST = 1 ] && return 77
	local exe want
	cli_write_script "$W/script"
	start_prog "$PROGS/counter" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" --action-script "$W/script" || { fail "dump with a script failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	amber_to "$W/restore.log" 60 restore -d -D "$W/img" --action-script "$W/script" || { fail "restore with a script failed"; attach "$W/restore.log"; return 1; }
	echo "$PID" >>"$W/pids"
	wait_for 10 is_restored "$PID" "$exe" || { fail "pid $PID not restored"; return 1; }
	want="pre-dump $PID $W/img
post-dump $PID $W/img
pre-restore none $W/img
post-restore $PID $W/img
pre-resume $PID $W/img
post-resume $PID $W/img"
	[ "$(cat "$W/actions")" = "$want" ] || { fail "the script saw: $(tr '\n' ';' <"$W/actions") wanted: $(tr '\n' ';' <<<"$want")"; return 1; }
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] || { fail "the restored counter failed"; return 1; }
}

# With TCP connections (--tcp-established) the script also sees network-lock at
# dump (before the sockets are dumped) and network-unlock at restore (once the
# processes are built, before they resume), in CRIU's places.
cli_netlock_dumped() {
	local want="pre-dump $PID $W/img
network-lock $PID $W/img
post-dump $PID $W/img"
	[ "$(cat "$W/actions")" = "$want" ] || { fail "at dump the script saw: $(tr '\n' ';' <"$W/actions") wanted: $(tr '\n' ';' <<<"$want")"; return 1; }
	: >"$W/actions"
}
t_cli_action_scripts_netlock() {
	[ $SELFTEST = 1 ] && return 77
	local want
	cli_write_script "$W/script"
	cycle -d "--tcp-established --action-script $W/script" \
		-r "--tcp-established --action-script $W/script" -B cli_netlock_dumped -- \
		"$PROGS/netlock" "$T" || return 1
	want="pre-restore none $W/img
post-restore $PID $W/img
network-unlock $PID $W/img
pre-resume $PID $W/img
post-resume $PID $W/img"
	[ "$(cat "$W/actions")" = "$want" ] || { fail "at restore the script saw: $(tr '\n' ';' <"$W/actions") wanted: $(tr '\n' ';' <<<"$want")"; return 1; }
}

# A failing pre-dump script: nothing frozen, nothing written; a failing pre-resume
# script: nothing left running, and the image still restores afterwards.
# amber dies of a fault: the log says so (a runtime reads the log, not amber's
# stderr), and the default action follows.  The fault is a SIGSEGV the
# post-dump script sends it; the process, let go as amber dies, runs on.
t_cli_crash_logged() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/counter" "$T" || return
	printf '#!/bin/sh\n[ "$CRTOOLS_SCRIPT_ACTION" != post-dump ] || kill -SEGV $PPID\n' >"$W/segv"
	chmod +x "$W/segv"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -o "$W/amber.log" --action-script "$W/segv"
	rc=$?
	[ $rc = 139 ] || { fail "amber ended with $rc, not by its SIGSEGV (139)"; attach "$W/dump.log"; return 1; }
	grep -q "^amber: error: pid [0-9]* killed by SIGSEGV (sent by pid [0-9]*): a bug in amber$" "$W/amber.log" ||
		{ fail "the log does not say amber was killed by SIGSEGV"; attach "$W/amber.log"; return 1; }
	[ "$(status_field "$PID" TracerPid)" = 0 ] || { fail "the process is still traced"; return 1; }
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] || { fail "the counter failed"; return 1; }
}

t_cli_action_script_fails() {
	[ $SELFTEST = 1 ] && return 77
	local exe
	start_prog "$PROGS/counter" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	cli_write_script "$W/fail-pre-dump" pre-dump
	cli_refused "action script $W/fail-pre-dump failed at pre-dump \(exit status 1\)" 1 dump -t "$PID" -D "$W/img" --action-script "$W/fail-pre-dump" || return 1
	[ ! -e "$W/img" ] || { fail "a dump stopped at pre-dump left $W/img"; return 1; }
	[ "$(proc_state "$PID")" != T ] && [ "$(status_field "$PID" TracerPid)" = 0 ] || { fail "the process was touched"; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" || { fail "dump failed"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	cli_write_script "$W/fail-pre-resume" pre-resume
	cli_refused "action script $W/fail-pre-resume failed at pre-resume" 1 restore -d -D "$W/img" --action-script "$W/fail-pre-resume" || return 1
	wait_for 10 is_gone "$PID" || { fail "a restore stopped at pre-resume left pid $PID"; return 1; }
	amber_to "$W/restore.log" 60 restore -d -D "$W/img" || { fail "the image does not restore after the failed try"; attach "$W/restore.log"; return 1; }
	echo "$PID" >>"$W/pids"
	wait_for 10 is_restored "$PID" "$exe" || { fail "pid $PID not restored"; return 1; }
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] || { fail "the restored counter failed"; return 1; }
}

# -s: stopped after the dump (image complete, process kept), and after the restore.
t_cli_leave_stopped() {
	[ $SELFTEST = 1 ] && return 77
	local exe
	start_prog "$PROGS/counter" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -s || { fail "dump -s failed"; attach "$W/dump.log"; return 1; }
	wait_for 5 eval '[ "$(proc_state "$PID")" = T ]' || { fail "after dump -s the process is in state $(proc_state "$PID"), not T"; return 1; }
	[ "$(status_field "$PID" TracerPid)" = 0 ] || { fail "after dump -s the process is still traced"; return 1; }
	[ -f "$W/img/inventory.img" ] || { fail "dump -s wrote no complete image"; return 1; }
	kill -KILL "$PID"
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there"; return 1; }
	amber_to "$W/restore.log" 60 restore -d -s -D "$W/img" || { fail "restore -s failed"; attach "$W/restore.log"; return 1; }
	echo "$PID" >>"$W/pids"
	# stopped, so not "free running": the exe and no tracer
	wait_for 10 eval '[ "$(readlink "/proc/$PID/exe")" = "$exe" ] && [ "$(status_field "$PID" TracerPid)" = 0 ]' ||
		{ fail "pid $PID not restored"; return 1; }
	wait_for 5 eval '[ "$(proc_state "$PID")" = T ]' || { fail "after restore -s the process is in state $(proc_state "$PID"), not T"; return 1; }
	kill -CONT "$PID"
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] || { fail "the restored counter failed after SIGCONT"; return 1; }
}

# amber(8) names every option of the table, and make install puts it and amber in place.
t_cli_man_page() {
	[ $SELFTEST = 1 ] && return 77
	local opt missing=""
	for opt in $("$AMBER" help --options | awk '{print $1}'); do
		grep -qF -- "*$opt*" "$ROOT/doc/amber.8.scd" || missing="$missing $opt"
	done
	[ -z "$missing" ] || { fail "doc/amber.8.scd does not describe:$missing"; return 1; }
	make -s -C "$ROOT" install DESTDIR="$W/root" PREFIX=/usr >"$W/install.log" 2>&1 ||
		{ fail "make install failed"; attach "$W/install.log"; return 1; }
	[ -x "$W/root/usr/sbin/amber" ] || { fail "make install put no amber in sbin"; return 1; }
	grep -q -- 'leave\\-stopped\|leave-stopped' "$W/root/usr/share/man/man8/amber.8" ||
		{ fail "make install put no (or an empty) amber.8"; return 1; }
}
