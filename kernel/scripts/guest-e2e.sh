#!/bin/sh
# Runs inside the guest (copied to /amber/e2e.sh): a representative part of
# amber's e2e suite (tests/e2e/run.sh needs bash, python and tmux, which the
# busybox guest does not have).  For each program of build/progs: start it in
# its own session with a work dir T, wait for T/ready, amber dump, wait until
# the pid is gone, amber restore (foreground, in the background of this
# script), wait until the pid is back and untraced, touch T/go, and require
# amber restore's exit status (= the program's own verdict) to be 0.
# Prints KQ-RESULT amber.e2e.<prog> PASS|FAIL.
A=/amber/amber
P=/amber/progs
rc=0
state() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }
tracer() { sed -n 's/^TracerPid:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null; }
waitfor() { # waitfor SECONDS CMD...
	n=$(($1 * 10)); shift
	while ! "$@"; do n=$((n - 1)); [ $n -le 0 ] && return 1; sleep 0.1; done
}
gone() { s=$(state "$1"); [ -z "$s" ] || [ "$s" = Z ]; }
back() { s=$(state "$1"); [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != t ] && [ "$s" != T ] && [ "$(tracer "$1")" = 0 ]; }
exited() { ! kill -0 "$1" 2>/dev/null; }
one() { # one NAME [ARGS...]
	name=$1; shift
	T=/tmp/e2e/$name; rm -rf "$T"; mkdir -p "$T"; chmod 777 "$T"; : > "$T/stdin"
	why=""
	# shellcheck disable=SC2086
	(cd "$T" && exec < "$T/stdin" >> "$T/out" 2>> "$T/err" &&
		exec env AMBER_T="$T" $PENV setsid "$P/$name" "$T" "$@") &
	pid=$!
	if ! waitfor 15 test -e "$T/ready"; then why="not ready after 15 s"
	elif ! timeout 60 "$A" dump -t "$pid" -D "$T/img" -v > "$T/dump.log" 2>&1; then why="amber dump failed"
	else
		wait "$pid" 2>/dev/null
		if ! waitfor 10 gone "$pid"; then why="pid $pid still there after the dump"
		else
			timeout 120 "$A" restore -D "$T/img" -v > "$T/restore.log" 2>&1 &
			rpid=$!
			if ! waitfor 30 back "$pid"; then why="pid $pid not restored"; kill "$rpid" 2>/dev/null
			else
				touch "$T/go"
				wait "$rpid"; r=$?
				[ $r = 0 ] || why="restored program reported failure (amber restore exit $r)"
			fi
		fi
	fi
	if [ -z "$why" ]; then
		echo "KQ-RESULT amber.e2e.$name PASS dump + restore of pid $pid, $(grep -c '^ok:' "$T/out") checks ok after restore"
	else
		rc=1
		echo "KQ-RESULT amber.e2e.$name FAIL $why"
		for f in dump.log restore.log err; do
			[ -s "$T/$f" ] && tail -8 "$T/$f" | sed "s|^|KQ-INFO   $name/$f: |"
		done
		kill -9 "$pid" 2>/dev/null
	fi
}
# On 6.12 POSIX timer ids come back through amber's filler path (no
# PR_TIMER_CREATE_RESTORE_IDS before 6.17).  KQ_E2E_PROGS=a,b,c (rig env) to choose.
list=$(echo "${KQ_E2E_PROGS:-counter-static,counter,mem,regs,signals,files,ident,cmdline,timers,threads,tree,clonevm,cow}" | tr , ' ')
for prog in $list; do
	[ -x "$P/$prog" ] || continue
	PENV=""
	if [ "$prog" = cmdline ]; then
		PENV="AMBER_E2E_MARK=cmdline-env-mark EMPTY="
		one cmdline "arg with  spaces" "" last
	else
		one "$prog"
	fi
done
exit $rc
