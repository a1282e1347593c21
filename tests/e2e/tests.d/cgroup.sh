# cgroups (src/cgroup.c): each process back in its own cgroups; a missing one is made with
# its dumped settings (--manage-cgroups soft, the default), full and ignore modes.
TESTS+=(cgroup_soft cgroup_ignore cgroup_image_refused cgroup_devices cgroup_bpf_refused)

# the v2 hierarchy and the one with the pids controller (v1, or v2 where it is enabled)
cg_hiers() {
	CG2=$(findmnt -rn -t cgroup2 -o TARGET | head -1)
	CGP=$(findmnt -rn -t cgroup -o TARGET,OPTIONS | awk '$2 ~ /(^|,)pids(,|$)/ {print $1; exit}')
	[ -n "$CGP" ] || { grep -qw pids "$CG2/cgroup.subtree_control" 2>/dev/null && CGP=$CG2; }
	[ -n "$CG2" ] && [ -n "$CGP" ]
}
cg_name() { echo "amber-cg-$(basename "$W")-$1"; }
cg_mk() { # a b: the test's cgroups in both hierarchies; b's pids.max 42
	local d
	for d in "$CG2" "$CGP"; do mkdir -p "$d/$(cg_name a)" "$d/$(cg_name b)"; done
	echo 42 >"$CGP/$(cg_name b)/pids.max"
}
cg_rm() {
	local d x
	for d in "$CG2" "$CGP"; do for x in a b; do
		[ -d "$d/$(cg_name $x)" ] && wait_for 10 rmdir "$d/$(cg_name $x)" 2>/dev/null
	done; done
	true
}
cg_move() { # PID a|b
	local d
	for d in "$CG2" "$CGP"; do echo "$1" >"$d/$(cg_name "$2")/cgroup.procs" || return 1; done
}
# the program's two processes moved, their cgroups as the kernel says
cg_setup() {
	CHILD=$(cat "$T/child.pid")
	cg_move "$PID" a && cg_move "$CHILD" b || { fail "cannot move the program into its cgroups"; return 1; }
	touch "$T/moved"
	wait_for 10 test -e "$T/seen.parent" -a -e "$T/seen.child" || { fail "the program did not read its cgroups"; return 1; }
	cat "/proc/$PID/cgroup" >"$W/cg.parent"
	cat "/proc/$CHILD/cgroup" >"$W/cg.child"
}
# after the dump: b removed, so that the restore must make it again
cg_gone() {
	wait_for 10 is_gone "$CHILD" || { fail "the child is still there"; return 1; }
	local d
	for d in "$CG2" "$CGP"; do wait_for 10 rmdir "$d/$(cg_name b)" || { fail "cannot remove $d/$(cg_name b)"; return 1; }; done
}
cg_back() {
	diff -u "$W/cg.parent" "/proc/$PID/cgroup" >>"$W/log" &&
		diff -u "$W/cg.child" "/proc/$CHILD/cgroup" >>"$W/log" ||
		{ fail "the processes are not back in their cgroups"; return 1; }
	[ "$(cat "$CGP/$(cg_name b)/pids.max")" = 42 ] ||
		{ fail "the cgroup made again has pids.max $(cat "$CGP/$(cg_name b)/pids.max"), not 42"; return 1; }
	note "back in $(grep -c "$(cg_name a)" "/proc/$PID/cgroup") and $(grep -c "$(cg_name b)" "/proc/$CHILD/cgroup") cgroups; $(cg_name b) made again with pids.max 42"
}
t_cgroup_soft() {
	cg_hiers || return 77
	cg_mk
	cycle -P cg_setup -B cg_gone -A cg_back -- "$PROGS/cgroups" "$T"
	local rc=$?
	cleanup_test
	cg_rm
	return $rc
}

