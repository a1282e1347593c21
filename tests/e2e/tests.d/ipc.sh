# System V IPC (tests/e2e/progs/sysv.c) and POSIX message queues (mqueue.c).
# /proc/sysvipc must show the same objects (ids, keys, modes, owners, sizes, attach
# counts, message counts) after the restore, none while the image holds them.
TESTS+=(sysv sysv_id_taken sysv_undo_refused)

# The columns that survive: not the pids and times of last use (README, Limits).
sysv_state() {
	local kind ids
	while read -r kind ids; do
		for id in $ids; do
			case $kind in
			shm) awk -v id="$id" '$2 == id {print "shm", $1, $2, $3, $4, $7, $8, $9, $10, $11}' /proc/sysvipc/shm ;;
			sem) awk -v id="$id" '$2 == id {print "sem", $1, $2, $3, $4, $5, $6, $7, $8}' /proc/sysvipc/sem ;;
			msg) awk -v id="$id" '$2 == id {print "msg", $1, $2, $3, $4, $5, $8, $9, $10, $11}' /proc/sysvipc/msg ;;
			esac
		done
	done <"$T/ipc-ids"
}
sysv_rm_all() { # what a failed test may leave
	local kind ids
	[ -f "$T/ipc-ids" ] || return 0
	while read -r kind ids; do
		for id in $ids; do
			case $kind in
			shm) ipcrm -m "$id" 2>/dev/null ;;
			sem) ipcrm -s "$id" 2>/dev/null ;;
			msg) ipcrm -q "$id" 2>/dev/null ;;
			esac
		done
	done <"$T/ipc-ids"
	return 0
}
sysv_before() {
	sysv_state >"$W/sysv.before"
	[ "$(lines "$W/sysv.before")" = 5 ] || { fail "expected 3 segments, a set and a queue: $(cat "$W/sysv.before")"; return 1; }
}
sysv_gone() {
	sysv_state >"$W/sysv.dumped"
	[ ! -s "$W/sysv.dumped" ] && return 0
	fail "the dump left the tree's objects in place: $(cat "$W/sysv.dumped")"
	return 1
}
sysv_after() {
	sysv_state >"$W/sysv.after"
	diff -u "$W/sysv.before" "$W/sysv.after" >"$W/sysv.diff" && return 0
	fail "/proc/sysvipc differs after restore (- before, + after):"
	sed 's/^/    /' "$W/sysv.diff" >>"$W/log"
	return 1
}
t_sysv() {
	cycle -f maps -P sysv_before -B sysv_gone -A sysv_after -- "$PROGS/sysv" "$T"
	local rc=$?
	sysv_rm_all
	return $rc
}

# A segment id of the image taken by someone else: the restore fails naming it and
# makes nothing (the other objects' ids stay free).
t_sysv_id_taken() {
	[ $SELFTEST = 1 ] && return 77
	local rc id other
	start_prog "$PROGS/sysv" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump exited with $rc"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$(awk '$1 == "shm" {print $3}' "$T/ipc-ids")
	echo "$id" >/proc/sys/kernel/shm_next_id
	other=$("$PY" -c 'import ctypes; print(ctypes.CDLL(None).shmget(0, 4096, 0o1600))')
	[ "$other" = "$id" ] || { fail "could not take segment id $id (got $other)"; ipcrm -m "$other" 2>/dev/null; return 1; }
	amber_to "$W/restore.log" 30 restore -d -D "$W/img"
	rc=$?
	ipcrm -m "$other"
	[ $rc != 0 ] || { fail "amber restore exited 0 while segment id $id is taken"; sysv_rm_all; return 1; }
	grep -q "shared memory segment id $id is taken" "$W/restore.log" ||
		{ fail "the restore failure does not name segment $id"; attach "$W/restore.log"; return 1; }
	sysv_state >"$W/sysv.left"
	[ ! -s "$W/sysv.left" ] || { fail "the failed restore made objects: $(cat "$W/sysv.left")"; sysv_rm_all; return 1; }
	note "refused: $(grep -m1 'is taken' "$W/restore.log")"
}

