# UTS and IPC namespaces (src/ns/ns.c, tests/e2e/progs/namespaced.c): a tree
# whose processes are in namespaces of their own, shared by a child and by a
# sibling, comes back in new ones with the same names, sysctls and System V
# objects, shared as before; the host's names stay.
TESTS+=(ns_uts ns_ipc ns_sysv ns_mqueue ns_mqueue_image_refused ns_image_refused ns_owner_refused ns_thread_refused)
TESTS+=(ns_time ns_time_refused ns_time_image_refused ns_cgroup ns_cgroup_image_refused ns_cgroup_refused)

# "NAME UTS IPC" per process of $T/nspids: "host", or the first process of
# that namespace (so the sharing, not the inode numbers, is compared)
ns_classes() {
	local name pid kind ino first line
	declare -A seen=()
	while read -r name pid; do
		line=$name
		for kind in uts ipc; do
			ino=$(readlink "/proc/$pid/ns/$kind") || { echo "$name gone"; continue 2; }
			if [ "$ino" = "$(readlink "/proc/self/ns/$kind")" ]; then
				first=host
			else
				first=${seen[$ino]:-$name}
				seen[$ino]=$first
			fi
			line="$line $first"
		done
		echo "$line"
	done <"$T/nspids"
}
ns_host() { echo "$(hostname) $(domainname)"; }
ns_before() {
	ns_classes >"$W/ns.before"
	ns_host >"$W/host.before"
	# A, A1 and C in A's UTS namespace, B in its own, the root in the host's
	[ "$(awk '{print $2}' "$W/ns.before" | sort -u | tr '\n' ' ')" = "A1 B host " ] ||
		{ fail "unexpected UTS namespaces before the dump: $(cat "$W/ns.before")"; return 1; }
}
ns_after() {
	ns_classes >"$W/ns.after"
	diff -u "$W/ns.before" "$W/ns.after" >"$W/ns.diff" ||
		{ fail "the namespaces are not shared as before (- before, + after):"; sed 's/^/    /' "$W/ns.diff" >>"$W/log"; return 1; }
	ns_host_same
}
ns_host_same() {
	[ "$(ns_host)" = "$(cat "$W/host.before")" ] ||
		{ fail "the host's names changed: $(ns_host), were $(cat "$W/host.before")"; return 1; }
}
t_ns_uts() { cycle -P ns_before -A ns_after -- "$PROGS/namespaced" "$T"; }
t_ns_ipc() {
	cycle -P ns_before -A ns_ipc_after -- "$PROGS/namespaced" "$T" ipc
}
ns_ipc_after() {
	ns_after || return 1
	# A's IPC namespace is not B's nor the host's
	[ "$(awk '$1 == "A" || $1 == "C" || $1 == "A1" {print $3}' "$W/ns.after" | sort -u)" = A1 ] &&
		[ "$(awk '$1 == "B" || $1 == "root" {print $3}' "$W/ns.after" | sort -u)" = host ] ||
		{ fail "unexpected IPC namespaces after the restore: $(cat "$W/ns.after")"; return 1; }
}

# The whole System V test (progs/sysv.c: SHM_DEST, SHM_LOCK, read-only and
# inherited attaches, a child) with its root in a new UTS and IPC namespace.
ns_own() {
	local kind
	for kind in uts ipc; do
		[ "$(readlink "/proc/$PID/ns/$kind")" != "$(readlink /proc/self/ns/$kind)" ] ||
			{ fail "pid $PID is in the host's $kind namespace"; return 1; }
	done
	[ "$(nsenter -t "$PID" -u hostname)" = amber-sysv ] ||
		{ fail "hostname in pid $PID's namespace: $(nsenter -t "$PID" -u hostname)"; return 1; }
	[ "$(nsenter -t "$PID" -i ipcs | grep -c '^0x')" = 5 ] ||
		{ fail "not 5 System V objects in pid $PID's IPC namespace"; nsenter -t "$PID" -i ipcs >>"$W/log"; return 1; }
	[ ! -s "$W/host.before" ] || ns_host_same
}
ns_sysv_before() { ns_host >"$W/host.before" && ns_own; }
t_ns_sysv() {
	command -v unshare >/dev/null || return 77
	cycle -P ns_sysv_before -A ns_own -- unshare --uts --ipc sh -c \
		'hostname amber-sysv && exec "$0" "$@"' "$PROGS/sysv" "$T"
}

