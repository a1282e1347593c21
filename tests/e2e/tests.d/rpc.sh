# amber swrk (src/rpc/): CRIU's RPC as runc drives it, played by build/tools/rpc_client
# (a socketpair, amber swrk FD on one end, one request per packet, NOTIFYs answered).
TESTS+=(rpc_version_malformed rpc_dump_restore rpc_notify_refused rpc_refused_options
	rpc_mntroot rpc_close_mid_request rpc_criu_alias rpc_runc rpc_runc_refused rpc_cg_root_refused)

RPC_CLIENT=$ROOT/build/tools/rpc_client

# rpc_to OUT ARGS...: the client with a time limit, its lines in OUT and the log
rpc_to() {
	local out=$1
	shift
	echo "+ rpc_client $*" >>"$W/log"
	timeout -k 5 120 "$RPC_CLIENT" "$@" >"$out" 2>>"$W/rpc.err"
	local rc=$?
	sed 's/^/    /' "$out" >>"$W/log"
	return $rc
}
# has_line FILE REGEX WHAT: FILE has a line matching REGEX
has_line() {
	grep -qE -- "$2" "$1" || { fail "$3: no line /$2/ in the client's output"; attach "$W/rpc.err"; return 1; }
}
# an image directory as runc makes one: empty, 0700
rpc_img() {
	rm -rf "$W/img"
	mkdir -m 0700 "$W/img"
	mkdir -p "$W/work"
}

# VERSION and FEATURE_CHECK answer as runc needs; packets that are no request get an
# error answer and the worker goes on serving; closing the socket ends it with 0.
t_rpc_version_malformed() {
	[ $SELFTEST = 1 ] && return 77
	rpc_to "$W/out" "$AMBER" version features garbage truncated oversized badtype version ||
		{ fail "rpc_client failed"; attach "$W/rpc.err"; return 1; }
	has_line "$W/out" '^version ok major=4 minor=0 type=10$' "VERSION" || return 1
	# asked for all three, amber has none: present and false
	has_line "$W/out" '^features ok mem_track=1/0 lazy_pages=1/0 pidfd_store=1/0 type=9$' "FEATURE_CHECK" || return 1
	has_line "$W/out" '^garbage fail errno=74 msg=malformed request: 256 bytes' "random bytes" || return 1
	has_line "$W/out" '^truncated fail errno=74 msg=malformed request' "a truncated request" || return 1
	has_line "$W/out" '^oversized fail errno=74 msg=request of 1048577 bytes refused' "an oversized packet" || return 1
	has_line "$W/out" '^badtype fail errno=22 msg=unknown request type 99 type=99$' "an unknown type" || return 1
	# the second VERSION: the worker survived all of the above
	[ "$(grep -c '^version ok major=4' "$W/out")" = 2 ] || { fail "no answer to the VERSION after the bad packets"; return 1; }
	has_line "$W/out" '^worker exit 0$' "the worker's exit" || return 1
	amber_to "$W/swrk.log" 10 swrk 0 </dev/null && { fail "amber swrk on a non-socket succeeded"; return 1; }
	grep -q "fd 0 is not a socket" "$W/swrk.log" || { fail "amber swrk 0 (no socket) did not say so"; attach "$W/swrk.log"; return 1; }
	amber_to "$W/swrk.log" 10 swrk x1 && { fail "amber swrk x1 succeeded"; return 1; }
	grep -q "'x1' is not an fd number" "$W/swrk.log" || { fail "amber swrk x1 did not say so"; attach "$W/swrk.log"; return 1; }
}

