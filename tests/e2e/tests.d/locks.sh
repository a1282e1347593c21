# File locks (tests/e2e/progs/locks.c): flock, POSIX, OFD locks and leases, dumped with
# --file-locks.  The program's checker process asks the kernel who holds what after the
# restore; the test compares /proc/locks for the program's files before and after (the
# pids and inodes are the same since the processes and files are).
TESTS+=(locks locks_refused locks_sqlite)

locks_state() { # the /proc/locks lines of the files in $T, without their ordinal
	local ino re=""
	for ino in $(stat -c %i "$T"/flock.sh "$T"/flock.ex "$T"/posix "$T"/ofd "$T"/lease.rd "$T"/lease.wr "$T"/*.db* 2>/dev/null); do
		re="$re|:$ino "
	done
	grep -E "${re#|}" /proc/locks | grep -v -- '->' | sed 's/^[0-9]*: //' | tr -s ' ' | sort
}
locks_before() {
	locks_state >"$W/locks.before"
	[ "$(lines "$W/locks.before")" = 9 ] ||
		{ fail "expected 9 locks, /proc/locks has: $(cat "$W/locks.before")"; return 1; }
}
locks_after() {
	locks_state >"$W/locks.after"
	diff -u "$W/locks.before" "$W/locks.after" >"$W/locks.diff" && return 0
	fail "/proc/locks differs after restore (- before, + after):"
	sed 's/^/    /' "$W/locks.diff" >>"$W/log"
	return 1
}
t_locks() { cycle -d --file-locks -P locks_before -A locks_after -- "$PROGS/locks" "$T"; }

# Without --file-locks a tree holding locks is refused, naming the flag, and runs on.
t_locks_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/locks" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of a process holding locks exited 0 without --file-locks"; attach "$W/dump.log"; return 1; }
	grep -q "holds an\? .*; dump with --file-locks (-l)" "$W/dump.log" ||
		{ fail "the refusal does not name --file-locks"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "the refused dump left an inventory.img"; return 1; }
	runs_on "the refused dump" 20 || return 1
	note "refused: $(grep -m1 'file-locks' "$W/dump.log")"
}

# sqlite in WAL mode (python3's sqlite3, POSIX locks on the db and its -shm, which is
# mapped shared): a writer inserting in a loop is dumped with -l and restored; then a
# second connection reads and closes, the writer keeps inserting, the db stays sound.
sqlite_count() { "$PY" -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1], timeout=10); print(c.execute("select count(*) from t").fetchone()[0]); c.close()' "$T/w.db"; }
# Between transactions a WAL connection holds two POSIX read locks: the DMS byte (128) of
# the -shm and the shared range of the db (more within a transaction, which comes and goes).
sqlite_locks() {
	local shm db
	shm=$(stat -c %i "$T/w.db-shm") && db=$(stat -c %i "$T/w.db") || return 1
	wait_for 5 eval 'grep -q "POSIX  ADVISORY  READ $PID [0-9a-f:]*:$shm 128 128\$" /proc/locks &&
		grep -q "POSIX  ADVISORY  READ $PID [0-9a-f:]*:$db 1073741826 1073742335\$" /proc/locks'
}
sqlite_before() {
	sqlite_locks || { fail "the writer does not hold its WAL read locks: $(cat /proc/locks)"; return 1; }
}
sqlite_after() {
	local a b c n
	sqlite_locks || { fail "after restore pid $PID does not hold its WAL read locks: $(cat /proc/locks)"; return 1; }
	a=$(cat "$T/rows")
	wait_for 10 eval '[ "$(cat "$T/rows")" -gt "$a" ]' || { fail "the writer inserts no rows after restore (rows $a)"; return 1; }
	b=$(sqlite_count) || { fail "a second connection cannot read the restored writer's db"; return 1; }
	[ "$b" -ge "$a" ] || { fail "the second connection sees $b rows, the writer had $a"; return 1; }
	c=$(cat "$T/rows")
	wait_for 10 eval '[ "$(cat "$T/rows")" -gt "$c" ]' || { fail "the writer stopped inserting after the second connection closed (rows $c)"; return 1; }
	n=$(cat "$T/rows")
	note "rows: $a at restore, $b seen by the reader, $n after it closed"
}
t_locks_sqlite() {
	cycle -d --file-locks -P sqlite_before -A sqlite_after -- "$PY" "$SRC/locks-sqlite.py" "$T"
}

# O_ASYNC with its owner and signal (tests/e2e/progs/locks-async.c) on a pipe, a socket,
# an inotify fd and a file.  fdinfo's flags (O_ASYNC among them) must be the same after
# the restore (pipes aside: amber's pipe ends add O_LARGEFILE, see README); then the
# test writes into the pipe and the program must get the pipe's signal with its fd.
TESTS+=(locks_async)
async_state() {
	local f
	for f in $(ls "/proc/$PID/fd" | sort -n); do
		case $(readlink "/proc/$PID/fd/$f") in
		pipe:*) ;;
		*) echo "fd $f $(grep '^flags:' "/proc/$PID/fdinfo/$f" | tr -s '\t' ' ')" ;;
		esac
	done
}
async_before() { async_state >"$W/async.before"; }
async_after() {
	local wfd
	async_state >"$W/async.after"
	diff -u "$W/async.before" "$W/async.after" >"$W/async.diff" ||
		{ fail "fdinfo flags differ after restore:"; sed 's/^/    /' "$W/async.diff" >>"$W/log"; return 1; }
	wfd=$(sed -n 's/^fds: pipe [0-9]* \([0-9]*\) .*/\1/p' "$T/out")
	[ -n "$wfd" ] || { fail "the program did not say its fds"; return 1; }
	printf T >"/proc/$PID/fd/$wfd" || { fail "cannot write into the restored pipe (fd $wfd)"; return 1; }
	touch "$T/wrote"
}
t_locks_async() { cycle -P async_before -A async_after -- "$PROGS/locks-async" "$T"; }

# A lease grants nothing its owner could not take: nobody's process leases its own file
# (restored by root from nobody's image, the lease comes back); the image edited to point
# that fd at a root-owned file nobody may read is restored as far as opening it, and the
# lease must then be refused by the kernel's own check (nobody neither owns it nor has
# CAP_LEASE).
TESTS+=(locks_lease_owner)
t_locks_lease_owner() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/locks-lease" "$T"; return; }
	local id rc
	mkdir -p "$T" && : >"$T/out" && : >"$T/err" && chown 65534:65534 "$T" "$T/out" "$T/err"
	start_prog setpriv --reuid=65534 --regid=65534 --clear-groups "$PROGS/locks-lease" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v -l || { fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	chown -R 65534:65534 "$W/img"
	id=$("$AMBER" show "$W/img" | jq -r --arg p "$T/lease" '.files[] | select(.path == $p and .locks) | .id')
	[ -n "$id" ] || { fail "the image has no lease on $T/lease"; return 1; }
	cp -a "$W/img" "$W/edited"
	"$ROOT/build/tools/imgedit" "$W/edited" files.img "$id.path=/etc/hostname" 2>>"$W/log" || { fail "imgedit failed"; return 1; }
	amber_to "$W/edited.log" 30 restore -d -D "$W/edited" -v
	rc=$?
	[ $rc != 0 ] || { fail "root restored nobody's image with a lease on /etc/hostname"; attach "$W/edited.log"; return 1; }
	grep -q "cannot take its read lease on /etc/hostname.*Permission denied\|cannot take its read lease on /etc/hostname.*Resource temporarily" "$W/edited.log" ||
		{ fail "refused, but not by the lease check"; attach "$W/edited.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID exists after the refused restore"; return 1; }
	note "refused: $(grep -m1 'lease on /etc/hostname' "$W/edited.log")"
	amber_to "$W/restore.log" 30 restore -D "$W/img" -v &
	RPID=$!
	wait_for 10 is_alive "$PID" || { fail "nobody's own image did not restore"; attach "$W/restore.log"; return 1; }
	grep -q "LEASE  ACTIVE    READ $PID " /proc/locks || { fail "no lease of pid $PID in /proc/locks: $(cat /proc/locks)"; return 1; }
	touch "$T/go"
	wait "$RPID" || { fail "the restored program failed its checks"; attach_all; return 1; }
}

# A flock on a description only a mapping keeps (its fd closed) shows in no fdinfo: the
# dump must refuse it, naming the process, and leave the program running with its lock.
TESTS+=(locks_mapped_refused locks_mapped_ofd_refused)
t_locks_mapped_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/locks-lease" "$T" mapped || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v --file-locks
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of a flock held through a mapping only exited 0"; attach "$W/dump.log"; return 1; }
	grep -q "pid $PID holds a flock on inode $(stat -c %i "$T/mapped") that amber finds through no fd" "$W/dump.log" ||
		{ fail "the refusal does not name the process and the inode"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "the refused dump left an inventory.img"; return 1; }
	runs_on "the refused dump" 20 || return 1
	note "refused: $(grep -m1 'through no fd' "$W/dump.log")"
}
t_locks_mapped_ofd_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/locks-lease" "$T" mapped-ofd || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v --file-locks
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of an OFD lock held through a mapping only exited 0"; attach "$W/dump.log"; return 1; }
	grep -q "an OFD lock is held on inode $(stat -c %i "$T/mapped"), which the tree maps" "$W/dump.log" ||
		{ fail "the refusal does not name the inode"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump" 20 || return 1
	note "refused: $(grep -m1 'OFD lock is held' "$W/dump.log")"
}
