# Process trees (tests/e2e/progs/tree.c): groups, sessions, a zombie, a pipe with
# data, a shared offset and shared anonymous memory between processes.
TESTS+=(tree)
t_tree() { cycle -- "$PROGS/tree" "$T"; }

# Zombies whose parents ignore SIGCHLD (SIG_IGN; SA_NOCLDWAIT with a handler)
# since they died come back as zombies with their statuses, the handler not run
# for them, and the actions as they were (tests/e2e/progs/zombiechld.c).
TESTS+=(tree_zombie_sigchld)
t_tree_zombie_sigchld() { cycle -- "$PROGS/zombiechld" "$T"; }

# More children than one page of the children file holds, and than 1024 (a
# dump once kept only the first 1024 and left the others running).
TESTS+=(tree_wide)
t_tree_wide() { DUMP_TIMEOUT=120 cycle -- "$PROGS/widetree" "$T" 1100; }

# A tree whose restore needs more fds than amber may have (it keeps the image's
# files open, and two fds per process above the processes' highest fd, here
# 1900) is refused with the limit named and nothing left behind, at each of the
# two places it can run out; the same image restores with the usual limit.
TESTS+=(tree_fd_limit)
fd_limit_refused() { # LIMIT PATTERN
	( ulimit -n "$1" && amber_to "$W/limit-$1.log" 60 restore -d -D "$W/img" ) &&
		{ fail "restored with ulimit -n $1"; return 1; }
	grep -q -- "$2" "$W/limit-$1.log" ||
		{ fail "ulimit -n $1: the error does not say '$2'"; attach "$W/limit-$1.log"; return 1; }
	is_gone "$PID" || { fail "ulimit -n $1: pid $PID exists after the failed restore"; return 1; }
	note "ulimit -n $1: $(grep -m1 error "$W/limit-$1.log")"
}
t_tree_fd_limit() {
	[ $SELFTEST = 1 ] && return 77
	local n
	start_prog bash -c 'ulimit -n 4096 && exec 1900</dev/null && exec "$0" "$@"' \
		"$PROGS/widetree" "$T" 300 || return 1
	amber_to "$W/dump.log" 120 dump -t "$PID" -D "$W/img" -v || { fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	n=$(find "$W/img" -name '*.img' | wc -l)
	fd_limit_refused $((n / 2)) "keeps each of the image's [0-9]* files open while it restores: raise the fd limit" || return 1
	fd_limit_refused $((n + 300)) "cannot make the channels to the 301 processes' restore: Too many open files: raise the fd limit" || return 1
	unedited_restores
}