# One worker: DUMP of counter (images_dir_fd, work_dir_fd, log_file, notify_scripts),
# then RESTORE (first one with a cg_root that is no clean path: refused); the
# stages come as NOTIFYs in CRIU's order, the restored counter goes on counting and
# passes its checks.
rpc_dumped() {
	is_gone "$PID" || wait_for 10 is_gone "$PID"
}
t_rpc_dump_restore() {
	[ $SELFTEST = 1 ] && return 77
	local exe want
	start_prog "$PROGS/counter" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	rpc_img
	rpc_to "$W/out" -n "$W/notify" "$AMBER" \
		"dump=$W/img,$PID,notify,work=$W/work,log=dump.log,log_level=4" \
		"restore=$W/img,cg_root=:/amber//elsewhere" \
		"restore=$W/img,notify,work=$W/work,log=restore.log,log_level=4" ||
		{ fail "rpc_client failed"; attach "$W/rpc.err"; attach "$W/work/dump.log"; attach "$W/work/restore.log"; return 1; }
	# (a cg_root elsewhere moves the cgroups: podman_export_import)
	has_line "$W/out" "^restore fail errno=22 msg=option cg_root: '/amber//elsewhere' is not a clean" \
		"RESTORE with a cg_root that is no clean path" || return 1
	has_line "$W/out" '^dump ok type=1$' "DUMP" || { attach "$W/work/dump.log"; return 1; }
	has_line "$W/out" "^restore ok pid=$PID type=2\$" "RESTORE" || { attach "$W/work/restore.log"; return 1; }
	has_line "$W/out" '^worker exit 0$' "the worker's exit" || return 1
	[ -f "$W/img/inventory.img" ] || { fail "DUMP answered ok but wrote no inventory.img"; return 1; }
	grep -q "image of 1 process(es) from pid $PID complete" "$W/work/dump.log" ||
		{ fail "no dump.log in the work directory"; return 1; }
	grep -q "process(es) restored" "$W/work/restore.log" ||
		{ fail "no restore.log in the work directory"; return 1; }
	want="pre-dump 0
post-dump 0
pre-restore 0
post-restore $PID
pre-resume 0
post-resume 0"
	[ "$(cat "$W/notify")" = "$want" ] ||
		{ fail "the NOTIFYs were: $(tr '\n' ';' <"$W/notify") wanted: $(tr '\n' ';' <<<"$want")"; return 1; }
	wait_for 10 is_restored "$PID" "$exe" || { fail "pid $PID is not back after RESTORE"; return 1; }
	echo "$PID" >>"$W/pids"
	COUNT_AT_DUMP=$(lines "$T/count.log")
	count_continues || return 1
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the restored counter failed its checks"; attach "$T/err"; return 1; }
}

# The client's failure answer to a NOTIFY stops the dump like a failing action
# script: at pre-dump before anything, at post-dump after the freeze; both times
# the target runs on and passes its checks, the answer names the stage.
t_rpc_notify_refused() {
	[ $SELFTEST = 1 ] && return 77
	local stage
	start_prog "$PROGS/signals" "$T" || return
	for stage in pre-dump post-dump; do
		rpc_img
		: >"$W/notify"
		rpc_to "$W/out" -n "$W/notify" -F "$stage" "$AMBER" "dump=$W/img,$PID,notify" ||
			{ fail "rpc_client failed"; attach "$W/rpc.err"; return 1; }
		has_line "$W/out" "^dump fail errno=[0-9]+ msg=the client refused stage $stage" "DUMP refused at $stage" || return 1
		has_line "$W/out" '^worker exit 0$' "the worker's exit" || return 1
		[ "$(tail -n1 "$W/notify")" = "$stage 0" ] || { fail "the last NOTIFY was not $stage: $(tr '\n' ';' <"$W/notify")"; return 1; }
		wait_for 5 is_free_running "$PID" || { fail "after the refusal at $stage pid $PID is not running freely: state $(proc_state "$PID")"; return 1; }
	done
	runs_on "two refused RPC dumps" 15
}

