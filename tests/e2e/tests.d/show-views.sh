# amber show DIR ps|fds|mems (src/show-views.c): each view of a real dump must say what
# /proc said of the processes just before it: the tree (tests/e2e/progs/tree.c: groups,
# sessions, a zombie), the fds, cwd and root (files.c), the mappings (mem.c).
TESTS+=(show_view_ps show_view_fds show_view_mems show_view_usage)

# Every pid of the tree under $PID, parents first.
views_tree_pids() { # PID
	local p=$1 c
	echo "$p"
	for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
		views_tree_pids "$c"
	done
}

# PID PPID PGID SID STATE(zombie|running) COMM, from /proc.
views_ps_proc() {
	local p st
	for p in $(views_tree_pids "$PID"); do
		st=$(sed 's/.*) //' "/proc/$p/stat")
		set -- $st
		if [ "$1" = Z ]; then
			echo "$p $2 $3 $4 zombie <defunct>"
		else
			echo "$p $2 $3 $4 running $(cat "/proc/$p/comm")"
		fi
	done | sort -n
}
views_ps_before() { views_ps_proc >"$W/ps.proc"; }
views_ps_check() {
	amber_to "$W/ps.log" 30 show "$W/img" ps || { fail "amber show ps exited with $?"; attach "$W/ps.log"; return 1; }
	# drop the "+ amber" line and the header; PID PPID PGID SID STATE (THREADS) COMM
	sed '1,2d' "$W/ps.log" | awk '{print $1, $2, $3, $4, $5, $7}' | sort -n >"$W/ps.show"
	[ "$(lines "$W/ps.proc")" -ge 3 ] || { fail "the tree has fewer than 3 processes"; return 1; }
	grep -q ' zombie ' "$W/ps.proc" || { fail "the tree holds no zombie"; return 1; }
	diff -u "$W/ps.proc" "$W/ps.show" >"$W/ps.diff" && return 0
	fail "amber show ps differs from /proc (- /proc, + show):"
	sed 's/^/    /' "$W/ps.diff" >>"$W/log"
	return 1
}
t_show_view_ps() {
	[ $SELFTEST = 1 ] && return 77
	cycle -P views_ps_before -B views_ps_check -- "$PROGS/tree" "$T"
}

# PID FD FLAGS TARGET for every fd, then cwd and root, from /proc.
views_fds_before() {
	local f flags
	for f in $(ls "/proc/$PID/fd" | sort -n); do
		flags=$(awk '/^flags:/ {print $2}' "/proc/$PID/fdinfo/$f")
		echo "$PID $f 0$((8#$flags & ~8#2000000)) $(readlink "/proc/$PID/fd/$f")"
	done >"$W/fds.proc"
	echo "$PID cwd $(readlink "/proc/$PID/cwd")" >>"$W/fds.proc"
	echo "$PID root $(readlink "/proc/$PID/root")" >>"$W/fds.proc"
}
views_fds_check() {
	amber_to "$W/fds.log" 30 show "$W/img" fds || { fail "amber show fds exited with $?"; attach "$W/fds.log"; return 1; }
	# PID FD KIND FLAGS FILE: the flags without O_CLOEXEC, which is the fd's, not the file's
	sed '1,2d' "$W/fds.log" | while read -r p fd kind flags file; do
		case $fd in
		cwd | root) echo "$p $fd $file" ;;
		*) echo "$p $fd 0$((flags & ~8#2000000)) $file" ;;
		esac
	done >"$W/fds.show"
	[ "$(lines "$W/fds.proc")" -ge 8 ] || { fail "the program holds too few fds"; return 1; }
	diff -u "$W/fds.proc" "$W/fds.show" >"$W/fds.diff" && return 0
	fail "amber show fds differs from /proc (- /proc, + show):"
	sed 's/^/    /' "$W/fds.diff" >>"$W/log"
	return 1
}
t_show_view_fds() {
	[ $SELFTEST = 1 ] && return 77
	cycle -P views_fds_before -B views_fds_check -- "$PROGS/files" "$T"
}

# START-END PROT of every mapping (less [vsyscall], which is no VMA of the process's), and
# the pages the process has in memory in its writable private anonymous mappings.
views_mems_before() {
	awk '$6 != "[vsyscall]" {split($1, r, "-"); printf "%012s-%012s %s\n", r[1], r[2], substr($2, 1, 3)}' \
		"/proc/$PID/maps" >"$W/mems.proc"
}
views_mems_check() {
	local saved
	amber_to "$W/mems.log" 30 show "$W/img" mems || { fail "amber show mems exited with $?"; attach "$W/mems.log"; return 1; }
	sed '1,2d' "$W/mems.log" | awk '{print $2, $3}' >"$W/mems.show"
	diff -u "$W/mems.proc" "$W/mems.show" >"$W/mems.diff" || {
		fail "amber show mems: the mappings differ from /proc/PID/maps (- maps, + show):"
		sed 's/^/    /' "$W/mems.diff" >>"$W/log"
		return 1
	}
	# the pages column: the pagemap's runs, counted per VMA, add up to what pages-PID.img holds
	saved=$(sed '1,2d' "$W/mems.log" | awk '{s += $5} END {print s + 0}')
	want=$(( ($(stat -c %s "$W/img/pages-$PID.img") - 4096) / 4096 ))
	[ "$saved" = "$want" ] || { fail "amber show mems counts $saved pages saved, pages-$PID.img holds $want"; return 1; }
	note "amber show mems: $(lines "$W/mems.show") mappings, $saved pages"
}
t_show_view_mems() {
	[ $SELFTEST = 1 ] && return 77
	cycle -P views_mems_before -B views_mems_check -- "$PROGS/mem" "$T"
}

# A word after DIR that is no view is an error naming it, not a second directory.
t_show_view_usage() {
	[ $SELFTEST = 1 ] && return 77
	mkdir -p "$W/empty"
	amber_to "$W/usage.log" 10 show "$W/empty" pss
	local rc=$?
	[ $rc = 2 ] || { fail "amber show DIR pss exited with $rc, not 2"; attach "$W/usage.log"; return 1; }
	grep -q "'pss'.*not a view (ps, fds, mems)" "$W/usage.log" || { fail "no message naming 'pss'"; attach "$W/usage.log"; return 1; }
}
