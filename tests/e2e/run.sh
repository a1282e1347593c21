#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# amber end-to-end tests.
#
#   tests/e2e/run.sh [-v] [NAME|GLOB...]   run all tests, or those named (globs: 'fault_*')
#   tests/e2e/run.sh -l                    list the tests
#   tests/e2e/run.sh --selftest [NAME...]  no amber at all: each program must pass its own
#                                          checks when simply told "go", its external facts
#                                          must be stable, and with AMBER_TEST_SABOTAGE=1 it
#                                          must fail (proves the checks can fail)
#
# Needs: make progs (and make for build/amber), root.  Output: TAP lines, the logs of
# failed tests as "# " comments, and a last line "N passed, N failed"; exit 1 if any
# failed.  Work files: tests/e2e/out/NAME/ (override with AMBER_E2E_OUT), kept for
# inspection and wiped when the test runs again.  Env: AMBER=path of the binary.
#
# The standard cycle (see cycle()): start the program in its own session with a fresh
# work dir T, wait for T/ready, record external facts from /proc, amber dump, wait until
# the pid is really gone, amber restore in the background, wait until the pid is back
# (same exe, no tracer), compare the facts, touch T/go, and require amber restore's exit
# status (= the program's own verdict) to be 0.

set -u
shopt -s nullglob

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
AMBER=${AMBER:-$ROOT/build/amber}
PROGS=$ROOT/build/progs
SRC=$ROOT/tests/e2e/progs
OUT=${AMBER_E2E_OUT:-$ROOT/tests/e2e/out}
TEST_PORTS=42000-42099,47000-47999 # the fixed ports tests bind on the host
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
TMUX_SOCK=amber-e2e-$$
SELFTEST=0
VERBOSE=0

TESTS=(
	mem regs regs_avx512 regs_spin signals threads files ident ident_creds timers cmdline
	counter_dynamic counter_static counter_sh counter_python counter_sh_tree counter_detached
	shell_job
	leave_running leave_running_continue restore_pid_busy show check corrupt_images truncated_images
	fault_dump_write_all_ENOSPC fault_dump_write_3_ENOSPC fault_dump_write_short
	fault_dump_open_5_EACCES fault_dump_fsync_EIO fault_dump_rename_EIO
	fault_dump_ptrace_all_EPERM fault_dump_ptrace_4_EPERM fault_dump_ptrace_10_EPERM
	fault_dump_ptrace_30_EPERM fault_dump_wait_2_EINTR fault_dump_vm_read_EIO
	fault_dump_pread_EIO fault_dump_read_7_EIO fault_dump_kcmp_EPERM
	fault_dump_pidfd_getfd_EPERM fault_dump_mmap_ENOMEM
	fault_restore_clone3_EPERM fault_restore_clone3_vm fault_restore_clone3_tree
	fault_restore_mmap_ENOMEM fault_restore_read_EIO
	fault_restore_open_3_EACCES fault_restore_ptrace_5_EPERM fault_restore_pread_EIO
)

# ---------------------------------------------------------------- helpers

W=    # this test's output dir
T=    # the program's work dir ($W/t)
PID=  # the program
RPID= # the background amber restore (or the program itself in selftest mode)

note() { echo "$*" >>"$W/log"; }
fail() {
	echo "FAIL: $*" >>"$W/log"
	return 1
}

# sleep in 0.1 s steps until "$@" succeeds; false after $1 seconds
wait_for() {
	local n=$(($1 * 10))
	shift
	while ! "$@"; do
		n=$((n - 1))
		[ $n -le 0 ] && return 1
		sleep 0.1
	done
}

