# Network namespaces (src/ns/net.c, tests/e2e/progs/netns.c): a program in a
# network namespace the test makes (unshare --net: it goes with the program)
# with lo up and 10.77.0.1/24 on it, two routes, two sysctls changed, an nft
# table with a rule, TCP and UDP sockets with data queued, comes back in a
# new namespace made the same; the host's network configuration stays as it
# was.  Ports 47400-47401.
TESTS+=(netns_cycle netns_veth netns_link_refused netns_image_refused netns_vethpair netns_userns)

# what the namespace is made of, then the program (HOSTPID: the host's namespace, for a veth)
NETNS_SETUP='ip link set lo up && ip addr add 10.77.0.1/24 dev lo &&
ip route add 10.88.0.0/24 dev lo src 10.77.0.1 && ip route add blackhole 10.99.0.0/24 &&
sysctl -qw net.ipv4.ip_default_ttl=77 && sysctl -qw net.ipv4.ip_local_port_range="40000 45000" &&
nft add table inet amb_t && nft add chain inet amb_t input "{ type filter hook input priority 0; }" &&
nft add rule inet amb_t input tcp dport 47499 drop'

netns_host() {
	{
		ip -o addr show | grep -v " vha$$ "
		ip route show table all | grep -v "vha$$"
		sysctl net.ipv4.ip_default_ttl net.ipv4.ip_local_port_range
		nft list ruleset 2>/dev/null | grep -v "^\s*$"
	} 2>&1 | sort
}
netns_host_before() { netns_host >"$W/host.before"; }
netns_host_same() {
	netns_host >"$W/host.after"
	diff -u "$W/host.before" "$W/host.after" >"$W/host.diff" ||
		{ fail "the host's network configuration changed (- before, + after):"; sed 's/^/    /' "$W/host.diff" >>"$W/log"; return 1; }
}
netns_in() { nsenter --net="/proc/$PID/ns/net" "$@"; }

# after the restore: the process is in a namespace of its own, made as it was
netns_check() {
	[ "$(readlink "/proc/$PID/ns/net")" != "$(readlink /proc/self/ns/net)" ] ||
		{ fail "pid $PID is in the host's network namespace"; return 1; }
	netns_in ip -4 -o addr show dev lo | grep -q "inet 10.77.0.1/24 " ||
		{ fail "10.77.0.1/24 is not on lo: $(netns_in ip -o addr show dev lo)"; return 1; }
	netns_in ip route show 10.88.0.0/24 | grep -q "dev lo .*src 10.77.0.1" ||
		{ fail "the route to 10.88.0.0/24 is not back: $(netns_in ip route)"; return 1; }
	netns_in ip route show type blackhole | grep -q "10.99.0.0/24" ||
		{ fail "the blackhole route is not back: $(netns_in ip route show type blackhole)"; return 1; }
	[ "$(netns_in sysctl -n net.ipv4.ip_default_ttl)" = 77 ] &&
		[ "$(netns_in sysctl -n net.ipv4.ip_local_port_range | tr -s ' \t' ' ')" = "40000 45000" ] ||
		{ fail "the sysctls are not back: ttl $(netns_in sysctl -n net.ipv4.ip_default_ttl)"; return 1; }
	netns_in nft list table inet amb_t 2>&1 | grep -q "tcp dport 47499 drop" ||
		{ fail "the nft rule is not back: $(netns_in nft list ruleset 2>&1)"; return 1; }
	netns_host_same
}

t_netns_cycle() {
	command -v unshare >/dev/null && command -v nft >/dev/null || return 77
	cycle -d --tcp-established -r --tcp-established -P netns_host_before -A netns_check -- \
		unshare --net sh -c "$NETNS_SETUP"' && exec "$0" "$@"' "$PROGS/netns" "$T"
}

