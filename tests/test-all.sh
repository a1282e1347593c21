#!/usr/bin/env bash
# Every test: amber's unit and e2e tests (tests/run-all.sh), the fuzz targets'
# regression inputs, seeds and a short fuzzing run each (fuzz/run.sh ci), then
# the kernel rig (kernel/scripts/rig.sh: the C/R patch series built and tested
# under QEMU, amber included).  Ends with the sum: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
pass=0 failed=0 rc=0
for cmd in tests/run-all.sh fuzz/run.sh kernel/scripts/rig.sh; do
	echo "# ==== $cmd"
	"$cmd" 2>&1 | tee "$log"
	[ "${PIPESTATUS[0]}" = 0 ] || rc=1
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	if [ -z "$last" ]; then
		echo "# $cmd printed no summary"
		failed=$((failed + 1)) rc=1
		continue
	fi
	pass=$((pass + ${last%% passed*}))
	f=${last#*, }
	failed=$((failed + ${f%% failed*}))
done
echo "$pass passed, $failed failed"
exit $rc
