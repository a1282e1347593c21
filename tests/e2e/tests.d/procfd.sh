# fds on /proc files and namespace files of the tree's own processes
# (tests/e2e/progs/procfd.c): reopened once the restored processes exist, they
# must name them (contents, offsets, flags, namespace inodes).  One of a process
# outside the tree, or of another namespace, is refused at dump, naming the fd.
TESTS+=(procfd)

procfd_state() { # PID: its and its descendants' fds from 20 up, as the kernel shows them
	local p=$1 f c
	for f in $(ls "/proc/$p/fd" | sort -n); do
		[ "$f" -ge 20 ] || continue
		echo "pid $p fd $f $(readlink "/proc/$p/fd/$f") $(grep -E '^(pos|flags):' "/proc/$p/fdinfo/$f" | tr -s '\t\n' '  ')"
	done
	for c in $(cat /proc/"$p"/task/*/children); do
		procfd_state "$c"
	done
}
procfd_before() {
	procfd_state "$PID" >"$W/procfd.before"
	[ "$(grep -c 'fd ' "$W/procfd.before")" -ge 18 ] || { fail "expected 18 /proc fds, found: $(cat "$W/procfd.before")"; return 1; }
}
procfd_after() {
	procfd_state "$PID" >"$W/procfd.after"
	diff -u "$W/procfd.before" "$W/procfd.after" >"$W/procfd.diff" && return 0
	fail "the /proc fds differ after restore (- before, + after):"
	sed 's/^/    /' "$W/procfd.diff" >>"$W/log"
	return 1
}
t_procfd() { cycle -P procfd_before -A procfd_after -- "$PROGS/procfd" "$T"; }

# Refused at dump, naming the fd, and the process runs on: a /proc file or
# directory of a process outside the tree (at restore that pid would be another
# process's), a file of a namespace the tree is not in (a netns of `ip netns
# add`; one made by unshare and held only by the fd).
TESTS+=(procfd_outside_refused procfd_dir_refused procfd_task_refused)
TESTS+=(procfd_netns_refused procfd_ns_unshared_refused)
procfd_refused() { # SETUP PATTERN
	[ $SELFTEST = 1 ] && return 77
	mkdir -p "$T"
	start_prog bash -c "$1 exec $PROGS/counter $T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded"; return 1; }
	grep -q -- "$2" "$W/dump.log" ||
		{ fail "the refusal does not say '$2'"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "the refused dump left an inventory.img"; return 1; }
	note "refused: $(grep -m1 -- "$2" "$W/dump.log")"
	runs_on "the refused dump"
}
t_procfd_outside_refused() {
	procfd_refused "exec 7</proc/$$/status;" "fd 7 is /proc/$$/status, of process $$, which is not in the dumped tree"
}
t_procfd_dir_refused() {
	procfd_refused "exec 7</proc/$$;" "fd 7 is /proc/$$, of process $$, which is not in the dumped tree"
}
t_procfd_task_refused() {
	procfd_refused "exec 7</proc/$$/task/$$/stat;" "fd 7 is /proc/$$/task/$$/stat, of process $$, which is not in the dumped tree"
}
t_procfd_netns_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ns=amber-e2e-$$ ino rc
	ip netns add "$ns" || return 77
	ino=$(stat -L -c %i "/run/netns/$ns")
	procfd_refused "exec 7</run/netns/$ns;" \
		"fd 7 is /run/netns/$ns, a file of a net namespace (inode $ino) that the dumped tree is not in"
	rc=$?
	ip netns del "$ns"
	return $rc
}
t_procfd_ns_unshared_refused() {
	command -v unshare >/dev/null || return 77
	# the namespace lives on only through fd 7 once unshare's sleep is killed
	procfd_refused "unshare -n sleep 60 & u=\$!;
		while [ \"\$(readlink /proc/\$u/ns/net)\" = \"\$(readlink /proc/self/ns/net)\" ]; do sleep 0.05; done;
		exec 7</proc/\$u/ns/net; kill \$u;" \
		"fd 7 is net:\[[0-9]*\], a file of a net namespace (inode [0-9]*) that the dumped tree is not in"
}
