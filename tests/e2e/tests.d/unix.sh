# Unix sockets (tests/e2e/progs/unix.c): descriptors in flight (SCM_RIGHTS) open nowhere
# else, zero-length datagrams, sender addresses of queued datagrams (a sender gone since),
# and a long queue of small datagrams.
TESTS+=(unix_rights unix_longq unix_creds)

t_unix_rights() { cycle -- "$PROGS/unix" "$T" rights; }
# more than 65536 datagrams: peeking at the n-th costs n in the kernel, so the dump of
# 66000 takes minutes (3.5 on a quiet 2-core VM with 6.18)
# credentials of queued messages (SCM_CREDENTIALS): writers kept apart, senders gone since
t_unix_creds() { cycle -- "$PROGS/unix" "$T" creds; }
t_unix_longq() { DUMP_TIMEOUT=900 cycle -- "$PROGS/unix" "$T" longq; }

# Connections not accept()ed yet: each client connects again at restore, in the queue's order.
TESTS+=(unix_pending unix_pending_refused unix_pending_image_refused)

# ss's Recv-Q of a listener is its queue length: the same after the restore
pend_queues() { ${PEND_NS:+nsenter --net="/proc/$PID/ns/net"} ss -xlnH | awk -v t="$T/" 'index($5, t) == 1 {print $5, $3}' | sort; }
pend_before() { pend_queues >"$W/queues.before"; grep -q "a.sock 4$" "$W/queues.before" ||
	{ fail "listener a.sock does not have 4 pending connections: $(cat "$W/queues.before")"; return 1; }; }
pend_after() { pend_queues >"$W/queues.after"; cmp -s "$W/queues.before" "$W/queues.after" ||
	{ fail "the listeners' queues differ: $(cat "$W/queues.before") / $(cat "$W/queues.after")"; return 1; }; }
t_unix_pending() { cycle -P pend_before -A pend_after -- "$PROGS/unix" "$T" pending; }

# refused at dump, naming the socket, and the program goes on unharmed
t_unix_pending_refused() {
	[ $SELFTEST = 1 ] && return 77
	local mode pat ok=0
	for mode in pendingdata pendingout listenout; do
		case $mode in
		pendingdata) pat="not accept()ed yet and holds data it sent" ;;
		pendingout) pat="has a connection not accept()ed yet from socket:\[[0-9]*\], which is not open in the dumped tree" ;;
		listenout) pat="waits to be accept()ed by that listener, which is not open in the dumped tree" ;;
		esac
		rm -rf "$T"
		start_prog "$PROGS/unix" "$T" "$mode" || return 1
		amber_to "$W/$mode.log" 60 dump -t "$PID" -D "$W/img-$mode"
		if [ $? = 0 ]; then
			fail "$mode: the dump succeeded"; ok=1
		elif ! grep -q -- "$pat" "$W/$mode.log"; then
			fail "$mode: refused, but not for '$pat'"; attach "$W/$mode.log"; ok=1
		else
			note "$mode: $(grep -m1 -o "error.*" "$W/$mode.log" | cut -c1-300)"
		fi
		touch "$T/go"
		wait_for 20 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
			{ fail "$mode: the program did not go on unharmed"; attach "$T/err"; ok=1; }
	done
	return $ok
}
# the pairing of pending connections and their clients, edited: refused before anything is made
t_unix_pending_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local l c ok=0
	start_prog "$PROGS/unix" "$T" pending || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" || { fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	l=$("$AMBER" show "$W/img" | jq -r '[.files[] | select((.unix_sk.pending // []) | length == 4) | .id][0]')
	c=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.unix_sk.pending_on and .unix_sk.shutdown == 0) | .id][0]')
	[ -n "$l" ] && [ "$l" != null ] && [ -n "$c" ] && [ "$c" != null ] ||
		{ fail "the image has no listener with 4 pending connections"; return 1; }
	local lino plist
	lino=$("$AMBER" show "$W/img" | jq -r --argjson l "$l" '.files[] | select(.id == $l) | .unix_sk.ino')
	plist=$("$AMBER" show "$W/img" | jq -r --argjson l "$l" '.files[] | select(.id == $l) | .unix_sk.pending | map(tostring) | join(" ")')
	set -- $plist
	opt_refused pend_other "are not what a dump writes" "$l.unix_sk.pending=$lino,$2,$3,$4" || ok=1
	opt_refused pend_twice "are not what a dump writes" "$l.unix_sk.pending=$1,$1,$3,$4" || ok=1
	opt_refused pend_short "are not what a dump writes" "$l.unix_sk.pending=$1,$2,$3" || ok=1
	opt_refused pend_backlog "are not what a dump writes" "$l.unix_sk.backlog=1" || ok=1
	opt_refused pend_dgram "are not what a dump writes" "$l.unix_sk.type=2" || ok=1
	opt_refused pend_on "are not what a dump writes" "$c.unix_sk.pending_on=12345" || ok=1
	[ $ok = 0 ] && unedited_restores
}

# Unix sockets of a network namespace of the tree: made in it, so that their abstract names are
# that namespace's (the listener B of "pending", the senders of "rights"): /proc/net/unix lists
# them inside, not on the host, and a new connection to B from inside reaches the restored one
TESTS+=(unix_netns_pending unix_netns_rights)
unetns_abs() { # NAME: the namespace lists it, amber's does not
	nsenter --net="/proc/$PID/ns/net" cat /proc/net/unix | grep -q " @$1\$" ||
		{ fail "@$1 is not in the namespace's /proc/net/unix"; return 1; }
	! grep -q " @$1\$" /proc/net/unix || { fail "@$1 is bound in amber's namespace"; return 1; }
	note "@$1 bound inside the namespace only"
}
unetns_pend_after() {
	pend_after && unetns_abs "amber-pending-$PID" || return 1
	# the host cannot reach it, a process in the namespace can (this is a new connection:
	# the program's checks ran on the old ones; B's backlog is 1 and empty by now)
	! python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect('\\0amber-pending-$PID')" 2>/dev/null ||
		{ fail "amber's namespace reaches @amber-pending-$PID"; return 1; }
}
t_unix_netns_pending() {
	command -v unshare >/dev/null || return 77
	PEND_NS=1 cycle -P pend_before -A unetns_pend_after -- unshare --net "$PROGS/unix" "$T" pending
}
t_unix_netns_rights() {
	command -v unshare >/dev/null || return 77
	cycle -A 'unetns_abs_rights' -- unshare --net "$PROGS/unix" "$T" rights
}
unetns_abs_rights() { unetns_abs "amb-unix-$PID"; }
