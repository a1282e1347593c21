# A runc container as users run one (tests.d/rpc.sh has the runc helpers): its init is a
# busybox shell that answers commands, with a counter and a TCP server (busybox nc) on the
# container's own lo; runc checkpoint ends it, runc restore -d brings it back, and the
# shell answers as pid 1 with the container's hostname, the server answers on 127.0.0.1
# inside the container's network namespace (lo comes back up in the namespace runc
# wants empty), the counter counts on and passes its own checks. Port 47488 (in the
# container's namespace).
TESTS+=(rpc_runc_services)

rsv_bundle() {
	rpc_runc_bundle || return 1
	mkdir -p "$W/bundle/rootfs/bin"
	cp /bin/busybox "$W/bundle/rootfs/bin/busybox" || { fail "no static busybox (busybox-static)"; return 1; }
	local a
	for a in sh nc cat echo hostname mv sleep; do ln -sf busybox "$W/bundle/rootfs/bin/$a"; done
	mkfifo "$W/bundle/rootfs/t/cmd"
	# the shell runs each line written to /t/cmd, its output to /t/out (an open of the FIFO
	# that ends without a line, as a writer's open racing the reader's, is skipped)
	jq '.hostname = "amber-runc" | .process.env += ["PATH=/bin"] | .process.args = ["/bin/sh", "-c",
		"/counter /t & nc -ll -p 47488 -e /bin/sh -c \"echo pong $(hostname)\" &
		 while :; do read l </t/cmd && [ -n \"$l\" ] || continue;
		   eval \"$l\" >/t/out.tmp 2>&1; mv /t/out.tmp /t/out; done"]' \
		"$W/bundle/config.json" >"$W/config.json" && mv "$W/config.json" "$W/bundle/config.json" ||
		{ fail "cannot edit config.json"; return 1; }
}
# SHELL-LINE EXPECTED: the container's shell answers
rsv_ask() {
	rm -f "$W/bundle/rootfs/t/out"
	echo "$1" >"$W/bundle/rootfs/t/cmd" &
	wait_for 10 test -e "$W/bundle/rootfs/t/out" || { fail "the container's shell did not answer '$1'"; return 1; }
	[ "$(cat "$W/bundle/rootfs/t/out")" = "$2" ] ||
		{ fail "the shell answered '$(cat "$W/bundle/rootfs/t/out")' to '$1', not '$2'"; return 1; }
}
# PID: the server on the container's lo answers
rsv_tcp() {
	local got
	got=$(nsenter --net="/proc/$1/ns/net" busybox nc 127.0.0.1 47488 </dev/null 2>&1)
	[ "$got" = "pong amber-runc" ] || { fail "the container's TCP server answered '$got'"; return 1; }
}
t_rpc_runc_services() {
	[ $SELFTEST = 1 ] && return 77
	command -v runc >/dev/null && [ -x /bin/busybox ] || { note "runc or busybox-static is not installed (make setup)"; return 77; }
	local id=amber-rsv-$$ rc
	rsv_bundle || return 1
	rsv_case "$id"
	rc=$?
	runc --root "$W/state" delete -f "$id" >>"$W/log" 2>&1
	wait
	return $rc
}
rsv_case() {
	local id=$1 pid n
	rpc_runc_bg run.out run -d "$id"
	wait_for 15 test -e "$W/bundle/rootfs/t/ready" || { fail "the container's counter did not start"; attach "$W/run.out"; return 1; }
	pid=$(rpc_runc_state "$id" .pid)
	rsv_ask 'echo $$ $(hostname)' "1 amber-runc" || return 1
	wait_for 10 rsv_tcp "$pid" || return 1
	rpc_runc_ckpt "$id" img ||
		{ fail "runc checkpoint failed"; attach "$W/img.out"; attach "$W/work-img/dump.log" 20; return 1; }
	wait_for 10 eval '! kill -0 $pid 2>/dev/null' || { fail "the container's init $pid lives on after the checkpoint"; return 1; }
	n=$(lines "$W/bundle/rootfs/t/count.log")
	rpc_runc_bg restore.out restore -d --image-path "$W/img" --work-path "$W/work-img" "$id"
	wait_for 30 eval '[ "$(rpc_runc_state "$id" .status)" = running ]' ||
		{ fail "runc restore -d: the container is not running"; attach "$W/restore.out"; attach "$W/work-img/restore.log" 20; return 1; }
	pid=$(rpc_runc_state "$id" .pid)
	rsv_ask 'echo $$ $(hostname)' "1 amber-runc" || return 1
	rsv_tcp "$pid" || return 1
	wait_for 5 eval '[ "$(lines "$W/bundle/rootfs/t/count.log")" -gt $n ]' ||
		{ fail "the restored counter does not count"; return 1; }
	note "restored: pid $pid; the shell answers as pid 1 of amber-runc, the server on 127.0.0.1:47488"
	touch "$W/bundle/rootfs/t/go"
	wait_for 15 test -e "$W/bundle/rootfs/t/result" || { fail "the counter wrote no verdict after go"; return 1; }
	[ "$(cat "$W/bundle/rootfs/t/result")" = 0 ] || { fail "the restored counter's own checks failed"; return 1; }
}

