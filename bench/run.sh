#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# make bench: time amber dump and restore on the workloads of bench/workload.c,
# and the same with upstream CRIU 4.x (`criu` in PATH or CRIU=path; otherwise
# bench/get-criu.sh builds 4.1.1 once into /var/cache/amber-criu, unless
# BENCH_CRIU=0), printed side by side as ratios (amber / CRIU; < 1 means
# amber is faster).  Images go to a tmpfs (BENCH_DIR, default /dev/shm) so the
# disk does not dominate; a run over 600 s counts as failed.  Each row is the
# median of BENCH_RUNS runs (3).
# BENCH_ONLY=REGEX runs only the rows whose name matches (e.g. 'memory|page').
# Under each row, where amber's time went (its stats: amber show --stats).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AMBER=${AMBER:-$ROOT/build/amber} # AMBER=path to time another build
W=$ROOT/build/bench-workload
DIR=${BENCH_DIR:-/dev/shm}/amber-bench.$$
RUNS=${BENCH_RUNS:-3}
ONLY=${BENCH_ONLY:-}
CRIU=${CRIU:-$(command -v criu || true)}

mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
gcc -O2 -pthread -o "$W" "$ROOT/bench/workload.c" || exit 1

is_criu4() { [ -n "$1" ] && "$1" --version 2>/dev/null | grep -qE 'Version: ([4-9]|[1-9][0-9])\.'; }
if ! is_criu4 "$CRIU" && [ "${BENCH_CRIU:-1}" = 1 ]; then
	# Debian 12's criu (3.17) does not work on 6.x kernels: build 4.1.1 once
	[ -n "$CRIU" ] && echo "# $CRIU is not CRIU 4.x; building upstream 4.1.1 (bench/get-criu.sh)"
	CRIU=$("$ROOT/bench/get-criu.sh" 2>"$DIR/get-criu.log" | tail -n 1) ||
		{ echo "# bench/get-criu.sh failed:"; tail -n 5 "$DIR/get-criu.log" | sed 's/^/#   /'; }
fi
is_criu4 "$CRIU" || CRIU=
if [ -n "$CRIU" ]; then
	echo "# CRIU: $CRIU ($("$CRIU" --version | head -n 1))"
	# CRIU stops its parasite on a hardware breakpoint; where the guest's debug
	# registers do not trap it would wait forever: use its own fallback
	# (PTRACE_SYSCALL stops, fault code 130 = FI_NO_BREAKPOINTS)
	if gcc -O2 -o "$DIR/hwbp" "$ROOT/bench/hwbp.c" && ! "$DIR/hwbp"; then
		export CRIU_FAULT=130
		echo "# hardware breakpoints do not fire here: CRIU runs with CRIU_FAULT=130 (no breakpoints)"
	fi
else
	echo "# no upstream CRIU 4.x: amber only (set CRIU=path to compare)"
fi
# In a VM with free page reporting the host takes back freed guest memory; the
# first touch of such memory then costs a host fault (measured here ~2.6 s/GiB
# against ~0.3 s/GiB), and the large rows vary with what the host has reclaimed.
for f in /sys/bus/virtio/drivers/virtio_balloon/virtio*/features; do
	[ "$(cut -c6 "$f")" = 1 ] &&
		echo "# virtio-balloon free page reporting is on: the 4 GiB rows depend on the host"
done

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

wait_gone() { # PIDS...
	for p in "$@"; do
		for _ in $(seq 400); do [ -e /proc/$p ] || break; sleep 0.025; done
	done
}

start() { # ARGS -> sets WPID (the workload, in its own session)
	local out=$DIR/w.out
	rm -f "$out"
	setsid "$W" "$@" >"$out" 2>/dev/null </dev/null &
	WPID=$! # setsid execs in place: not a group leader in a script
	for _ in $(seq 600); do grep -q ready "$out" 2>/dev/null && break; sleep 0.05; done
	# a tree is ready when all its processes exist
	[ "$1" = tree ] || [ "$1" = fds ] && for _ in $(seq 600); do
		[ "$(tree_pids "$WPID" | wc -l)" -ge "$2" ] && break
		sleep 0.05
	done
}

