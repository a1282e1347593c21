# Sockets of other families (tests/e2e/progs/skfamilies.c; src/net/sk-raw.c,
# sk-packet.c, sk-netlink.c): UDP-Lite, ping and raw sockets, packet sockets,
# netlink sockets.  Each runs, with amber, in a network namespace of the
# test's own (amberfam-PID: lo up, a veth pair amf0/amf1, ping sockets allowed
# for root), removed afterwards; the program checks every option, address
# and membership again after restore, and that each socket still works.
TESTS+=(skfamilies_inet skfamilies_packet skfamilies_netlink skfamilies_rawq_refused
	skfamilies_ring_refused skfamilies_ring_mapped_refused skfamilies_image_refused
	skfamilies_owner_refused skfamilies_owner_ping)

FAM_NS=amberfam-$$

# fam_ns_up: the namespace, and AMBER_NS, amber running in it
fam_ns_up() {
	ip netns del "$FAM_NS" 2>/dev/null
	ip netns add "$FAM_NS" || { fail "cannot create network namespace $FAM_NS"; return 1; }
	fam_in sh -c 'echo "0 0" >/proc/sys/net/ipv4/ping_group_range' &&
		ip -n "$FAM_NS" link set lo up &&
		ip -n "$FAM_NS" link add amf0 type veth peer name amf1 &&
		fam_in sh -c 'for i in amf0 amf1; do
			echo 1 >/proc/sys/net/ipv6/conf/$i/disable_ipv6; done' &&
		ip -n "$FAM_NS" link set amf0 up && ip -n "$FAM_NS" link set amf1 up ||
		{ fail "cannot set up namespace $FAM_NS"; fam_ns_down; return 1; }
	AMBER_NS=$W/amber-ns
	printf '#!/bin/sh\nexec nsenter --net=/run/netns/%s %s "$@"\n' "$FAM_NS" "$AMBER" >"$AMBER_NS"
	chmod 0755 "$AMBER_NS"
}
fam_ns_down() { ip netns del "$FAM_NS" 2>/dev/null; }
fam_in() { nsenter --net="/run/netns/$FAM_NS" "$@"; }

# skfam_cycle MODE: the standard cycle of "skfamilies DIR MODE" in the namespace
skfam_cycle() {
	local rc
	fam_ns_up || return 1
	AMBER=$AMBER_NS cycle -- nsenter --net="/run/netns/$FAM_NS" "$PROGS/skfamilies" "$T" "$1"
	rc=$?
	cleanup_test
	fam_ns_down
	return $rc
}

t_skfamilies_inet() { skfam_cycle inet; }
t_skfamilies_packet() { skfam_cycle packet; }
t_skfamilies_netlink() { skfam_cycle netlink; }

# fam_dump_refused MODE PATTERN: the dump of "skfamilies DIR MODE" (in the
# namespace) is refused, saying PATTERN, and the program runs on
fam_dump_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	fam_ns_up || return 1
	start_prog nsenter --net="/run/netns/$FAM_NS" "$PROGS/skfamilies" "$T" "$1" ||
		{ fam_ns_down; return 1; }
	AMBER=$AMBER_NS amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"
	rc=$?
	if [ $rc = 0 ]; then
		fail "the dump of 'skfamilies $1' succeeded"
	elif ! grep -q -- "$2" "$W/dump.log"; then
		fail "refused, but not saying '$2'"
		attach "$W/dump.log"
		rc=0
	elif [ -e "$W/img/inventory.img" ]; then
		fail "a refused dump left inventory.img"
		rc=0
	elif ! runs_on "the refused dump"; then
		rc=0
	else
		note "amber said: $(grep -m1 error "$W/dump.log")"
	fi
	cleanup_test
	fam_ns_down
	[ $rc != 0 ]
}

# a raw socket with a packet queued is refused at dump, naming it, and runs on
t_skfamilies_rawq_refused() { fam_dump_refused rawq "raw socket .* has packets queued for reading"; }
# so is a SOCK_DGRAM packet socket's transmit ring with PACKET_LOSS (its place
# is found only by sending), and a receive ring mapped with its socket closed
t_skfamilies_ring_refused() {
	fam_dump_refused ring "a SOCK_DGRAM packet socket with PACKET_LOSS has a PACKET_TX_RING, whose place amber cannot find without sending"
}
t_skfamilies_ring_mapped_refused() { fam_dump_refused ring-mapped "maps socket:\[[0-9]*\], a socket's memory"; }

