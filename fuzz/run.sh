#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Run amber's fuzz targets (build/fuzz/fuzz_*, built by `make fuzz-build`).
#
#   fuzz/run.sh [ci] [TARGET...]          every regression input (fuzz/regress/TARGET/),
#                                         then the seed corpus (fuzz/corpus/TARGET/), through
#                                         each target, then FUZZ_CI_SECONDS (20) of fuzzing
#                                         each: what `make fuzz-ci` and tests/test-all.sh run
#   fuzz/run.sh fuzz SECONDS [TARGET...]  fuzz each target for SECONDS (`make fuzz`)
#
# Fuzzing starts from the seeds and from what earlier runs found (build/fuzz/corpus/TARGET/,
# where new inputs go); a crash is saved in build/fuzz/crashes/TARGET/ and fails that step.
# Keep a crash as a regression input once it is fixed: cp it to fuzz/regress/TARGET/.
# One "ok"/"not ok" line per target and step, last line "N passed, N failed"; exit 1 if
# anything failed.  FUZZ_JOBS=N fuzzes each target with N processes.

set -u
shopt -s nullglob
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
BIN=build/fuzz
mode=ci
seconds=${FUZZ_CI_SECONDS:-20}
if [ $# -gt 0 ] && [ "$1" = ci ]; then
	shift
elif [ $# -gt 0 ] && [ "$1" = fuzz ]; then
	mode=fuzz
	seconds=${2:?usage: fuzz/run.sh fuzz SECONDS [TARGET...]}
	shift 2
fi
targets=("$@")
if [ ${#targets[@]} = 0 ]; then
	for f in fuzz/fuzz_*.c; do
		f=${f#fuzz/fuzz_}
		targets+=("${f%.c}")
	done
fi

pass=0 failed=0 n=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# One step: STEP TARGET COMMAND...; its output is shown only if it fails.
step() {
	local name=$1 t=$2
	shift 2
	n=$((n + 1))
	if "$@" >"$log" 2>&1; then
		pass=$((pass + 1))
		echo "ok $n - $t $name"
	else
		failed=$((failed + 1))
		echo "not ok $n - $t $name"
		grep -E '^(==[0-9]+==|SUMMARY|fuzz:|Running|.*runtime error|artifact_prefix|Test unit)' \
			"$log" | head -n 40 | sed 's/^/# /'
		ls -t "$BIN/crashes/$t"/crash-* "$BIN/crashes/$t"/leak-* "$BIN/crashes/$t"/timeout-* \
			2>/dev/null | head -n 3 | sed 's/^/# saved: /'
	fi
}

# Each regression input once, by name (libFuzzer runs the files it is given).
replay_files() {
	local bin=$1
	shift
	timeout -k 5 300 "$bin" -rss_limit_mb=2048 -timeout=20 "$@"
}

# Every input of the corpus once, then stop.
replay_dir() {
	timeout -k 5 600 "$1" -rss_limit_mb=2048 -timeout=20 -runs=0 "$2"
}

fuzz_for() {
	local bin=$1 t=$2 secs=$3 jobs=${FUZZ_JOBS:-1}
	local opts=(-rss_limit_mb=2048 -timeout=20 -max_total_time="$secs" -print_final_stats=1
		-artifact_prefix="$BIN/crashes/$t/")

	mkdir -p "$BIN/corpus/$t" "$BIN/crashes/$t"
	if [ "$jobs" -gt 1 ]; then
		opts+=(-fork="$jobs")
	fi
	timeout -k 10 $((secs + 120)) "$bin" "${opts[@]}" "$BIN/corpus/$t" "fuzz/corpus/$t"
}

for t in "${targets[@]}"; do
	bin=$BIN/fuzz_$t
	if [ ! -x "$bin" ]; then
		n=$((n + 1)) failed=$((failed + 1))
		echo "not ok $n - $t: no $bin (make fuzz-build)"
		continue
	fi
	if [ $mode = ci ]; then
		regress=(fuzz/regress/"$t"/*)
		if [ ${#regress[@]} -gt 0 ]; then
			step "regressions (${#regress[@]})" "$t" replay_files "$bin" "${regress[@]}"
		fi
		step corpus "$t" replay_dir "$bin" "fuzz/corpus/$t"
	fi
	step "fuzz ${seconds}s" "$t" fuzz_for "$bin" "$t" "$seconds"
	if [ $mode = fuzz ]; then
		grep -E '^stat::(number_of_executed_units|new_units_added)|^Done [0-9]+ runs' "$log" |
			sed 's/^/# /'
	fi
done

echo "$pass passed, $failed failed"
[ $failed = 0 ]