# Options amber cannot honour are refused by name, before anything is touched.
t_rpc_refused_options() {
	[ $SELFTEST = 1 ] && return 77
	local o
	start_prog "$PROGS/signals" "$T" || return
	rpc_img
	rpc_to "$W/out" "$AMBER" "dump=$W/img,$PID,ext_unix_sk" \
		"dump=$W/img,$PID,external=net[4026531840]:extnet" "dump=$W/img,$PID,cgmode=5" \
		"dump=$W/img,$PID,external=veth[eth0]:h0" "pre_dump=$W/img,$PID" \
		"restore=$W/img,external=mnt[k]:$W,external=dev[1/2]:x" \
		"dump=$W/img,$PID,empty_ns=0x48000000" "dump=$W/img,$PID,cg_root=:/x" \
		"restore=$W/img,inherit_fd=pipe:[1]:99" ||
		{ fail "rpc_client failed"; attach "$W/rpc.err"; return 1; }
	has_line "$W/out" "^restore fail errno=9 msg=option inherit_fd: key 'pipe:\[1\]': fd 99 is not an open fd" \
		"RESTORE with an inherit_fd the worker does not have" || return 1
	for o in ext_unix_sk "external is not supported: 'net\[4026531840\]:extnet'" \
		"empty_ns is not supported: only the network namespace" "cg_root is not supported: it is a restore option" \
		"manage_cgroups_mode is not supported: strict" \
		"external is not supported on DUMP: 'veth\[eth0\]:h0'"; do
		has_line "$W/out" "^dump fail errno=95 msg=option $o" "the refusal of $o" || return 1
	done
	has_line "$W/out" '^pre_dump fail errno=95 msg=PRE_DUMP is not supported' "PRE_DUMP" || return 1
	has_line "$W/out" "^restore fail errno=95 msg=option external is not supported: 'dev\[1/2\]:x'" \
		"RESTORE with external dev[]" || return 1
	has_line "$W/out" '^worker exit 0$' "the worker's exit" || return 1
	[ -z "$(ls -A "$W/img")" ] || { fail "a refused dump wrote into the image directory: $(ls "$W/img")"; return 1; }
	runs_on "refused RPC dumps" 15
}

# A tree that pivot_root()ed (mntroot.sh's) dumped through the RPC with root (its
# rootfs) and ext_mnt (/etc/hostname -> hn), restored with root and ext_mnt
# (hn -> another file): the program passes its checks.  A root that is not the
# tree's, or amber's own for it, is refused with the tree running on; a RESTORE
# with an external amber does not know is refused naming it before anything.
rpc_mntroot_body() {
	local init h
	mr_start || return 1
	init=$MR_INIT
	rpc_img
	mkdir -m 0700 "$W/bad"
	rpc_to "$W/out" "$AMBER" "dump=$W/bad,$init,root=$W,ext_mnt=/etc/hostname:hn" \
		"dump=$W/img,$init,root=$T,ext_mnt=/etc/hostname:hn,work=$W/work,log=dump.log" \
		"restore=$W/img,root=$T,ext_mnt=hn:$W/hn.after,external=net[1]:x" \
		"restore=$W/img,root=$T,ext_mnt=hn:$W/hn.after,work=$W/work,log=restore.log" ||
		{ fail "rpc_client failed"; attach "$W/rpc.err"; return 1; }
	has_line "$W/out" "^dump fail errno=22 msg=root $W: the tree's root mount is $T" \
		"DUMP with a root not the tree's" || return 1
	has_line "$W/out" '^dump ok type=1$' "DUMP" || { attach "$W/work/dump.log"; return 1; }
	has_line "$W/out" "^restore fail errno=95 msg=option external is not supported: 'net\[1\]:x'" \
		"RESTORE with external net[]" || return 1
	has_line "$W/out" "^restore ok pid=[0-9]+ type=2\$" "RESTORE" || { attach "$W/work/restore.log"; return 1; }
	h=$(sed -n 's/^restore ok pid=\([0-9]*\) type=2$/\1/p' "$W/out")
	MR_PIDS="$MR_PIDS $h"
	mr_check_restored "$h"
}
t_rpc_mntroot() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null && command -v jq >/dev/null || return 77
	mr_run rpc_mntroot_body
}

