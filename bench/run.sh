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
# After every restore the workload checks itself (its bytes, children, threads,
# fds, mappings; redis its keys, the JVM its threads and heap): a run that came
# back wrong prints "bad" and does not count.  The dense memory rows also print
# amber/limit: the machine's own cost of moving the same bytes in the same run
# (write() of the memory into the image's filesystem; read() of it into fresh
# anonymous memory; one of each right after each of amber's runs, their
# medians).  The table goes to bench/results/DATE.txt (BENCH_RESULTS=
# to put it elsewhere, none to skip) with the machine's description, and its
# numbers to DATE.dat, drawn by gnuplot (bench/plot.gp) into DATE.png.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
AMBER=${AMBER:-$ROOT/build/amber} # AMBER=path to time another build
W=$ROOT/build/bench-workload
DIR=${BENCH_DIR:-/dev/shm}/amber-bench.$$
RUNS=${BENCH_RUNS:-3}
ONLY=${BENCH_ONLY:-}
CRIU=${CRIU:-$(command -v criu || true)}

RESULTS=${BENCH_RESULTS:-$ROOT/bench/results}
STAMP=$(date +%Y-%m-%d)

mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT
gcc -O2 -pthread -o "$W" "$ROOT/bench/workload.c" || exit 1
export BENCH_VERDICT=$DIR/verdict

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
	case $1 in
	redis) start_redis "$2"; return ;;
	jvm) start_jvm "$2"; return ;;
	esac
	setsid "$W" "$@" >"$out" 2>/dev/null </dev/null &
	WPID=$! # setsid execs in place: not a group leader in a script
	for _ in $(seq 600); do grep -q ready "$out" 2>/dev/null && break; sleep 0.05; done
	# a tree is ready when all its processes exist
	[ "$1" = tree ] || [ "$1" = fds ] && for _ in $(seq 600); do
		[ "$(tree_pids "$WPID" | wc -l)" -ge "$2" ] && break
		sleep 0.05
	done
}

# redis-server from Debian with N keys (DEBUG POPULATE: key:I -> value:I), on a unix socket
start_redis() {
	rm -f "$DIR/redis.sock"
	setsid redis-server --port 0 --unixsocket "$DIR/redis.sock" --save '' --appendonly no \
		--enable-debug-command yes --dir "$DIR" >"$DIR/w.out" 2>&1 </dev/null &
	WPID=$!
	for _ in $(seq 200); do [ -S "$DIR/redis.sock" ] && break; sleep 0.05; done
	redis-cli -s "$DIR/redis.sock" DEBUG POPULATE "$1" >/dev/null
	WANT=$1
}
# Debian's JVM running bench/Threads.java: N threads and a heap of 200000 entries
start_jvm() {
	[ -f "$DIR/Threads.class" ] || javac -d "$DIR" "$ROOT/bench/Threads.java" || return
	rm -f "$DIR/check" "$DIR/jverdict"
	setsid java -XX:-UsePerfData -Xmx256m -cp "$DIR" Threads "$1" "$DIR" >"$DIR/w.out" 2>&1 </dev/null &
	WPID=$!
	for _ in $(seq 600); do grep -q ready "$DIR/w.out" 2>/dev/null && break; sleep 0.05; done
}

# The restored workload checks itself: prints ok or why not.
verify() { # KIND
	local v
	case $1 in
	redis)
		v="$(redis-cli -s "$DIR/redis.sock" DBSIZE 2>&1) $(redis-cli -s "$DIR/redis.sock" GET key:4242 2>&1)"
		[ "$v" = "$WANT value:4242" ] && echo ok || echo "bad: redis says $v"
		return ;;
	jvm)
		rm -f "$DIR/jverdict"; touch "$DIR/check"; v=$DIR/jverdict ;;
	*)
		rm -f "$BENCH_VERDICT"; kill -USR1 "$WPID" 2>/dev/null; v=$BENCH_VERDICT ;;
	esac
	for _ in $(seq 600); do [ -s "$v" ] && break; sleep 0.05; done
	cat "$v" 2>/dev/null || echo "bad: no answer"
}

