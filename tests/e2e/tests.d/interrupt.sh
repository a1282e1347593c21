# Ctrl-C (SIGINT) or SIGTERM to amber in the middle of a dump: amber stops, the
# target runs on unharmed (its own checks pass), and the image is not complete.
TESTS+=(dump_interrupted_sigint dump_interrupted_sigterm)
interrupted_dump() { # SIGNAL
	[ $SELFTEST = 1 ] && return 77
	local apid rc
	start_prog "$PROGS/bigmem" "$T" || return 1
	"$AMBER" dump -t "$PID" -D "$W/img" -v >"$W/dump.log" 2>&1 &
	apid=$!
	# in the middle: its pages (1 GiB) are read and written after every other part
	wait_for 10 grep -q "dumping memory of pid $PID" "$W/dump.log"
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

# The image's file system fills up in the middle of the pages (a 16 MiB tmpfs,
# 1 GiB of them): amber says so, leaves no complete image, and the target
# runs on unharmed (its own checks pass).
TESTS+=(dump_nospace)
nospace_dump() {
	start_prog "$PROGS/bigmem" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/small/img" -v
	dump_refused $? "cannot write image file pages-$PID.img: No space left on device" "$W/small/img" 30
}
t_dump_nospace() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	mkdir -p "$W/small" && mount -t tmpfs -o size=16m amber-e2e-small "$W/small" ||
		{ fail "cannot mount a tmpfs at $W/small"; return 1; }
	nospace_dump
	rc=$?
	umount -l "$W/small"
	return $rc
}