proc_state() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }
status_field() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" 2>/dev/null; }
is_alive() { # exists and is not a zombie
	local s
	s=$(proc_state "$1")
	[ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}
is_gone() {
	local s
	s=$(proc_state "$1")
	if [ "$s" = Z ]; then
		wait "$1" 2>/dev/null # reap it if it is ours
		s=$(proc_state "$1")
	fi
	[ -z "$s" ]
}
# running normally: alive, not stopped or traced
is_free_running() {
	local s
	s=$(proc_state "$1")
	[ -n "$s" ] && [ "$s" != Z ] && [ "$s" != t ] && [ "$s" != T ] &&
		[ "$(status_field "$1" TracerPid)" = 0 ]
}
# runs_on WHAT [SECONDS]: after WHAT (a dump that must leave the program alone)
# $PID runs freely and, told to go, passes its own checks within SECONDS (60).
runs_on() {
	local rc
	wait_for 5 is_free_running "$PID" ||
		{ fail "after $1 pid $PID is not running freely: state $(proc_state "$PID"), TracerPid $(status_field "$PID" TracerPid)"; return 1; }
	touch "$T/go"
	wait_for "${2:-60}" exited "$PID"
	wait "$PID"
	rc=$?
	[ $rc = 0 ] || { fail "after $1 the program fails its own checks (exit $rc)"; attach_all; return 1; }
}
# A dump of $PID that had to fail (its status RC): it says PATTERN, left no
# complete image in DIR ($W/img), and the program runs on and passes its own
# checks (within SECONDS, 60).
dump_refused() { # RC PATTERN [DIR] [SECONDS]
	[ "$1" != 0 ] || { fail "the dump succeeded"; attach "$W/dump.log"; return 1; }
	grep -q -- "$2" "$W/dump.log" ||
		{ fail "the refusal does not say '$2'"; attach "$W/dump.log"; return 1; }
	[ ! -e "${3:-$W/img}/inventory.img" ] || { fail "the refused dump marked its image complete"; return 1; }
	note "amber said: $(grep -m1 -- "$2" "$W/dump.log")"
	runs_on "the refused dump" "${4:-60}"
}
# A dump of $PID into $W/img (logged to dump.log) that must succeed; $PID is gone after it.
dump_and_gone() {
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
}
# A dump -R of $PID into DIR, logged to LOG, that must succeed.
dump_leave_running() { # LOG DIR
	amber_to "$1" 60 dump -t "$PID" -D "$2" -R -v || { fail "amber dump -R failed"; attach "$1"; return 1; }
}
# After the refusals of an image-editing test: the unedited image restores
# detached and the program passes its own checks (so the refusals were not a
# broken setup).
unedited_restores() {
	amber_to "$W/restore.log" 60 restore -d -D "$W/img" || { fail "the unedited image does not restore"; attach "$W/restore.log"; return 1; }
	echo "$PID" >>"$W/pids"
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the restored program failed its checks"; attach "$T/err"; return 1; }
}
# restored: the pid exists again with the program's exe, nobody tracing it
is_restored() { # PID EXE
	is_free_running "$1" && [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$2" ]
}
exited() { ! kill -0 "$1" 2>/dev/null || [ "$(proc_state "$1")" = Z ]; }

# External facts about pid $1; $2... add optional kinds.
facts() {
	local p=$1 k fd
	shift
	echo "== exe: $(readlink "/proc/$p/exe")"
	echo "== comm: $(cat "/proc/$p/comm")"
	echo "== cmdline: $(cat -v "/proc/$p/cmdline")"
	echo "== environ: $(cat -v "/proc/$p/environ")"
	echo "== ps -o args: $(ps -o args= -p "$p")"
	echo "== stat 48-51 (arg_start arg_end env_start env_end):" \
		"$(sed 's/.*) //' "/proc/$p/stat" | cut -d' ' -f46-49)"
	echo "== status:"
	grep -E '^(Uid|Gid|Groups):' "/proc/$p/status"
	echo "== limits:"
	cat "/proc/$p/limits"
	for k; do
		echo "== $k:"
		case $k in
		fds)
			for fd in $(ls "/proc/$p/fd" | sort -n); do
				echo "fd $fd -> $(readlink "/proc/$p/fd/$fd")" \
					"$(grep -E '^(pos|flags):' "/proc/$p/fdinfo/$fd" | tr -s '\t\n' '  ')"
			done
			;;
		fs)
			echo "cwd $(readlink "/proc/$p/cwd")"
			echo "root $(readlink "/proc/$p/root")"
			grep '^Umask:' "/proc/$p/status"
			;;
		maps) awk '{print $1, $2, $3, $6, $7}' "/proc/$p/maps" ;;
		vmflags) # range and VmFlags of every mapping
			awk '/^[0-9a-f]+-[0-9a-f]+ / {r = $1} /^VmFlags:/ {$1 = ""; print r $0}' "/proc/$p/smaps"
			;;
		timers) # one line per timer, sorted by id (the kernel lists them in no set order)
			awk '/^ID:/ && NR > 1 {print ""} {printf "%s ", $0} END {print ""}' \
				"/proc/$p/timers" | sort -n -k2
			;;
		sigs) # (not SigQ: that counts the whole user's queued signals)
			grep -E '^(SigPnd|ShdPnd|SigBlk|SigIgn|SigCgt):' "/proc/$p/status"
			;;
		caps) grep -E '^(Cap|NoNewPrivs|Seccomp)' "/proc/$p/status" ;;
		auxv) od -An -tx8 -v "/proc/$p/auxv" ;;
		pers) cat "/proc/$p/personality" ;;
		esac
	done
}

# Show the end of a log file in the test log.
attach() { # FILE [LINES]
	[ -s "$1" ] || return 0
	note "--- ${1#"$W"/} (last ${2:-25} lines):"
	tail -n "${2:-25}" "$1" | sed 's/^/    /' >>"$W/log"
}

# what went wrong first: CI shows the start of a long failure
attach_errors() { # FILE
	[ -s "$1" ] && grep -qE 'error|FAIL' "$1" || return 0
	note "--- ${1#"$W"/} (errors):"
	grep -E 'error|FAIL' "$1" | head -n 8 | sed 's/^/    /' >>"$W/log"
}

attach_all() {
	local f
	for f in "$W/dump.log" "$W/restore.log" "$T/err" "$T/out"; do
		attach_errors "$f"
	done
	attach "$W/dump.log"
	attach "$W/restore.log"
	attach "$T/err" 30
	[ -s "$T/out" ] && grep -q FAIL "$T/out" && attach "$T/out"
	return 0
}

# Only stdin/out/err go to a program: close what the caller of run.sh may have leaked.
close_extra_fds() {
	local f fd
	for f in /proc/$BASHPID/fd/*; do
		fd=${f##*/}
		[ "$fd" -gt 2 ] && eval "exec $fd>&-"
	done
	return 0
}

# start_prog CMD... : runs CMD (with $T among its args) in its own session, stdio on
# regular files in $T; sets PID and waits for $T/ready.  Env: PENV (array of VAR=VAL).
start_prog() {
	mkdir -p "$T"
	chmod 0777 "$T"
	: >"$T/stdin"
	(
		cd "$T" || exit 2
		exec <"$T/stdin" >>"$T/out" 2>>"$T/err"
		close_extra_fds
		exec env AMBER_T="$T" ${PENV[@]+"${PENV[@]}"} setsid "$@"
	) &
	PID=$!
	echo "$PID" >>"$W/pids"
	if ! wait_for 15 test -e "$T/ready"; then
		if exited "$PID"; then
			wait "$PID"
			local rc=$?
			[ $rc = 77 ] && return 77
			fail "program exited with $rc before it was ready"
		else
			fail "program not ready after 15 s"
		fi
		attach "$T/err"
		return 1
	fi
	note "started $* as pid $PID"
}

# amber with a time limit; output appended to $1
amber_to() { # LOG SECONDS ARGS...
	local log=$1 t=$2
	shift 2
	echo "+ amber $*" >>"$log"
	timeout -k 5 "$t" "$AMBER" "$@" >>"$log" 2>&1
}

# Kill what this test started (recorded pids still running one of our commands).
cleanup_test() {
	local p
	[ -f "$W/pids" ] || return 0
	for p in $(cat "$W/pids"); do
		if [ -r "/proc/$p/cmdline" ] && [ "$(proc_state "$p")" != Z ] &&
			tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -e "$W" -e "$SRC" -e "$PROGS"; then
			kill -9 "$p" 2>/dev/null
		fi
		wait "$p" 2>/dev/null
	done
	return 0
}

