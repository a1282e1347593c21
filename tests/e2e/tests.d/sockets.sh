# Sockets (tests/e2e/progs/sockets.c): unix socketpairs of every type, named
# unix stream and dgram sockets, TCP listeners, UDP, and established TCP
# connections inside the tree and to a peer outside it, each with queued data.
TESTS+=(sockets_unix sockets sockets_tcp_refused sockets_unix_external sockets_leave_running
	sockets_dump_fails)

t_sockets_unix() { cycle -- "$PROGS/sockets" "$T" unix; }

# an image with established connections is refused by a restore without the flag
restore_needs_flag() {
	local out
	out=$(timeout -k 5 60 "$AMBER" restore -D "$W/img" 2>&1)
	local rc=$?
	echo "$out" | sed 's/^/    restore without --tcp-established: /' >>"$W/log"
	[ $rc != 0 ] || { fail "restore without --tcp-established succeeded"; return 1; }
	echo "$out" | grep -q -- --tcp-established ||
		{ fail "restore without --tcp-established does not name the flag"; return 1; }
	is_gone "$PID" || { fail "the refused restore left pid $PID behind"; return 1; }
}
t_sockets() {
	cycle -d "--tcp-established" -r "--tcp-established" -B restore_needs_flag -- \
		"$PROGS/sockets" "$T" all
}

# refused_dump WHAT PATTERN ARGS...: the dump fails naming PATTERN, and the tree runs on
refused_dump() {
	local what=$1 pat=$2
	shift 2
	start_prog "$PROGS/sockets" "$T" "$@" || return
	note "$what"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	dump_refused $? "$pat"
}

# without --tcp-established the dump is refused, naming the flag, and the tree runs on
t_sockets_tcp_refused() {
	[ $SELFTEST = 1 ] && return 77
	refused_dump "established TCP connections without the flag" --tcp-established all
}

# a unix socket whose peer is outside the tree is refused
t_sockets_unix_external() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/sockets" "$T" extunix; return; }
	refused_dump "a socketpair shared with a process outside the tree" "external unix socket" extunix
}

# -R with TCP_REPAIR: repair mode is left again and every connection keeps working
t_sockets_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/sockets" "$T" all || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -R --tcp-established -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump -R --tcp-established exited with $rc"; attach "$W/dump.log"; return 1; }
	[ -e "$W/img/inventory.img" ] || { fail "no inventory.img"; return 1; }
	runs_on "dump -R"
}

# a dump that fails after the connections went into repair mode must leave them working
t_sockets_dump_fails() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/sockets" "$T" all || return
	echo "+ AMBER_FAULT=rename:*:EIO" >>"$W/dump.log"
	AMBER_FAULT='rename:*:EIO' amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" --tcp-established -v -v
	rc=$?
	[ $rc != 0 ] || { fail "the dump succeeded despite the injected fault"; return 1; }
	grep -q "fault injection" "$W/dump.log" || { fail "the fault did not fire"; attach "$W/dump.log"; return 1; }
	grep -q "dumping files" "$W/dump.log" || { fail "the dump failed before the sockets were dumped"; attach "$W/dump.log"; return 1; }
	runs_on "the failed dump" || return 1
	note "amber said: $(grep -v '^+ ' "$W/dump.log" | grep -iv 'info\|debug\|fault injection' | tail -n 2 | tr '\n' ' ')"
}