# The whole POSIX message queue test (progs/mqueue.c: queued messages with
# priorities, flags, an unlinked queue, a child's descriptions) in a new IPC
# namespace: the queues come back in the restored namespace, with the same
# fds, and never in the host's.
ns_mq_host_none() {
	local n
	for n in $(cat "$T/mq-names"); do
		! mq_exists "$n" || { fail "message queue $n exists in the host's IPC namespace"; return 1; }
	done
}
ns_mq_before() {
	[ "$(readlink "/proc/$PID/ns/ipc")" != "$(readlink /proc/self/ns/ipc)" ] ||
		{ fail "pid $PID is in the host's IPC namespace"; return 1; }
	mq_before && ns_mq_host_none
}
ns_mq_after() {
	local a
	mq_after && ns_mq_host_none || return 1
	[ "$(readlink "/proc/$PID/ns/ipc")" != "$(readlink /proc/self/ns/ipc)" ] ||
		{ fail "pid $PID is in the host's IPC namespace after the restore"; return 1; }
	a=$(awk '{print $1}' "$T/mq-names")
	nsenter -t "$PID" -i "$PY" -c 'import ctypes, sys
rt = ctypes.CDLL("librt.so.1", use_errno=True)
sys.exit(0 if rt.mq_open(sys.argv[1].encode(), 0) >= 0 else 1)' "$a" ||
		{ fail "message queue $a is not in pid $PID's IPC namespace"; return 1; }
}
t_ns_mqueue() {
	command -v unshare >/dev/null && command -v nsenter >/dev/null || return 77
	cycle -P ns_mq_before -A ns_mq_after -- unshare --ipc "$PROGS/mqueue" "$T"
}

# The queues' namespace ids are checked before anything is made (ipc.img's
# and files.img's); nobody's image of them is refused; the unedited restores.
t_ns_mqueue_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null || return 77
	local ok=0 idx other rc
	start_prog unshare --ipc "$PROGS/mqueue" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	idx=$("$AMBER" show "$W/img" | jq '[.files[] | select(.kind == "FILE_MQUEUE")][0].id')
	[ "$("$AMBER" show "$W/img" | jq ".files[$idx].mqueue_ns")" -ge 1 ] ||
		{ fail "files.img: the queue is not tagged with its namespace"; return 1; }
	refused ns_mq_file "files.img: entry $idx .* names IPC namespace 9 for a message queue, which ns.img does not have" \
		files.img "$idx.mqueue_ns=9" || ok=1
	other=$("$AMBER" show "$W/img" | jq '[.files[] | select(.kind != "FILE_MQUEUE")][0].id')
	refused ns_mq_file_kind "files.img: entry $other .* names IPC namespace 1 for a message queue" \
		files.img "$other.mqueue_ns=1" || ok=1
	refused ns_mq_ipc "an entry names IPC namespace 9, which ns.img does not have" ipc.img "0.ns=9" || ok=1
	rm -rf "$W/nobody"
	cp -a "$W/img" "$W/nobody"
	chown -R 65534:65534 "$W/nobody"
	amber_to "$W/nobody.log" 30 restore -d -D "$W/nobody" -v
	rc=$?
	[ $rc != 0 ] || { fail "root restored nobody's image with a namespace's queues"; return 1; }
	grep -q "image has IPC namespace 1 .*uid 65534's image may not make namespaces" "$W/nobody.log" ||
		{ fail "nobody's image refused, but not naming the IPC namespace"; attach "$W/nobody.log"; ok=1; }
	[ $ok = 0 ] || return 1
	unedited_restores
}

# dump the namespaced tree (root's image) for the refusal tests
ns_dump() {
	start_prog "$PROGS/namespaced" "$T" "$@" || return 1
	ns_host >"$W/host.before"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
}