# Leftovers of earlier runs: anything whose command line mentions our output dir.
kill_leftovers() {
	local f p
	for f in /proc/[0-9]*/cmdline; do
		p=${f#/proc/}
		p=${p%/cmdline}
		[ "$p" = $$ ] || [ "$p" = "$BASHPID" ] && continue
		if { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -q "$OUT/"; then
			kill -9 "$p" 2>/dev/null
		fi
	done
	# nft tables of killed test programs (tcpstates-PID) still drop packets on test ports
	command -v nft >/dev/null || return 0
	for f in $(nft list tables inet 2>/dev/null | awk '$3 ~ /^tcpstates-[0-9]+$/ {print $3}'); do
		[ -d "/proc/${f#tcpstates-}" ] || nft delete table inet "$f"
	done
}

# what an exit status of amber restore (without -d) means
explain_rc() {
	case $1 in
	0) ;;
	1) echo " (the program's own checks failed, or amber failed)" ;;
	124) echo " (timed out)" ;;
	12[5-9] | 1[3-9][0-9]) echo " (128+$(($1 - 128)): SIG$(kill -l $(($1 - 128)) 2>/dev/null) killed the restored program or amber)" ;;
	*) echo " (the program's exit status, or amber's)" ;;
	esac
}

lines() { wc -l <"$1" 2>/dev/null || echo 0; }

# ---------------------------------------------------------------- the standard cycle
#
# cycle [-f "FACT KINDS"] [-d "DUMP OPTS"] [-r "RESTORE OPTS"] [-P|-B|-A hook] -- CMD...
#   -P hook: run just before the dump
#   -B hook: run after the dump (the image is in $W/img), before the restore
#   -A hook: run after the restore and the facts comparison, before "go"
# A hook fails the test by returning non-zero.  Env for the program: PENV array.

cycle() {
	local kinds="" dopts="" ropts="" hook_p="" hook_b="" hook_a="" detached=0 daemon=0 exe rc
	while [ $# -gt 0 ]; do
		case $1 in
		-f) kinds=$2; shift 2 ;;
		-d) dopts=$2; shift 2 ;;
		-r) ropts=$2; shift 2 ;;
		-P) hook_p=$2; shift 2 ;;
		-B) hook_b=$2; shift 2 ;;
		-A) hook_a=$2; shift 2 ;;
		-D) daemon=1; shift ;; # the program's ready file names the pid to dump
		--) shift; break ;;
		*) break ;;
		esac
	done
	case " $ropts " in *" -d "* | *" --restore-detached "*) detached=1 ;; esac

	if [ $SELFTEST = 1 ]; then
		selftest_cycle "$kinds" "$@"
		return
	fi

	start_prog "$@" || return
	if [ $daemon = 1 ]; then
		PID=$(head -n1 "$T/ready")
		echo "$PID" >>"$W/pids"
	fi
	exe=$(readlink "/proc/$PID/exe")
	# shellcheck disable=SC2086
	facts "$PID" $kinds >"$W/facts.before"

	if [ -n "$hook_p" ]; then
		"$hook_p" || return 1
	fi
	# shellcheck disable=SC2086
	amber_to "$W/dump.log" "${DUMP_TIMEOUT:-60}" dump -t "$PID" -D "$W/img" -v $dopts
	rc=$?
	if [ $rc != 0 ]; then
		fail "amber dump exited with $rc"
		attach "$W/dump.log"
		return 1
	fi
	if ! wait_for 10 is_gone "$PID"; then
		fail "pid $PID still exists 10 s after the dump (state $(proc_state "$PID"))"
		return 1
	fi
	[ -f "$W/img/inventory.img" ] || { fail "dump succeeded but wrote no inventory.img"; return 1; }
	if [ -n "$hook_b" ]; then
		"$hook_b" || { attach_all; return 1; }
	fi

	# shellcheck disable=SC2086
	echo "+ amber restore -D $W/img -v $ropts" >>"$W/restore.log"
	(exec timeout -k 5 120 "$AMBER" restore -D "$W/img" -v $ropts >>"$W/restore.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	wait_for 30 eval 'is_restored "$PID" "$exe" || exited "$RPID"'
	if exited "$RPID" && ! is_restored "$PID" "$exe"; then
		wait "$RPID"
		rc=$?
		if [ $detached = 0 ] || [ $rc != 0 ]; then
			fail "amber restore exited with $rc$(explain_rc $rc) and pid $PID is not back"
			attach_all
			return 1
		fi
		wait_for 5 is_restored "$PID" "$exe"
	fi
	if ! is_restored "$PID" "$exe"; then
		fail "pid $PID not restored after 30 s: state '$(proc_state "$PID")'," \
			"exe '$(readlink "/proc/$PID/exe")' (want $exe)," \
			"TracerPid '$(status_field "$PID" TracerPid)'"
		attach_all
		return 1
	fi
	echo "$PID" >>"$W/pids"
	# shellcheck disable=SC2086
	facts "$PID" $kinds >"$W/facts.after"
	if ! diff -u "$W/facts.before" "$W/facts.after" >"$W/facts.diff"; then
		fail "external facts differ after restore (- before, + after):"
		sed 's/^/    /' "$W/facts.diff" >>"$W/log"
		rc=1
	else
		rc=0
	fi
	if [ -n "$hook_a" ]; then
		"$hook_a" || rc=1
	fi

	touch "$T/go"
	wait "$RPID"
	local rrc=$?
	if [ $detached = 1 ]; then
		[ $rrc = 0 ] || { fail "amber restore -d exited with $rrc"; rc=1; }
		if ! wait_for 30 test -e "$T/result"; then
			fail "the detached program wrote no verdict in 30 s"
			rc=1
		elif [ "$(cat "$T/result")" != 0 ]; then
			fail "the restored program's checks failed (result $(cat "$T/result"))"
			rc=1
		fi
	elif [ $rrc != 0 ]; then
		fail "amber restore exited with $rrc$(explain_rc $rrc)"
		rc=1
	fi
	[ $rc = 0 ] || attach_all
	return $rc
}

