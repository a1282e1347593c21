# Socket options (tests/e2e/progs/sockopts.c, src/net/sk-opts.c): TCP
# listeners in one SO_REUSEPORT group, an established connection, UDP over
# IPv4 and IPv6, unix pairs, each with options set; after restore every one
# reads back as before, and the filters, the group and IP_FREEBIND still work.
TESTS+=(sockopts sockopts_multicast sockopts_mcast_source_refused sockopts_optid_refused
	sockopts_image_refused sockopts_owner_refused)

t_sockopts() {
	cycle -d "--tcp-established" -r "--tcp-established" -- "$PROGS/sockopts" "$T"
}

# the id of the inet/unix socket whose options include NAME, and NAME's index there
sk_with_opt() {
	"$AMBER" show "$W/img" | jq -r --arg n "$1" '[.files[] | (.inet_sk // .unix_sk) as $s |
		select($s != null) | {id, k: (($s.opts // []) | map(.name) | index($n))} |
		select(.k != null)][0] | "\(.id) \(.k)"'
}
sk_kind() {
	"$AMBER" show "$W/img" | jq -r --argjson i "$1" '.files[] | select(.id == $i) |
		if .inet_sk then "inet_sk" else "unix_sk" end'
}

# opt_refused NAME PATTERN EDIT...: an edited copy of files.img is refused by a
# restore before any process exists, for the reason PATTERN
opt_refused() {
	local name=$1 pat=$2 rc
	shift 2
	rm -rf "$W/$name"
	cp -a "$W/img" "$W/$name"
	"$IMGEDIT" "$W/$name" files.img "$@" 2>>"$W/log" || { fail "$name: imgedit failed"; return 1; }
	amber_to "$W/$name.log" 30 restore -d --tcp-established -D "$W/$name"
	rc=$?
	[ $rc != 0 ] || { fail "$name: restored an image edited with $*"; attach "$W/$name.log"; return 1; }
	grep -q -- "$pat" "$W/$name.log" ||
		{ fail "$name: refused, but not for '$pat'"; attach "$W/$name.log"; return 1; }
	! grep -q "restoring task" "$W/$name.log" ||
		{ fail "$name: refused only once processes existed"; attach "$W/$name.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "$name: pid $PID exists after the refusal"; return 1; }
	note "$name: refused ($(grep -m1 error "$W/$name.log"))"
}

t_sockopts_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ka kak kf kfk cc cck rb rbk big ok=0
	start_prog "$PROGS/sockopts" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" --tcp-established ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	read -r ka kak <<<"$(sk_with_opt SO_KEEPALIVE)"
	read -r kf kfk <<<"$(sk_with_opt SO_ATTACH_FILTER)"
	read -r cc cck <<<"$(sk_with_opt TCP_CONGESTION)"
	[ -n "$ka" ] && [ -n "$kf" ] && [ -n "$cc" ] && [ "$kf" != null ] ||
		{ fail "the image lacks the program's options"; return 1; }
	# BPF_MAXINSNS + 1 instructions of 8 bytes
	big=$W/big
	head -c $((4097 * 8)) /dev/zero | od -An -v -tx1 | tr -d ' \n' >"$big"

	opt_refused unknown "does not know" "$ka.$(sk_kind "$ka").opts.$kak.name=SO_BOGUS" || ok=1
	opt_refused bool_range "SO_KEEPALIVE out of its range" \
		"$ka.$(sk_kind "$ka").opts.$kak.val=2" || ok=1
	opt_refused big_filter "socket filter of 32776 bytes" \
		"$kf.$(sk_kind "$kf").opts.$kfk.data=@$big" || ok=1
	opt_refused odd_filter "socket filter of 7 bytes" \
		"$kf.$(sk_kind "$kf").opts.$kfk.data=00112233445566" || ok=1
	opt_refused twice "SO_KEEPALIVE twice" "$ka.$(sk_kind "$ka").opts.0.name=SO_KEEPALIVE" \
		"$ka.$(sk_kind "$ka").opts.0.val=1" || ok=1
	# a value the kernel changes (it doubles half of it): read back, and refused
	read -r rb rbk <<<"$(sk_with_opt SO_RCVBUF)"
	opt_refused odd_rcvbuf "SO_RCVBUF is 100000 once set, not 100001" \
		"$rb.inet_sk.opts.$rbk.val=100001" || ok=1
	# a value the kernel refuses: the error names the process, the fd and the option
	opt_refused no_such_cc "pid $PID: fd [0-9]* (inet socket:\[[0-9]*\]): cannot set TCP_CONGESTION" \
		"$cc.inet_sk.opts.$cck.data=$(printf nosuchcc | od -An -v -tx1 | tr -d ' \n')" || ok=1
	return $ok
}

# nobody's image (progs/owner.c, security-owner.sh) asking for what needs
# CAP_NET_ADMIN is refused by root's restore, naming the option
t_sockopts_owner_refused() {
	[ $SELFTEST = 1 ] && return 77
	local sk n ok=0
	owner_dump || return 1
	sk=$(sock_id)
	[ -n "$sk" ] || { fail "the owner program's image has no unix socket"; return 1; }
	n=$("$AMBER" show "$W/img" | jq --argjson i "$sk" '.files[] | select(.id == $i) |
		.unix_sk.opts // [] | length')
	refused mark "SO_MARK = 1, which needs CAP_NET_ADMIN" files.img \
		"$sk.unix_sk.opts.$n.name=SO_MARK" "$sk.unix_sk.opts.$n.val=1" || ok=1
	refused priority "SO_PRIORITY = 7, which needs CAP_NET_ADMIN" files.img \
		"$sk.unix_sk.opts.$n.name=SO_PRIORITY" "$sk.unix_sk.opts.$n.val=7" || ok=1
	return $ok
}

# a UDP socket that joined a multicast group on lo receives the group's datagrams after restore
t_sockopts_multicast() {
	cycle -d "--tcp-established" -r "--tcp-established" -- "$PROGS/sockopts" "$T" mc
}

# sockopts_dump_refused MODE PATTERN: the dump of "sockopts DIR MODE" is
# refused naming PATTERN, and the program runs on
sockopts_dump_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/sockopts" "$T" "$1" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" --tcp-established
	rc=$?
	[ $rc != 0 ] || { fail "the dump of 'sockopts $1' succeeded"; return 1; }
	grep -q -- "$2" "$W/dump.log" ||
		{ fail "the refusal does not say '$2'"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "a refused dump left inventory.img"; return 1; }
	runs_on "the refused dump" || return 1
	note "amber said: $(grep -m1 error "$W/dump.log")"
}

# a membership that filters sources is refused at dump
t_sockopts_mcast_source_refused() {
	sockopts_dump_refused mcsrc "239.1.2.3 on lo (ifindex 1) filters sources"
}

# so is SOF_TIMESTAMPING_OPT_ID, whose counter cannot be set
t_sockopts_optid_refused() {
	sockopts_dump_refused optid "SO_TIMESTAMPING_OLD is set with SOF_TIMESTAMPING_OPT_ID"
}

# Options amber does not keep yet are refused at dump, naming them, and the
# process runs on: IP_OPTIONS, SO_PEEK_OFF, SO_BUSY_POLL, SO_MAX_PACING_RATE.
TESTS+=(sockopts_unkept_refused)
t_sockopts_unkept_refused() {
	[ $SELFTEST = 1 ] && return 77
	local opt ok=0
	for opt in IP_OPTIONS SO_PEEK_OFF SO_BUSY_POLL SO_MAX_PACING_RATE; do
		rm -rf "$T" "$W/img"
		start_prog "$PY" -c 'import socket, sys, time
o = sys.argv[2]
if o == "IP_OPTIONS":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, b"\x01\x01\x01\x01")
elif o == "SO_PEEK_OFF":
    s, t = socket.socketpair()
    s.setsockopt(socket.SOL_SOCKET, 42, 3)
elif o == "SO_BUSY_POLL":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, 46, 77)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, 47, 123456)
open(sys.argv[1] + "/ready", "w").write("x")
time.sleep(120)' "$T" "$opt" || return 1
		if amber_to "$W/dump-$opt.log" 30 dump -t "$PID" -D "$W/img"; then
			fail "$opt: a socket with it set was dumped"
			ok=1
		elif ! grep -q "$opt is set, which amber does not restore" "$W/dump-$opt.log"; then
			fail "$opt: refused, but not naming it"
			attach "$W/dump-$opt.log"
			ok=1
		elif ! is_alive "$PID"; then
			fail "$opt: the refused dump harmed the process"
			ok=1
		fi
		kill "$PID" 2>/dev/null
		wait "$PID" 2>/dev/null
	done
	return $ok
}