# runc checkpoint --file-locks: a container holding an flock and a POSIX lock is refused
# without the flag (naming it; the container runs on), and with it comes back holding both
TESTS+=(rpc_runc_filelocks)
t_rpc_runc_filelocks() {
	[ $SELFTEST = 1 ] && return 77
	command -v runc >/dev/null || { note "runc is not installed (make setup)"; return 77; }
	local id=amber-rfl-$$ rc
	rpc_runc_bundle || return 1
	cp "$PROGS/flock-static" "$W/bundle/rootfs/flock"
	jq '.process.args = ["/flock", "/t"]' "$W/bundle/config.json" >"$W/config.json" &&
		mv "$W/config.json" "$W/bundle/config.json" || { fail "cannot edit config.json"; return 1; }
	rfl_case "$id"
	rc=$?
	runc --root "$W/state" delete -f "$id" >>"$W/log" 2>&1
	wait
	return $rc
}
rfl_held() { ! flock -n "$W/bundle/rootfs/t/lock" true; }
rfl_case() {
	local id=$1 pid
	rpc_runc_bg run.out run -d "$id"
	wait_for 15 test -e "$W/bundle/rootfs/t/ready" || { fail "the container did not start"; attach "$W/run.out"; return 1; }
	pid=$(rpc_runc_state "$id" .pid)
	rfl_held || { fail "the container does not hold its lock"; return 1; }
	rpc_runc_ckpt "$id" img0 && { fail "runc checkpoint without --file-locks succeeded"; return 1; }
	grep -q -- "--file-locks" "$W/work-img0/dump.log" ||
		{ fail "the refusal does not name --file-locks"; attach "$W/work-img0/dump.log" 10; return 1; }
	[ "$(rpc_runc_state "$id" .status)" = running ] && [ "$(rpc_runc_state "$id" .pid)" = "$pid" ] ||
		{ fail "the container is not running on after the refused checkpoint"; return 1; }
	rpc_runc_ckpt "$id" img --file-locks ||
		{ fail "runc checkpoint --file-locks failed"; attach "$W/img.out"; attach "$W/work-img/dump.log" 20; return 1; }
	wait_for 10 eval '! kill -0 $pid 2>/dev/null' || { fail "the container's init lives on after the checkpoint"; return 1; }
	rfl_held && { fail "the lock is still held with the container gone"; return 1; }
	rpc_runc_bg restore.out restore -d --file-locks --image-path "$W/img" --work-path "$W/work-img" "$id"
	wait_for 30 eval '[ "$(rpc_runc_state "$id" .status)" = running ]' ||
		{ fail "runc restore -d --file-locks: the container is not running"; attach "$W/restore.out"; attach "$W/work-img/restore.log" 20; return 1; }
	rfl_held || { fail "the restored container does not hold its lock"; return 1; }
	note "refused without --file-locks ($(grep -m1 -o 'error: .*' "$W/work-img0/dump.log" | cut -c1-100)); restored holding the lock"
	touch "$W/bundle/rootfs/t/go"
	wait_for 15 test -e "$W/bundle/rootfs/t/result" || { fail "the program wrote no verdict after go"; return 1; }
	[ "$(cat "$W/bundle/rootfs/t/result")" = 0 ] || { fail "the restored program's own checks failed"; return 1; }
}
