# A container made by `unshare --fork --pid --mount-proc --net --ipc --uts`
# (tests/e2e/progs/container.c is its init: a counter, a TCP server on
# 127.0.0.1:47500 of its network namespace with a client connected, an
# interactive sh on a FIFO of the work dir, a tmpfs at T/ctr): amber dumps
# the init and everything below it (--tcp-established), the container and
# its namespaces are gone, amber restores it and it goes on: the counter and
# the client count on from where they were, the sh answers with its pid in
# the namespace and the container's hostname, the server answers on its
# address inside the restored network namespace, /proc inside shows the
# namespace's pids, and the host's mounts, hostname and links are as before.
TESTS+=(container)

CTR_SETUP='ip link set lo up && hostname amber-ctr && mount -t tmpfs -o size=1m ctr "$0/ctr" &&
exec "$1" "$0" "$0/ctr"'

ctr_host() {
	{
		sed 's/^[0-9]* [0-9]* //' /proc/self/mountinfo
		hostname
		ip -o link show | sed 's/^[0-9]*: //'
	} | sort
}
# the namespaces of pid $1 (inode links), one per line
ctr_ns() {
	local k
	for k in pid mnt net uts ipc; do
		echo "$k $(readlink "/proc/$1/ns/$k")"
	done
}
# whether any process is in one of the namespaces listed in $1
ctr_ns_used() {
	local f
	for f in /proc/[0-9]*/ns/{pid,mnt,net,uts,ipc}; do
		grep -qxF "${f##*/} $(readlink "$f" 2>/dev/null)" "$1" && return 0
	done
	return 1
}
ctr_read() { nsenter -t "$1" -m cat "$T/ctr/$2" 2>/dev/null; } # INIT FILE
# the sh's answer to a command: "ID PID HOSTNAME" (the FIFO has no reader if the sh is gone)
ctr_sh() { # ID
	timeout 5 sh -c 'echo "echo \"$1 \$\$ \$(hostname)\"" >"$2"' _ "$1" "$T/sh.in" || return 1
	wait_for 5 grep -q "^$1 " "$T/sh.out" && grep "^$1 " "$T/sh.out"
}
# "PID COMM" of the processes of pid $1's pid namespace, from its /proc (ps itself left out)
ctr_ps() {
	timeout 5 nsenter -t "$1" -p -m ps -e -o pid=,comm= | awk '$2 != "ps" {print $1, $2}' |
		tr '\n' ' '
}
# the server's answer to "ping" on 127.0.0.1:47500 of pid $1's network namespace
ctr_ping() {
	timeout 5 nsenter --net="/proc/$1/ns/net" bash -c \
		'exec 3<>/dev/tcp/127.0.0.1/47500 && echo ping >&3 && head -1 <&3' 2>/dev/null
}

