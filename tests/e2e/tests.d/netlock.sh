# The network lock (src/net/netlock.c) with tests/e2e/progs/netlock.c: a peer
# outside the tree and a child inside it keep sending to the root over TCP
# while it is dumped and restored; every byte must arrive in order, with no
# reset, and no amber nft table may outlive what it locks.
TESTS+=(netlock netlock_dump_fails netlock_leave_running netlock_skip_resets)

# the nft table amber made for the tree rooted at pid $1 (empty if none)
nl_table() { nft list tables 2>/dev/null | sed -n "s/^table inet \(amber-$1-[0-9a-f]*\)\$/\1/p"; }

nl_no_table() {
	local t
	t=$(nl_table "$PID")
	[ -z "$t" ] || { fail "$1: nft table inet $t is still there"; nft list table inet "$t" >>"$W/log" 2>&1; return 1; }
}

# after the dump: the lock holds every port of both connections, the peer keeps
# sending into it for 2 s without a reset, and a refused restore leaves it
nl_locked() {
	local t rules p rc
	t=$(nl_table "$PID")
	[ -n "$t" ] || { fail "no amber nft table after the dump (nft list tables: $(nft list tables 2>&1 | tr '\n' ' '))"; return 1; }
	rules=$(nft list table inet "$t")
	echo "$rules" | sed 's/^/    lock: /' >>"$W/log"
	for p in $(cat "$T/ports"); do
		echo "$rules" | grep -q "sport $p .*drop" && echo "$rules" | grep -q "dport $p .*drop" ||
			{ fail "the lock has no rule for port $p in both directions"; return 1; }
	done
	[ "$(echo "$rules" | grep -c drop)" = 6 ] || { fail "the lock has not 6 rules (3 sockets x 2 directions)"; return 1; }
	sleep 2
	[ ! -e "$T/e.sent" ] || { fail "the peer stopped while the tree was dumped: $(cat "$T/e.sent")"; return 1; }
	amber_to "$W/refused.log" 60 restore -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "a restore without --tcp-established succeeded"; return 1; }
	[ "$(nl_table "$PID")" = "$t" ] || { fail "the refused restore removed the lock"; return 1; }
	note "the lock $t held for 2 s and survived a refused restore"
}

nl_unlocked() { nl_no_table "the restore"; }
t_netlock() {
	cycle -d "--tcp-established" -r "--tcp-established" -B nl_locked -A nl_unlocked -- \
		"$PROGS/netlock" "$T"
}

# nl_runs_on WHAT: the tree runs on, the lock is gone, and every byte arrives after go
nl_runs_on() {
	local rc
	grep -q "locked .* in nft table" "$W/dump.log" || { fail "$1: the dump locked no connection"; attach "$W/dump.log"; return 1; }
	nl_no_table "$1" || return 1
	runs_on "$1"
}

t_netlock_dump_fails() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/netlock" "$T" || return
	echo "+ AMBER_FAULT=rename:*:EIO" >>"$W/dump.log"
	AMBER_FAULT='rename:*:EIO' amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" --tcp-established -v -v
	[ $? != 0 ] || { fail "the dump succeeded despite the injected fault"; return 1; }
	grep -q "fault injection" "$W/dump.log" || { fail "the fault did not fire"; attach "$W/dump.log"; return 1; }
	nl_runs_on "the failed dump"
}

t_netlock_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/netlock" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -R --tcp-established -v -v ||
		{ fail "amber dump -R exited with $?"; attach "$W/dump.log"; return 1; }
	nl_runs_on "dump -R"
}

# the control: without the lock the same peer is reset once the dump killed the tree
t_netlock_skip_resets() {
	[ $SELFTEST = 1 ] && return 77
	local err
	start_prog "$PROGS/netlock" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" --tcp-established --network-lock skip -v -v ||
		{ fail "amber dump --network-lock skip exited with $?"; attach "$W/dump.log"; return 1; }
	! grep -q "in nft table" "$W/dump.log" || { fail "--network-lock skip locked"; return 1; }
	nl_no_table "--network-lock skip" || return 1
	wait_for 20 test -s "$T/e.sent" || { fail "the unlocked peer was not reset in 20 s"; return 1; }
	err=$(cut -d' ' -f2 "$T/e.sent")
	[ "$err" != 0 ] || { fail "the unlocked peer finished without an error"; return 1; }
	note "without the lock the peer's send failed with errno $err"
}

# --network-lock iptables (CRIU's default name): the same lock as a chain of
# amber's in the filter tables of iptables and ip6tables, jumped to from INPUT
# and OUTPUT.  Run in a network namespace of the test's (fam_ns_up,
# skfamilies.sh), so that no table outlives it; a restore refused meanwhile
# leaves the chain and says how to remove it.
TESTS+=(netlock_iptables netlock_nftables_name)