tree_pids() { # PID: the pid and its descendants
	local p=$1 c
	echo "$p"
	for c in $(cat /proc/$p/task/*/children 2>/dev/null); do tree_pids "$c"; done
}

# one run: prints "dump_seconds restore_seconds" or "fail fail"
run_amber() {
	local img=$DIR/img t0 t1 t2 t3 pids
	rm -rf "$img"
	pids=$(tree_pids "$WPID")
	t0=$(now)
	timeout 600 "$AMBER" dump -t "$WPID" -D "$img" >/dev/null 2>&1 || { echo "fail fail"; return; }
	t1=$(now)
	wait_gone $pids
	t2=$(now)
	timeout 600 "$AMBER" restore -D "$img" -d >/dev/null 2>&1 || { echo "fail fail"; return; }
	t3=$(now)
	checked "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)"
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
	local img=$DIR/cimg t0 t1 t2 t3 pids
	rm -rf "$img"; mkdir -p "$img"
	pids=$(tree_pids "$WPID")
	t0=$(now)
	timeout 600 "$CRIU" dump -t "$WPID" -D "$img" --shell-job >/dev/null 2>&1 || { echo "fail fail"; return; }
	t1=$(now)
	wait_gone $pids
	t2=$(now)
	timeout 600 "$CRIU" restore -D "$img" -d --shell-job >/dev/null 2>&1 || { echo "fail fail"; return; }
	t3=$(now)
	checked "$(echo "$t1 - $t0" | bc)" "$(echo "$t3 - $t2" | bc)"
}

# "dump restore" seconds if the restored workload is right, else "bad bad"
checked() {
	local v
	v=$(verify "$KIND")
	if [ "$v" = ok ]; then
		printf '%.3f %.3f\n' "$1" "$2"
	else
		echo "$v" >>"$DIR/bad.log"
		echo "bad bad"
	fi
}

# the median of numbers, or the first word that is not one (fail, bad)
med() {
	local all w
	all=$(cat)
	w=$(grep -vE '^[0-9.]+$' <<<"$all" | head -n 1)
	[ -n "$w" ] && echo "$w" && return
	median <<<"$all"
}

bench_row() { # NAME TOOL ARGS...
	local name=$1 tool=$2 d=() r=() i res
	shift 2
	KIND=$1
	for i in $(seq "$RUNS"); do
		start "$@"
		res=$("run_$tool")
		d+=("${res% *}")
		r+=("${res#* }")
		pkill -KILL -s "$WPID" 2>/dev/null
		wait_gone $(tree_pids "$WPID") "$WPID"
		[ "$tool" = amber ] && [ "$KIND" = mem ] && limit_run "$2"
	done
	echo "$(printf '%s\n' "${d[@]}" | med) $(printf '%s\n' "${r[@]}" | med)"
}

# The machine's cost of a dense row's bytes, measured right after each of
# amber's runs (a guest whose speed drifts over minutes would otherwise
# compare amber's runs with others made under other conditions): one write()
# of them into the image's filesystem and one fill of fresh memory from it,
# appended to DIR/limit.w and DIR/limit.f; the first run of a row is preceded
# by an unmeasured pass (in a VM that hands freed memory back to the host,
# the first touch of it again costs a host fault).
limit_run() { # MIB
	[ -e "$DIR/limit.w" ] ||
		{ "$W" limit-write "$1" "$DIR/limit.bin" && "$W" limit-fill "$1" "$DIR/limit.bin"; } >/dev/null
	"$W" limit-write "$1" "$DIR/limit.bin" >>"$DIR/limit.w"
	"$W" limit-fill "$1" "$DIR/limit.bin" >>"$DIR/limit.f"
	rm -f "$DIR/limit.bin"
}
# "write_seconds fill_seconds": the medians of the row's limit runs, the
# statistic amber's column has (the fastest write() of a guest whose times
# spread 20% put that spread into amber/limit)
limit_row() {
	echo "$(med <"$DIR/limit.w") $(med <"$DIR/limit.f")"
	rm -f "$DIR/limit.w" "$DIR/limit.f"
}

isnum() { [[ $1 =~ ^[0-9.]+$ ]]; }
ratio() { isnum "$1" && isnum "$2" && [ "$2" != 0.000 ] && echo "scale=2; $1 / $2" | bc || echo "-"; }

out() { echo "$*"; [ -n "$RFILE" ] && echo "$*" >>"$RFILE"; }

RFILE= DFILE=
if [ "$RESULTS" != none ] && [ -z "$ONLY" ]; then
	mkdir -p "$RESULTS"
	RFILE=$RESULTS/$STAMP.txt DFILE=$RESULTS/$STAMP.dat
	: >"$RFILE"
	echo "# row amber_dump amber_restore criu_dump criu_restore" >"$DFILE"
	{
		echo "# amber bench, $(date -u '+%Y-%m-%d %H:%M UTC'), medians of $RUNS runs"
		echo "# machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/^Mem:/ {print $2}') GiB, kernel $(uname -r)"
		echo "# amber $(git -C "$ROOT" describe --always --dirty 2>/dev/null); CRIU: ${CRIU:+$("$CRIU" --version | head -n 1)}"
		[ "${CRIU_FAULT:-}" = 130 ] && echo "# CRIU with CRIU_FAULT=130 (hardware breakpoints do not fire here)"
	} >>"$RFILE"
fi

out "$(printf '%-24s %10s %10s %10s %10s %8s %8s %8s %8s' workload "amber dump" restore "criu dump" restore "d ratio" "r ratio" "d/limit" "r/limit")"
for row in "1 GiB memory:mem 1024" "4 GiB memory:mem 4096" "1 GiB, every 2nd page:sparse 1024" \
	   "tree of 50:tree 50" "tree of 500:tree 500" "tree of 2000:tree 2000" \
	   "200 procs x 50 fds:fds 200" "100 threads:threads 100" "10000 threads:threads 10000" \
	   "10000 mappings:vmas 10000" "redis, 1M keys:redis 1000000" "JVM, 200 threads:jvm 200"; do
	name=${row%%:*}
	args=${row#*:}
	[[ -z $ONLY || $name =~ $ONLY ]] || continue
	case $args in
	redis*) command -v redis-server >/dev/null || { out "# $name: no redis-server (apt install redis-server)"; continue; } ;;
	jvm*) command -v javac >/dev/null || { out "# $name: no javac (apt install openjdk-17-jdk-headless)"; continue; } ;;
	esac
	read -r ad ar <<<"$(bench_row "$name" amber $args)"
	ph=$(phases)
	cd=- cr=- ld=- lr=-
	[ -n "$CRIU" ] && read -r cd cr <<<"$(bench_row "$name" criu $args)"
	if [ "${args%% *}" = mem ]; then
		read -r wl fl <<<"$(limit_row)"
		ld=$(ratio "$ad" "$wl") lr=$(ratio "$ar" "$fl")
	fi
	out "$(printf '%-24s %10s %10s %10s %10s %8s %8s %8s %8s' "$name" "$ad" "$ar" "$cd" "$cr" \
		"$(ratio "$ad" "$cd")" "$(ratio "$ar" "$cr")" "$ld" "$lr")"
	[ "${args%% *}" = mem ] && out "#   limit (s): write $wl, fill $fl"
	[ -n "$ph" ] && out "#   amber phases (ms, last run): $ph"
	[ -s "$DIR/bad.log" ] && out "#   bad: $(sort -u "$DIR/bad.log" | paste -sd';')" && rm -f "$DIR/bad.log"
	[ -n "$DFILE" ] && echo "\"$name\" $ad $ar $cd $cr" >>"$DFILE"
done
if [ -n "$DFILE" ] && command -v gnuplot >/dev/null; then
	gnuplot -e "dat='$DFILE'; png='$RESULTS/$STAMP.png'; title='amber vs CRIU, $STAMP'" \
		"$ROOT/bench/plot.gp" && echo "# plot: $RESULTS/$STAMP.png"
fi
[ -n "$RFILE" ] && echo "# results: $RFILE"
