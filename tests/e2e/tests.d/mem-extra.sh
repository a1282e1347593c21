# Memory: zero pages and unmodified file pages are not saved; the vDSO keeps
# working when it is moved (same kernel) and when it is proxied (the path taken
# on a kernel whose vDSO layout differs, forced with AMBER_VDSO_PROXY=1).
TESTS+=(zero_pages vdso vdso_proxy)

small_image() {
	local size
	size=$(stat -c %s "$W/img/pages-$PID.img")
	note "pages-$PID.img: $size bytes"
	# 16 anonymous pages + 1 file page + the vDSO + libc/stack pages: far below 1 MiB,
	# where saving the zero or unmodified file pages would be 68 MiB
	[ "$size" -lt $((1 << 20)) ] || { fail "pages image is $size bytes: zero or file pages were saved"; return 1; }
}
t_zero_pages() { cycle -B small_image -- "$PROGS/zero" "$T"; }
t_vdso() { cycle -- "$PROGS/vdso" "$T"; }
t_vdso_proxy() {
	[ $SELFTEST = 1 ] && return 77 # without amber nothing moves the vDSO
	local PENV=(AMBER_T_EXPECT_PROXY=1)
	AMBER_VDSO_PROXY=1 cycle -- "$PROGS/vdso" "$T"
}
