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
	[ "$(grep -c 'fd ' "$W/procfd.before")" -ge 19 ] || { fail "expected 19 /proc fds, found: $(cat "$W/procfd.before")"; return 1; }
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
procfd_refused() { # SETUP PATTERN [DUMP OPTION]
	[ $SELFTEST = 1 ] && return 77
	mkdir -p "$T"
	start_prog bash -c "$1 exec $PROGS/counter $T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ${3:+"$3"} &&
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

# A crafted image must not make restore open a /proc path of a process outside
# the restored tree, a path reached through a link of /proc/PID (root, cwd, fd/N)
# or anything outside /proc/PID, nor a pidfd of a process outside the tree: each
# is refused, before any process is created but for a link that only opening
# it finds (refused then, and the processes killed).
TESTS+=(procfd_image_refused)
t_procfd_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 proc ns pfd pid
	start_prog "$PROGS/procfd" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	"$AMBER" show "$W/img" >"$W/show.json"
	proc=$(jq -r '[.files[] | select(.kind == "FILE_PROC")][0].id' "$W/show.json")
	ns=$(jq -r '[.files[] | select(.kind == "FILE_NSFS")][0].id' "$W/show.json")
	pfd=$(jq -r '[.files[] | select(.kind == "FILE_PIDFD")][0].id' "$W/show.json")
	for v in "$proc" "$ns" "$pfd"; do
		[ -n "$v" ] && [ "$v" != null ] || { fail "the image lacks a /proc file, namespace file or pidfd"; return 1; }
	done
	pid=$PID
	local bad="is not a file in /proc/PID of a process of the restored tree"
	refused proc_init "$bad" files.img "$proc.path=/proc/1/status" "$proc.proc_pid=1" || ok=1
	refused proc_other "$bad" files.img "$proc.path=/proc/$$/status" "$proc.proc_pid=$$" || ok=1
	refused proc_mismatch "$bad" files.img "$proc.path=/proc/1/status" || ok=1
	refused proc_dotdot "$bad" files.img "$proc.proc_pid=$pid" "$proc.path=/proc/$pid/../1/status" || ok=1
	refused proc_root "$bad" files.img "$proc.proc_pid=$pid" "$proc.path=/proc/$pid/root/etc/shadow" || ok=1
	refused proc_cwd "$bad" files.img "$proc.proc_pid=$pid" "$proc.path=/proc/$pid/cwd/x" || ok=1
	refused proc_notproc "$bad" files.img "$proc.proc_pid=$pid" "$proc.path=/proc/$pid/x/../../../etc/shadow" || ok=1
	# through a link of /proc/PID (fd 0's file): refused when opened, following no link
	refused proc_link "cannot reopen /proc/$pid/fd/0/x (flags 0) .*Too many levels of symbolic links" \
		files.img "$proc.proc_pid=$pid" "$proc.path=/proc/$pid/fd/0/x" "$proc.flags=0" || ok=1
	refused proc_link2 "cannot reopen /proc/$pid/fd/0 (flags 0) .*Too many levels of symbolic links" \
		files.img "$proc.proc_pid=$pid" "$proc.path=/proc/$pid/fd/0" "$proc.flags=0" || ok=1
	refused proc_creat "$bad" files.img "$proc.flags=$((0100 | 01000))" || ok=1
	refused ns_name "names no namespace file" files.img "$ns.proc_ns=../../../etc/shadow" || ok=1
	refused ns_none "names no namespace file" files.img "$ns.proc_ns=" || ok=1
	refused pidfd_init "pidfd entry $pfd refers to no process of the restored tree" files.img "$pfd.pidfd.pid=1" || ok=1
	refused pidfd_dead "pidfd entry $pfd refers to no process of the restored tree" files.img "$pfd.pidfd.dead=1" || ok=1
	refused pidfd_status "pidfd entry $pfd refers to no process of the restored tree" files.img \
		"$pfd.pidfd.dead=1" "$pfd.pidfd.pid=0" "$pfd.pidfd.exit_code=$((0x12345))" || ok=1
	return $ok
}

# nobody's tree, nobody's image, restored by root: the late opens run with
# nobody's rights on processes that have their credentials back by then.
TESTS+=(procfd_owner)
t_procfd_owner() {
	[ $SELFTEST = 1 ] && return 77
	mkdir -p "$T"
	: >"$T/out"
	: >"$T/err"
	chown 65534:65534 "$T/out" "$T/err"
	start_prog setpriv --reuid=65534 --regid=65534 --clear-groups "$PROGS/procfd" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	chown -R 65534:65534 "$W/img"
	amber_to "$W/restore.log" 60 restore -D "$W/img" -v &
	RPID=$!
	wait_for 10 is_alive "$PID" || { fail "nobody's image did not restore"; attach "$W/restore.log"; return 1; }
	wait_for 10 uids_are "$PID" 65534 || { fail "restored with uids $(status_field "$PID" Uid)"; return 1; }
	touch "$T/go"
	wait "$RPID" || { fail "the restored program failed its checks"; attach_all; return 1; }
}

# A file lock on a /proc file (taken before the processes are back, where the
# file is not yet) is refused at dump, naming the fd.
TESTS+=(procfd_lock_refused)
t_procfd_lock_refused() {
	command -v flock >/dev/null || return 77
	procfd_refused "exec 7</proc/self/status; flock -s 7;" \
		"fd 7 (/proc/[0-9]*/status) has a file lock; amber cannot restore that" -l
}