# A crafted ns.img or pstree.img is refused before anything is made (refused()
# is security-owner.sh's); the host's names stay; the unedited image restores.
t_ns_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 long uts ipc
	ns_dump ipc || return 1
	long=$(printf 'h%.0s' $(seq 65))
	uts=$("$AMBER" show "$W/img" | jq '[.pstree[] | .uts_ns // 0] | max')
	[ "$uts" -ge 1 ] || { fail "pstree.img names no UTS namespace"; return 1; }
	refused ns_long "hostname or domainname longer than 64 bytes" ns.img "0.hostname=$long" || ok=1
	refused ns_pid_ns "pid [0-9]* is in UTS namespace 9, which ns.img does not have" pstree.img \
		"1.uts_ns=9" || ok=1
	refused ns_id "id out of range" ns.img "0.id=77" || ok=1
	refused ns_unused "no process of pstree.img is in it" pstree.img "1.uts_ns=0" \
		"2.uts_ns=0" "3.uts_ns=0" "4.uts_ns=0" || ok=1
	ipc=$("$AMBER" show "$W/img" | jq '[.pstree[] | .ipc_ns // 0] | max')
	refused ns_kind "only a UTS namespace has a hostname" ns.img "$((uts - 1)).kind=NS_IPC" || ok=1
	refused ns_sysctl "a sysctl that is not a namespace's IPC sysctl" ns.img \
		"$((ipc - 1)).sysctls.0.name=core_pattern" || ok=1
	refused ns_sysctl_val "a sysctl value that is not numbers" ns.img \
		"$((ipc - 1)).sysctls.0.value=1;2" || ok=1
	refused ns_ipc_obj "names IPC namespace 5, which ns.img does not have" ipc.img "0.ns=5" || ok=1
	ns_host_same || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores || return 1
	ns_host_same
}

# Root dumped it, but the image is nobody's now: nobody may not make namespaces.
t_ns_owner_refused() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	ns_dump || return 1
	chown -R 65534:65534 "$W/img"
	amber_to "$W/restore.log" 30 restore -d -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "root restored nobody's image with namespaces"; return 1; }
	grep -q "image has UTS namespace 1, hostname amber-ns-a .*uid 65534's image may not make namespaces" "$W/restore.log" ||
		{ fail "refused, but not naming the namespace"; attach "$W/restore.log"; return 1; }
	grep -q "made UTS namespace\|restoring task" "$W/restore.log" &&
		{ fail "refused only once something was made"; attach "$W/restore.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID exists after the refused restore"; return 1; }
	ns_host_same
}

# a thread alone in a namespace of its own (also as the last of 701, which the dump checks
# from a second thread), a process whose children would go to a pid namespace it
# unshared: refused at dump, naming them; the program runs on unharmed
t_ns_thread_refused() {
	[ $SELFTEST = 1 ] && return 77
	local mode pat
	for mode in thread manythreads pidchildren; do
		case $mode in
		thread | manythreads) pat="thread [0-9]* is in another uts namespace .* than its process" ;;
		pidchildren) pat="unshare()d a pid namespace for its children (pid_for_children)" ;;
		esac
		rm -rf "$T" "$W/img"
		start_prog "$PROGS/namespaced" "$T" "$mode" || return 1
		amber_to "$W/dump-$mode.log" 30 dump -t "$PID" -D "$W/img" &&
			{ fail "$mode: the dump succeeded"; return 1; }
		grep -q "$pat" "$W/dump-$mode.log" ||
			{ fail "$mode: refused, but not for '$pat'"; attach "$W/dump-$mode.log"; return 1; }
		note "$mode: $(grep -m1 -o "error.*" "$W/dump-$mode.log")"
		runs_on "the refused dump ($mode)" 15 || return 1
	done
}

# Time namespaces (src/ns/timens.c, tests/e2e/progs/timens.c): the root and
# A share one with big offsets, C is in the host's.  The image lies PAUSE
# seconds between dump and restore; the program checks that its clocks go on
# from the dump without counting them (DIR/paused), through the vDSO too.
NS_TIME_PAUSE=4
ns_kind_classes() { # KIND: "NAME host" or "NAME FIRST-OF-ITS-NAMESPACE"
	local name pid ino
	declare -A seen=()
	while read -r name pid; do
		ino=$(readlink "/proc/$pid/ns/$1") || { echo "$name gone"; continue; }
		if [ "$ino" = "$(readlink "/proc/self/ns/$1")" ]; then
			echo "$name host"
		else
			echo "$name ${seen[$ino]:=$name}"
		fi
	done <"$T/nspids"
}
ns_kind_before() { # KIND
	ns_kind_classes "$1" >"$W/ns.before"
	[ "$(cat "$W/ns.before" | tr '\n' ' ')" = "root root A root C host " ] ||
		{ fail "unexpected $1 namespaces before the dump: $(cat "$W/ns.before")"; return 1; }
}
ns_kind_after() { # KIND
	ns_kind_classes "$1" >"$W/ns.after"
	diff -u "$W/ns.before" "$W/ns.after" >"$W/ns.diff" ||
		{ fail "the $1 namespaces are not shared as before (- before, + after):"; sed 's/^/    /' "$W/ns.diff" >>"$W/log"; return 1; }
}
ns_time_before() { ns_kind_before time; }
ns_time_pause() {
	sleep "$NS_TIME_PAUSE"
	# the program allows one second less for what the dump and restore take
	echo $((NS_TIME_PAUSE - 1)) >"$T/paused"
}
ns_time_after() {
	ns_kind_after time || return 1
	note "root's offsets after the restore: $(tr '\n' ' ' <"/proc/$PID/timens_offsets")"
}
t_ns_time() {
	[ -e /proc/self/ns/time ] || return 77
	cycle -P ns_time_before -B ns_time_pause -A ns_time_after -- "$PROGS/timens" "$T"
}

