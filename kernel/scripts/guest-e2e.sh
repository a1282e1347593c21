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
start() { # start LABEL NAME [ARGS...]: the program in its session, its work dir T, pid
	label=$1; name=$2; shift 2
	T=/tmp/e2e/$label; rm -rf "$T"; mkdir -p "$T"; chmod 777 "$T"; : > "$T/stdin"
	why=""
	# shellcheck disable=SC2086
	(cd "$T" && exec < "$T/stdin" >> "$T/out" 2>> "$T/err" &&
		exec env AMBER_T="$T" $PENV setsid "$P/$name" "$T" "$@") &
	pid=$!
}
verdict() { # verdict WHAT: PASS, or FAIL with why and the logs
	if [ -z "$why" ]; then
		echo "KQ-RESULT amber.e2e.$label PASS $1, $(grep -c '^ok:' "$T/out") checks ok after it"
	else
		rc=1
		echo "KQ-RESULT amber.e2e.$label FAIL $why"
		for f in dump.log restore.log err; do
			[ -s "$T/$f" ] && tail -8 "$T/$f" | sed "s|^|KQ-INFO   $label/$f: |"
		done
		kill -9 "$pid" 2>/dev/null
	fi
}
# A dump that must be refused saying PATTERN; the program then runs on, its checks pass.
one_refused() { # one_refused LABEL PATTERN NAME [ARGS...]
	label=$1; pat=$2; shift 2
	start "$label" "$@"
	if ! waitfor 15 test -e "$T/ready"; then why="not ready after 15 s"
	elif timeout 60 "$A" dump -t "$pid" -D "$T/img" -v > "$T/dump.log" 2>&1; then why="amber dump succeeded"
	elif ! grep -q "$pat" "$T/dump.log"; then why="the refusal does not say '$pat'"
	else
		touch "$T/go"
		wait "$pid"; r=$?
		[ $r = 0 ] || why="the program did not run on after the refused dump (exit $r)"
	fi
	verdict "dump of pid $pid refused ($pat)"
}
one() { # one [-l LABEL] NAME [ARGS...]
	label=$1
	[ "$1" = -l ] && { label=$2; shift 2; }
	start "$label" "$@"
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
	verdict "dump + restore of pid $pid"
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
# An io_uring's registered files (a regular file at an offset, a pipe's two
# ends, a socket) and its setup flags (SUBMIT_ALL, COOP_TASKRUN, TASKRUN_FLAG):
# what kcmp()'s KCMP_IOURING_FILE and fdinfo's SetupFlags (patches 0007-0008)
# tell amber.  Debian's kernel has neither: there the dump must be refused,
# naming what is missing, and the program run on.
if [ -x "$P/uring" ] && echo " ${KQ_E2E_PROGS:-uring} " | grep -q ' uring '; then
	PENV=""
	if [ "$KQ_NAME" = debian ]; then
		one_refused uring-regfiles "KCMP_IOURING_FILE" uring regfiles
	else
		one -l uring-regfiles uring regfiles
	fi
fi
exit $rc