# The client closes its end while a DUMP waits for its pre-dump NOTIFY answer: the
# dump stops, the target runs on, and the worker exits 0.
t_rpc_close_mid_request() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/signals" "$T" || return
	rpc_img
	rpc_to "$W/out" "$AMBER" "dump_close=$W/img,$PID,notify,work=$W/work,log=dump.log" ||
		{ fail "rpc_client failed"; attach "$W/rpc.err"; return 1; }
	has_line "$W/out" '^worker exit 0$' "the worker's exit after the close" || { attach "$W/work/dump.log"; return 1; }
	grep -q "the client closed the socket" "$W/work/dump.log" ||
		{ fail "dump.log does not say the client went away"; attach "$W/work/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "the abandoned dump completed"; return 1; }
	runs_on "a DUMP whose client went away" 15
}

# make install-criu-alias: criu -> amber; as criu it prints CRIU's version line, serves
# criu swrk, and criu check is amber check.
t_rpc_criu_alias() {
	[ $SELFTEST = 1 ] && return 77
	local criu=$W/inst/usr/sbin/criu
	make -C "$ROOT" --no-print-directory install-criu-alias DESTDIR="$W/inst" PREFIX=/usr >>"$W/log" 2>&1 ||
		{ fail "make install-criu-alias failed"; return 1; }
	[ "$(readlink "$criu")" = amber ] || { fail "criu is not a link to amber: $(ls -l "$criu" 2>&1)"; return 1; }
	"$criu" --version >"$W/version" || { fail "criu --version exited with $?"; return 1; }
	grep -qx 'Version: 4\.0' "$W/version" || { fail "criu --version: no 'Version: 4.0' line"; attach "$W/version"; return 1; }
	cmp -s "$W/version" <("$criu" -V) || { fail "criu -V differs from criu --version"; return 1; }
	"$AMBER" --version | grep -q '^amber ' || { fail "amber --version lost its own line"; return 1; }
	"$criu" check >"$W/criu.check" 2>&1
	local crc=$?
	"$AMBER" check >"$W/amber.check" 2>&1
	# (the details hold addresses: the probes and verdicts must be the same)
	[ $crc = $? ] && [ "$(grep -c . "$W/criu.check")" -gt 5 ] &&
		cmp -s <(awk '{print $1, $3}' "$W/criu.check") <(awk '{print $1, $3}' "$W/amber.check") ||
		{ fail "criu check differs from amber check"; attach "$W/criu.check"; return 1; }
	rpc_to "$W/out" "$criu" version || { fail "rpc_client on criu swrk failed"; return 1; }
	has_line "$W/out" '^version ok major=4 minor=0' "VERSION through criu swrk" &&
		has_line "$W/out" '^worker exit 0$' "criu swrk's exit"
}

# runc's container: a bundle with the static counter, run detached with its stdout and
# stderr a pipe to cat (runc hands a restored container its new stdio pipes through
# inherit_fd), stdin /dev/null.  rpc_runc_bundle ID; rpc_runc_run ID OUT.
rpc_runc_bundle() {
	mkdir -p "$W/bundle/rootfs/t" "$W/bundle/rootfs/proc" "$W/bundle/rootfs/dev" "$W/bundle/rootfs/sys"
	cp "$PROGS/counter-static" "$W/bundle/rootfs/counter"
	ln -sf "$AMBER" "$W/criu"
	(cd "$W/bundle" && runc spec) || { fail "runc spec failed"; return 1; }
	jq --arg s "${AMBER_TEST_SABOTAGE:-0}" '.process.terminal = false | .process.args = ["/counter", "/t"] |
		.root.readonly = false | .process.env += ["AMBER_TEST_SABOTAGE=" + $s]' \
		"$W/bundle/config.json" >"$W/config.json" && mv "$W/config.json" "$W/bundle/config.json" ||
		{ fail "cannot edit config.json"; return 1; }
}
# runc CMD... in the bundle, stdio as above, output piped into $W/$OUT (cat in background)
rpc_runc_bg() {
	local out=$1
	shift
	echo "+ runc $*" >>"$W/log"
	(cd "$W/bundle" && timeout -k 5 60 runc --root "$W/state" --criu "$W/criu" "$@" </dev/null 2>&1 |
		cat >"$W/$out") &
}
rpc_runc_state() { runc --root "$W/state" state "$1" 2>/dev/null | jq -r "$2"; }
rpc_runc_ckpt() { # ID DIR [ARGS...]
	local id=$1 dir=$2
	shift 2
	mkdir -p "$W/$dir" "$W/work-$dir"
	echo "+ runc checkpoint $* $id" >>"$W/log"
	(cd "$W/bundle" && timeout -k 5 60 runc --root "$W/state" --criu "$W/criu" checkpoint \
		--image-path "$W/$dir" --work-path "$W/work-$dir" "$@" "$id") >"$W/$dir.out" 2>&1
}

