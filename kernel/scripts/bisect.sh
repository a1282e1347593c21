#!/bin/bash
# bisect.sh: bisectability check.  Reverts the series in $KQ_WORK/tree, then
# applies it one patch at a time; after each patch it builds the "abi" config
# (options of later patches simply do not exist yet) into $KQ_WORK/out-bisect
# (a copy of out-abi when that exists, so every step is incremental) and boots it.  Prints
#   KQ-RESULT bisect.NNNN PASS|FAIL ...
# A step passes when it builds, boots and crabi (expecting present) passes as
# root and as uid 1000.
set -uo pipefail
. "$(dirname "$(realpath "$0")")/lib.sh"
T=$KQ_WORK/tree; O=$KQ_WORK/out-bisect
bdie() { echo "KQ-RESULT bisect.setup FAIL $*"; exit 1; }
mapfile -t S < <(kq_series)
stamp=$(cat "$T/.kq-stamp" 2>/dev/null) || bdie "run fetch.sh first"
# start from abi's objects: each step then rebuilds only what the patches touch
[ -d "$O" ] || [ ! -d "$KQ_WORK/out-abi" ] || cp -a "$KQ_WORK/out-abi" "$O"
rm -f "$T/.kq-stamp"          # the tree is not the full series while we work
for ((i=${#S[@]}-1; i>=0; i--)); do
	patch -d "$T" -p1 -R --batch --quiet < "${S[$i]}" || bdie "cannot revert ${S[$i]}"
done
for p in "${S[@]}"; do
	n=$(basename "$p" | cut -c1-4)
	patch -d "$T" -p1 --batch --quiet < "$p" || bdie "cannot apply $p"
	t0=$(date +%s)
	if ! KQ_LAX=1 "$KQ_HERE/mkconfig.sh" "$T" "$O" abi >/dev/null 2>&1 ||
	   ! make -s -C "$T" O="$O" -j"$KQ_JOBS" bzImage > "$O.build.log" 2>&1; then
		echo "KQ-RESULT bisect.$n FAIL build failed after $(basename "$p") (log $O.build.log)"
		continue
	fi
	bt=$(( $(date +%s) - t0 ))
	log=$KQ_WORK/logs/boot-bisect-$n.log
	"$KQ_HERE/runvm.sh" "$O/arch/x86/boot/bzImage" "$KQ_WORK/initrd.gz" "$log" "${KQ_TIMEOUT:-120}" \
		"KQ_EXPECT=present KQ_AMBER_EXPECT=info KQ_NAME=bisect-$n"
	rc=$?
	sums=$(grep '^KQ-SUMMARY' "$log" | tr '\n' ' ')
	cfg=$(grep -E '^CONFIG_(PROC_CHILDREN|KCMP|PROC_PID_STAT_CR|PRCTL_SET_MM_ARGS)=y' "$O/.config" | sed 's/CONFIG_//; s/=y//' | tr '\n' ' ')
	# every prefix has the features on (KCMP via tinyconfig's EXPERT, the stat
	# fields and prctl options ungated before 0003/0004): crabi must pass
	if [ $rc = 0 ] && grep -q '^KQ-EXIT' "$log" && [ "$(grep -c '^KQ-SUMMARY.* 0 failed' "$log")" = 2 ]; then
		echo "KQ-RESULT bisect.$n PASS $(basename "$p"): built in ${bt}s, booted; options on: ${cfg:-none}; in-guest: $sums"
	else
		echo "KQ-RESULT bisect.$n FAIL $(basename "$p"): boot rc $rc, in-guest: $sums (log $log)"
	fi
done
echo "$stamp" > "$T/.kq-stamp"