tree_pids() { # PID: the pid and its descendants
	local p=$1 c
	echo "$p"
	for c in $(cat /proc/$p/task/*/children 2>/dev/null); do tree_pids "$c"; done
}

# one run: prints "dump_seconds restore_seconds" or "fail fail"
run_amber() {
	local img=$DIR/img t0 t1 t2 pids
	rm -rf "$img"
	pids=$(tree_pids "$WPID")
	t0=$(now)
	timeout 600 "$AMBER" dump -t "$WPID" -D "$img" >/dev/null 2>&1 || { echo "fail fail"; return; }
	t1=$(now)
	wait_gone $pids
	t2=$(now)
	timeout 600 "$AMBER" restore -D "$img" -d >/dev/null 2>&1 || { echo "fail fail"; return; }
	printf '%.3f %.3f\n' "$(echo "$t1 - $t0" | bc)" "$(echo "$(now) - $t2" | bc)"
	# where amber's time went (stats.c), for the phases line of the row
	"$AMBER" show --stats "$img" >"$DIR/stats.last" 2>/dev/null
}

# The last amber run's phases, from amber show --stats: "dump freezing=1.2 ..." (ms).
phases() {
	awk '/^dump statistics/ {w = "dump"} /^restore statistics/ {w = "restore"}
	     / ms$/ {v = $(NF - 1); $NF = ""; $(NF - 1) = ""; sub(/ time */, ""); gsub(/^ +| +$/, "")
		     gsub(/ /, "-"); printf "%s %s=%s ", w, $0, v}' "$DIR/stats.last" 2>/dev/null
}

run_criu() {
	local img=$DIR/cimg t0 t1 t2 pids
	rm -rf "$img"; mkdir -p "$img"
	pids=$(tree_pids "$WPID")
	t0=$(now)
	timeout 600 "$CRIU" dump -t "$WPID" -D "$img" --shell-job >/dev/null 2>&1 || { echo "fail fail"; return; }
	t1=$(now)
	wait_gone $pids
	t2=$(now)
	timeout 600 "$CRIU" restore -D "$img" -d --shell-job >/dev/null 2>&1 || { echo "fail fail"; return; }
	printf '%.3f %.3f\n' "$(echo "$t1 - $t0" | bc)" "$(echo "$(now) - $t2" | bc)"
}

bench_row() { # NAME TOOL ARGS...
	local name=$1 tool=$2 d=() r=() i res
	shift 2
	for i in $(seq "$RUNS"); do
		start "$@"
		res=$("run_$tool")
		d+=("${res% *}")
		r+=("${res#* }")
		pkill -KILL -s "$WPID" 2>/dev/null
		wait_gone $(tree_pids "$WPID") "$WPID"
	done
	echo "$(printf '%s\n' "${d[@]}" | median) $(printf '%s\n' "${r[@]}" | median)"
}

ratio() { [[ $1 == fail || $2 == fail || $2 == - ]] && echo "-" || echo "scale=2; $1 / $2" | bc; }

printf '%-22s %10s %10s %10s %10s %8s %8s\n' workload "amber dump" restore "criu dump" restore "d ratio" "r ratio"
for row in "1 GiB memory:mem 1024" "4 GiB memory:mem 4096" "1 GiB, every 2nd page:sparse 1024" \
	   "tree of 50:tree 50" \
	   "tree of 500:tree 500" "tree of 2000:tree 2000" "200 procs x 50 fds:fds 200" "100 threads:threads 100"; do
	name=${row%%:*}
	args=${row#*:}
	[[ -z $ONLY || $name =~ $ONLY ]] || continue
	read -r ad ar <<<"$(bench_row "$name" amber $args)"
	ph=$(phases)
	cd=- cr=-
	[ -n "$CRIU" ] && read -r cd cr <<<"$(bench_row "$name" criu $args)"
	printf '%-22s %10s %10s %10s %10s %8s %8s\n' "$name" "$ad" "$ar" "$cd" "$cr" \
		"$(ratio "$ad" "$cd")" "$(ratio "$ar" "$cr")"
	[ -n "$ph" ] && echo "#   amber phases (ms, last run): $ph"
done
