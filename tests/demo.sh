#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# amber demo (run it with `make demo`, which builds amber and the test programs first).
#
# Starts build/progs/counter, which writes "count N" to a log every ~100 ms, checkpoints it
# with `amber dump` (the process is gone), brings it back with `amber restore -d`, and shows
# the log continuing from where it stopped.  Needs root.

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
AMBER=$ROOT/build/amber
COUNTER=$ROOT/build/progs/counter
PID=

if [ -t 1 ]; then B=$'\e[1m' G=$'\e[32m' N=$'\e[0m'; else B='' G='' N=''; fi
say() { printf '\n%s==> %s%s\n' "$B" "$*" "$N"; }
run() { # show the command, then run it
	printf '%s$' "$G"
	printf ' %q' "$@"
	printf '%s\n' "$N"
	"$@"
}
die() {
	printf '\ndemo failed: %s\n' "$*" >&2
	exit 1
}
wait_for() { # SECONDS CMD...: poll every 0.1 s
	local n=$(($1 * 10))
	shift
	until "$@"; do
		n=$((n - 1))
		[ $n -gt 0 ] || return 1
		sleep 0.1
	done
}
running() { [ -e "/proc/$PID" ] && ! grep -q '^State:.*Z' "/proc/$PID/status" 2>/dev/null; }
gone() { [ ! -e "/proc/$PID" ]; }

for f in "$AMBER" "$COUNTER"; do
	[ -x "$f" ] || die "$f is missing: run 'make demo' (it builds first)"
done
[ "$(id -u)" = 0 ] || die "amber needs root"

DEMO=$(mktemp -d /tmp/amber-demo.XXXXXX)
WORK=$DEMO/work
IMG=$DEMO/image
LOG=$WORK/count.log
mkdir -p "$WORK"
: >"$WORK/stdin"
cleanup() {
	[ -n "$PID" ] && running && kill -9 "$PID" 2>/dev/null
	rm -rf "$DEMO"
}
trap cleanup EXIT

say "Starting a counter: it appends \"count N\" to $LOG every 100 ms"
(cd "$WORK" && exec setsid "$COUNTER" "$WORK" <"$WORK/stdin" >"$WORK/out" 2>&1) &
PID=$!
disown "$PID" # no "Killed" job notice from bash when amber dump kills it
wait_for 10 test -e "$WORK/ready" || die "the counter did not start"
sleep 1.5
echo "The counter runs as pid $PID:"
run ps -o pid,stat,etime,args -p "$PID"
echo "Its log so far ends with:"
run tail -n 3 "$LOG"

say "Checkpointing it with amber dump (the process is killed once its image is written)"
run "$AMBER" dump -t "$PID" -D "$IMG" || die "amber dump failed"
wait_for 10 gone || die "pid $PID is still there after the dump"
LAST=$(tail -n 1 "$LOG")
echo "The image:"
run ls -l "$IMG"
echo "The process is gone:"
run ps -o pid,stat,args -p "$PID" || echo "(no process $PID)"
echo "The log stopped at: $LAST"
sleep 1
echo "One second later it still ends with: $(tail -n 1 "$LOG")"

say "Restoring it with amber restore -d (same pid, detached)"
run "$AMBER" restore -D "$IMG" -d || die "amber restore failed"
wait_for 10 running || die "pid $PID did not come back"
sleep 1.5
run ps -o pid,stat,args -p "$PID"
echo "The log around the checkpoint:"
run grep -A 6 -x -- "$LAST" "$LOG"
echo "...and it keeps going:"
run tail -n 2 "$LOG"
NEXT=$(grep -A 1 -x -- "$LAST" "$LOG" | sed -n 2p)
if [ "${NEXT#count }" = $((${LAST#count } + 1)) ]; then
	echo "${B}It continued from ${LAST#count } to ${NEXT#count }: nothing lost, nothing repeated.${N}"
else
	die "after '$LAST' the log has '$NEXT'"
fi

say "Stopping the restored counter"
run kill "$PID"
wait_for 10 eval '! running' || die "pid $PID did not stop"
echo "Done."
