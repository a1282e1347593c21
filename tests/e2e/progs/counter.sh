#!/bin/sh
# counter.sh DIR [tree]: the counter program as a /bin/sh (dash) script.  Only builtins
# in the loop, so the pacing is a busy loop.  Writes "count N" lines to DIR/count.log
# through fd 3 (no O_APPEND); when DIR/go appears it re-reads the log, checks it holds
# count 0..N-1, prints OK/FAIL and exits 0 only if it does.
# With "tree" the counting runs in a forked subshell (a second dash process, no exec)
# and the script waits for it and exits with its status: a two-process tree.
dir=${1:-$AMBER_T}
[ -n "$dir" ] || { echo "usage: counter.sh DIR [tree]" >&2; exit 2; }
count() {
	exec 3>"$dir/count.log"
	n=0
	while [ ! -e "$dir/go" ]; do
		echo "count $n" >&3
		n=$((n + 1))
		[ $n -eq 1 ] && echo $$ >"$dir/ready"
		i=0
		while [ $i -lt 20000 ]; do i=$((i + 1)); done
	done
	[ "$AMBER_TEST_SABOTAGE" = 1 ] && { echo "note: sabotage" >&2; n=$((n + 1)); }
	expect=0
	bad=0
	while read -r word num; do
		if [ "$word $num" != "count $expect" ]; then bad=$((bad + 1)); fi
		expect=$((expect + 1))
	done <"$dir/count.log"
	if [ $bad -eq 0 ] && [ $expect -eq $n ]; then
		echo "ok: count.log holds count 0..$((n - 1))"
		echo 0 >"$dir/result"
		exit 0
	fi
	echo "FAIL: count.log has $expect lines, $bad bad; in-memory count is $n" >&2
	echo 1 >"$dir/result"
	exit 1
}

if [ "$2" = tree ]; then
	count &
	wait $!
	exit $?
fi
count