# Without amber: facts must be stable, the checks must pass, and must fail when sabotaged.
selftest_cycle() {
	local kinds=$1 rc
	shift
	start_prog "$@" || return
	# shellcheck disable=SC2086
	facts "$PID" $kinds >"$W/facts.before"
	sleep 0.3
	# shellcheck disable=SC2086
	facts "$PID" $kinds >"$W/facts.after"
	if ! diff -u "$W/facts.before" "$W/facts.after" >"$W/facts.diff"; then
		fail "external facts are not stable even without amber:"
		sed 's/^/    /' "$W/facts.diff" >>"$W/log"
		return 1
	fi
	touch "$T/go"
	wait_for 30 exited "$PID"
	wait "$PID"
	rc=$?
	[ $rc = 0 ] || { fail "program failed its own checks (exit $rc)"; attach "$T/err"; return 1; }
	note "self-check passed"

	# sabotaged: must fail
	mv "$T" "$T.pass"
	local PENV=(${PENV[@]+"${PENV[@]}"} AMBER_TEST_SABOTAGE=1)
	start_prog "$@" || return
	touch "$T/go"
	wait_for 30 exited "$PID"
	wait "$PID"
	rc=$?
	[ $rc = 1 ] || { fail "sabotaged program exited with $rc, expected 1"; attach "$T/err"; return 1; }
	note "sabotaged run failed as it must: $(grep -m1 FAIL "$T/err")"
	return 0
}

# ---------------------------------------------------------------- the tests

t_mem() { cycle -f "maps vmflags fds" -- "$PROGS/mem" "$T"; }
t_regs() { cycle -- "$PROGS/regs" "$T"; }
t_regs_avx512() {
	grep -qw avx512f /proc/cpuinfo || return 77
	cycle -- "$PROGS/regs-avx512" "$T"
}
# caught in user mode (a pause loop) rather than inside nanosleep()
in_user_mode() {
	[ "$(proc_state "$PID")" = R ] || { fail "the program is not running in user mode (state $(proc_state "$PID"))"; return 1; }
}
t_regs_spin() {
	local prog=regs-avx512
	grep -qw avx512f /proc/cpuinfo || prog=regs
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/$prog" "$T" spin; return; }
	cycle -P in_user_mode -- "$PROGS/$prog" "$T" spin
}
t_signals() { cycle -f "sigs" -- "$PROGS/signals" "$T"; }
t_threads() { cycle -f "sigs" -- "$PROGS/threads" "$T"; } # the lead's prog, tests/e2e/progs/threads.c
t_files() { cycle -f "fds fs" -- "$PROGS/files" "$T"; }
t_ident() { cycle -f "caps pers" -- "$PROGS/ident" "$T"; }
t_ident_creds() { cycle -f "caps pers" -- "$PROGS/ident" "$T" creds; }
t_timers() { cycle -f "timers sigs" -- "$PROGS/timers" "$T"; }
t_cmdline() {
	local PENV=(AMBER_E2E_MARK=cmdline-env-mark "SPACED VALUE=a b  c" EMPTY=)
	cycle -f "auxv" -- "$PROGS/cmdline" "$T" "arg with  spaces" "" "ünïcödé ✓" \
		"$(printf 'long%.0s' {1..100})" last
}

# counters: after the restore the log must keep growing from where it stopped
COUNT_AT_DUMP=0
count_at_dump() {
	COUNT_AT_DUMP=$(lines "$T/count.log")
	note "count.log had $COUNT_AT_DUMP lines at the dump"
	[ "$COUNT_AT_DUMP" -gt 0 ]
}
count_continues() {
	if ! wait_for 15 eval '[ "$(lines "$T/count.log")" -ge $((COUNT_AT_DUMP + 3)) ]'; then
		fail "count.log did not grow after the restore: $(lines "$T/count.log") lines" \
			"(had $COUNT_AT_DUMP at the dump); last: $(tail -n1 "$T/count.log")"
		return 1
	fi
	note "count.log continues: $(lines "$T/count.log") lines, last '$(tail -n1 "$T/count.log")'"
}
counter_cycle() {
	if [ $SELFTEST = 0 ]; then
		cycle -B count_at_dump -A count_continues "$@"
	else
		cycle "$@"
	fi
}
t_counter_dynamic() { counter_cycle -- "$PROGS/counter" "$T"; }
t_counter_static() { counter_cycle -- "$PROGS/counter-static" "$T"; }
t_counter_sh() { counter_cycle -- /bin/sh "$SRC/counter.sh" "$T"; }
t_counter_python() { counter_cycle -- "$PY" "$SRC/counter.py" "$T"; }

# a two-process tree: the child (a forked dash) must come back with its pid and parent
CHILDREN=
record_children() {
	CHILDREN=$(cat "/proc/$PID/task/$PID/children" 2>/dev/null)
	note "children of $PID before the dump: $CHILDREN"
	[ -n "$CHILDREN" ] || fail "pid $PID has no child"
}
children_back() {
	local c ok=0
	for c in $CHILDREN; do
		if [ "$(readlink "/proc/$c/exe")" != /usr/bin/dash ] ||
			[ "$(status_field "$c" PPid)" != "$PID" ]; then
			fail "child $c not restored: exe '$(readlink "/proc/$c/exe")', PPid '$(status_field "$c" PPid)'"
			ok=1
		fi
	done
	[ "$(cat "/proc/$PID/task/$PID/children" 2>/dev/null)" = "$CHILDREN" ] ||
		{ fail "children after restore: '$(cat "/proc/$PID/task/$PID/children" 2>/dev/null)', before '$CHILDREN'"; ok=1; }
	return $ok
}
tree_after_restore() { children_back && count_continues; }
t_counter_sh_tree() {
	[ -x /usr/bin/dash ] || return 77
	if [ $SELFTEST = 1 ]; then
		cycle -- /bin/sh "$SRC/counter.sh" "$T" tree
		return
	fi
	cycle -P record_children -B count_at_dump -A tree_after_restore -- /bin/sh "$SRC/counter.sh" "$T" tree
}

