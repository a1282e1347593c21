#!/bin/bash
# rig.sh: the one command for the kernel half of amber (issue 3).
#
#   kernel/scripts/rig.sh
#
# 1. installs missing host tools (apt, Debian 12), 2. downloads linux-source-6.12
# and Debian's prebuilt 6.12 kernel into $KQ_WORK (default /var/cache/amber-kernel,
# outside the repo), unpacks the tree and applies kernel/patches, 3. checks the
# series (patch -p1, git am, checkpatch --strict), 4. builds the guest tests
# statically and one busybox initramfs, 5. boots Debian's kernel, then builds and
# boots each tiny kernel variant (baseline = C/R options off, abi = the four
# options on without CHECKPOINT_RESTORE, cr = CHECKPOINT_RESTORE=y selecting them,
# only-X = exactly one of them on: built from baseline's objects, so incremental),
# always under QEMU TCG with a hard timeout, and 6. prints every in-guest
# KQ-RESULT line and a final "N passed, N failed" (exit 1 if anything failed).
#
# Environment (see docs/kernel.md): KQ_WORK, KQ_JOBS (2), KQ_VARIANTS
# ("baseline abi cr only-children only-kcmp kcmp-plain only-stat only-prctl noipc"), KQ_DEBIAN (1: boot Debian's kernel), KQ_CCACHE (auto|0|1),
# KQ_BISECT (0; 1: build+boot every prefix of the series), KQ_TIMEOUT (300 s per
# boot), KQ_AMBER (amber binary for the guest; default <repo>/build/amber),
# KQ_E2E (1: also dump/restore build/progs in the guest), KQ_E2E_PROGS (a,b,c).
# Nothing is ever loaded into the host kernel; QEMU never uses KVM.
set -uo pipefail
. "$(dirname "$(realpath "$0")")/lib.sh"
VARIANTS=${KQ_VARIANTS:-baseline abi cr only-children only-kcmp kcmp-plain only-stat only-prctl noipc}
TO=${KQ_TIMEOUT:-300}
L=$KQ_WORK/logs
pass=0; fail=0
mkdir -p "$L" || { echo "0 passed, 1 failed"; exit 1; }

tally() { # tally PREFIX < lines: echo and count KQ-RESULT lines
	local pre=$1 line
	while IFS= read -r line; do
		case "$line" in
		KQ-RESULT*)
			line="KQ-RESULT $pre${line#KQ-RESULT }"
			echo "$line"
			read -r _ _ verdict _ <<< "$line"
			if [ "$verdict" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi ;;
		*) echo "$line" ;;
		esac
	done
}
abort() { # abort MESSAGE: count one failure and still end with the summary line
	echo "KQ-RESULT rig.abort FAIL $*"
	echo "$pass passed, $((fail + 1)) failed"
	exit 1
}
res() { echo "KQ-RESULT $1 $2 ${*:3}"; [ "$2" = PASS ] && pass=$((pass + 1)) || fail=$((fail + 1)); }

boot() { # boot NAME KERNEL EXPECT AMBER_EXPECT
	local name=$1 k=$2 expect=$3 aexp=$4 log=$L/boot-$1.log rc t0
	kq_stage "boot $name (expect $expect)"
	t0=$(date +%s)
	"$KQ_HERE/runvm.sh" "$k" "$KQ_WORK/initrd.gz" "$log" "$TO" "KQ_EXPECT=$expect KQ_AMBER_EXPECT=$aexp KQ_NAME=$name${KQ_E2E_PROGS:+ KQ_E2E_PROGS=$KQ_E2E_PROGS}"
	rc=$?
	tally "$name." < <(grep -E '^(KQ-RESULT|KQ-SUMMARY|KQ-INFO|KQ-AMBER|KQ-SKIP)' "$log")
	local boot_ok=0 sums
	grep -q 'KQ-BOOT-OK' "$log" && boot_ok=1
	sums=$(grep -c '^KQ-SUMMARY' "$log")
	if [ $boot_ok = 1 ] && grep -q '^KQ-EXIT' "$log" && [ "$sums" = 2 ] && [ $rc = 0 ]; then
		res "$name.vm" PASS "booted, tests ran as root and as uid 1000, qemu rc $rc, $(( $(date +%s) - t0 ))s ($(grep -o 'KQ-BOOT-OK kernel=[^ ]*' "$log"))"
	else
		res "$name.vm" FAIL "qemu rc $rc (124 = timeout), boot_ok=$boot_ok, summaries=$sums; log $log"
		tail -25 "$log" | sed 's/^/KQ-LOG /'
	fi
}

