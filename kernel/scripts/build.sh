#!/bin/bash
# build.sh VARIANT [SRC]: configure and build $KQ_WORK/out-VARIANT/arch/x86/boot/bzImage
# with make -j$KQ_JOBS.  ccache is used when KQ_CCACHE=1, or when $KQ_WORK/ccache
# already exists (KQ_CCACHE=auto, the default); it only pays off when that dir
# survives between runs (a cold ccache build is ~50% slower).
set -euo pipefail
. "$(dirname "$(realpath "$0")")/lib.sh"
v=$1; src=${2:-$KQ_WORK/tree}; out=$KQ_WORK/out-$v
# a single-option variant starts from baseline's objects: only what the option touches rebuilds
case $v in
only-*) [ -d "$out" ] || [ ! -d "$KQ_WORK/out-baseline" ] || cp -a "$KQ_WORK/out-baseline" "$out" ;;
noipc) [ -d "$out" ] || [ ! -d "$KQ_WORK/out-abi" ] || cp -a "$KQ_WORK/out-abi" "$out" ;;
esac
"$KQ_HERE/mkconfig.sh" "$src" "$out" "$v"
cc=()
case "${KQ_CCACHE:-auto}" in
1) use=1 ;; 0) use=0 ;; *) [ -d "$KQ_WORK/ccache" ] && use=1 || use=0 ;;
esac
if [ $use = 1 ] && command -v ccache >/dev/null; then
	export CCACHE_DIR=$KQ_WORK/ccache CCACHE_BASEDIR=$KQ_WORK CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-1G}
	mkdir -p "$CCACHE_DIR"; cc=(CC="ccache gcc")
fi
t0=$(date +%s)
make -s -C "$src" O="$out" -j"$KQ_JOBS" "${cc[@]}" bzImage > "$out.build.log" 2>&1 || {
	tail -40 "$out.build.log"; kq_die "build of $v failed (log: $out.build.log)"; }
echo "built $v in $(( $(date +%s) - t0 ))s: $out/arch/x86/boot/bzImage ($(stat -c %s "$out/arch/x86/boot/bzImage") bytes)"