check_pidfile() {
	[ "$(cat "$W/pidfile" 2>/dev/null)" = "$PID" ] ||
		fail "--pidfile holds '$(cat "$W/pidfile" 2>/dev/null)', expected $PID"
}
t_counter_detached() {
	if [ $SELFTEST = 1 ]; then
		cycle -- "$PROGS/counter" "$T"
		return
	fi
	cycle -r "-d --pidfile $W/pidfile" -B count_at_dump \
		-A 'count_continues_and_pidfile' -- "$PROGS/counter" "$T"
}
count_continues_and_pidfile() {
	count_continues && check_pidfile
}

# --shell-job: a job in a tmux pane, dumped and restored in the pane, keeps writing to it.
tm() { tmux -L "$TMUX_SOCK" "$@"; }
# tm_shell: a fresh tmux session "e2e" with a clean bash at its prompt, as a new user has
tm_shell() {
	tm kill-server 2>/dev/null
	tm new-session -d -s e2e -x 160 -y 50 "env -i PATH=$PATH HOME=/root TERM=screen PS1='pane\$ ' bash --norc --noprofile" ||
		{ fail "tmux new-session failed"; return 1; }
	echo "$(tm display -p -t e2e '#{pane_pid}')" >>"$W/pids"
	wait_for 5 eval 'tm capture-pane -p -t e2e | grep -q "pane\\$"' || { fail "no shell prompt in the pane"; tm kill-server; return 1; }
}
ticks_after_mark() {
	tm capture-pane -p -t e2e -S -3000 | awk 'f && /^tick [0-9]+$/ {print $2} $0 == "RESTORE-MARK" {f = 1}'
}
t_shell_job() {
	[ $SELFTEST = 1 ] && return 77
	command -v tmux >/dev/null || return 77
	local rc=0 exe last_tick first_after
	mkdir -p "$T"
	chmod 0777 "$T"
	tm_shell || return 1
	tm send-keys -t e2e "cd $T && $PROGS/counter $T tty" Enter
	if ! wait_for 10 test -e "$T/ready"; then
		fail "the job did not start in the pane"
		tm capture-pane -p -t e2e | sed 's/^/    /' >>"$W/log"
		tm kill-server
		return 1
	fi
	PID=$(cat "$T/ready")
	echo "$PID" >>"$W/pids"
	exe=$(readlink "/proc/$PID/exe")
	note "job pid $PID on $(readlink "/proc/$PID/fd/1")"
	sleep 0.5
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -j -v
	rc=$?
	if [ $rc != 0 ]; then
		fail "amber dump -j exited with $rc"
		attach "$W/dump.log"
		tm kill-server
		return 1
	fi
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; tm kill-server; return 1; }
	last_tick=$(tm capture-pane -p -t e2e -S -3000 | grep '^tick ' | tail -n1 | cut -d' ' -f2)
	note "last tick in the pane before the dump: $last_tick"
	[ -n "$last_tick" ] || { fail "no ticks in the pane"; tm kill-server; return 1; }
	sleep 0.3
	tm send-keys -t e2e "echo RESTORE-MARK; $AMBER restore -D $W/img -j 2>>$W/restore.log; echo RESTORE-RC=\$?" Enter
	if ! wait_for 20 is_restored "$PID" "$exe"; then
		fail "pid $PID not restored in the pane"
		rc=1
	elif ! wait_for 10 eval '[ "$(ticks_after_mark | wc -l)" -ge 3 ]'; then
		fail "the restored job does not keep writing to the pane (want tick $((last_tick + 1)).. after the restore)"
		rc=1
	else
		first_after=$(ticks_after_mark | head -n1)
		if [ "$first_after" != $((last_tick + 1)) ]; then
			fail "first tick in the pane after the restore is '$first_after', expected $((last_tick + 1))"
			rc=1
		else
			note "the pane continues: tick $first_after .. $(ticks_after_mark | tail -n1)"
		fi
	fi
	touch "$T/go"
	if ! wait_for 15 eval 'tm capture-pane -p -t e2e -S -2000 | grep -q "^RESTORE-RC=[0-9]"'; then
		fail "amber restore -j did not finish after go"
		rc=1
	elif ! tm capture-pane -p -t e2e -S -2000 | grep -q "^RESTORE-RC=0"; then
		fail "amber restore -j: $(tm capture-pane -p -t e2e -S -2000 | grep "^RESTORE-RC")"
		rc=1
	fi
	if [ $rc != 0 ]; then
		note "--- pane:"
		tm capture-pane -p -t e2e -S -2000 | grep -v '^$' | tail -n 30 | sed 's/^/    /' >>"$W/log"
		attach_all
	fi
	tm kill-server 2>/dev/null
	return $rc
}

# -R: the target keeps running, untouched; the image restores after it is killed.
t_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	local prog=regs-avx512 exe rc
	grep -qw avx512f /proc/cpuinfo || prog=regs
	start_prog "$PROGS/$prog" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	facts "$PID" >"$W/facts.before"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -R -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump -R exited with $rc"; attach "$W/dump.log"; return 1; }
	[ -f "$W/img/inventory.img" ] || { fail "no inventory.img"; return 1; }
	wait_for 5 is_free_running "$PID" ||
		{ fail "after dump -R the target is not running freely: state $(proc_state "$PID"), TracerPid $(status_field "$PID" TracerPid)"; return 1; }
	kill -9 "$PID"
	wait_for 10 is_gone "$PID" || { fail "pid $PID did not go away after SIGKILL"; return 1; }
	(exec timeout -k 5 120 "$AMBER" restore -D "$W/img" >>"$W/restore.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	wait_for 20 is_restored "$PID" "$exe" || { fail "pid $PID not restored"; attach_all; return 1; }
	facts "$PID" >"$W/facts.after"
	diff -u "$W/facts.before" "$W/facts.after" >"$W/facts.diff" ||
		{ fail "facts differ:"; sed 's/^/    /' "$W/facts.diff" >>"$W/log"; }
	touch "$T/go"
	wait "$RPID"
	rc=$?
	[ $rc = 0 ] || { fail "amber restore exited with $rc"; attach_all; return 1; }
	[ ! -s "$W/facts.diff" ]
}

