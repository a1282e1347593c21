# Connections waiting in a listener's accept queue (tests/e2e/progs/tcppending.c); loopback
# ports 47300-47309.
TESTS+=(tcppending_4 tcppending_6 tcppending_m tcppending_skip tcppending_data_refused
	tcppending_ext_refused)

# Three clients of the tree connect()ed and wait, nobody accept()ed: after the restore the
# server accepts them in the order they connected, from their own ports, data flows both
# ways and the clients see EOF, not a reset.
pending_back() {
	[ "$(grep -c "comes back as number" "$W/dump.log")" = 3 ] ||
		{ fail "the dump does not say the three waiting connections come back"; attach "$W/dump.log"; return 1; }
}
t_tcppending_4() { cycle -B pending_back -- "$PROGS/tcppending" "$T" ok 4 47300; }
t_tcppending_6() { cycle -B pending_back -- "$PROGS/tcppending" "$T" ok 6 47301; }
# a dual-stack IPv6 listener, IPv4 clients (v4-mapped addresses on the server's side)
t_tcppending_m() { cycle -B pending_back -- "$PROGS/tcppending" "$T" ok m 47302; }
# the same in a network namespace of the tree (its restore lock lets lo through)
TESTS+=(tcppending_netns)
t_tcppending_netns() {
	command -v unshare >/dev/null || return 77
	cycle -B pending_back -- unshare --net sh -c 'ip link set lo up && exec "$0" "$@"' \
		"$PROGS/tcppending" "$T" ok 4 47307
}
# --skip-in-flight drops only what cannot come back: these do
t_tcppending_skip() { cycle -d --skip-in-flight -B pending_back -- "$PROGS/tcppending" "$T" ok 4 47303; }

# Refused: the dump names why and the flag; the program runs on unharmed (its checks pass).
tcppending_refused() { # MODE PORT WHY
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/tcppending" "$T" "$1" 4 "$2" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "the dump succeeded"; attach "$W/dump.log"; return 1; }
	grep -q -- "$3" "$W/dump.log" && grep -q -- "--skip-in-flight" "$W/dump.log" ||
		{ fail "the refusal does not say \"$3\" and name --skip-in-flight"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "a refused dump left inventory.img"; return 1; }
	note "amber said: $(grep -m1 -- "$3" "$W/dump.log")"
	touch "$T/go"
	wait_for 30 test -e "$T/result" || { fail "the program wrote no verdict after the refused dump"; return 1; }
	[ "$(cat "$T/result")" = 0 ] || { fail "the program's checks failed after the refused dump"; attach "$T/err"; return 1; }
}
# a client of the tree that sent data already: a new handshake would lose it
t_tcppending_data_refused() { tcppending_refused data 47304 "its client sent 5 byte(s)"; }
# a client outside the tree: amber cannot put its connection back into the queue
t_tcppending_ext_refused() {
	local rc
	tcppending_refused ext 47305 "held by a process outside the dumped tree"
	rc=$?
	# the peer answers and exits after go; should it still wait, it goes
	[ -s "$T/peer.pid" ] && grep -q tcppending "/proc/$(cat "$T/peer.pid")/cmdline" 2>/dev/null &&
		kill -9 "$(cat "$T/peer.pid")"
	return $rc
}

# The image's waiting connections are checked before anything is made: a listener and
# its clients must name each other, once each, the clients be ESTABLISHED and connected
# to it, and no more wait than its backlog takes.
TESTS+=(tcppending_image_refused)
t_tcppending_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 ls c1 ino1 list
	start_prog "$PROGS/tcppending" "$T" ok 4 47306 || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	ls=$(tcp_entry '.value.inet_sk.state == 10')
	c1=$(tcp_entry '.value.inet_sk.pending_on')
	ino1=$("$AMBER" show "$W/img" | jq -r ".files[$c1].ino")
	list=$("$AMBER" show "$W/img" | jq -r ".files[$ls].inet_sk.pending | map(tostring) | join(\",\")")
	[ "$ls" != null ] && [ "$c1" != null ] || { fail "no listener or waiting client in the image"; return 1; }
	refused pend_twice "a waiting connection listed twice" files.img "$ls.inet_sk.pending=$list,$ino1" || ok=1
	refused pend_unknown "does not wait on it\\|does not list it" files.img "$ls.inet_sk.pending=12345" || ok=1
	refused pend_other "does not list it\\|does not wait on it" files.img "$c1.inet_sk.pending_on=12345" || ok=1
	refused pend_elsewhere "whose client does not wait on it" files.img "$c1.inet_sk.dst_port=22" || ok=1
	refused pend_state "that is not ESTABLISHED" files.img "$c1.inet_sk.state=8" || ok=1
	refused pend_backlog "more connections waiting than its backlog" files.img "$ls.inet_sk.backlog=1" || ok=1
	refused pend_udp "not a TCP socket" files.img "$c1.inet_sk.type=2" || ok=1
	return $ok
}