# ignore: the processes stay in amber's cgroups (the ones the test runs in)
cg_gone_both() { cg_gone && wait_for 10 rmdir "$CG2/$(cg_name a)"; }
cg_amber_s() {
	grep -q "amber-cg-$(basename "$W")" "/proc/$PID/cgroup" "/proc/$CHILD/cgroup" &&
		{ fail "with ignore a process is in a test cgroup"; return 1; }
	diff <(sed 's/^[0-9]*://' /proc/self/cgroup) <(sed 's/^[0-9]*://' "/proc/$CHILD/cgroup") >>"$W/log" ||
		{ fail "with ignore the child is not in amber's cgroups"; return 1; }
	# the program's own checks expect its cgroups: let it see them (it would fail otherwise)
	cg_mk; cg_move "$PID" a && cg_move "$CHILD" b
}
t_cgroup_ignore() {
	cg_hiers || return 77
	cg_mk
	cycle -P cg_setup -B cg_gone_both -A cg_amber_s -r "--manage-cgroups=ignore" -- "$PROGS/cgroups" "$T"
	local rc=$?
	cleanup_test
	cg_rm
	return $rc
}

# edited cgroup.img: refused before anything is made
t_cgroup_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	cg_hiers || return 77
	local ok=0
	cg_mk
	start_prog "$PROGS/cgroups" "$T" || { cg_rm; return 1; }
	cg_setup || { cg_rm; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" || { fail "amber dump failed"; attach "$W/dump.log"; cg_rm; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; cg_rm; return 1; }
	cg_refused() { # NAME PATTERN EDIT...
		local name=$1 pat=$2
		shift 2
		rm -rf "$W/$name"; cp -a "$W/img" "$W/$name"
		"$IMGEDIT" "$W/$name" cgroup.img "$@" 2>>"$W/log" || { fail "$name: imgedit failed"; return 1; }
		amber_to "$W/$name.log" 30 restore -d -D "$W/$name"
		[ $? != 0 ] || { fail "$name: restored an image edited with $*"; return 1; }
		grep -q -- "$pat" "$W/$name.log" || { fail "$name: refused, but not for '$pat'"; attach "$W/$name.log"; return 1; }
		! grep -q "restoring task" "$W/$name.log" || { fail "$name: refused once processes existed"; return 1; }
			note "$name: $(grep -m1 -o "error.*" "$W/$name.log")"
	}
	# records: the two processes' sets (0, 1), the processes (2, 3), then the cgroups
	cg_refused cg_dotdot "a cgroup path or hierarchy" "0.set.members.0.path=/../../etc" || ok=1
	cg_refused cg_setid "a set's id" "0.set.id=0" || ok=1
	cg_refused cg_prop "a cgroup setting" "4.dir.props.0.name=release_agent" \
		"4.dir.props.0.value=/tmp/x" || ok=1
	cg_refused cg_bpf "a cgroup's BPF program type" "4.dir.bpf=bogus" || ok=1
	cg_refused cg_task "a process not in pstree.img" "2.task.pid=1" || ok=1
	cg_refused cg_hier "does not mount" "0.set.members.0.controllers=nosuchctl" || ok=1
	[ $ok = 0 ] || { cg_rm; return 1; }
	unedited_restores
	local rc=$?
	cleanup_test
	cg_rm
	return $rc
}