# SEM_UNDO leaves an undo list nobody can read: refused at dump, naming the pid.
t_sysv_undo_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	PENV=(SYSV_UNDO=1)
	start_prog "$PROGS/sysv" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of a process with a SEM_UNDO list exited 0"; sysv_rm_all; return 1; }
	grep -q "pid $PID.*semaphore undo list (a semop with SEM_UNDO" "$W/dump.log" ||
		{ fail "the refusal does not name pid $PID and SEM_UNDO"; attach "$W/dump.log"; sysv_rm_all; return 1; }
	sysv_state >"$W/sysv.still"
	[ "$(lines "$W/sysv.still")" = 5 ] || { fail "the refused dump changed the objects: $(cat "$W/sysv.still")"; sysv_rm_all; return 1; }
	runs_on "the refused dump" 20 || { sysv_rm_all; return 1; }
}

# POSIX message queues (tests/e2e/progs/mqueue.c): the queue fds' links and fdinfo flags
# must be the same after the restore; the dump takes the named queue with it.
TESTS+=(mqueue mqueue_notify_refused)
mq_exists() { # NAME: a queue of that name exists
	"$PY" -c 'import ctypes, sys
rt = ctypes.CDLL("librt.so.1", use_errno=True)
fd = rt.mq_open(sys.argv[1].encode(), 0)
sys.exit(0 if fd >= 0 or ctypes.get_errno() == 13 else 1)' "$1"
}
mq_rm_all() {
	local n
	[ -f "$T/mq-names" ] || return 0
	for n in $(cat "$T/mq-names"); do
		"$PY" -c 'import ctypes, sys; ctypes.CDLL("librt.so.1").mq_unlink(sys.argv[1].encode())' "$n"
	done
	return 0
}
mq_fds() { # PID: the queue fds of it and its child
	local p fd
	for p in $1 $(cat "/proc/$1/task/$1/children"); do
		for fd in $(ls "/proc/$p/fd" | sort -n); do
			case $(readlink "/proc/$p/fd/$fd") in
			/amber-mq-*) echo "$p fd $fd -> $(readlink "/proc/$p/fd/$fd") $(grep -E '^(pos|flags):' "/proc/$p/fdinfo/$fd" | tr -s '\t\n' '  ')" ;;
			esac
		done
	done
}
mq_before() {
	mq_fds "$PID" >"$W/mq.before"
	[ "$(lines "$W/mq.before")" = 7 ] || { fail "expected 7 queue fds (3 inherited by the child): $(cat "$W/mq.before")"; return 1; }
}
mq_after() {
	mq_fds "$PID" >"$W/mq.after"
	diff -u "$W/mq.before" "$W/mq.after" >"$W/mq.diff" && return 0
	fail "the queue fds differ after restore (- before, + after):"
	sed 's/^/    /' "$W/mq.diff" >>"$W/log"
	return 1
}
mq_gone() {
	local a
	a=$(awk '{print $1}' "$T/mq-names")
	! mq_exists "$a" || { fail "the dump left message queue $a in place"; return 1; }
}
t_mqueue() {
	cycle -P mq_before -B mq_gone -A mq_after -- "$PROGS/mqueue" "$T"
	local rc=$?
	mq_rm_all
	return $rc
}

# mq_notify names a process and a sigevent nobody can read back: refused at dump.
t_mqueue_notify_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	PENV=(MQ_NOTIFY=1)
	start_prog "$PROGS/mqueue" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of a queue with mq_notify exited 0"; mq_rm_all; return 1; }
	grep -q "has a notification (mq_notify) registered by pid $PID" "$W/dump.log" ||
		{ fail "the refusal does not name mq_notify and pid $PID"; attach "$W/dump.log"; mq_rm_all; return 1; }
	runs_on "the refused dump" 20 || { mq_rm_all; return 1; }
	mq_rm_all
}
