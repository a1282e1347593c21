# memfd (tests/e2e/progs/memfd.c): names, sizes, seals, modes and contents, shared
# mappings in two processes staying one object, private COW pages of a memfd mapping.
# /proc must show the same memfd links and mapping names after the restore.
TESTS+=(memfd)

memfd_state() { # PID
	local p
	for p in $1 $(cat "/proc/$1/task/$1/children"); do
		ls -l "/proc/$p/fd" | awk '/memfd:/ {print $(NF-3), $(NF-2), $(NF-1), $NF}'
		awk '/memfd:/ {print $2, $3, $6, $7, $8}' "/proc/$p/maps"
	done
}
memfd_before() {
	memfd_state "$PID" >"$W/memfd.before"
	[ "$(grep -c memfd: "$W/memfd.before")" -ge 8 ] || { fail "expected memfd fds and maps, found: $(cat "$W/memfd.before")"; return 1; }
}
memfd_after() {
	memfd_state "$PID" >"$W/memfd.after"
	diff -u "$W/memfd.before" "$W/memfd.after" >"$W/memfd.diff" && return 0
	fail "the memfd fds or mappings differ after restore (- before, + after):"
	sed 's/^/    /' "$W/memfd.diff" >>"$W/log"
	return 1
}
t_memfd() { cycle -P memfd_before -A memfd_after -- "$PROGS/memfd" "$T"; }
