# A process in another namespace (here: a cgroup namespace) is refused, unharmed.
TESTS+=(other_namespace_refused)
t_other_namespace_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null || return 77
	local rc
	# network and cgroup namespaces are dumped now (netns.sh, ns.sh): a user namespace is not
	start_prog unshare -U "$PROGS/counter" "$T" || return 1
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "a process in another user namespace was dumped"; return 1; }
	grep -q "user namespace" "$W/dump.log" || { fail "no reason given"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "an image was marked complete"; return 1; }
	runs_on "the refused dump" 15
}
