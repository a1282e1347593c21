# The progress line (src/progress.c): on a terminal, a dump or restore that runs past the
# threshold (AMBER_PROGRESS_AFTER_MS, 1 s by default; 0 here) shows pages moved, the rate
# and the processes done, cleared at the end; without a terminal nothing of it is printed.
# tests/e2e/progs/bigmem.c (1 GiB) keeps amber busy long enough for a few ticks.
TESTS+=(progress_tty progress_no_tty)

# FILE WHAT: a progress line for WHAT (dump|restore) in the raw terminal output, the
# last one followed by the sequence that clears it.
progress_seen() {
	local f=$1 what=$2
	grep -aqE "amber: $what: [0-9]+ MiB of pages (written|restored), [0-9]+ MiB/s, [0-9]+/1 processes" "$f" ||
		{ fail "no $what progress line on the terminal"; attach "$f"; return 1; }
	"$PY" - "$f" <<'PYEOF' || { fail "the $what progress line is not cleared at the end"; attach "$f"; return 1; }
import sys
data = open(sys.argv[1], "rb").read()
last = data.rfind(b"MiB of pages")
sys.exit(0 if last >= 0 and data.find(b"\r\x1b[K", last) > last else 1)
PYEOF
}

t_progress_tty() {
	[ $SELFTEST = 1 ] && return 77
	local exe
	start_prog "$PROGS/bigmem" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	AMBER_PROGRESS_AFTER_MS=0 timeout -k 5 120 script -qfec "$AMBER dump -t $PID -D $W/img" "$W/dump.tty" >/dev/null 2>&1 ||
		{ fail "amber dump on a terminal failed"; attach "$W/dump.tty"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	progress_seen "$W/dump.tty" dump || return 1
	AMBER_PROGRESS_AFTER_MS=0 timeout -k 5 120 script -qfec "$AMBER restore -d -D $W/img" "$W/restore.tty" >/dev/null 2>&1 ||
		{ fail "amber restore -d on a terminal failed"; attach "$W/restore.tty"; return 1; }
	wait_for 30 is_restored "$PID" "$exe" || { fail "pid $PID not restored"; attach "$W/restore.tty"; return 1; }
	echo "$PID" >>"$W/pids"
	progress_seen "$W/restore.tty" restore || return 1
	touch "$T/go"
	wait_for 60 test -e "$T/result" || { fail "the restored program wrote no verdict"; return 1; }
	[ "$(cat "$T/result")" = 0 ] || { fail "the restored program's checks failed"; return 1; }
}

progress_none_in_logs() {
	! grep -aq "MiB of pages" "$W/dump.log" "$W/restore.log" ||
		{ fail "a progress line went into a log (not a terminal)"; return 1; }
}
t_progress_no_tty() {
	[ $SELFTEST = 1 ] && return 77
	local AMBER_PROGRESS_AFTER_MS=0
	export AMBER_PROGRESS_AFTER_MS
	cycle -A progress_none_in_logs -- "$PROGS/bigmem" "$T"
}