# the chain amber made for the tree rooted at pid $1 (empty if none), in IPv4's table
nl_ipt_chain() { fam_in iptables -w -S 2>/dev/null | sed -n "s/^-N \(amber-ipt-$1-[0-9a-f]*\)\$/\1/p"; }

nl_ipt_locked() {
	local c rules p rc
	c=$(nl_ipt_chain "$PID")
	[ -n "$c" ] || { fail "no amber iptables chain after the dump: $(fam_in iptables -w -S 2>&1 | tr '\n' ' ')"; return 1; }
	rules=$(fam_in iptables -w -S "$c")
	echo "$rules" | sed 's/^/    lock: /' >>"$W/log"
	for p in $(cat "$T/ports"); do
		echo "$rules" | grep -q -- "--sport $p .*DROP" && echo "$rules" | grep -q -- "--dport $p .*DROP" ||
			{ fail "the lock has no rule for port $p in both directions"; return 1; }
	done
	[ "$(echo "$rules" | grep -c DROP)" = 6 ] || { fail "the chain has not 6 rules (3 sockets x 2 directions)"; return 1; }
	for p in INPUT OUTPUT; do
		fam_in iptables -w -S "$p" | grep -q -- "-A $p -j $c" ||
			{ fail "$p does not jump to $c"; return 1; }
		fam_in ip6tables -w -S "$p" | grep -q -- "-A $p -j $c" ||
			{ fail "ip6tables' $p does not jump to $c"; return 1; }
	done
	sleep 2
	[ ! -e "$T/e.sent" ] || { fail "the peer stopped while the tree was dumped: $(cat "$T/e.sent")"; return 1; }
	amber_to "$W/refused.log" 60 restore -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "a restore without --tcp-established succeeded"; return 1; }
	[ "$(nl_ipt_chain "$PID")" = "$c" ] || { fail "the refused restore removed the lock"; return 1; }
	grep -q "the network lock of the image, iptables chain $c (filter table), stays in place" "$W/refused.log" &&
		grep -qF "remove it with 'for t in iptables ip6tables; do \$t -w -D INPUT -j $c;" "$W/refused.log" ||
		{ fail "the refused restore does not name the lock and its removal"; attach "$W/refused.log"; return 1; }
	note "the lock $c held for 2 s and survived a refused restore, which said: $(grep -m1 'stays in place' "$W/refused.log")"
}

nl_ipt_unlocked() {
	[ -z "$(nl_ipt_chain "$PID")" ] || { fail "the restore left the iptables chain"; return 1; }
	! fam_in ip6tables -w -S | grep -q "amber-ipt-" || { fail "the restore left the ip6tables chain"; return 1; }
	! fam_in iptables -w -S | grep -q -- "-j amber-ipt-" || { fail "the restore left a jump to the chain"; return 1; }
}

t_netlock_iptables() {
	local rc
	fam_ns_up || return 1
	AMBER=$AMBER_NS cycle -d "--tcp-established --network-lock iptables" -r "--tcp-established" \
		-B nl_ipt_locked -A nl_ipt_unlocked -- nsenter --net="/run/netns/$FAM_NS" "$PROGS/netlock" "$T"
	rc=$?
	cleanup_test
	fam_ns_down
	return $rc
}

# CRIU's other name, nftables, is nft; a refused restore names the table and its removal
nl_nft_named() {
	local t rc
	t=$(fam_in nft list tables 2>/dev/null | sed -n "s/^table inet \(amber-$PID-[0-9a-f]*\)\$/\1/p")
	[ -n "$t" ] || { fail "no amber nft table after the dump with --network-lock nftables"; return 1; }
	amber_to "$W/refused.log" 60 restore -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "a restore without --tcp-established succeeded"; return 1; }
	grep -qF "nft table inet $t, stays in place so that the restore can be tried again; if the image is abandoned, remove it with 'nft delete table inet $t'" "$W/refused.log" ||
		{ fail "the refused restore does not name the lock and its removal"; attach "$W/refused.log"; return 1; }
}
nl_nft_gone() {
	! fam_in nft list tables 2>/dev/null | grep -q "amber-$PID-" || { fail "the restore left the nft table"; return 1; }
}
t_netlock_nftables_name() {
	local rc
	fam_ns_up || return 1
	AMBER=$AMBER_NS cycle -d "--tcp-established --network-lock nftables" -r "--tcp-established" \
		-B nl_nft_named -A nl_nft_gone -- nsenter --net="/run/netns/$FAM_NS" "$PROGS/netlock" "$T"
	rc=$?
	cleanup_test
	fam_ns_down
	return $rc
}
