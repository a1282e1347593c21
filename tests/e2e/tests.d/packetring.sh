# Packet sockets' receive rings (tests/e2e/progs/packetring.c; src/net/packet-ring.c):
# TPACKET_V1, V2 and V3 rings on lo with frames unread, a V3 block half filled,
# a V3 ring the kernel froze and one whose current block the retire timer left
# empty.  After restore the program reads the unread frames where it looks
# next, and new frames land right after them.
TESTS+=(packetring_v1 packetring_v2 packetring_v3 packetring_v3frozen packetring_v3empty)

t_packetring_v1() { cycle -- "$PROGS/packetring" "$T" v1; }
t_packetring_v2() { cycle -- "$PROGS/packetring" "$T" v2; }
t_packetring_v3() { cycle -- "$PROGS/packetring" "$T" v3; }
t_packetring_v3frozen() { cycle -- "$PROGS/packetring" "$T" v3frozen; }
t_packetring_v3empty() { cycle -- "$PROGS/packetring" "$T" v3empty; }

# Transmit rings (PACKET_TX_RING): V1 with PACKET_LOSS, V2 with a receive ring in
# the same mapping, V3; the ring wrapped, two frames queued and not sent at
# the dump.  After restore a send() sends the two first, and new frames go
# out in order from where the program is in the ring.
TESTS+=(packetring_tx1loss packetring_tx2 packetring_tx3)
t_packetring_tx1loss() { cycle -- "$PROGS/packetring" "$T" tx1loss; }
t_packetring_tx2() { cycle -- "$PROGS/packetring" "$T" tx2; }
t_packetring_tx3() { cycle -- "$PROGS/packetring" "$T" tx3; }

# A dump that leaves the program running (-R) offers every frame of its
# transmit rings to the kernel to find its place, and puts them back: the
# program's own checks (its two queued frames go out first, then new ones in
# order) pass on the original rings; with and without PACKET_LOSS.
TESTS+=(packetring_tx_leave_running)
t_packetring_tx_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	local mode
	for mode in tx2 tx1loss; do
		start_prog "$PROGS/packetring" "$T" "$mode" || return 1
		dump_leave_running "$W/dump-$mode.log" "$W/img-$mode" || return 1
		grep -q "PACKET_TX_RING V[12], 16 frames of 1024, the kernel at frame 5" "$W/dump-$mode.log" ||
			{ fail "the dump did not find the kernel at frame 5 ($mode)"; attach "$W/dump-$mode.log"; return 1; }
		runs_on "the dump with -R ($mode)" || return 1
		rm -f "$T/go" "$T/ready" "$T/result"
	done
}

# Debian's tcpdump capturing UDP on lo into a file (-U): libpcap's TPACKET_V3
# ring (the last datagrams before the dump still in the block the kernel
# fills) and, with --immediate-mode, its TPACKET_V2 ring.  Datagrams 1-10
# before the dump, 11-20 after the restore: the file has all 20, in order.
TESTS+=(packetring_tcpdump packetring_tcpdump_immediate)
t_packetring_tcpdump() { tcpd_case 47480 V3; }
t_packetring_tcpdump_immediate() { tcpd_case 47481 V2 --immediate-mode; }
tcpd_send() { # PORT FIRST LAST
	local i
	for ((i = $2; i <= $3; i++)); do echo "amber-dgram-$i" >"/dev/udp/127.0.0.1/$1"; done
}
tcpd_got() { tcpdump -r "$T/cap.pcap" -n -A 2>/dev/null | grep -o 'amber-dgram-[0-9]*' | sed 's/.*-//' | paste -sd' '; }
tcpd_case() { # PORT VERSION [TCPDUMP OPTIONS]
	[ $SELFTEST = 1 ] && return 77
	command -v tcpdump >/dev/null || { note "tcpdump is not installed (make setup)"; return 77; }
	local port=$1 version=$2 got want
	shift 2
	start_prog sh -c 'touch "$AMBER_T/ready"; exec tcpdump -i lo -n -U -Z root "$@" -w "$AMBER_T/cap.pcap" udp port '"$port" tcpdump "$@" || return 1
	wait_for 10 grep -q "listening on" "$T/err" || { fail "tcpdump did not start"; attach "$T/err"; return 1; }
	tcpd_send "$port" 1 5
	wait_for 5 eval '[ "$(tcpd_got)" = "1 2 3 4 5" ]' || { fail "tcpdump wrote '$(tcpd_got)', not 1-5"; return 1; }
	tcpd_send "$port" 6 10
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v || { fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	grep -q "PACKET_RX_RING $version" "$W/dump.log" ||
		{ fail "tcpdump's ring is not a $version ring"; attach "$W/dump.log" 10; return 1; }
	note "$(grep -o 'PACKET_RX_RING.*' "$W/dump.log")"
	wait_for 10 is_gone "$PID" || { fail "tcpdump $PID still there after the dump"; return 1; }
	amber_to "$W/restore.log" 60 restore -d -D "$W/img" -v ||
		{ fail "amber restore failed"; attach "$W/restore.log"; return 1; }
	tcpd_send "$port" 11 20
	want="$(seq -s ' ' 1 20)"
	wait_for 10 eval '[ "$(tcpd_got)" = "$want" ]'
	kill -INT "$PID"
	wait_for 10 is_gone "$PID" || { fail "tcpdump did not end on SIGINT"; return 1; }
	got=$(tcpd_got)
	[ "$got" = "$want" ] || { fail "the capture holds '$got', not 1-20 in order"; attach "$T/err"; return 1; }
	grep -q "^20 packets captured" "$T/err" ||
		{ fail "tcpdump's own count is not 20"; attach "$T/err"; return 1; }
}

# Crafted ring records are refused before anything is made; the unedited image
# restores.
TESTS+=(packetring_image_refused)
t_packetring_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 id other k bad="a packet ring the socket could not have"
	start_prog "$PROGS/packetring" "$T" v3 || return 1
	dump_and_gone || return 1
	id=$("$AMBER" show "$W/img" | jq '[.files[] | select(.packet_sk.rx_ring)][0].id')
	other=$("$AMBER" show "$W/img" | jq '[.files[] | select(.packet_sk and (.packet_sk.rx_ring | not))][0].id')
	k=$("$AMBER" show "$W/img" | jq '.tasks[0].mm.vmas | map(.kind == "VMA_PACKET_RING") | index(true)')
	[ "$id" != null ] && [ "$other" != null ] && [ "$k" != null ] ||
		{ fail "no ring, other packet socket or ring mapping in the image"; return 1; }
	refused pr_head "$bad" files.img "$id.packet_sk.rx_ring.head=4" || ok=1
	refused pr_bsize "the image is corrupt" files.img "$id.packet_sk.rx_ring.block_size=6144" || ok=1
	refused pr_frames "$bad" files.img "$id.packet_sk.rx_ring.frame_nr=7" || ok=1
	refused pr_data "$bad" files.img "$id.packet_sk.rx_ring.data=00" || ok=1
	refused pr_steps "$bad" files.img "$id.packet_sk.rx_ring.steps=632,672,704,3000" || ok=1
	refused pr_step "$bad" files.img "$id.packet_sk.rx_ring.steps=632,673,704" || ok=1
	refused pr_frozen "$bad" files.img "$id.packet_sk.rx_ring.frozen=true" || ok=1
	refused pr_unbound "$bad" files.img "$id.packet_sk.protocol=0" || ok=1
	refused pr_vma_off "not a packet ring of the process's" "mm-$PID.img" "vmas.$k.pgoff=4096" || ok=1
	refused pr_vma_len "not a packet ring of the process's" "mm-$PID.img" \
		"vmas.$k.end=$(("$("$AMBER" show "$W/img" | jq ".tasks[0].mm.vmas[$k].start")" + 8192))" || ok=1
	refused pr_vma_file "not a packet ring of the process's" "mm-$PID.img" "vmas.$k.file_id=$other" || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores
}

