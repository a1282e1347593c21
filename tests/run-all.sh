#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Run every test: the unit tests (build/unit/*, cmocka; a binary's exit status is its
# verdict, its "[  PASSED  ] N test(s)" / "[  FAILED  ] N test(s)" lines give the counts),
# then the end-to-end suite (tests/e2e/run.sh; extra arguments go to it).  Last line:
# "N passed, N failed" over both; exit 1 if anything failed.  `make test` builds first.

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
pass=0
failed=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

units=(build/unit/*)
if [ ! -e "${units[0]}" ]; then
	echo "# no unit tests in build/unit (make units)"
	units=()
fi
for u in "${units[@]}"; do
	[ -f "$u" ] && [ -x "$u" ] || continue
	echo "# unit: $u"
	timeout -k 5 300 "$u" >"$tmp" 2>&1
	rc=$?
	cat "$tmp"
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]\+\) test.*/\1/p' "$tmp" | awk '{s += $1} END {print s + 0}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]\+\) test.*/\1/p' "$tmp" | awk '{s += $1} END {print s + 0}')
	if [ $rc != 0 ] && [ "$f" = 0 ]; then
		f=1 # crashed, timed out, or does not print cmocka's summary
		echo "# $u exited with $rc"
	fi
	if [ $rc = 0 ] && [ "$p" = 0 ]; then
		p=1 # no cmocka summary: count the binary as one test
	fi
	pass=$((pass + p))
	failed=$((failed + f))
	echo "# $u: $p passed, $f failed"
done

echo "# e2e: tests/e2e/run.sh $*"
tests/e2e/run.sh "$@" | tee "$tmp"
rc=${PIPESTATUS[0]}
last=$(tail -n 1 "$tmp")
if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
	pass=$((pass + BASH_REMATCH[1]))
	failed=$((failed + BASH_REMATCH[2]))
	if [ $rc != 0 ] && [ "${BASH_REMATCH[2]}" = 0 ]; then
		failed=$((failed + 1))
	fi
else
	echo "# tests/e2e/run.sh did not finish (exit $rc)"
	failed=$((failed + 1))
fi

echo "$pass passed, $failed failed"
[ $failed = 0 ]