t_leave_running_continue() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/signals" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -R -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump -R exited with $rc"; attach "$W/dump.log"; return 1; }
	runs_on "dump -R" 15 || return 1
	note "the original passed its checks after dump -R"
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there"; return 1; }
	amber_to "$W/restore.log" 60 restore -D "$W/img"
	rc=$?
	[ $rc = 0 ] || { fail "restoring the -R image (go already set) exited with $rc"; attach_all; return 1; }
	note "the restored copy passed its checks too"
}

# Restoring while the pid is still in use (the original, left running by -R) must be
# refused, and must not disturb the original.
t_restore_pid_busy() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/signals" "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -R -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump -R exited with $rc"; attach "$W/dump.log"; return 1; }
	amber_to "$W/restore.log" 30 restore -d -D "$W/img"
	rc=$?
	[ $rc != 0 ] || fail "amber restore exited 0 while pid $PID is in use"
	note "amber restore exited $rc: $(grep -v '^+ ' "$W/restore.log" | tail -n 1)"
	runs_on "dump -R (the original)" 15 || return 1
	! grep -q '^FAIL' "$W/log"
}

# amber show: JSON with the pid, comm and registers (r12 holds a known value).
check_show() {
	local json=$W/show.json r12 want=$((0x10606060606060)) comm
	comm=$(head -c 15 <<<"$PROG_COMM")
	amber_to "$W/show.log" 30 show "$W/img" || { fail "amber show exited with $?"; attach "$W/show.log"; return 1; }
	sed '1d' "$W/show.log" >"$json" # drop the "+ amber" line
	jq -e . "$json" >/dev/null 2>"$W/jq.err" || { fail "amber show output is not JSON: $(head -c 300 "$W/jq.err")"; return 1; }
	jq -e --argjson p "$PID" '[.. | objects | .pid? | select(. != null) | tonumber? ] | index($p) != null' "$json" >/dev/null ||
		{ fail "no \"pid\": $PID in amber show"; return 1; }
	jq -e --arg c "$comm" '[.. | strings] | index($c) != null' "$json" >/dev/null ||
		{ fail "comm \"$comm\" not in amber show"; return 1; }
	r12=$(jq -r '[.. | objects | select(has("r12")) | .r12][0] // empty' "$json")
	case $r12 in
	0x* | 0X*) r12=$((r12)) ;;
	esac
	[ -n "$r12" ] && [ "$r12" = "$want" ] ||
		{ fail "amber show: r12 is '$r12', expected $want (0x10606060606060)"; return 1; }
	note "amber show: pid, comm \"$comm\" and r12 found"
}
t_show() {
	[ $SELFTEST = 1 ] && return 77
	PROG_COMM=regs
	cycle -B check_show -- "$PROGS/regs" "$T"
}

t_check() {
	[ $SELFTEST = 1 ] && return 77
	amber_to "$W/check.log" 30 check
	local rc=$?
	attach "$W/check.log" 40
	[ $rc = 0 ] || { fail "amber check exited with $rc"; return 1; }
	[ "$(lines "$W/check.log")" -ge 3 ] || { fail "amber check lists no features"; return 1; }
}

