# podman container checkpoint / restore with runc as the runtime and amber as runc's criu
# (a directory with a link named criu first in PATH: podman asks criu's version over
# CRIU's RPC, runc runs criu swrk from PATH).  Rootful podman with its storage under the
# test's directory, cgroupfs (no systemd), no network; the image is `podman import`ed from
# a rootfs the test makes (busybox and the static counter), nothing is pulled.
TESTS+=(podman_checkpoint podman_export_import podman_tcp_established)

# PM: podman with the test's storage; podman_setup makes the image, podman_cleanup removes
# every container and image and unmounts what podman left mounted under $W/pm.
podman_setup() {
	PM=()
	command -v podman >/dev/null || { note "podman is not installed (make setup)"; return 77; }
	command -v runc >/dev/null || { note "runc is not installed (make setup)"; return 77; }
	[ -x /bin/busybox ] || { note "busybox-static is not installed (make setup)"; return 77; }
	# (podman wants a runroot path under 50 characters)
	PMRUN=$(mktemp -d /tmp/amber-pm.XXXXXX) || { fail "cannot make podman's runroot"; return 1; }
	PM=(podman --root "$W/pm/root" --runroot "$PMRUN" --tmpdir "$W/pm/tmp" --storage-driver overlay
		--cgroup-manager cgroupfs --runtime runc --events-backend file)
	mkdir -p "$W/bin" "$W/rootfs/bin" "$W/rootfs/t" "$W/rootfs/tmp" "$W/pm/tmp"
	ln -sf "$AMBER" "$W/bin/criu"
	cp /bin/busybox "$W/rootfs/bin/busybox"
	for a in sh cat ls sleep nc; do ln -sf busybox "$W/rootfs/bin/$a"; done
	cp "$PROGS/counter-static" "$W/rootfs/counter"
	cp "$PROGS/tcploop-static" "$W/rootfs/tcploop"
	tar -C "$W/rootfs" -cf "$W/rootfs.tar" . || { fail "cannot make the rootfs tarball"; return 1; }
	pm import "$W/rootfs.tar" amber-test:1 >"$W/import.out" 2>&1 ||
		{ fail "podman import failed"; attach "$W/import.out"; return 1; }
}
pm() {
	echo "+ podman $*" >>"$W/log"
	PATH="$W/bin:$PATH" timeout -k 5 90 "${PM[@]}" "$@"
}
podman_cleanup() {
	[ ${#PM[@]} -gt 0 ] || return 0
	pm rm -af -t 0 >>"$W/log" 2>&1
	pm rmi -af >>"$W/log" 2>&1
	local m
	findmnt -rn -o TARGET | grep -e "^$W/pm/" -e "^$PMRUN/" | sort -r | while read -r m; do umount -l "$m"; done
	rm -rf "$W/pm" "$PMRUN"
}
# podman run -d NAME [PROGRAM ARGS]: the counter (or PROGRAM /t ARGS) in its own
# container (no network but its own lo; rlimits below amber's: podman's default raises
# them, which needs CAP_SYS_RESOURCE)
podman_run() {
	local c=$1 prog=${2:-/counter}
	shift
	shift
	pm run -d --name "$c" --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
		--env "AMBER_TEST_SABOTAGE=${AMBER_TEST_SABOTAGE:-0}" amber-test:1 "$prog" /t "$@" \
		>"$W/run.out" 2>&1 || { fail "podman run failed"; attach "$W/run.out"; return 1; }
	podman_pid "$c" && wait_for 15 test -e "/proc/$CPID/root/t/ready" ||
		{ fail "the container's $prog did not start"; pm logs "$c" >"$W/logs.out" 2>&1; attach "$W/logs.out"; return 1; }
}
# CPID: the container's init as podman says it
podman_pid() {
	CPID=$(pm inspect -f '{{.State.Pid}}' "$1" 2>>"$W/log")
	[ -n "$CPID" ] && [ "$CPID" != 0 ] || { fail "podman knows no pid of $1"; return 1; }
}
podman_state() { pm inspect -f "{{$2}}" "$1" 2>>"$W/log"; }
# the counter of $CPID writes on (count.log seen through its root)
podman_counts() {
	local n
	n=$(lines "/proc/$CPID/root/t/count.log")
	wait_for 5 eval '[ "$(lines "/proc/$CPID/root/t/count.log")" -gt $n ]' ||
		{ fail "$1: the counter (pid $CPID) does not count"; return 1; }
}
# go, then the program's own checks in podman logs (the counter's: count.log whole, no
# line lost or twice; else the line OK).  podman_go NAME [OK]
podman_go() {
	local c=$1 ok=${2:-count.log holds}
	touch "/proc/$CPID/root/t/go"
	wait_for 15 eval '[ "$(podman_state "$c" .State.Status)" = exited ]' ||
		{ fail "the program did not finish after go"; return 1; }
	pm logs "$1" >"$W/logs.out" 2>&1
	attach "$W/logs.out"
	grep -q "^ok: $ok" "$W/logs.out" && grep -q " 0 failed" "$W/logs.out" &&
		[ "$(podman_state "$1" .State.ExitCode)" = 0 ] ||
		{ fail "the restored program's own checks failed"; return 1; }
}
podman_ckpt_fail() { # NAME WHAT
	fail "$2 failed"
	attach "$W/ckpt.out"
	find "$W/pm/root" -name dump.log -newer "$W/rootfs.tar" -exec tail -n 20 {} + >"$W/dump.tail" 2>/dev/null
	attach "$W/dump.tail"
	return 1
}
podman_restore_fail() {
	fail "$1 failed"
	attach "$W/restore.out"
	find "$W/pm/root" -name restore.log -newer "$W/rootfs.tar" -exec tail -n 20 {} + >"$W/restore.tail" 2>/dev/null
	attach "$W/restore.tail"
	return 1
}

# podman container checkpoint --leave-running (the container runs on), checkpoint
# --print-stats (podman says it exited, checkpointed; the counter is gone; the stats are
# amber's), restore --print-stats: running again, a new pid
# that is pid 1 of its pid namespace and counts on, podman exec reaches it; then go: the
# counter's own checks pass (count.log whole over both checkpoints).
t_podman_checkpoint() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	podman_setup && podman_checkpoint_case
	rc=$?
	podman_cleanup
	return $rc
}
podman_checkpoint_case() {
	local c=amber-pm-$$ pid st
	podman_run $c || return 1
	pm container checkpoint --leave-running $c >"$W/ckpt.out" 2>&1 || podman_ckpt_fail $c "checkpoint --leave-running" || return 1
	[ "$(podman_state $c .State.Status)" = running ] && [ "$(podman_state $c .State.Pid)" = "$CPID" ] ||
		{ fail "the container is not running on after --leave-running"; return 1; }
	podman_counts "after --leave-running" || return 1
	pid=$CPID
	pm container checkpoint --print-stats $c >"$W/ckpt.out" 2>"$W/ckpt.err" || { cat "$W/ckpt.err" >>"$W/ckpt.out"; podman_ckpt_fail $c "checkpoint"; } || return 1
	# podman reads the stats-dump file amber writes in runc's work directory, as CRIU does
	[ "$(jq '.container_statistics[0].criu_statistics.pages_written' "$W/ckpt.out")" -gt 0 ] 2>/dev/null ||
		{ fail "checkpoint --print-stats: no pages_written"; attach "$W/ckpt.out"; return 1; }
	wait_for 10 eval '! kill -0 $pid 2>/dev/null' || { fail "the container's init $pid lives on after the checkpoint"; return 1; }
	[ "$(podman_state $c '.State.Status}} {{.State.Checkpointed')" = "exited true" ] ||
		{ fail "podman does not say the container is checkpointed: $(podman_state $c '.State.Status}} {{.State.Checkpointed')"; return 1; }
	pm container restore --print-stats $c >"$W/restore.out" 2>"$W/restore.err" || { cat "$W/restore.err" >>"$W/restore.out"; podman_restore_fail "podman container restore"; } || return 1
	[ "$(jq '.container_statistics[0].criu_statistics.pages_restored' "$W/restore.out")" -gt 0 ] 2>/dev/null ||
		{ fail "restore --print-stats: no pages_restored"; attach "$W/restore.out"; return 1; }
	[ "$(podman_state $c .State.Status)" = running ] || { fail "the restored container is not running"; return 1; }
	podman_pid $c || return 1
	note "restored: podman says pid $CPID"
	[ "$(cat "/proc/$CPID/comm" 2>/dev/null)" = counter ] || { fail "podman's pid $CPID is not the restored counter"; return 1; }
	[ "$(status_field "$CPID" NSpid | awk '{print $NF}')" = 1 ] ||
		{ fail "the restored init is not pid 1 of its pid namespace ($(status_field "$CPID" NSpid))"; return 1; }
	podman_counts "after restore" || return 1
	pm exec $c /counter >"$W/exec.out" 2>&1
	st=$?
	[ $st = 2 ] && grep -q usage "$W/exec.out" || { fail "podman exec into the restored container: $st"; attach "$W/exec.out"; return 1; }
	podman_go $c
}

# podman container checkpoint --export (a gzip tarball), podman rm, podman container
# restore --import --name NEW: a new container (new id, new cgroups: runc's cg_root, amber
# moves the image's cgroups there) runs the counter on, and its checks pass.
t_podman_export_import() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	podman_setup && podman_export_case
	rc=$?
	podman_cleanup
	return $rc
}
podman_export_case() {
	local c=amber-pmx-$$ id nid
	podman_run $c || return 1
	id=$(podman_state $c .Id)
	pm container checkpoint --export "$W/ckpt.tar.gz" --compress gzip $c >"$W/ckpt.out" 2>&1 ||
		podman_ckpt_fail $c "checkpoint --export" || return 1
	tar -tzf "$W/ckpt.tar.gz" >"$W/ckpt.list" 2>&1 && grep -q "checkpoint/inventory.img" "$W/ckpt.list" &&
		grep -qx "stats-dump" "$W/ckpt.list" ||
		{ fail "the exported archive holds no amber image or no stats-dump"; attach "$W/ckpt.list"; return 1; }
	pm rm $c >>"$W/log" 2>&1 || { fail "podman rm of the checkpointed container failed"; return 1; }
	pm container restore --import "$W/ckpt.tar.gz" --name $c-new >"$W/restore.out" 2>&1 ||
		podman_restore_fail "podman container restore --import" || return 1
	nid=$(podman_state $c-new .Id)
	[ -n "$nid" ] && [ "$nid" != "$id" ] || { fail "restore --import made no new container ($nid)"; return 1; }
	[ "$(podman_state $c-new .State.Status)" = running ] || { fail "the imported container is not running"; return 1; }
	podman_pid $c-new || return 1
	grep -q "^0::.*$nid" "/proc/$CPID/cgroup" || grep -q "memory:.*$nid" "/proc/$CPID/cgroup" ||
		{ fail "the restored counter is not in the new container's cgroups"; cat "/proc/$CPID/cgroup" >"$W/cg"; attach "$W/cg"; return 1; }
	podman_counts "after restore --import" || return 1
	podman_go $c-new
}