# A process whose time_for_children is not its time namespace is refused at
# dump, naming it (it would come back with one); the program runs on.
t_ns_time_refused() {
	[ $SELFTEST = 1 ] && return 77
	[ -e /proc/self/ns/time ] || return 77
	start_prog "$PROGS/timens" "$T" unshared || return 1
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"
	dump_refused $? "pid $PID unshare()d a time namespace for its children (time_for_children" "$W/img" 15
}

# Crafted offsets or ids of time namespaces are refused before anything is
# made; nobody's image may not make one; the unedited image restores.
t_ns_time_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	[ -e /proc/self/ns/time ] || return 77
	local ok=0 id rc
	start_prog "$PROGS/timens" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$("$AMBER" show "$W/img" | jq '[.pstree[] | .time_ns // 0] | max')
	[ "$id" -ge 1 ] || { fail "pstree.img names no time namespace"; return 1; }
	refused ns_time_neg "its CLOCK_MONOTONIC (offset + host's clock at dump) is out of the kernel's range" \
		ns.img "$((id - 1)).monotonic_off_ns=-9000000000000000000" || ok=1
	refused ns_time_big "its CLOCK_BOOTTIME (offset + host's clock at dump) is out of the kernel's range" \
		ns.img "$((id - 1)).boottime_off_ns=9000000000000000000" || ok=1
	refused ns_time_clock "its CLOCK_MONOTONIC .* is out of the kernel's range" \
		ns.img "$((id - 1)).monotonic_ns=18000000000000000000" || ok=1
	refused ns_time_id "pid [0-9]* is in time namespace 9, which ns.img does not have" \
		pstree.img "0.time_ns=9" || ok=1
	refused ns_time_kind "only a time namespace has clock offsets" ns.img "$((id - 1)).kind=NS_UTS" || ok=1
	rm -rf "$W/nobody"
	cp -a "$W/img" "$W/nobody"
	chown -R 65534:65534 "$W/nobody"
	amber_to "$W/nobody.log" 30 restore -d -D "$W/nobody" -v
	rc=$?
	[ $rc != 0 ] || { fail "root restored nobody's image with a time namespace"; return 1; }
	grep -q "image has time namespace $id .*uid 65534's image may not make namespaces" "$W/nobody.log" ||
		{ fail "nobody's image refused, but not naming the time namespace"; attach "$W/nobody.log"; ok=1; }
	grep -q "made time namespace" "$W/nobody.log" && { fail "nobody's image: a namespace was made"; ok=1; }
	[ $ok = 0 ] || return 1
	unedited_restores
}

# Cgroup namespaces (src/ns/cgroupns.c, tests/e2e/progs/cgroupns.c): the
# root and A share one rooted at their cgroups (amber's: restored processes
# come back in amber's cgroups), C is in the host's; after the restore they
# share a new one and see the same /proc/self/cgroup, "/" everywhere.
ns_cgroup_before() { ns_kind_before cgroup; }
ns_cgroup_after() { ns_kind_after cgroup; }
t_ns_cgroup() {
	[ -e /proc/self/ns/cgroup ] || return 77
	cycle -P ns_cgroup_before -A ns_cgroup_after -- "$PROGS/cgroupns" "$T"
}

