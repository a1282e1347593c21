# A process in another namespace (here: a cgroup namespace) is refused, unharmed.
TESTS+=(other_namespace_refused)
t_other_namespace_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null || return 77
	local rc
	# a user namespace is dumped now (userns.sh), with network and time namespaces it owns
	# (netns.sh, ns.sh), but not with a mount namespace it owns
	start_prog unshare --user --map-root-user --mount "$PROGS/counter" "$T" || return 1
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "a process in a user and a mount namespace was dumped"; return 1; }
	grep -q "pid $PID is in user namespace .* and in another mnt namespace than amber" "$W/dump.log" ||
		{ fail "no reason given"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "an image was marked complete"; return 1; }
	runs_on "the refused dump" 15
}
