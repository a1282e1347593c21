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

# seccomp (progs/seccomp.c): threads with filter chains of their own (two
# filters, one, another two), a child in strict mode, a child whose threads
# share one filter (TSYNC after the restore must work); the program checks
# what each filter answers, the test what /proc says of every task.
TESTS+=(seccomp seccomp_image_refused seccomp_owner_refused)
seccomp_state() {
	local p d
	for p in $1 $(cat /proc/$1/task/*/children); do
		for d in /proc/$p/task/*; do
			echo "${d##*/} $(grep -E '^(Seccomp|Seccomp_filters|NoNewPrivs|Speculation_Store_Bypass):' "$d/status" | tr -s '\t\n' '  ')"
		done
	done
}
seccomp_before() {
	seccomp_state "$PID" >"$W/seccomp.before"
	grep -q 'Seccomp: 1 ' "$W/seccomp.before" && grep -q 'Seccomp_filters: 2 ' "$W/seccomp.before" ||
		{ fail "no strict child or no two-filter thread: $(cat "$W/seccomp.before")"; return 1; }
}
seccomp_after() {
	seccomp_state "$PID" >"$W/seccomp.after"
	diff -u "$W/seccomp.before" "$W/seccomp.after" >"$W/seccomp.diff" && return 0
	fail "seccomp state differs after restore (- before, + after):"
	sed 's/^/    /' "$W/seccomp.diff" >>"$W/log"
	return 1
}
t_seccomp() { cycle -P seccomp_before -A seccomp_after -- "$PROGS/seccomp" "$T"; }

# Classic BPF instructions (struct sock_filter, little endian), as hex for imgedit.
SC_ALLOW=060000000000ff7f     # ret SECCOMP_RET_ALLOW
SC_NOTIF=060000000000c07f     # ret SECCOMP_RET_USER_NOTIF
SC_JA_OUT=0500000005000000    # ja +5: past the end
SC_LD_MEM=6000000003000000    # ld M[3], never stored

# Crafted filters in a root image are refused before any process exists.
t_seccomp_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0
	start_prog "$PROGS/seccomp" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	refused sc_mode "seccomp mode 7" "core-$PID.img" "seccomp_mode=7" || ok=1
	refused sc_jump "a jump out of the program" "core-$PID.img" \
		"seccomp_filters.0.prog=$SC_JA_OUT$SC_ALLOW" || ok=1
	refused sc_mem "read before it is written" "core-$PID.img" \
		"seccomp_filters.0.prog=$SC_LD_MEM$SC_ALLOW" || ok=1
	refused sc_notif "USER_NOTIF" "core-$PID.img" "seccomp_filters.1.prog=$SC_NOTIF" || ok=1
	refused sc_flags "unknown flags" "core-$PID.img" "seccomp_filters.0.flags=8" || ok=1
	refused sc_odd "whole number of instructions" "core-$PID.img" \
		"seccomp_filters.0.prog=${SC_ALLOW}00" || ok=1
	return $ok
}

# nobody's image given a filter without no_new_privs: a filter could fool a
# set-user-ID program the process executes, so the kernel lets only a
# privileged process install one; a restore must not do it on nobody's word.
t_seccomp_owner_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0
	owner_dump || return 1
	refused sc_no_nnp "without no_new_privs" "core-$PID.img" "seccomp_mode=2" \
		"seccomp_filters.0.prog=$SC_ALLOW" || ok=1
	return $ok
}

# membarrier (progs/membarrier.c): a parent registered for the global, private
# and rseq expedited barriers, its child for SYNC_CORE only; each checks its
# registrations and which barriers work (the others give EPERM).
TESTS+=(membarrier membarrier_image_refused)
t_membarrier() { cycle -- "$PROGS/membarrier" "$T"; }

# A registration command the kernel does not have (bit 0 is the plain
# MEMBARRIER_CMD_GLOBAL barrier, not a registration) is refused.
t_membarrier_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/membarrier" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	refused mb_unknown "unknown commands" "core-$PID.img" "membarrier=17"
}

# A thread with an x86 user shadow stack is refused at dump, naming it, and
# runs on (only where the CPU has user_shstk; the parser has a unit test).
TESTS+=(shstk_refused)
t_shstk_refused() {
	grep -qw user_shstk /proc/cpuinfo || return 77
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/shstk" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded with a shadow stack on"; return 1; }
	grep -q "pid $PID thread $PID: has an x86 user shadow stack" "$W/dump.log" ||
		{ fail "the refusal does not name the shadow stack"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}