# a veth whose peer is the host's: made again with --external, its host side
# up once the program runs; the host reaches the namespace through it (port 47402)
netns_veth_setup() {
	ip link add "vha$$" type veth peer name veth0 netns "/proc/$PID/ns/net" &&
		netns_in ip addr add 10.78.0.2/24 dev veth0 && netns_in ip link set veth0 up &&
		ip addr add 10.78.0.1/24 dev "vha$$" && ip link set "vha$$" up
}
netns_veth_before() { netns_host_before && netns_veth_setup; }
# the kernel takes a namespace down in the background
netns_veth_gone() {
	wait_for 10 eval '! ip link show "vha$$" >/dev/null 2>&1' ||
		{ fail "the host side vha$$ outlived the namespace"; return 1; }
}
netns_veth_check() {
	netns_check || return 1
	netns_in ip -o addr show dev veth0 | grep -q "inet 10.78.0.2/24" ||
		{ fail "veth0 has not 10.78.0.2/24: $(netns_in ip -o addr)"; return 1; }
	wait_for 10 eval 'ip -o link show "vha$$" | grep -q "state UP"' ||
		{ fail "the host side vha$$ is not up: $(ip -o link show "vha$$" 2>&1)"; return 1; }
	# a connection refused (port 47402 is nobody's) is an answer from the namespace
	ip addr add 10.78.0.1/24 dev "vha$$" &&
		wait_for 10 eval 'timeout 2 bash -c "exec 3<>/dev/tcp/10.78.0.2/47402" 2>&1 |
			grep -q "Connection refused"' ||
		{ fail "the host does not reach the namespace through the veth"; return 1; }
}
t_netns_veth() {
	command -v unshare >/dev/null && command -v nft >/dev/null || return 77
	[ $SELFTEST = 1 ] && return 77
	local rc=0
	# in a configuration file: cycle's options are split unquoted, and veth[...] is a glob
	echo "external veth[veth0]:vha$$" >"$W/external.conf"
	cycle -d --tcp-established -r "--tcp-established --config $W/external.conf" \
		-P netns_veth_before -B netns_veth_gone -A netns_veth_check -- \
		unshare --net sh -c "$NETNS_SETUP"' && exec "$0" "$@"' "$PROGS/netns" "$T" || rc=1
	ip link del "vha$$" 2>/dev/null
	return $rc
}

# a link amber does not make (vxlan): refused naming it, the program runs on unharmed
t_netns_link_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null || return 77
	netns_host_before
	start_prog unshare --net sh -c 'ip link set lo up && ip addr add 10.77.0.1/24 dev lo &&
		ip link add ambvx0 type vxlan id 77 dstport 4789 && exec "$0" "$@"' "$PROGS/netns" "$T" noconn ||
		return 1
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img" &&
		{ fail "a namespace with a vxlan link was dumped"; return 1; }
	grep -q "network namespace 1 .* has link ambvx0 of kind vxlan" "$W/dump.log" ||
		{ fail "refused, but not naming the link"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "an image was marked complete"; return 1; }
	runs_on "the refused dump" 15 || return 1
	netns_host_same
}

# crafted netns.img or pstree.img: refused before anything is made; the unedited image restores
t_netns_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null && command -v nft >/dev/null || return 77
	local ok=0
	netns_host_before
	start_prog unshare --net sh -c "$NETNS_SETUP"' && exec "$0" "$@"' "$PROGS/netns" "$T" noconn ||
		return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	refused netns_prefix "an address with a prefix length out of range" netns.img \
		"0.addrs.0.prefixlen=33" || ok=1
	refused netns_oif "route to 10.88.0.0 via a link it does not have" netns.img \
		"0.routes.0.oif=9" || ok=1
	refused netns_include "an nft ruleset with 'include'" netns.img \
		'0.nft=include "/etc/shadow"' || ok=1
	refused netns_nft_top "an nft ruleset with a top-level 'flush' statement" netns.img \
		'0.nft=flush ruleset' || ok=1
	refused netns_sysctl "a sysctl that is not one of a network namespace" netns.img \
		"0.sysctls.0.name=../kernel/core_pattern" || ok=1
	refused netns_link "a link of a kind amber does not make (vxlan)" netns.img \
		"0.links.0.kind=vxlan" || ok=1
	refused netns_userns "owned by the tree's user namespace, which ns.img does not have" \
		netns.img "0.in_userns=1" || ok=1
	refused netns_empty "contents for a namespace left empty" netns.img "0.empty=true" || ok=1
	refused netns_pstree "pid [0-9]* is in network namespace 7, which netns.img does not have" \
		pstree.img "0.net_ns=7" || ok=1
	netns_host_same || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores || return 1
	netns_host_same
}

