#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The fuzz targets' seed corpus, from real images: dumps a few of the test programs
# (build/progs/*) with build/amber and splits each image into inputs of every target
# (fuzz/split-image.py), then keeps only the seeds that add coverage (libFuzzer -merge).
#
#   fuzz/make-corpus.sh [OUT]     default OUT: fuzz/corpus (what is committed)
#
# Needs root, `make all progs fuzz-build`.  The programs are killed by their dumps.

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
OUT=${1:-fuzz/corpus}
AMBER=build/amber
PROGS=(counter mem files vdso threads tree anonfd "sockets unix" signals timers)

[ "$(id -u)" = 0 ] || { echo "make-corpus: needs root (amber dump)" >&2; exit 1; }
for f in $AMBER build/fuzz/fuzz_records; do
	[ -x "$f" ] || { echo "make-corpus: no $f (make all progs fuzz-build)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/amber-corpus-XXXXXX)
chmod 0755 "$work"
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT

for p in "${PROGS[@]}"; do
	read -r prog args <<<"$p"
	t=$work/$prog
	mkdir -p "$t"
	(cd "$t" && exec setsid env AMBER_T="$t" "$ROOT/build/progs/$prog" "$t" $args \
		</dev/null >"$t/out" 2>"$t/err") &
	pid=$!
	disown "$pid" # killed by the dump: no job notice
	for _ in $(seq 150); do
		[ -e "$t/ready" ] && break
		sleep 0.1
	done
	if [ ! -e "$t/ready" ] || ! $AMBER dump -t "$pid" -D "$t/img" >"$t/dump.log" 2>&1; then
		echo "make-corpus: could not dump $prog:" >&2
		cat "$t/err" "$t/dump.log" >&2 2>/dev/null
		exit 1
	fi
	pid=
	python3 fuzz/split-image.py $AMBER "$t/img" "$work/all" "$prog" || exit 1
	echo "make-corpus: $prog: $(ls "$t/img" | wc -l) image files"
done

# Only what adds coverage: each target's merge keeps the smallest inputs that reach it
# (named by their hash: they get their names back, PROG-FILE).
for d in "$work"/all/*/; do
	target=$(basename "$d")
	mkdir -p "$work/merged/$target"
	build/fuzz/fuzz_"$target" -merge=1 "$work/merged/$target" "$d" >"$work/merge.log" 2>&1 ||
		{ cat "$work/merge.log" >&2; exit 1; }
	rm -rf "${OUT:?}/$target"
	mkdir -p "$OUT/$target"
	(cd "$d" && sha1sum -- *) | while read -r sum name; do
		[ -e "$work/merged/$target/$sum" ] && cp "$d/$name" "$OUT/$target/$name"
	done
	echo "make-corpus: $target: $(ls "$OUT/$target" | wc -l) seeds," \
		"$(du -sk "$OUT/$target" | cut -f1) KiB"
done
