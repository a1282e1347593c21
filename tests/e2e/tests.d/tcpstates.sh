# TCP states beyond ESTABLISHED/LISTEN (tests/e2e/progs/tcpstates.c); loopback ports 47100-47101 and 47210-47299 (sockopts has 47110-47116).
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

# Half-closed and closing connections, connects in progress, --tcp-close, urgent data:
# over IPv4, IPv6 (::1) and v4-mapped addresses on dual-stack IPv6 sockets (m).
TESTS+=(tcpstates_half_4 tcpstates_half_6 tcpstates_half_m tcpstates_closing_4
	tcpstates_closing_6 tcpstates_closing_late tcpstates_synsent_4 tcpstates_synsent_6 tcpstates_close_4
	tcpstates_close_m tcpstates_close_restore tcpstates_half_needs_flag tcpstates_oob_refused
	tcpstates_synsent_blocking tcpstates_half_leave_running tcpstates_oobinline_refused
	tcpstates_synsent_refused)

# What ss (sock_diag) says of every socket on the test's port, but TIME_WAIT ones:
# state, local and peer address; the same after the restore as before the dump.
ss_states() {
	ss -tanH exclude time-wait "( sport = :$TCPPORT or dport = :$TCPPORT )" | awk '{print $1, $4, $5}' | sort
}
ss_before() {
	ss_states >"$W/ss.before"
	[ -s "$W/ss.before" ] || { fail "ss lists no socket on port $TCPPORT"; return 1; }
}
ss_after() {
	wait_for 5 eval 'ss_states >"$W/ss.after"; cmp -s "$W/ss.before" "$W/ss.after"' || {
		fail "the sockets' states (ss) differ after the restore (- before, + after):"
		diff -u "$W/ss.before" "$W/ss.after" | sed 's/^/    /' >>"$W/log"
		return 1
	}
	note "ss after the restore: $(tr '\n' ';' <"$W/ss.after")"
}
tcp_cycle() { # MODE FAM PORT [cycle options]
	local mode=$1 fam=$2
	TCPPORT=$3
	shift 3
	cycle -P ss_before -A ss_after "$@" -- "$PROGS/tcpstates" "$T" "$mode" "$fam" "$TCPPORT"
	local rc=$?
	# the program's own nft table (closing), should it have died before removing it
	[ -z "$PID" ] || nft delete table inet "tcpstates-$PID" 2>/dev/null
	return $rc
}
t_tcpstates_half_4() { tcp_cycle half 4 47210 -d --tcp-established -r --tcp-established; }
t_tcpstates_half_6() { tcp_cycle half 6 47211 -d --tcp-established -r --tcp-established; }
t_tcpstates_half_m() { tcp_cycle half m 47212 -d --tcp-established -r --tcp-established; }
t_tcpstates_closing_4() { tcp_cycle closing 4 47213 -d --tcp-established -r --tcp-established; }
t_tcpstates_closing_6() { tcp_cycle closing 6 47214 -d --tcp-established -r --tcp-established; }
# The restore stalls 2 s once the lock is gone (AMBER_FAULT=spawn:2:delay: its second
# nft run, removing the lock, returns late).  E, whose FIN was never acknowledged, sends
# it again meanwhile: the FINs must have been replayed before, or CLOSING becomes LAST_ACK.
stall_after_unlock() { export AMBER_FAULT=spawn:2:delay; }
stalled() {
	grep -q "fault injection: spawn call 2: 2 s late" "$W/restore.log" ||
		{ fail "the restore did not stall after the unlock"; return 1; }
	ss_after
}
t_tcpstates_closing_late() {
	tcp_cycle closing 6 47227 -B stall_after_unlock -A stalled -d --tcp-established \
		-r "--tcp-established -v"
}
# a connect() in progress needs no flag
t_tcpstates_synsent_4() { tcp_cycle synsent 4 47215; }
t_tcpstates_synsent_6() { tcp_cycle synsent 6 47216; }
t_tcpstates_synsent_blocking() { tcp_cycle synsentb m 47223; }
# the listener it was connecting to is gone by the restore: the connect fails as it would have
kill_peer() { kill -9 "$(cat "$T/peer.pid")"; }
t_tcpstates_synsent_refused() {
	[ $SELFTEST = 1 ] && return 77 # without amber E lives on
	cycle -B kill_peer -- "$PROGS/tcpstates" "$T" synsentr 4 47226
}

# -R: repair mode goes again on half-closed connections, which keep working
t_tcpstates_half_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/tcpstates" "$T" half 6 47224 || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -R --tcp-established -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump -R --tcp-established exited with $rc"; attach "$W/dump.log"; return 1; }
	runs_on "dump -R"
}

