#!/bin/bash
# build.sh VARIANT [SRC]: configure and build $KQ_WORK/out-VARIANT/arch/x86/boot/bzImage
# with make -j$KQ_JOBS.  ccache is used when KQ_CCACHE=1, or when $KQ_WORK/ccache
# already exists (KQ_CCACHE=auto, the default); it only pays off when that dir
# survives between runs (a cold ccache build is ~50% slower).
set -euo pipefail
. "$(dirname "$(realpath "$0")")/lib.sh"
v=$1; src=${2:-$KQ_WORK/tree}; out=$KQ_WORK/out-$v
frag=$v; extra=()
# Only baseline is built from scratch.  The other variants start from the
# objects of the one they differ least from, so only what their options touch
# is rebuilt (kbuild tracks which CONFIG_ symbols each file uses): abi and the
# single-option kernels from baseline, cr from abi (CHECKPOINT_RESTORE reaches
# two headers), noipc from abi (SYSVIPC is in sched.h: most of the tree), and
# kcmp-plain, the control of the per-boot order check, from only-kcmp with
# kernel/kcmp.c alone compiled differently.
case $v in
abi | only-*) from=baseline ;;
cr | noipc) from=abi ;;
kcmp-plain) from=only-kcmp; frag=only-kcmp
	extra=("CFLAGS_kcmp.o=-include $KQ_KDIR/tests/kcmp-plain.h") ;;
*) from= ;;
esac
if [ -n "$from" ] && [ ! -d "$out" ] && [ -d "$KQ_WORK/out-$from" ]; then
	cp -a "$KQ_WORK/out-$from" "$out"
fi
"$KQ_HERE/mkconfig.sh" "$src" "$out" "$frag"
cc=()
case "${KQ_CCACHE:-auto}" in
1) use=1 ;; 0) use=0 ;; *) [ -d "$KQ_WORK/ccache" ] && use=1 || use=0 ;;
esac
if [ $use = 1 ] && command -v ccache >/dev/null; then
	export CCACHE_DIR=$KQ_WORK/ccache CCACHE_BASEDIR=$KQ_WORK CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-1G}
	mkdir -p "$CCACHE_DIR"; cc=(CC="ccache gcc")
fi
t0=$(date +%s)
make -s -C "$src" O="$out" -j"$KQ_JOBS" "${cc[@]}" "${extra[@]}" bzImage > "$out.build.log" 2>&1 || {
	tail -40 "$out.build.log"; kq_die "build of $v failed (log: $out.build.log)"; }
# CPU seconds of the build (user + sys of all children): what a quiet machine's wall
# time is about, divided by the number of cores
times >"$out.times" # in this shell: a $(times) subshell has no children
cpu=$(tail -1 "$out.times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); n += t[1] * 60 + t[2] } printf "%d", n }')
rm -f "$out.times"
echo "built $v${from:+ from the objects of $from} in $(( $(date +%s) - t0 ))s (${cpu}s CPU): $out/arch/x86/boot/bzImage ($(stat -c %s "$out/arch/x86/boot/bzImage") bytes)"