# An established TCP connection over the container's lo (tcploop: a client and its server
# in one process, data queued both ways): podman container checkpoint without
# --tcp-established is refused naming it, and the container runs on; with it (--keep: the
# logs stay), the namespace is left empty for runc but for lo, up as it was, restore
# --tcp-established brings the connection back on a new lo, and after go every number
# came in order both ways and the listener accepts a new connection.
t_podman_tcp_established() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	podman_setup && podman_tcp_case
	rc=$?
	podman_cleanup
	return $rc
}
podman_tcp_case() {
	local c=amber-pmt-$$ d
	podman_run $c /tcploop 47493 || return 1
	d=$(podman_state $c .StaticDir)
	pm container checkpoint $c >"$W/ckpt.out" 2>&1 && { fail "checkpoint of an established connection without --tcp-established succeeded"; return 1; }
	grep -q "tcp-established" "$d/dump.log" || { fail "dump.log does not name --tcp-established"; attach "$d/dump.log" 10; return 1; }
	[ "$(podman_state $c .State.Status)" = running ] || { fail "the container is not running after the refused checkpoint"; return 1; }
	pm container checkpoint --tcp-established --keep $c >"$W/ckpt.out" 2>&1 ||
		podman_ckpt_fail $c "checkpoint --tcp-established" || return 1
	grep -q "left empty (empty_ns) but for lo, up" "$d/dump.log" ||
		{ fail "dump.log does not say lo was up"; attach "$d/dump.log" 20; return 1; }
	pm container restore --tcp-established --keep $c >"$W/restore.out" 2>&1 ||
		podman_restore_fail "podman container restore --tcp-established" || return 1
	grep -q "made empty (empty_ns) but for lo, up as it was" "$d/restore.log" ||
		{ fail "restore.log does not say lo was brought up"; attach "$d/restore.log" 20; return 1; }
	[ "$(podman_state $c .State.Status)" = running ] || { fail "the restored container is not running"; return 1; }
	podman_pid $c || return 1
	podman_go $c "every number came in order both ways"
}
