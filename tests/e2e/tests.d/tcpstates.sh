# TCP states beyond ESTABLISHED/LISTEN (tests/e2e/progs/tcpstates.c); loopback ports 47100-47199.
TESTS+=(tcpstates_pending_refused tcpstates_pending_skip)

# a connection in a listener's accept queue: the dump is refused, naming the flag and listener
t_tcpstates_pending_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/tcpstates" "$T" pending 47100 || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "the dump of a listener with a pending connection succeeded"; return 1; }
	grep -q -- "--skip-in-flight" "$W/dump.log" && grep -q "127.0.0.1:47100" "$W/dump.log" ||
		{ fail "the refusal does not name --skip-in-flight and the listener"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "a refused dump left inventory.img"; return 1; }
	note "amber said: $(grep -m1 -- --skip-in-flight "$W/dump.log")"
	kill -9 "$PID"
}

# with --skip-in-flight it is dropped (and the log says so); the listener works
t_tcpstates_pending_skip() {
	[ $SELFTEST = 1 ] && return 77 # without amber the connection is still there
	cycle -d "--skip-in-flight" -B pending_logged -- "$PROGS/tcpstates" "$T" pending 47101
}
pending_logged() {
	grep -q "skip-in-flight: 1 connection" "$W/dump.log" ||
		{ fail "the dump does not say it dropped the connection"; attach "$W/dump.log"; return 1; }
}