# runc checkpoint and restore with amber as its criu (a link named criu):
# --leave-running first (the container runs on), then a checkpoint that ends the
# container (runc forgets it, the counter is gone), then runc restore -d: runc says it
# runs with the restored pid, which is pid 1 of its own pid namespace and runc's child
# (rst_sibling) until runc exits, runc ps and exec reach it, its stdout is the new runc's
# pipe (inherit_fd), its /sys its own network namespace's; it is checkpointed and
# restored once more, and after go the counter's own checks pass there (count.log
# whole: no line lost or twice over the three checkpoints).
t_rpc_runc() {
	[ $SELFTEST = 1 ] && return 77
	command -v runc >/dev/null || { note "runc is not installed (make setup)"; return 77; }
	local id=amber-rpc-$$ rc
	rpc_runc_bundle || return 1
	rpc_runc_case "$id"
	rc=$?
	runc --root "$W/state" delete -f "$id" >>"$W/log" 2>&1
	wait
	return $rc
}
rpc_runc_case() {
	local id=$1 pid n st
	rpc_runc_bg run.out run -d "$id"
	wait_for 15 test -e "$W/bundle/rootfs/t/ready" || { fail "the container's counter did not start"; attach "$W/run.out"; return 1; }
	pid=$(rpc_runc_state "$id" .pid)
	rpc_runc_ckpt "$id" img1 --leave-running ||
		{ fail "runc checkpoint --leave-running failed"; attach "$W/img1.out"; attach_errors "$W/work-img1/dump.log"; attach "$W/work-img1/dump.log" 20; return 1; }
	[ "$(rpc_runc_state "$id" .status)" = running ] && [ "$(rpc_runc_state "$id" .pid)" = "$pid" ] ||
		{ fail "the container is not running on after --leave-running"; return 1; }
	test -s "$W/img1/inventory.img" || { fail "--leave-running wrote no image"; return 1; }
	n=$(lines "$W/bundle/rootfs/t/count.log")
	wait_for 5 eval '[ "$(lines "$W/bundle/rootfs/t/count.log")" -gt $n ]' ||
		{ fail "the counter stopped after --leave-running"; return 1; }
	rpc_runc_ckpt "$id" img ||
		{ fail "runc checkpoint failed"; attach "$W/img.out"; attach_errors "$W/work-img/dump.log"; attach "$W/work-img/dump.log" 20; return 1; }
	grep -q "left empty (empty_ns)" "$W/work-img/dump.log" ||
		{ fail "dump.log does not say the network namespace was left empty"; return 1; }
	wait_for 10 eval '! kill -0 $pid 2>/dev/null' || { fail "the container's init $pid lives on after the checkpoint"; return 1; }
	runc --root "$W/state" state "$id" >/dev/null 2>&1 && { fail "runc still knows the container after the checkpoint"; return 1; }
	n=$(lines "$W/bundle/rootfs/t/count.log")

	rpc_runc_bg restore.out restore -d --image-path "$W/img" --work-path "$W/work-img" "$id"
	wait_for 30 eval '[ "$(rpc_runc_state "$id" .status)" = running ]' ||
		{ fail "runc restore -d: the container is not running"; attach "$W/restore.out"; attach_errors "$W/work-img/restore.log"; attach "$W/work-img/restore.log" 20; return 1; }
	pid=$(rpc_runc_state "$id" .pid)
	note "restored: runc says pid $pid; $(grep -m1 'empty (empty_ns)' "$W/work-img/restore.log")"
	[ "$(readlink "/proc/$pid/exe")" = "$W/bundle/rootfs/counter" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = counter ] ||
		{ fail "runc's pid $pid is not the restored counter"; return 1; }
	[ "$(status_field "$pid" NSpid | awk '{print $NF}')" = 1 ] ||
		{ fail "the restored init is not pid 1 of its pid namespace ($(status_field "$pid" NSpid))"; return 1; }
	grep -q "stage setup-namespaces: the client said go on" "$W/work-img/restore.log" ||
		{ fail "runc was not notified of setup-namespaces"; return 1; }
	grep -q "file .* is the client's fd 1 (inherit_fd pipe:" "$W/work-img/restore.log" ||
		{ fail "the restored stdout is not the new runc's pipe (inherit_fd)"; attach_errors "$W/work-img/restore.log"; attach "$W/work-img/restore.log" 20; return 1; }
	wait_for 5 eval '[ "$(lines "$W/bundle/rootfs/t/count.log")" -gt $n ]' ||
		{ fail "the restored counter does not count"; return 1; }
	runc --root "$W/state" ps "$id" >"$W/ps.out" 2>&1 && grep -qw "$pid" "$W/ps.out" ||
		{ fail "runc ps does not show the restored pid $pid"; attach "$W/ps.out"; return 1; }
	# exec joins the restored namespaces: the counter without arguments says its usage
	runc --root "$W/state" exec "$id" /counter >"$W/exec.out" 2>&1
	st=$?
	[ $st = 2 ] && grep -q usage "$W/exec.out" || { fail "runc exec into the restored container: $st"; attach "$W/exec.out"; return 1; }
	# its sysfs is its network namespace's (runc's default has no links but lo)
	[ "$(ls "/proc/$pid/root/sys/class/net" | tr '\n' ' ')" = "lo " ] ||
		{ fail "the restored /sys shows links of another network namespace: $(ls "/proc/$pid/root/sys/class/net" | tr '\n' ' ')"; return 1; }
	# the restored container is one runc and amber checkpoint and restore again
	rpc_runc_ckpt "$id" img2 ||
		{ fail "runc checkpoint of the restored container failed"; attach "$W/img2.out"; attach_errors "$W/work-img2/dump.log"; attach "$W/work-img2/dump.log" 20; return 1; }
	wait_for 10 eval '! kill -0 $pid 2>/dev/null' || { fail "the restored init $pid lives on after the second checkpoint"; return 1; }
	wait
	rpc_runc_bg restore.out restore -d --image-path "$W/img2" --work-path "$W/work-img2" "$id"
	wait_for 30 eval '[ "$(rpc_runc_state "$id" .status)" = running ]' ||
		{ fail "the second runc restore -d: the container is not running"; attach "$W/restore.out"; attach_errors "$W/work-img2/restore.log"; attach "$W/work-img2/restore.log" 20; return 1; }
	pid=$(rpc_runc_state "$id" .pid)
	touch "$W/bundle/rootfs/t/go"
	wait_for 15 eval '! kill -0 $pid 2>/dev/null' || { fail "the restored counter did not finish after go"; return 1; }
	wait
	attach "$W/restore.out"
	grep -q "^ok: count.log holds" "$W/restore.out" && grep -q " 0 failed" "$W/restore.out" ||
		{ fail "the restored counter's own checks failed (or its output did not reach the new runc's pipe)"; return 1; }
}