# Crafted roots are refused before anything is made, so is a root that is
# not amber's cgroup (naming it), and nobody's image; the unedited restores.
t_ns_cgroup_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	[ -e /proc/self/ns/cgroup ] || return 77
	local ok=0 id rc
	start_prog "$PROGS/cgroupns" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$("$AMBER" show "$W/img" | jq '[.pstree[] | .cgroup_ns // 0] | max')
	[ "$id" -ge 1 ] || { fail "pstree.img names no cgroup namespace"; return 1; }
	# (a list of one root: imgedit takes a comma list)
	refused ns_cg_dotdot 'root "0::/a/../x" is not ID:CONTROLLERS:/PATH without . or ..' \
		ns.img "$((id - 1)).cgroup_roots=0::/a/../x" || ok=1
	refused ns_cg_other "cgroup namespace $id has its root at 0::/amber-nowhere, which is not amber's cgroup" \
		ns.img "$((id - 1)).cgroup_roots=0::/amber-nowhere" || ok=1
	refused ns_cg_kind "only a cgroup namespace has cgroup roots" ns.img "$((id - 1)).kind=NS_IPC" || ok=1
	refused ns_cg_id "pid [0-9]* is in cgroup namespace 9, which ns.img does not have" \
		pstree.img "0.cgroup_ns=9" || ok=1
	rm -rf "$W/nobody"
	cp -a "$W/img" "$W/nobody"
	chown -R 65534:65534 "$W/nobody"
	amber_to "$W/nobody.log" 30 restore -d -D "$W/nobody" -v
	rc=$?
	[ $rc != 0 ] || { fail "root restored nobody's image with a cgroup namespace"; return 1; }
	grep -q "image has cgroup namespace $id .*uid 65534's image may not make namespaces" "$W/nobody.log" ||
		{ fail "nobody's image refused, but not naming the cgroup namespace"; attach "$W/nobody.log"; ok=1; }
	[ $ok = 0 ] || return 1
	unedited_restores
}

# A process below its cgroup namespace's root (moved to a child cgroup of
# the cgroup v2 hierarchy) is refused at dump, naming it; moved back, the
# program runs on and passes its checks.
t_ns_cgroup_refused() {
	[ $SELFTEST = 1 ] && return 77
	[ -e /proc/self/ns/cgroup ] || return 77
	local v2 own sub rc
	v2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
	own=$(sed -n 's/^0:://p' /proc/self/cgroup)
	[ -n "$v2" ] && [ -n "$own" ] || return 77
	sub="$v2${own%/}/amber-test-$$"
	start_prog "$PROGS/cgroupns" "$T" || return 1
	mkdir "$sub" && echo "$PID" >"$sub/cgroup.procs" || { rmdir "$sub" 2>/dev/null; return 77; }
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"
	rc=$?
	echo "$PID" >"$v2$own/cgroup.procs"
	rmdir "$sub"
	[ $rc != 0 ] || { fail "a process below its cgroup namespace's root was dumped"; return 1; }
	grep -q "pid $PID is in cgroup 0::/amber-test-$$ of its cgroup namespace .* below the namespace's root" "$W/dump.log" ||
		{ fail "refused, but not naming pid $PID's cgroup"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "an image was marked complete"; return 1; }
	runs_on "the refused dump" 15
}

# The same in a user namespace (unshare --user): the time namespace the root made there is owned
# by it, and comes back made inside the new one
TESTS+=(ns_time_userns)
ns_owner() { # KIND PID: the inode of the user namespace owning pid's namespace of KIND
	python3 -c 'import fcntl, os, sys
fd = os.open("/proc/%s/ns/%s" % (sys.argv[2], sys.argv[1]), os.O_RDONLY)
print(os.fstat(fcntl.ioctl(fd, 0xb701)).st_ino)' "$1" "$2"
}
ns_time_owned() {
	[ "$(ns_owner time "$PID")" = "$(stat -L -c %i "/proc/$PID/ns/user")" ] ||
		{ fail "the time namespace is owned by user namespace $(ns_owner time "$PID"), not the process's $(stat -L -c %i "/proc/$PID/ns/user")"; return 1; }
}
ns_time_userns_before() { ns_time_before && ns_time_owned; }
ns_time_userns_after() {
	ns_time_after && ns_time_owned || return 1
	[ "$(readlink "/proc/$PID/ns/user")" != "$(readlink /proc/self/ns/user)" ] ||
		{ fail "the process is in amber's user namespace"; return 1; }
	note "time namespace owned by the process's user namespace $(ns_owner time "$PID")"
}
t_ns_time_userns() {
	[ -e /proc/self/ns/time ] && command -v unshare >/dev/null || return 77
	cycle -P ns_time_userns_before -B ns_time_pause -A ns_time_userns_after -- \
		unshare --user --map-root-user "$PROGS/timens" "$T"
}