# --tcp-close at dump: no TCP repair, no network lock; the restore needs no flag
close_logged() {
	grep -q "comes back reset" "$W/restore.log" ||
		{ fail "the restore does not say the connections come back reset"; attach "$W/restore.log"; return 1; }
}
t_tcpstates_close_4() {
	[ $SELFTEST = 1 ] && return 77 # without amber nothing is reset
	cycle -d --tcp-close -A close_logged -- "$PROGS/tcpstates" "$T" close 4 47217
}
t_tcpstates_close_m() {
	[ $SELFTEST = 1 ] && return 77
	cycle -d --tcp-close -A close_logged -- "$PROGS/tcpstates" "$T" close m 47218
}
# dumped with TCP repair, restored with --tcp-close (instead of --tcp-established)
t_tcpstates_close_restore() {
	[ $SELFTEST = 1 ] && return 77
	cycle -d --tcp-established -r --tcp-close -A close_logged -- "$PROGS/tcpstates" "$T" close 6 47219
}

# connections without a flag: refused, naming the first one's state and both flags; the tree runs on
t_tcpstates_half_needs_flag() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/tcpstates" "$T" half 4 47220 || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "the dump of half-closed connections without a flag succeeded"; return 1; }
	grep -Eq -- "(ESTABLISHED|CLOSE_WAIT|FIN_WAIT2) TCP connection 127.0.0.1:[0-9]+ -> 127.0.0.1:[0-9]+; .*--tcp-established.*--tcp-close" "$W/dump.log" ||
		{ fail "the refusal does not name the flags and the state"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "a refused dump left inventory.img"; return 1; }
	note "amber said: $(grep -m1 -- --tcp-close "$W/dump.log")"
	runs_on "the refused dump"
}

# urgent data not read yet: refused at dump, naming it; the tree runs on
t_tcpstates_oob_refused() { oob_refused 47221; }
t_tcpstates_oobinline_refused() { oob_refused 47225 inline; }
oob_refused() { # PORT [inline]
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/tcpstates" "$T" oob "$@"; return; }
	local rc
	start_prog "$PROGS/tcpstates" "$T" oob "$@" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v --tcp-established
	rc=$?
	[ $rc != 0 ] || { fail "the dump of a connection with urgent data succeeded"; return 1; }
	grep -q "urgent data (MSG_OOB) not read yet" "$W/dump.log" && grep -q "127.0.0.1:$1" "$W/dump.log" ||
		{ fail "the refusal does not name the urgent data and the connection"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "a refused dump left inventory.img"; return 1; }
	note "amber said: $(grep -m1 urgent "$W/dump.log")"
	runs_on "the refused dump"
}

# The image's TCP state and shutdown bits are checked before any socket is made:
# a state amber does not restore, bits outside sk_shutdown's, bits the state
# cannot have, "closed" on a listener.
TESTS+=(tcpstates_image_refused)
tcp_entry() { # JQ-SELECT: the files.img index of the first inet socket it selects
	"$AMBER" show "$W/img" | jq -r "[.files | to_entries[] | select(.value.inet_sk) | select($1)][0].key"
}
t_tcpstates_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 cw ls
	start_prog "$PROGS/tcpstates" "$T" half 4 47222 || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" --tcp-established -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	cw=$(tcp_entry '.value.inet_sk.state == 8')
	ls=$(tcp_entry '.value.inet_sk.state == 10')
	[ "$cw" != null ] && [ "$ls" != null ] || { fail "no CLOSE_WAIT connection or listener in the image"; return 1; }
	refused tcp_state "state 99 (?) with a state amber does not restore" files.img "$cw.inet_sk.state=99" || ok=1
	refused tcp_synrecv "state 3 (SYN_RECV) with a state amber does not restore" files.img "$cw.inet_sk.state=3" || ok=1
	refused tcp_bits "unknown shutdown bits" files.img "$cw.inet_sk.shutdown=5" || ok=1
	refused tcp_cw_sent "shutdown bits its state cannot have" files.img "$cw.inet_sk.shutdown=3" || ok=1
	refused tcp_cw_rcv "shutdown bits its state cannot have" files.img "$cw.inet_sk.shutdown=0" || ok=1
	refused tcp_closed "closed but not a connection" files.img "$ls.inet_sk.closed=true" || ok=1
	# the network lock the dump left stays for a restore that never comes
	nft list tables | awk '/amber-'"$PID"'-/ {print $3}' | while read -r t; do nft delete table inet "$t"; done
	touch "$T/go" # the peer outside the tree waits for it
	return $ok
}