# v1 devices: a container's device list survives the cgroup being made again; before, the new
# cgroup inherited its parent's ("a *:* rwm") and the restored process could open any device
cgd_dir() { echo "$CGD/$(cg_name dev)"; }
cgd_setup() {
	echo "$PID" >"$(cgd_dir)/cgroup.procs" || { fail "cannot move the program into $(cgd_dir)"; return 1; }
	touch "$T/moved"
	wait_for 10 test -e "$T/seen" || { fail "the program did not check its devices"; return 1; }
	cat "$(cgd_dir)/devices.list" >"$W/devices.before"
}
cgd_gone() {
	wait_for 10 rmdir "$(cgd_dir)" || { fail "cannot remove $(cgd_dir)"; return 1; }
}
cgd_back() {
	grep -q ":devices:/$(cg_name dev)\$" "/proc/$PID/cgroup" ||
		{ fail "the process is not back in its devices cgroup"; return 1; }
	diff -u "$W/devices.before" "$(cgd_dir)/devices.list" >>"$W/log" ||
		{ fail "the cgroup made again allows other devices"; return 1; }
	note "$(cg_name dev) made again allowing only: $(tr '\n' ';' <"$(cgd_dir)/devices.list")"
}
t_cgroup_devices() {
	CGD=$(findmnt -rn -t cgroup -o TARGET,OPTIONS | awk '$2 ~ /(^|,)devices(,|$)/ {print $1; exit}')
	[ -n "$CGD" ] || return 77
	mkdir -p "$(cgd_dir)" && echo a >"$(cgd_dir)/devices.deny" &&
		echo "c 1:3 rwm" >"$(cgd_dir)/devices.allow" && echo "c 1:5 r" >"$(cgd_dir)/devices.allow" ||
		{ fail "cannot set up $(cgd_dir)"; return 1; }
	cycle -P cgd_setup -B cgd_gone -A cgd_back -- "$PROGS/cgdevices" "$T"
	local rc=$?
	cleanup_test
	[ -d "$(cgd_dir)" ] && wait_for 10 rmdir "$(cgd_dir)"
	return $rc
}

# v2: a cgroup with a BPF device program attached (a runtime's device filter) is not made again
# without it: refused, naming the cgroup, before any process exists; restored once it is there
t_cgroup_bpf_refused() {
	[ $SELFTEST = 1 ] && return 77
	local cg2 dir
	cg2=$(findmnt -rn -t cgroup2 -o TARGET | head -1)
	[ -n "$cg2" ] || return 77
	dir="$cg2/$(cg_name bpf)"
	mkdir -p "$dir" || { fail "cannot make $dir"; return 1; }
	"$PROGS/cgbpf" "$dir" 2>>"$W/log"
	case $? in 0) ;; 77) rmdir "$dir"; return 77 ;; *) fail "cannot attach a device program to $dir"; rmdir "$dir"; return 1 ;; esac
	cgb_fail() { fail "$1"; [ -n "$2" ] && attach "$2"; cleanup_test; [ -d "$dir" ] && wait_for 10 rmdir "$dir"; return 1; }
	start_prog "$PROGS/counter" "$T" || { rmdir "$dir"; return 1; }
	echo "$PID" >"$dir/cgroup.procs" || cgb_fail "cannot move the program into $dir" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" || cgb_fail "amber dump failed" "$W/dump.log" || return 1
	wait_for 10 is_gone "$PID" && wait_for 10 rmdir "$dir" || cgb_fail "cannot remove $dir after the dump" || return 1
	amber_to "$W/refused.log" 30 restore -d -D "$W/img"
	[ $? != 0 ] || cgb_fail "restored without the cgroup's device program" || return 1
	grep -q "cgroup /$(cg_name bpf) had BPF programs attached (device)" "$W/refused.log" ||
		cgb_fail "refused, but not naming the cgroup and its device program" "$W/refused.log" || return 1
	! grep -q "restoring task" "$W/refused.log" && ! kill -0 "$PID" 2>/dev/null ||
		cgb_fail "refused once processes existed" || return 1
	[ ! -d "$dir" ] || cgb_fail "the refused restore made $dir" || return 1
	note "$(grep -m1 -o "error.*" "$W/refused.log")"
	# the runtime's part: the cgroup with its program; then the restore goes on
	mkdir "$dir" && "$PROGS/cgbpf" "$dir" || cgb_fail "cannot make $dir again" || return 1
	unedited_restores || { cleanup_test; wait_for 10 rmdir "$dir"; return 1; }
	grep -q "::/$(cg_name bpf)\$" "/proc/$PID/cgroup" || cgb_fail "the restored counter is not in $dir" || return 1
	cleanup_test
	wait_for 10 rmdir "$dir"
	return 0
}
