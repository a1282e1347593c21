# Process state beyond the basics (tests/e2e/progs/sched.c ...).
# sched: every thread has its own policy, priority, nice, CPU affinity and I/O
# priority, and the process a loginuid; the program checks its threads' own
# view, the test what /proc shows.
TESTS+=(sched sched_owner_refused)

sched_state() { # PID: per thread nice, rt_priority, policy, allowed CPUs
	local p=$1 d
	echo "loginuid $(cat /proc/$p/loginuid)"
	for d in /proc/$p/task/*; do
		echo "${d##*/} $(sed 's/.*) //' "$d/stat" | awk '{print "nice", $17, "rt", $38, "policy", $39}')" \
			"$(grep Cpus_allowed_list "$d/status" | tr -s '\t' ' ')"
	done
}
sched_before() {
	sched_state "$PID" >"$W/sched.before"
	[ "$(wc -l <"$W/sched.before")" = 6 ] || { fail "expected 5 threads: $(cat "$W/sched.before")"; return 1; }
	grep -q 'policy 1' "$W/sched.before" || { fail "no SCHED_FIFO thread: $(cat "$W/sched.before")"; return 1; }
}
sched_after() {
	sched_state "$PID" >"$W/sched.after"
	diff -u "$W/sched.before" "$W/sched.after" >"$W/sched.diff" && return 0
	fail "scheduling of the threads differs after restore (- before, + after):"
	sed 's/^/    /' "$W/sched.diff" >>"$W/log"
	return 1
}
t_sched() { cycle -P sched_before -A sched_after -- "$PROGS/sched" "$T"; }

# nobody's image (security-owner.sh's owner_dump) edited to ask for what nobody
# may not have: an RT policy, a nice below its own, the realtime I/O class, a
# loginuid (CAP_AUDIT_CONTROL).
t_sched_owner_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0
	owner_dump || return 1
	refused sched_fifo "may not" "core-$PID.img" "sched_policy=1" "sched_priority=10" || ok=1
	refused sched_nice "may not" "core-$PID.img" "sched_nice=-5" || ok=1
	refused sched_ioprio_rt "I/O priority class 1" "core-$PID.img" "ioprio=8194" || ok=1
	refused loginuid "cannot set loginuid 4242" "core-$PID.img" "loginuid=4242" || ok=1
	return $ok
}

# sigsync: pending SIGTRAP/SIGSEGV/SIGBUS with the kernel's si_codes (TRAP_BRKPT,
# SEGV_MAPERR, BUS_MCEERR_AO) in a thread's and the process's queue; the kernel's
# per-task view of the queues must be the same after restore.
TESTS+=(sigsync)
sigsync_state() {
	local d
	for d in /proc/$1/task/*; do echo "${d##*/} $(grep -E '^(SigPnd|ShdPnd|SigBlk):' "$d/status" | tr -s '\t\n' '  ')"; done
}
sigsync_before() {
	sigsync_state "$PID" >"$W/sigsync.before"
	grep -q 'SigPnd: 0000000000000010' "$W/sigsync.before" || { fail "no thread with SIGTRAP pending: $(cat "$W/sigsync.before")"; return 1; }
}
sigsync_after() {
	sigsync_state "$PID" >"$W/sigsync.after"
	diff -u "$W/sigsync.before" "$W/sigsync.after" >"$W/sigsync.diff" && return 0
	fail "pending signals differ after restore (- before, + after):"
	sed 's/^/    /' "$W/sigsync.diff" >>"$W/log"
	return 1
}
t_sigsync() { cycle -P sigsync_before -A sigsync_after -- "$PROGS/sigsync" "$T"; }