# The same for transmit rings: a V2 one beside a receive ring (the mapping holds
# both), and block options on a V3 one.
TESTS+=(packetring_tx_image_refused)
t_packetring_tx_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 id k v start bad="a packet ring of a shape the kernel does not make"
	start_prog "$PROGS/packetring" "$T" tx2 || return 1
	dump_and_gone || return 1
	id=$("$AMBER" show "$W/img" | jq '[.files[] | select(.packet_sk.tx_ring)][0].id')
	k=$("$AMBER" show "$W/img" | jq '.tasks[0].mm.vmas | map(.kind == "VMA_PACKET_RING") | index(true)')
	[ "$id" != null ] && [ "$k" != null ] || { fail "no transmit ring or ring mapping in the image"; return 1; }
	start=$("$AMBER" show "$W/img" | jq ".tasks[0].mm.vmas[$k].start")
	refused tx_head "$bad" files.img "$id.packet_sk.tx_ring.head=16" || ok=1
	refused tx_frames "$bad" files.img "$id.packet_sk.tx_ring.frame_nr=15" || ok=1
	refused tx_data "$bad" files.img "$id.packet_sk.tx_ring.data=00" || ok=1
	v=$("$AMBER" show "$W/img" | jq "[.files[] | select(.id == $id)][0].packet_sk.opts | map(.name == \"PACKET_VERSION\") | index(true)")
	refused tx_v3opts "a V3 transmit ring with block options" files.img \
		"$id.packet_sk.opts.$v.val=2" "$id.packet_sk.tx_ring.retire_tmo=5" || ok=1
	# the mapping holds the receive ring alone
	refused tx_vma_len "not a packet ring of the process's" "mm-$PID.img" "vmas.$k.end=$((start + 16384))" || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores
}

# A transmit ring alone (V3) whose socket's version is none the kernel has
# (amber sizes the frames' headers by it) is refused the same way.
TESTS+=(packetring_tx_version_refused)
t_packetring_tx_version_refused() {
	[ $SELFTEST = 1 ] && return 77
	local id v
	start_prog "$PROGS/packetring" "$T" tx3 || return 1
	dump_and_gone || return 1
	id=$("$AMBER" show "$W/img" | jq '[.files[] | select(.packet_sk.tx_ring)][0].id')
	v=$("$AMBER" show "$W/img" | jq "[.files[] | select(.id == $id)][0].packet_sk.opts | map(.name == \"PACKET_VERSION\") | index(true)")
	[ "$id" != null ] && [ "$v" != null ] || { fail "no transmit ring or version in the image"; return 1; }
	refused tx_version "a packet ring of a shape the kernel does not make" files.img \
		"$id.packet_sk.opts.$v.val=7" || return 1
	unedited_restores
}

# A mapping of part of a ring is refused at dump, naming it; the program runs on.
TESTS+=(packetring_part_refused)
t_packetring_part_refused() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/packetring" "$T" v2part; return; }
	start_prog "$PROGS/packetring" "$T" v2part || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v && { fail "amber dump succeeded"; return 1; }
	grep -q "is part of the rings of packet socket:\[[0-9]*\]" "$W/dump.log" ||
		{ fail "the refusal does not name the partial mapping"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}