# What amber still refuses reaches runc as an error naming it, and the container runs on:
# runc checkpoint --auto-dedup (incremental images: amber has none).  (runc's own
# --empty-ns takes only network, which amber maps.)
t_rpc_runc_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v runc >/dev/null || { note "runc is not installed (make setup)"; return 77; }
	local id=amber-rpcr-$$ rc
	rpc_runc_bundle || return 1
	rpc_runc_refused_case "$id"
	rc=$?
	runc --root "$W/state" delete -f "$id" >>"$W/log" 2>&1
	wait
	return $rc
}
rpc_runc_refused_case() {
	local id=$1 n
	rpc_runc_bg run.out run -d "$id"
	wait_for 15 test -e "$W/bundle/rootfs/t/ready" || { fail "the container's counter did not start"; return 1; }
	rpc_runc_ckpt "$id" img --auto-dedup && { fail "runc checkpoint --auto-dedup succeeded"; return 1; }
	attach "$W/img.out" 10
	grep -q "criu failed: type DUMP errno 95" "$W/img.out" ||
		{ fail "runc did not get amber's refusal of the DUMP"; return 1; }
	grep -q "option auto_dedup is not supported" "$W/work-img/dump.log" ||
		{ fail "runc's dump.log does not name the refused option"; attach "$W/work-img/dump.log"; return 1; }
	[ "$(rpc_runc_state "$id" .status)" = running ] ||
		{ fail "the container is not running after the refused checkpoint"; return 1; }
	n=$(lines "$W/bundle/rootfs/t/count.log")
	wait_for 5 eval '[ "$(lines "$W/bundle/rootfs/t/count.log")" -gt $n ]' ||
		{ fail "the container's counter stopped counting"; return 1; }
}