# Corrupted / truncated images: every file, one at a time, must be refused, with a message,
# and no process may appear; the pristine image then still restores.
bad_image_test() { # corrupt|truncate
	[ $SELFTEST = 1 ] && return 77
	local how=$1 f name size rc bad=0 n=0 exe
	start_prog "$PROGS/counter" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v || { fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still exists after the dump"; return 1; }
	for f in "$W"/img/*; do
		[ -f "$f" ] || continue
		name=${f##*/}
		size=$(stat -c %s "$f")
		[ "$size" -gt 0 ] || continue
		n=$((n + 1))
		rm -rf "$W/bad"
		cp -a "$W/img" "$W/bad"
		if [ "$how" = corrupt ]; then
			"$PY" -c 'import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0xff]))' "$W/bad/$name" $((size / 2))
			what="byte $((size / 2)) of $size flipped"
		else
			truncate -s $((size / 2)) "$W/bad/$name"
			what="truncated from $size to $((size / 2)) bytes"
		fi
		: >"$W/bad.log"
		amber_to "$W/bad.log" 30 restore -d -D "$W/bad"
		rc=$?
		if [ $rc = 0 ]; then
			bad=$((bad + 1))
			note "NOT REFUSED: $name ($what): amber restore exited 0"
			kill -9 "$PID" 2>/dev/null
		elif [ "$(grep -cv '^+ amber' "$W/bad.log")" = 0 ]; then
			bad=$((bad + 1))
			note "refused without a message: $name ($what), exit $rc"
		else
			note "refused: $name ($what), exit $rc: $(grep -v '^+ amber' "$W/bad.log" | tail -n1)"
		fi
		if ! wait_for 10 is_gone "$PID"; then
			bad=$((bad + 1))
			note "a process with pid $PID exists after restoring the bad image ($name)"
			kill -9 "$PID" 2>/dev/null
			wait_for 10 is_gone "$PID"
		fi
	done
	[ $n -gt 0 ] || { fail "the image has no files"; return 1; }
	# the pristine image still works
	(exec timeout -k 5 120 "$AMBER" restore -D "$W/img" >>"$W/restore.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	if wait_for 20 is_restored "$PID" "$exe"; then
		touch "$T/go"
		wait "$RPID"
		rc=$?
		[ $rc = 0 ] || { bad=$((bad + 1)); note "the pristine image restored, but exited $rc"; attach_all; }
	else
		bad=$((bad + 1))
		note "the pristine image did not restore"
		attach_all
	fi
	[ $bad = 0 ] || fail "$bad problem(s) with $n $how image files"
}
t_corrupt_images() { bad_image_test corrupt; }
t_truncated_images() { bad_image_test truncate; }

# ---- fault injection on dump: a failed dump leaves the target running and unharmed (it
# passes its own checks afterwards) and no inventory.img.  If amber survives the fault
# (EINTR, short writes, a fault that never fired), the image must restore normally.
fault_dump() { # PROG SPEC hard|soft
	[ $SELFTEST = 1 ] && return 77
	local prog=$1 spec=$2 kind=$3 rc fired=unknown exe
	start_prog "$PROGS/$prog" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	echo "+ AMBER_FAULT=$spec" >>"$W/dump.log"
	AMBER_FAULT=$spec amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v -v # -vv: debug lines say when a fault fires
	rc=$?
	grep -q "fault injection" "$W/dump.log" && fired=yes
	note "AMBER_FAULT=$spec: amber dump exited $rc (fault fired: $fired)"
	if [ $rc = 0 ]; then
		local ignored=0
		if [ $kind = hard ] && [ $fired = yes ]; then
			fail "amber dump exited 0 although $spec was injected and fired:"
			grep -A2 'fault injection' "$W/dump.log" | head -n 6 | sed 's/^/    /' >>"$W/log"
			note "(restoring that image anyway, to show what was lost)"
			ignored=1
		else
			note "dump survived the fault; the image must restore"
		fi
		wait_for 10 is_gone "$PID" || { fail "pid $PID still exists after the dump"; return 1; }
		(exec timeout -k 5 120 "$AMBER" restore -D "$W/img" >>"$W/restore.log" 2>&1) &
		RPID=$!
		echo "$RPID" >>"$W/pids"
		wait_for 20 is_restored "$PID" "$exe" || { fail "pid $PID not restored"; attach_all; return 1; }
		touch "$T/go"
		wait "$RPID"
		rc=$?
		[ $rc = 0 ] || { fail "restore of the image exited $rc"; attach_all; return 1; }
		[ $ignored = 0 ] || { note "the restored program passed its checks"; return 1; }
		return 0
	fi
	[ "$(grep -cv '^+ ' "$W/dump.log")" -gt 0 ] || fail "amber dump failed without a message"
	if [ -e "$W/img/inventory.img" ]; then
		fail "a failed dump left $W/img/inventory.img"
	fi
	if ! is_alive "$PID"; then
		fail "the target died (state '$(proc_state "$PID")')"
		attach_all
		return 1
	fi
	if ! wait_for 5 is_free_running "$PID"; then
		fail "the target is left stopped or traced: state $(proc_state "$PID"), TracerPid $(status_field "$PID" TracerPid)"
		attach "$W/dump.log"
		return 1
	fi
	touch "$T/go"
	wait_for 20 exited "$PID"
	wait "$PID"
	rc=$?
	if [ $rc != 0 ]; then
		fail "after the failed dump the target fails its own checks (exit $rc)"
		attach_all
		return 1
	fi
	note "target unharmed: it passed its own checks"
	note "amber said: $(grep -v '^+ ' "$W/dump.log" | grep -iv 'debug\|fault injection' | tail -n 2 | tr '\n' ' ')"
	! grep -q '^FAIL' "$W/log"
}
t_fault_dump_write_all_ENOSPC() { fault_dump mem 'write:*:ENOSPC' hard; }
t_fault_dump_write_3_ENOSPC() { fault_dump mem 'write:3:ENOSPC' hard; }
t_fault_dump_write_short() { fault_dump mem 'write:*:short' soft; }
t_fault_dump_open_5_EACCES() { fault_dump mem 'open:5:EACCES' hard; }
t_fault_dump_fsync_EIO() { fault_dump mem 'fsync:*:EIO' hard; }
t_fault_dump_rename_EIO() { fault_dump mem 'rename:*:EIO' hard; }
t_fault_dump_ptrace_all_EPERM() { fault_dump regs 'ptrace:*:EPERM' hard; }
t_fault_dump_ptrace_4_EPERM() { fault_dump regs 'ptrace:4:EPERM' hard; }
t_fault_dump_ptrace_10_EPERM() { fault_dump ident 'ptrace:10:EPERM' hard; } # dumpable 0
t_fault_dump_ptrace_30_EPERM() { fault_dump regs 'ptrace:30:EPERM' hard; }
t_fault_dump_wait_2_EINTR() { fault_dump regs 'wait:2:EINTR' soft; }
t_fault_dump_vm_read_EIO() { fault_dump mem 'vm_read:*:EIO' soft; } # a fallback is fine
t_fault_dump_pread_EIO() { fault_dump mem 'pread:*:EIO' hard; }
t_fault_dump_read_7_EIO() { fault_dump mem 'read:7:EIO' hard; }
t_fault_dump_kcmp_EPERM() { fault_dump files 'kcmp:*:EPERM' soft; }
t_fault_dump_pidfd_getfd_EPERM() { fault_dump files 'pidfd_getfd:*:EPERM' soft; }
t_fault_dump_mmap_ENOMEM() { fault_dump mem 'mmap:*:ENOMEM' hard; }

# ---- fault injection on restore: refused cleanly (non-zero, a message, the pid stays
# free), and the image is still good afterwards.
fault_restore() { # PROG SPEC
	[ $SELFTEST = 1 ] && return 77
	local prog=$1 spec=$2 rc exe fired=unknown tree p
	start_prog "$PROGS/$prog" "$T" || return
	exe=$(readlink "/proc/$PID/exe")
	tree="$PID $(cat /proc/"$PID"/task/*/children 2>/dev/null)"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v || { fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still exists after the dump"; return 1; }
	echo "+ AMBER_FAULT=$spec" >>"$W/restore.log"
	(AMBER_FAULT=$spec exec timeout -k 5 60 "$AMBER" restore -D "$W/img" -v -v >>"$W/restore.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	wait_for 30 eval 'exited $RPID || is_restored $PID $exe'
	if ! exited "$RPID"; then
		# it restored despite the fault: then it must work
		touch "$T/go"
		wait "$RPID"
		rc=$?
		grep -q "fault injection" "$W/restore.log" && fired=yes
		note "AMBER_FAULT=$spec: restore went through (fault fired: $fired), exit $rc"
		[ $rc = 0 ] || { fail "restore with $spec exited $rc after go"; attach_all; return 1; }
		[ $fired != yes ] || note "warning: the injected fault was survived"
		return 0
	fi
	wait "$RPID"
	rc=$?
	grep -q "fault injection" "$W/restore.log" && fired=yes
	note "AMBER_FAULT=$spec: amber restore exited $rc (fault fired: $fired)"
	if [ $rc = 0 ]; then
		fail "amber restore exited 0 but pid $PID is not running"
		attach_all
		return 1
	fi
	[ "$(grep -cv '^+ ' "$W/restore.log")" -gt 0 ] || fail "amber restore failed without a message"
	for p in $tree; do # every pid of the image is free again
		wait_for 10 is_gone "$p" && continue
		fail "pid $p is in use after the failed restore (state $(proc_state "$p"), $(tr '\0' ' ' <"/proc/$p/cmdline"))"
		kill -9 "$p" 2>/dev/null
		wait_for 10 is_gone "$p"
	done
	note "amber said: $(grep -v '^+ ' "$W/restore.log" | grep -iv 'debug\|fault injection' | tail -n 2 | tr '\n' ' ')"
	# the image is still good
	(exec timeout -k 5 120 "$AMBER" restore -D "$W/img" >>"$W/restore2.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	wait_for 20 is_restored "$PID" "$exe" || { fail "then the clean restore did not bring pid $PID back"; attach "$W/restore2.log"; return 1; }
	touch "$T/go"
	wait "$RPID"
	rc=$?
	[ $rc = 0 ] || { fail "then the clean restore exited $rc"; attach "$W/restore2.log"; attach "$T/err"; return 1; }
	! grep -q '^FAIL' "$W/log"
}
t_fault_restore_clone3_EPERM() { fault_restore counter 'clone3:*:EPERM'; }
# clone3 1: the root, 2: its first CLONE_VM child (waiting for its go), 3 fails
t_fault_restore_clone3_vm() { fault_restore clonevm 'clone3:3:EPERM'; }
t_fault_restore_clone3_tree() { fault_restore tree 'clone3:3:EPERM'; }
t_fault_restore_mmap_ENOMEM() { fault_restore counter 'mmap:*:ENOMEM'; }
t_fault_restore_read_EIO() { fault_restore counter 'read:*:EIO'; }
t_fault_restore_open_3_EACCES() { fault_restore counter 'open:3:EACCES'; }
t_fault_restore_ptrace_5_EPERM() { fault_restore counter 'ptrace:5:EPERM'; }
t_fault_restore_pread_EIO() { fault_restore counter 'pread:*:EIO'; }

# ---------------------------------------------------------------- more tests
# One file per area in tests.d/: each defines t_NAME functions and appends NAME to TESTS.
for f in "$ROOT"/tests/e2e/tests.d/*.sh; do
	# shellcheck source=/dev/null
	. "$f"
done

# ---------------------------------------------------------------- runner

usage() { sed -n '4,17p' "$0" | sed 's/^# \{0,1\}//'; }

main() {
	local sel=() t name matched n=0 pass=0 failed=0 skipped=0 rc
	while [ $# -gt 0 ]; do
		case $1 in
		-l | --list) printf '%s\n' "${TESTS[@]}"; exit 0 ;;
		--selftest) SELFTEST=1 ;;
		-v) VERBOSE=1 ;;
		-h | --help) usage; exit 0 ;;
		-*) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
		*) sel+=("$1") ;;
		esac
		shift
	done
	if [ ${#sel[@]} = 0 ]; then
		sel=("${TESTS[@]}")
	else
		local want=() s
		for s in "${sel[@]}"; do
			matched=0
			for t in "${TESTS[@]}"; do
				# shellcheck disable=SC2053
				if [[ $t == $s ]]; then want+=("$t"); matched=1; fi
			done
			[ $matched = 1 ] || { echo "no test matches '$s' (see -l)" >&2; exit 2; }
		done
		sel=("${want[@]}")
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "the e2e tests need root" >&2
		exit 2
	fi
	for t in mem regs signals files ident timers cmdline counter counter-static; do
		[ -x "$PROGS/$t" ] || { echo "missing $PROGS/$t: run 'make progs'" >&2; exit 2; }
	done
	if [ $SELFTEST = 0 ] && [ ! -x "$AMBER" ]; then
		echo "missing $AMBER: run 'make'" >&2
		exit 2
	fi
	mkdir -p "$OUT"
	chmod 0755 "$OUT"
	kill_leftovers
	# the tests' fixed ports lie in the ephemeral range: keep other sockets off them
	RESERVED=$(cat /proc/sys/net/ipv4/ip_local_reserved_ports)
	echo "${RESERVED:+$RESERVED,}$TEST_PORTS" >/proc/sys/net/ipv4/ip_local_reserved_ports
	trap 'echo "$RESERVED" >/proc/sys/net/ipv4/ip_local_reserved_ports; kill_leftovers; tmux -L "$TMUX_SOCK" kill-server 2>/dev/null' EXIT
	trap 'exit 130' INT TERM

	echo "1..${#sel[@]}"
	for name in "${sel[@]}"; do
		n=$((n + 1))
		W=$OUT/$name
		[ $SELFTEST = 1 ] && W=$OUT/selftest-$name
		T=$W/t
		rm -rf "$W"
		mkdir -p "$W"
		chmod 0755 "$W"
		: >"$W/log"
		(t_"$name") 2>>"$W/log" # bash's own complaints ("Killed") go to the log too
		rc=$?
		(cleanup_test)
		if [ $rc = 0 ]; then
			pass=$((pass + 1))
			echo "ok $n - $name"
			[ $VERBOSE = 1 ] && sed 's/^/# /' "$W/log"
		elif [ $rc = 77 ]; then
			skipped=$((skipped + 1))
			pass=$((pass + 1))
			echo "ok $n - $name # SKIP"
		else
			failed=$((failed + 1))
			echo "not ok $n - $name"
			grep -q . "$W/log" || echo "test function returned $rc without a message" >>"$W/log"
			grep -Ev '^[^ ]*run.sh: line [0-9]+: +[0-9]+ Killed ' "$W/log" | sed 's/^/# /'
			echo "#   (files: $W)"
		fi
	done
	[ $skipped = 0 ] || echo "# $skipped skipped"
	echo "$pass passed, $failed failed"
	[ $failed = 0 ]
}

main "$@"