# crafted values in the image's packet, netlink and raw sockets are refused before
# any process exists
t_skfamilies_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 pk nl raw fo
	fam_ns_up || return 1
	local AMBER=$AMBER_NS
	start_prog nsenter --net="/run/netns/$FAM_NS" "$PROGS/skfamilies" "$T" packet ||
		{ fam_ns_down; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" ||
		{ fail "amber dump failed"; attach "$W/dump.log"; fam_ns_down; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; fam_ns_down; return 1; }
	pk=$("$AMBER" show "$W/img" | jq -r '[.files[] | select((.packet_sk.mclist // []) | length > 0) | .id][0]')
	fo=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.packet_sk.fanout) | .id][0]')
	[ -n "$pk" ] && [ "$pk" != null ] && [ -n "$fo" ] && [ "$fo" != null ] ||
		{ fail "the image lacks the program's packet sockets"; fam_ns_down; return 1; }
	opt_refused pk_proto "packet socket with a protocol, an interface or a fanout out of range" \
		"$pk.packet_sk.protocol=65536" || ok=1
	opt_refused pk_ifname "was bound to interface amf9 (index" "$pk.packet_sk.ifname=amf9" || ok=1
	opt_refused pk_cbpf "fanout out of range" "$fo.packet_sk.fanout=$((4711 | 6 << 16))" || ok=1
	opt_refused pk_mc "packet membership out of range" "$pk.packet_sk.mclist.0.type=9" || ok=1
	opt_refused pk_mc_count "packet membership out of range" \
		"$pk.packet_sk.mclist.0.count=100000" || ok=1
	cleanup_test
	rm -rf "$W/img" "$T" # the last program's ready file would be taken for the next one's
	start_prog nsenter --net="/run/netns/$FAM_NS" "$PROGS/skfamilies" "$T" netlink ||
		{ fam_ns_down; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" ||
		{ fail "amber dump failed"; attach "$W/dump.log"; fam_ns_down; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; fam_ns_down; return 1; }
	nl=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.netlink_sk) | .id][0]')
	opt_refused nl_proto "netlink socket of type [0-9]*, protocol 99" "$nl.netlink_sk.protocol=99" ||
		ok=1
	opt_refused nl_groups "groups out of range" "$nl.netlink_sk.dst_group=100000" || ok=1
	cleanup_test
	rm -rf "$W/img" "$T" # the last program's ready file would be taken for the next one's
	start_prog nsenter --net="/run/netns/$FAM_NS" "$PROGS/skfamilies" "$T" inet ||
		{ fam_ns_down; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" ||
		{ fail "amber dump failed"; attach "$W/dump.log"; fam_ns_down; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; fam_ns_down; return 1; }
	raw=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.inet_sk.type == 3) | .id][0]')
	opt_refused raw_proto "addresses or ports out of range" "$raw.inet_sk.proto=0" || ok=1
	opt_refused raw_addr "addresses or ports out of range" "$raw.inet_sk.src_addr=7f0000" || ok=1
	opt_refused raw_dgrams "queued datagrams for a raw socket" \
		"$raw.inet_sk.dgrams.0.data=41" || ok=1
	cleanup_test
	fam_ns_down
	return $ok
}