# cg_root moves the root's cgroups and those below them (podman_export_import): a tree
# whose child is in a cgroup beside the root's (cgroups: the parent in a, the child in b)
# cannot follow, and the RESTORE is refused naming that cgroup before anything is made
# (the new root c is not made); a RESTORE without cg_root brings both back where they were.
t_rpc_cg_root_refused() {
	[ $SELFTEST = 1 ] && return 77
	cg_hiers || return 77
	local rc
	cg_mk
	rpc_cg_root_case
	rc=$?
	cleanup_test
	cg_rm
	rmdir "$CG2/$(cg_name c)" "$CGP/$(cg_name c)" 2>/dev/null
	return $rc
}
rpc_cg_root_case() {
	start_prog "$PROGS/cgroups" "$T" || return 1
	cg_setup || return 1
	rpc_img
	rpc_to "$W/out" "$AMBER" "dump=$W/img,$PID" \
		"restore=$W/img,cg_root=:/$(cg_name c),work=$W/work,log=refused.log,log_level=4" \
		"restore=$W/img,work=$W/work,log=restore.log,log_level=4" ||
		{ fail "rpc_client failed"; attach "$W/rpc.err"; return 1; }
	has_line "$W/out" '^dump ok type=1$' "DUMP" || return 1
	has_line "$W/out" "^restore fail errno=95 msg=option cg_root: a process was in cgroup /$(cg_name b) of hierarchy '.*', outside the root process's /$(cg_name a)" \
		"RESTORE with a cg_root the child cannot follow" || { attach "$W/work/refused.log" 20; return 1; }
	[ ! -d "$CG2/$(cg_name c)" ] && [ ! -d "$CGP/$(cg_name c)" ] ||
		{ fail "the refused RESTORE made cgroup $(cg_name c)"; return 1; }
	has_line "$W/out" "^restore ok pid=$PID type=2\$" "RESTORE" || { attach "$W/work/restore.log" 20; return 1; }
	wait_for 10 is_alive "$PID" || { fail "pid $PID is not back"; return 1; }
	echo "$PID" >>"$W/pids"
	cg_back || return 1
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the restored program failed its checks"; attach "$T/err"; return 1; }
}
