# Memory flags: madvise hints, mlock / mlock2 ONFAULT / MAP_LOCKED, mlockall
# MCL_FUTURE, PROT_NONE and MADV_GUARD_INSTALL guard pages come back on every
# VMA (the program checks its own smaps, bytes, faults and a fork; the test
# compares every VMA's VmFlags and VmLck before and after).
TESTS+=(memflags)

memflags_vmlck() { grep '^VmLck:' "/proc/$PID/status"; }
memflags_before() { memflags_vmlck >"$W/vmlck.before"; }
memflags_after() {
	memflags_vmlck >"$W/vmlck.after"
	note "$(cat "$W/vmlck.before") -> $(cat "$W/vmlck.after")"
	diff "$W/vmlck.before" "$W/vmlck.after" >/dev/null ||
		{ fail "VmLck differs: $(cat "$W/vmlck.before") / $(cat "$W/vmlck.after")"; return 1; }
	# the image holds the locks and guard pages as such
	"$AMBER" show "$W/img" | grep -q '"mlock_future"' ||
		{ fail "amber show lists no mlock_future"; return 1; }
}
t_memflags() { cycle -f vmflags -P memflags_before -A memflags_after -- "$PROGS/memflags" "$T"; }

# A process without a vDSO: injected through its own code's syscall at dump,
# through amber's scratch area at restore; its maps come back without either.
TESTS+=(memflags_novdso)
t_memflags_novdso() { cycle -f maps -- "$PROGS/memflags-novdso" "$T"; }