# Nobody's process made a raw socket and a packet socket with an ambient
# CAP_NET_RAW, then dropped it: root's restore of nobody's image refuses them
# (its owner could not make them), before any process exists.
t_skfamilies_owner_refused() {
	[ $SELFTEST = 1 ] && return 77
	local mode rc ok=0
	for mode in owner-raw owner-packet; do
		rm -rf "$W/img" "$T"
		mkdir -p "$T"
		: >"$T/out"
		: >"$T/err"
		chown 65534:65534 "$T/out" "$T/err"
		start_prog setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=+net_raw \
			--ambient-caps=+net_raw "$PROGS/skfamilies" "$T" "$mode" || return 1
		amber_to "$W/dump-$mode.log" 60 dump -t "$PID" -D "$W/img" ||
			{ fail "$mode: amber dump failed"; attach "$W/dump-$mode.log"; return 1; }
		wait_for 10 is_gone "$PID" || { fail "$mode: pid $PID still there"; return 1; }
		chown -R 65534:65534 "$W/img"
		amber_to "$W/restore-$mode.log" 30 restore -d -D "$W/img"
		rc=$?
		if [ $rc = 0 ]; then
			fail "$mode: root restored nobody's image with a $mode socket"
			ok=1
		elif ! grep -q "needs CAP_NET_RAW, and belongs to uid 65534" "$W/restore-$mode.log"; then
			fail "$mode: refused, but not for CAP_NET_RAW"
			attach "$W/restore-$mode.log"
			ok=1
		elif grep -q "restoring task" "$W/restore-$mode.log"; then
			fail "$mode: refused only once processes existed"
			ok=1
		else
			note "$mode: $(grep -m1 error "$W/restore-$mode.log")"
		fi
		wait_for 10 is_gone "$PID" || { fail "$mode: pid $PID exists after the refusal"; ok=1; }
		cleanup_test
	done
	return $ok
}

# Nobody's ping socket comes back in nobody's image, made with nobody's
# rights: while net.ipv4.ping_group_range leaves out nobody's group the
# restore is refused, saying so; once it includes it, the socket is bound to
# its id again and answered.
t_skfamilies_owner_ping() {
	local rc ok=0
	fam_ns_up || return 1
	fam_in sh -c 'echo "0 65534" >/proc/sys/net/ipv4/ping_group_range'
	mkdir -p "$T"
	: >"$T/out"
	: >"$T/err"
	chown 65534:65534 "$T/out" "$T/err"
	if [ $SELFTEST = 1 ]; then
		AMBER=$AMBER_NS selftest_cycle "" nsenter --net="/run/netns/$FAM_NS" setpriv --reuid=65534 \
			--regid=65534 --clear-groups "$PROGS/skfamilies" "$T" owner-ping
		rc=$?
		fam_ns_down
		return $rc
	fi
	start_prog nsenter --net="/run/netns/$FAM_NS" setpriv --reuid=65534 --regid=65534 \
		--clear-groups "$PROGS/skfamilies" "$T" owner-ping || { fam_ns_down; return 1; }
	AMBER=$AMBER_NS amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" ||
		{ fail "amber dump failed"; attach "$W/dump.log"; fam_ns_down; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; fam_ns_down; return 1; }
	chown -R 65534:65534 "$W/img"
	fam_in sh -c 'echo "0 100" >/proc/sys/net/ipv4/ping_group_range'
	AMBER=$AMBER_NS amber_to "$W/refused.log" 30 restore -d -D "$W/img"
	if [ $? = 0 ]; then
		fail "nobody's ping socket was made outside ping_group_range"
		ok=1
	elif ! grep -q "ping_group_range does not include the group of the image's owner" "$W/refused.log"; then
		fail "refused, but not for ping_group_range"
		attach "$W/refused.log"
		ok=1
	else
		note "outside the range: $(grep -m1 error "$W/refused.log")"
	fi
	wait_for 10 is_gone "$PID" || { fail "pid $PID exists after the refusal"; ok=1; }
	fam_in sh -c 'echo "0 65534" >/proc/sys/net/ipv4/ping_group_range'
	AMBER=$AMBER_NS amber_to "$W/restore.log" 30 restore -d -D "$W/img" ||
		{ fail "nobody's image did not restore"; attach "$W/restore.log"; ok=1; }
	if [ $ok = 0 ]; then
		wait_for 10 is_alive "$PID" || { fail "pid $PID not back"; ok=1; }
		touch "$T/go"
		wait_for 30 test -e "$T/result" || { fail "the restored program wrote no verdict"; ok=1; }
		[ "$(cat "$T/result" 2>/dev/null)" = 0 ] ||
			{ fail "the restored program's checks failed"; attach "$T/err"; ok=1; }
	fi
	cleanup_test
	fam_ns_down
	return $ok
}
