# Statistics (src/stats.c): --display-stats on dump and restore, stats-dump.img in the
# image, stats-restore.img beside it, amber show --stats.  The page counts must match
# what the image really holds (pages-PID.img), for tests/e2e/progs/mem.c.
TESTS+=(stats_dump_restore)

# "  pages written           123" -> 123
stats_field() { # FILE LABEL
	sed -n "s/^  $2  *\([0-9.]*\).*/\1/p" "$1" | head -n 1
}
stats_pages_in_image() {
	echo $(( ($(stat -c %s "$W/img/pages-$PID.img") - 4096) / 4096 ))
}
# where the time went: ptrace round trips counted, memory's share named, no more time in the
# resources than in the whole run
stats_breakdown() { # LOG
	local n sum total
	n=$(stats_field "$1" "injected syscalls")
	[ "${n:-0}" -gt 0 ] || { fail "$1: no injected syscalls counted ('$n')"; attach "$1"; return 1; }
	grep -q '^  time in memory ' "$1" || { fail "$1: no time in memory"; attach "$1"; return 1; }
	sum=$(awk '/^  time in / {s += $(NF-1)} END {printf "%d", s * 1000}' "$1")
	total=$(awk '/^  total time / {printf "%d", $(NF-1) * 1000}' "$1")
	[ "$sum" -le "$total" ] || { fail "$1: the resources took $sum us, more than the total $total us"; return 1; }
}
stats_after_dump() {
	local want written scanned
	want=$(stats_pages_in_image)
	grep -q '^dump statistics:' "$W/dump.log" || { fail "dump --display-stats printed no statistics"; attach "$W/dump.log"; return 1; }
	written=$(stats_field "$W/dump.log" "pages written")
	scanned=$(stats_field "$W/dump.log" "pages scanned")
	[ "$written" = "$want" ] || { fail "dump says $written pages written, pages-$PID.img holds $want"; return 1; }
	[ "$scanned" -ge "$written" ] || { fail "$scanned pages scanned, fewer than the $written written"; return 1; }
	[ "$(stats_field "$W/dump.log" processes)" = 1 ] || { fail "dump statistics: processes is not 1"; return 1; }
	[ -f "$W/img/stats-dump.img" ] || { fail "no stats-dump.img in the image"; return 1; }
	stats_breakdown "$W/dump.log" || return 1
	amber_to "$W/show.log" 30 show --stats "$W/img" || { fail "amber show --stats exited with $?"; attach "$W/show.log"; return 1; }
	[ "$(stats_field "$W/show.log" "pages written")" = "$want" ] || { fail "amber show --stats does not say $want pages written"; attach "$W/show.log"; return 1; }
	grep -q '^restore statistics: none' "$W/show.log" || { fail "amber show --stats shows restore statistics before any restore"; attach "$W/show.log"; return 1; }
}
stats_after_restore() {
	local want vdso
	# all but the old vDSO's pages, kept only for a kernel whose vDSO differs
	amber_to "$W/mems.log" 30 show "$W/img" mems || { fail "amber show mems exited with $?"; return 1; }
	vdso=$(awk '$4 == "vdso" {s += $5} END {print s + 0}' "$W/mems.log")
	want=$(($(stats_pages_in_image) - vdso))
	wait_for 10 test -f "$W/img/stats-restore.img" || { fail "restore wrote no stats-restore.img"; return 1; }
	amber_to "$W/show2.log" 30 show --stats "$W/img" || { fail "amber show --stats exited with $?"; attach "$W/show2.log"; return 1; }
	[ "$(stats_field "$W/show2.log" "pages restored")" = "$want" ] ||
		{ fail "amber show --stats: pages restored is not the $want of pages-$PID.img (less $vdso of the vDSO)"; attach "$W/show2.log"; return 1; }
	grep -q '^restore statistics:' "$W/restore.log" || { fail "restore --display-stats printed no statistics"; attach "$W/restore.log"; return 1; }
	[ "$(stats_field "$W/restore.log" "pages restored")" = "$want" ] || { fail "restore says another number of pages restored"; return 1; }
	stats_breakdown "$W/restore.log"
}
t_stats_dump_restore() {
	[ $SELFTEST = 1 ] && return 77
	cycle -d --display-stats -r --display-stats -B stats_after_dump -A stats_after_restore -- "$PROGS/mem" "$T"
}