# kcmp's order must not be the plain pointer order.  Boot a kernel N times and
# collect the order of 12 files opened alike (crabi --order-only prints it as
# kcmp-order-sig): with kcmp's random per-boot cookies it differs from boot to
# boot; the control kernel kcmp-plain (cookies zero, i.e. plain pointers, see
# tests/kcmp-plain.h) must repeat it, or the check could not fail.
order_sigs() { # NAME KERNEL N: the N signatures, "none<i>" for a boot without one
	local name=$1 k=$2 n=$3 i sig sigs=""
	for ((i = 1; i <= n; i++)); do
		"$KQ_HERE/runvm.sh" "$k" "$KQ_WORK/initrd.gz" "$L/boot-$name-order$i.log" "$TO" \
			"KQ_EXPECT=kcmp KQ_ORDER_ONLY=1 KQ_NAME=$name-order$i"
		sig=$(sed -n 's/^KQ-INFO root kcmp-order-sig //p' "$L/boot-$name-order$i.log")
		sigs="$sigs ${sig:-none$i}"
	done
	echo $sigs
}
ndistinct() { echo "$@" | tr ' ' '\n' | grep -v '^none' | sort -u | wc -l; }
order_per_boot() { # KERNEL (only-kcmp)
	local sigs
	sigs=$(order_sigs only-kcmp "$1" 3)
	if [ "$(ndistinct $sigs)" = 3 ]; then
		res only-kcmp.kcmp-order-per-boot PASS "3 boots, 3 different orders of 12 files: $sigs"
	else
		res only-kcmp.kcmp-order-per-boot FAIL "3 boots gave the orders: $sigs (a repeat: not obfuscated per boot?)"
	fi
}
order_control() { # KERNEL (kcmp-plain)
	local sigs
	sigs=$(order_sigs kcmp-plain "$1" 2)
	if [ "$(ndistinct $sigs)" = 1 ] && ! echo "$sigs" | grep -q none; then
		res kcmp-plain.kcmp-order-control PASS "plain pointer order, 2 boots: $sigs (the same, so the per-boot check can fail)"
	else
		res kcmp-plain.kcmp-order-control FAIL "plain pointer order, 2 boots: $sigs (want one order twice)"
	fi
}
# What each option costs: bloat-o-meter from baseline (all off) to only-X, next
# to the numbers the option's commit message gives (information, not a test:
# they move with the compiler and the source package's version).
bloat_info() { # only-X
	local v=$1 p bm got msg
	case $v in only-children) p=0001 ;; only-kcmp) p=0002 ;; only-stat) p=0003 ;; *) p=0004 ;; esac
	bm=$KQ_WORK/tree/scripts/bloat-o-meter
	[ -x "$bm" ] && command -v python3 >/dev/null || return 0
	got=$("$bm" "$KQ_WORK/out-baseline/vmlinux" "$KQ_WORK/out-$v/vmlinux" 2>/dev/null | sed -n 's/^add\/remove/&/p' | head -1)
	msg=$(grep -h '^  add/remove' "$KQ_KDIR"/patches/$p-*.patch | head -1 | sed 's/^ *//')
	echo "KQ-INFO bloat $v: $got; $p's message: ${msg:-none}$([ "$got" = "$msg" ] && echo ' (the same)')"
}

kq_stage "deps"
if [ "$(id -u)" = 0 ]; then "$KQ_HERE/deps.sh" || abort "cannot install host tools"; fi

kq_stage "fetch + unpack + apply the series"
"$KQ_HERE/fetch.sh" || abort "fetch/unpack/patch failed"

kq_stage "check the series"
tally "" < <("$KQ_HERE/check-series.sh")