t_container() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null && command -v nsenter >/dev/null && command -v ip >/dev/null ||
		return 77
	local init h sh1 sh2 p1 p2 c1 c2 c3 q1 q2 q3 ps ps1
	mkdir -p "$T/ctr" && mkfifo "$T/sh.in" || { fail "cannot make the work dir"; return 1; }
	ctr_host >"$W/host.before"
	start_prog unshare --fork --pid --mount-proc --net --ipc --uts \
		sh -c "$CTR_SETUP" "$T" "$PROGS/container" || return 1
	init=$(awk '{print $1}' "/proc/$PID/task/$PID/children")
	echo "$init" >>"$W/pids"
	[ "$(status_field "$init" NSpid | awk '{print $2}')" = 1 ] ||
		{ fail "pid $init (unshare's child) is not pid 1 of its namespace"; return 1; }
	ctr_ns "$init" >"$W/ns.before"
	sh1=$(ctr_sh before) || { fail "the sh does not answer before the dump"; attach "$T/sh.out"; return 1; }
	[ "${sh1#before * }" = amber-ctr ] || { fail "the sh answered '$sh1'"; return 1; }
	p1=$(ctr_ping "$init")
	[ "${p1%% *}" = pong ] || { fail "the server answered '$p1' before the dump"; return 1; }
	wait_for 10 eval '[ "$(ctr_read "$init" count)" -ge 100 ] 2>/dev/null' ||
		{ fail "the counter does not count: $(ctr_read "$init" count)"; return 1; }
	ps1=$(ctr_ps "$init")
	case " $ps1 " in
	*" 1 container "*" $(echo "$sh1" | awk '{print $2}') sh "*) ;;
	*) fail "ps inside the container shows '$ps1'"; return 1 ;;
	esac
	c1=$(ctr_read "$init" count)
	q1=$(ctr_read "$init" pong)
	note "before: sh '$sh1', server '$p1', count $c1, the client's last pong $q1"

	amber_to "$W/dump.log" 60 dump -t "$init" --tcp-established -D "$W/img" -v ||
		{ fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$init" || { fail "the init $init is still there after the dump"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "unshare $PID did not end with its child"; return 1; }
	wait_for 10 eval '! ctr_ns_used "$W/ns.before"' ||
		{ fail "a process is still in the container's namespaces after the dump"; return 1; }
	ctr_host | diff -u "$W/host.before" - >"$W/host.diff" ||
		{ fail "the host changed while the container was dumped:"; attach "$W/host.diff"; return 1; }

	amber_to "$W/restore.log" 60 restore -d --tcp-established --pidfile "$W/pidfile" -D "$W/img" -v ||
		{ fail "restore failed"; attach "$W/restore.log"; return 1; }
	h=$(cat "$W/pidfile")
	echo "$h" >>"$W/pids"
	c2=$(ctr_read "$h" count)
	q2=$(ctr_read "$h" pong)
	[ "$(status_field "$h" NSpid | awk '{print $2}')" = 1 ] ||
		{ fail "the restored init $h is not pid 1 of its namespace"; return 1; }
	ctr_ns "$h" | while read -r k ns; do
		[ "$ns" != "$(readlink "/proc/self/ns/$k")" ] || { fail "the restored init is in the host's $k namespace"; return 1; }
	done || return 1
	# counting on from the dump (not from 0), and still counting
	[ "${c2:-0}" -ge "$c1" ] && [ "${q2:-0}" -ge "$q1" ] ||
		{ fail "after the restore the count is '$c2' (was $c1), the client's pong '$q2' (was $q1)"; return 1; }
	wait_for 5 eval '[ "$(ctr_read "$h" count)" -gt "$c2" ] && [ "$(ctr_read "$h" pong)" -gt "$q2" ]' ||
		{ fail "the counter or the client stopped: count $(ctr_read "$h" count), pong $(ctr_read "$h" pong)"; return 1; }
	c3=$(ctr_read "$h" count)
	q3=$(ctr_read "$h" pong)
	[ -z "$(ctr_read "$h" client.err)" ] ||
		{ fail "the client's connection broke: $(ctr_read "$h" client.err)"; return 1; }
	sh2=$(ctr_sh after) || { fail "the sh does not answer after the restore"; attach "$T/sh.out"; return 1; }
	[ "${sh2#after }" = "${sh1#before }" ] ||
		{ fail "the sh answered '$sh2' after the restore, '$sh1' before"; return 1; }
	p2=$(ctr_ping "$h")
	[ "${p2%% *}" = pong ] && [ "${p2#pong }" -gt "$q3" ] ||
		{ fail "the server answered '$p2' after the restore (the client had pong $q3)"; return 1; }
	# the namespace's proc: its pids as before, the init pid 1
	ps=$(ctr_ps "$h")
	[ "$ps" = "$ps1" ] || { fail "ps inside the container shows '$ps', before the dump '$ps1'"; return 1; }
	[ "$(nsenter -t "$h" -p -m cat /proc/1/cmdline | tr '\0' ' ')" = "$PROGS/container $T $T/ctr " ] ||
		{ fail "/proc/1 inside the container is not its init"; return 1; }
	ctr_host | diff -u "$W/host.before" - >"$W/host.diff" ||
		{ fail "the host changed with the restore:"; attach "$W/host.diff"; return 1; }
	[ ! -e "$T/died" ] || { fail "a process of the container ended: $(cat "$T/died")"; return 1; }
	note "after: sh '$sh2', server '$p2', count $c2 then $c3, the client's pong $q2 then $q3; ps: $ps"
	ctr_ns "$h" >"$W/ns.after"
	kill -9 "$h"
	wait_for 10 is_gone "$h" && wait_for 10 eval '! ctr_ns_used "$W/ns.after"' ||
		{ fail "the restored container did not end"; return 1; }
	ctr_host | diff -u "$W/host.before" - >"$W/host.diff" ||
		{ fail "the host changed after the container ended:"; attach "$W/host.diff"; return 1; }
}