# a veth pair between two namespaces of the tree (the program's and its child's) and one with
# both ends in one namespace: made again together, each end with its name, ifindex and MAC; a
# TCP connection through the pair carries its queued data and new data (port 47480)
vp_links() { # PID: each veth of its namespace: name@peer, ifindex, MAC, addresses
	nsenter --net="/proc/$1/ns/net" ip -o link show type veth | sed -E 's/^([0-9]+: [^:@]+).* link\/ether ([0-9a-f:]+) .*/\1 \2/'
	nsenter --net="/proc/$1/ns/net" ip -o -4 addr show | awk '$2 != "lo" {print $2, $4}'
}
vp_idx() { nsenter --net="/proc/$1/ns/net" ip -o link show "$2" | cut -d: -f1; }
vp_setup() {
	CHILD=$(cat "$T/child.pid")
	ip link add vp0 netns "/proc/$PID/ns/net" type veth peer name vp1 netns "/proc/$CHILD/ns/net" &&
		netns_in ip addr add 10.79.0.1/24 dev vp0 && netns_in ip link set vp0 up &&
		nsenter --net="/proc/$CHILD/ns/net" sh -c 'ip link set lo up && ip addr add 10.79.0.2/24 dev vp1 && ip link set vp1 up' &&
		netns_in ip link add vs0 type veth peer name vs1 && netns_in ip addr add 10.80.0.1/24 dev vs0 &&
		netns_in ip link set vs0 up && netns_in ip link set vs1 up ||
		{ fail "cannot set up the veth pairs"; return 1; }
	touch "$T/netup"
	wait_for 10 test -e "$T/seen" -a -e "$T/seen.child" || { fail "the program did not connect"; return 1; }
	vp_links "$PID" >"$W/links.parent"
	vp_links "$CHILD" >"$W/links.child"
	grep -q vp0 "$W/links.parent" && grep -q vp1 "$W/links.child" || { fail "no pair: $(cat "$W/links.parent")"; return 1; }
}
vp_check() {
	vp_links "$PID" | diff -u "$W/links.parent" - >>"$W/log" &&
		vp_links "$CHILD" | diff -u "$W/links.child" - >>"$W/log" ||
		{ fail "the namespaces' veths are not as they were (see the log)"; return 1; }
	# each end's peer is the other end: its peer ifindex is the other's ifindex
	netns_in ip -o link show vp0 | grep -q "vp0@if$(vp_idx "$CHILD" vp1):.* link-netnsid" ||
		{ fail "vp0's peer is not vp1 of the child's namespace: $(netns_in ip -o link show vp0)"; return 1; }
	netns_in ip -o link show vs0 | grep -q "vs0@vs1:" || { fail "vs0 and vs1 are not a pair"; return 1; }
	! netns_in nft list tables 2>/dev/null | grep -q amber ||
		{ fail "the restore's lock is still in the namespace: $(netns_in nft list tables)"; return 1; }
	note "veths back: $(tr '\n' ';' <"$W/links.parent") / $(tr '\n' ';' <"$W/links.child")"
}
# before the restore: a pair whose ends do not name each other is refused before anything is made
vp_refused() {
	[ $SELFTEST = 1 ] && return 0
	local ok=0
	# records: namespace 1's links lo, vp0, vs1, vs0
	refused vp_peer_idx "veth vp0: its peer is not a veth of the image that names it back" \
		netns.img "0.links.1.peer_ifindex=3" || ok=1
	refused vp_peer_ns "veth vp0: its peer is not a veth of the image that names it back" \
		netns.img "0.links.1.peer_ns=7" || ok=1
	refused vp_peer_half "veth vs1: a peer without its ifindex" \
		netns.img "0.links.2.peer_ifindex=0" || ok=1
	return $ok
}
t_netns_vethpair() {
	command -v unshare >/dev/null || return 77
	cycle -d --tcp-established -r --tcp-established -P vp_setup -B vp_refused -A vp_check -- \
		unshare --net "$PROGS/vethpair" "$T"
}

# a network namespace owned by the tree's user namespace (unshare --user --net): made inside the
# new user namespace, so its root administers it as before; made as the host's, it would not
netns_owner() { # PID: the inode of the user namespace owning its network namespace
	python3 -c 'import fcntl, os, sys
fd = os.open("/proc/%s/ns/net" % sys.argv[1], os.O_RDONLY)
print(os.fstat(fcntl.ioctl(fd, 0xb701)).st_ino)' "$1"
}
netns_userns_check() {
	netns_check || return 1
	[ "$(netns_owner "$PID")" = "$(stat -L -c %i "/proc/$PID/ns/user")" ] ||
		{ fail "the network namespace is owned by user namespace $(netns_owner "$PID"), not the process's $(stat -L -c %i "/proc/$PID/ns/user")"; return 1; }
	[ "$(readlink "/proc/$PID/ns/user")" != "$(readlink /proc/self/ns/user)" ] ||
		{ fail "the process is in amber's user namespace"; return 1; }
	# its root administers it: a link made from inside the user namespace
	nsenter -t "$PID" -U -n --preserve-credentials ip link add ambd0 type dummy 2>>"$W/log" ||
		nsenter -t "$PID" -U -n ip link set lo mtu 65535 ||
		{ fail "the user namespace's root cannot administer its network namespace"; return 1; }
	note "network namespace owned by the process's user namespace $(netns_owner "$PID")"
}
t_netns_userns() {
	command -v unshare >/dev/null && command -v nft >/dev/null || return 77
	cycle -d --tcp-established -r --tcp-established -P netns_host_before -A netns_userns_check -- \
		unshare --user --map-root-user --net sh -c "$NETNS_SETUP"' && exec "$0" "$@"' "$PROGS/netns" "$T"
}