kq_stage "guest programs + initramfs"
gcc -O2 -Wall -static -pthread -o "$KQ_WORK/crabi" "$KQ_KDIR/tests/crabi.c" || abort "crabi does not build"
extra=()
AM=${KQ_AMBER:-$KQ_REPO/build/amber}
if [ -x "$AM" ]; then
	extra+=("$AM:/amber/amber"); echo "KQ-INFO amber: $AM goes into the guest"
	# a representative part of the e2e suite (guest-e2e.sh), if the programs are built
	if [ "${KQ_E2E:-1}" = 1 ] && [ -d "$KQ_REPO/build/progs" ]; then
		extra+=("$KQ_HERE/guest-e2e.sh:/amber/e2e.sh")
		progs=""
		for p in "$KQ_REPO"/build/progs/*; do
			[ -f "$p" ] && [ -x "$p" ] || continue
			extra+=("$p:/amber/progs/$(basename "$p")"); progs="$progs $(basename "$p")"
		done
		echo "KQ-INFO amber e2e programs:$progs"
	fi
else echo "KQ-SKIP amber: $AM not built; 'amber check' will not run in the guest"; fi
# the series' kselftests (0005, 0006) and the kselftest runner, static, installed as
# `make install` of tools/testing/selftests does; guest-run.sh runs them
rm -rf "$KQ_WORK/ksft"
if make -s -C "$KQ_WORK/tree" O="$KQ_WORK/ksft-headers" headers >"$L/ksft-build.log" 2>&1 &&
   make -s -C "$KQ_WORK/tree/tools/testing/selftests" TARGETS="kcmp proc prctl" CC="gcc -static" \
	KHDR_INCLUDES="-isystem $KQ_WORK/ksft-headers/usr/include" INSTALL_PATH="$KQ_WORK/ksft" \
	install >>"$L/ksft-build.log" 2>&1; then
	extra+=("$KQ_WORK/ksft:/ksft"); echo "KQ-INFO kselftests: kcmp proc prctl into /ksft"
else
	res ksft.build FAIL "kselftests did not build: $(tail -3 "$L/ksft-build.log" | tr '\n' ' ')"
fi
"$KQ_HERE/mkinitramfs.sh" "$KQ_WORK/initrd.gz" "$KQ_HERE/guest-run.sh" "$KQ_WORK/crabi" "${extra[@]}" \
	|| abort "initramfs failed"

if [ "${KQ_DEBIAN:-1}" = 1 ]; then
	dk=$(ls "$KQ_WORK"/debian/vmlinuz-* 2>/dev/null | head -1)
	if [ -n "$dk" ]; then boot debian "$dk" present,upstream pass # no 0007/0008
	else res debian.vm FAIL "no Debian kernel in $KQ_WORK/debian"; fi
fi

for v in $VARIANTS; do
	kq_stage "build $v"
	if "$KQ_HERE/build.sh" "$v"; then
		case $v in only-*) bloat_info "$v" ;; esac
		if [ "$v" = kcmp-plain ]; then
			order_control "$KQ_WORK/out-$v/arch/x86/boot/bzImage"
			continue
		fi
		case $v in
		baseline) e=absent; a=missing ;;
		abi) e=present; a=seeds ;;
		only-*) e=${v#only-}; a=only ;; # one option on: that feature alone
		noipc) e=present,noipc; a=info ;; # kcmp's SYSVSEM and EPOLL_TFD: EOPNOTSUPP
		*) e=present; a=pass ;;
		esac
		boot "$v" "$KQ_WORK/out-$v/arch/x86/boot/bzImage" "$e" "$a"
		[ "$v" = only-kcmp ] && order_per_boot "$KQ_WORK/out-$v/arch/x86/boot/bzImage"
	else
		res "$v.build" FAIL "see $KQ_WORK/out-$v.build.log"
	fi
done

if [ "${KQ_BISECT:-0}" = 1 ]; then
	kq_stage "bisectability: build + boot every prefix of the series"
	tally "" < <("$KQ_HERE/bisect.sh")
fi

kq_stage "done"
echo "KQ-INFO disk: $(du -sh "$KQ_WORK" 2>/dev/null | cut -f1) in $KQ_WORK"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
