# An image grants no more than whoever could have written it: a root process's
# image whose files belong to an unprivileged user is refused when root restores
# it (nothing is created), and restores once the files are root's again.
TESTS+=(image_owner_limits_privileges)
t_image_owner_limits_privileges() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/counter" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	chown -R 65534:65534 "$W/img"
	amber_to "$W/restore1.log" 30 restore -d -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "root restored a root process from an image owned by uid 65534"; return 1; }
	grep -q "may grant" "$W/restore1.log" || { fail "no reason given"; attach "$W/restore1.log"; return 1; }
	! kill -0 "$PID" 2>/dev/null || { fail "pid $PID exists after the refused restore"; return 1; }
	chown -R 0:0 "$W/img"
	amber_to "$W/restore2.log" 30 restore -D "$W/img" &
	RPID=$!
	wait_for 10 is_alive "$PID" || { fail "the root-owned image did not restore"; attach "$W/restore2.log"; return 1; }
	touch "$T/go"
	wait "$RPID" || { fail "the restored counter failed its checks"; attach_all; return 1; }
}
