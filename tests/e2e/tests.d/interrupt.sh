# Ctrl-C (SIGINT) or SIGTERM to amber in the middle of a dump: amber stops, the
# target runs on unharmed (its own checks pass), and the image is not complete.
TESTS+=(dump_interrupted_sigint dump_interrupted_sigterm)
interrupted_dump() { # SIGNAL
	[ $SELFTEST = 1 ] && return 77
	local apid rc
	start_prog "$PROGS/bigmem" "$T" || return 1
	"$AMBER" dump -t "$PID" -D "$W/img" -v >"$W/dump.log" 2>&1 &
	apid=$!
	sleep 0.3
	kill "-$1" "$apid"
	wait "$apid"
	rc=$?
	note "amber dump exited $rc after SIG$1"
	[ $rc != 0 ] || { fail "amber dump finished before SIG$1 came, or ignored it"; attach "$W/dump.log"; return 1; }
	grep -q "interrupted" "$W/dump.log" || { fail "no word of the interruption"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "the interrupted image is marked complete"; return 1; }
	runs_on "the interrupted dump" 30
}
t_dump_interrupted_sigint() { interrupted_dump INT; }
t_dump_interrupted_sigterm() { interrupted_dump TERM; }
