# restore --new-pidns (src/ns/pidns.c): the tree comes back in a new pid
# namespace when its pids are taken on the host, each process with the pid it
# had as it sees it (NSpid), under an init that amber leaves and that ends
# with the tree; /proc in there is the namespace's.
TESTS+=(pidns_pid_taken pidns_wait_status pidns_wait_status_failed)

# occupy pid $1 on the host with a sleeper (ns_last_pid, retried: other forks race)
pidns_take() {
	local s
	for _ in $(seq 100); do
		echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid
		sleep 300 &
		s=$!
		[ "$s" = "$1" ] && { TAKER=$s; echo "$s" >>"$W/pids"; return 0; }
		kill "$s"
		wait "$s" 2>/dev/null
	done
	fail "could not take pid $1 on the host"
	return 1
}

# the host pid H of the restored root: its NSpid is "H PID", its parent the
# namespace's init, whose pid namespace is not ours; in there /proc/PID is it
pidns_check() { # HOSTPID
	local h=$1 nspid init
	nspid=$(awk '/^NSpid:/ {print $2, $3}' "/proc/$h/status")
	[ "$nspid" = "$h $PID" ] || { fail "NSpid of the restored root is '$nspid', want '$h $PID'"; return 1; }
	[ "$(readlink "/proc/$h/exe")" = "$EXE" ] || { fail "host pid $h is not the program"; return 1; }
	[ "$(readlink "/proc/$h/ns/pid")" != "$(readlink /proc/self/ns/pid)" ] ||
		{ fail "the restored root is in the host's pid namespace"; return 1; }
	init=$(awk '/^PPid:/ {print $2}' "/proc/$h/status")
	[ "$(awk '/^NSpid:/ {print $3}' "/proc/$init/status")" = 1 ] ||
		{ fail "the root's parent $init is not the namespace's init"; return 1; }
	[ "$(nsenter -t "$h" -p -m cat "/proc/$PID/stat" | awk '{print $1, $4}')" = "$PID 1" ] ||
		{ fail "/proc/$PID in the namespace is not the restored root"; return 1; }
	INIT=$init
	note "pid $PID came back as host pid $h, under the namespace's init $init"
}

t_pidns_pid_taken() {
	[ $SELFTEST = 1 ] && return 77
	local h
	start_prog "$PROGS/signals" "$T" || return
	EXE=$(readlink "/proc/$PID/exe")
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v || { fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	pidns_take "$PID" || return 1
	amber_to "$W/busy.log" 30 restore -d -D "$W/img" && { fail "a restore onto a taken pid succeeded"; return 1; }
	grep -q "pid $PID" "$W/busy.log" || { fail "the refusal does not name pid $PID"; attach "$W/busy.log"; return 1; }
	amber_to "$W/restore.log" 60 restore -d --new-pidns --pidfile "$W/pidfile" -D "$W/img" -v ||
		{ fail "restore --new-pidns failed"; attach "$W/restore.log"; return 1; }
	h=$(cat "$W/pidfile")
	echo "$h" >>"$W/pids"
	pidns_check "$h" || return 1
	kill "$TAKER"
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the restored program failed its checks"; attach "$T/err"; return 1; }
	wait_for 10 is_gone "$INIT" || { fail "the namespace's init $INIT outlived the tree"; return 1; }
}

# without -d amber waits and exits with the root's status (WANT: 0, or 1 when
# the program is told to sabotage its own state and so fails its checks)
t_pidns_wait_status() { pidns_wait 0; }
t_pidns_wait_status_failed() {
	local PENV=(AMBER_TEST_SABOTAGE=1)
	pidns_wait 1
}
pidns_wait() {
	[ $SELFTEST = 1 ] && return 77
	local rc want=$1
	start_prog "$PROGS/signals" "$T" || return
	EXE=$(readlink "/proc/$PID/exe")
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v || { fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	(exec timeout -k 5 120 "$AMBER" restore --new-pidns --pidfile "$W/pidfile" -D "$W/img" -v >>"$W/restore.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	wait_for 30 test -s "$W/pidfile" || { fail "no pidfile"; attach "$W/restore.log"; return 1; }
	echo "$(cat "$W/pidfile")" >>"$W/pids"
	pidns_check "$(cat "$W/pidfile")" || return 1
	touch "$T/go"
	wait "$RPID"
	rc=$?
	[ $rc = "$want" ] && [ "$(cat "$T/result")" = "$want" ] || { fail "amber restore exited with $rc, the program's result $(cat "$T/result" 2>/dev/null), want $want"; attach "$W/restore.log"; return 1; }
}
