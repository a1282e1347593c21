# A user namespace (src/ns/userns.c, tests/e2e/progs/userns.c): a tree in a
# user namespace one level below amber's, with a UTS and an IPC namespace it
# owns, comes back in a new one with the same maps and setgroups, the same
# ids inside and outside, its capabilities inside only; the host's hostname
# stays.
TESTS+=(userns userns_nested_refused userns_unmapped_refused userns_owner_refused userns_image_refused)

# "ROOT A": the tree's pids; the host sees each as uid and gid 100000, both in
# one user namespace that is not the host's, whose UTS namespace it owns
userns_host_view() {
	local pid
	for pid in $(cat "$T/pids"); do
		[ "$(status_field "$pid" Uid)" = "100000	100000	100000	100000" ] &&
			[ "$(status_field "$pid" Gid)" = "100000	100000	100000	100000" ] ||
			{ fail "pid $pid: the host sees Uid '$(status_field "$pid" Uid)', Gid '$(status_field "$pid" Gid)', not 100000"; return 1; }
		[ "$(readlink "/proc/$pid/ns/user")" != "$(readlink /proc/self/ns/user)" ] ||
			{ fail "pid $pid is in the host's user namespace"; return 1; }
		[ "$(readlink "/proc/$pid/ns/user")" = "$(readlink "/proc/$PID/ns/user")" ] ||
			{ fail "pid $pid is not in the root's user namespace"; return 1; }
	done
	[ "$(stat -c %u:%g "$T/owned")" = 100000:100000 ] ||
		{ fail "the root's file is $(stat -c %u:%g "$T/owned") for the host, not 100000:100000"; return 1; }
	[ "$(hostname)" = "$(cat "$W/host.before")" ] ||
		{ fail "the host's hostname changed: $(hostname), was $(cat "$W/host.before")"; return 1; }
}
userns_before() {
	hostname >"$W/host.before"
	cat "/proc/$PID/uid_map" "/proc/$PID/gid_map" "/proc/$PID/setgroups" >"$W/maps.before"
	userns_host_view
}
userns_after() {
	userns_host_view || return 1
	# the maps as the host reads them
	cat "/proc/$PID/uid_map" "/proc/$PID/gid_map" "/proc/$PID/setgroups" >"$W/maps.after"
	cmp -s "$W/maps.before" "$W/maps.after" ||
		{ fail "the maps changed: $(cat "$W/maps.after"), were $(cat "$W/maps.before")"; return 1; }
	[ "$(nsenter -t "$PID" -u hostname)" = amber-userns ] ||
		{ fail "hostname in pid $PID's UTS namespace: $(nsenter -t "$PID" -u hostname)"; return 1; }
}
t_userns() {
	[ -e /proc/self/ns/user ] || return 77
	cycle -P userns_before -A userns_after -- "$PROGS/userns" "$T"
}

# A nested user namespace (two levels below amber's) is refused at dump,
# naming it; the program runs on.
t_userns_nested_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null || return 77
	local rc
	start_prog unshare --user --map-root-user unshare --user --map-root-user "$PROGS/counter" "$T" || return 1
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "a process in a nested user namespace was dumped"; return 1; }
	grep -q "pid $PID is in a nested user namespace" "$W/dump.log" ||
		{ fail "refused, but not naming the nested user namespace"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "an image was marked complete"; return 1; }
	runs_on "the refused dump" 15
}

# A user namespace whose maps were never written is refused at dump, naming it.
t_userns_unmapped_refused() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null || return 77
	local rc
	start_prog unshare --user "$PROGS/counter" "$T" || return 1
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "a process of an unmapped user namespace was dumped"; return 1; }
	grep -q "pid $PID: user namespace [0-9]* has no uid_map yet" "$W/dump.log" ||
		{ fail "refused, but not naming the missing map"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump" 15
}

# Only root's image may make a user namespace: nobody's is refused, naming
# it, before anything is made.
t_userns_owner_refused() {
	[ $SELFTEST = 1 ] && return 77
	[ -e /proc/self/ns/user ] || return 77
	local id rc
	start_prog "$PROGS/userns" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$("$AMBER" show "$W/img" | jq '[.pstree[] | .user_ns // 0] | max')
	[ "$id" -ge 1 ] || { fail "pstree.img names no user namespace"; return 1; }
	rm -rf "$W/nobody"
	cp -a "$W/img" "$W/nobody"
	chown -R 65534:65534 "$W/nobody"
	amber_to "$W/nobody.log" 30 restore -d -D "$W/nobody" -v
	rc=$?
	[ $rc != 0 ] || { fail "root restored nobody's image with a user namespace"; return 1; }
	grep -q "image has user namespace $id .*uid 65534's image may not make namespaces" "$W/nobody.log" ||
		{ fail "nobody's image refused, but not naming the user namespace"; attach "$W/nobody.log"; return 1; }
	grep -q "made user namespace" "$W/nobody.log" && { fail "a user namespace was made before the refusal"; return 1; }
	unedited_restores
}

# Crafted maps are refused before anything is made; the unedited image restores.
t_userns_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	[ -e /proc/self/ns/user ] || return 77
	local ok=0 id i many=()
	start_prog "$PROGS/userns" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$("$AMBER" show "$W/img" | jq '[.pstree[] | .user_ns // 0] | max')
	[ "$id" -ge 1 ] || { fail "pstree.img names no user namespace"; return 1; }
	i=$((id - 1))
	refused userns_overlap "user namespace $id: uid_map has overlapping lines" \
		ns.img "$i.uid_map.1.first=65535" "$i.uid_map.1.lower=200000" "$i.uid_map.1.count=2" || ok=1
	refused userns_lower_overlap "user namespace $id: gid_map has overlapping lines" \
		ns.img "$i.gid_map.1.first=70000" "$i.gid_map.1.lower=100005" "$i.gid_map.1.count=1" || ok=1
	refused userns_past "user namespace $id: uid_map has a line of no ids or past the last id" \
		ns.img "$i.uid_map.0.lower=4294967000" || ok=1
	refused userns_empty "user namespace $id: gid_map has a line of no ids" ns.img "$i.gid_map.0.count=0" || ok=1
	for ((k = 1; k <= 340; k++)); do many+=("$i.uid_map.$k.first=$((70000 + k))" "$i.uid_map.$k.lower=$((300000 + k))" "$i.uid_map.$k.count=1"); done
	refused userns_lines "user namespace $id: uid_map has more than 340 lines" ns.img "${many[@]}" || ok=1
	refused userns_kind "only a user namespace has maps and setgroups" ns.img "$i.kind=NS_UTS" || ok=1
	refused userns_two "pid [0-9]* is in user namespace 0, the root in $id" pstree.img "1.user_ns=0" || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores
}

# a process sharing cwd and root with its parent (CLONE_FS) in a user namespace could not
# enter it at restore: refused at dump, naming it; the program runs on
TESTS+=(userns_clonefs_refused)
t_userns_clonefs_refused() {
	[ $SELFTEST = 1 ] && return 77
	start_prog unshare --user --map-root-user "$PROGS/clonefs" "$T" || return 1
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img" &&
		{ fail "a CLONE_FS process in a user namespace was dumped"; return 1; }
	grep -q "(CLONE_FS) in a user namespace" "$W/dump.log" ||
		{ fail "refused, but not for CLONE_FS"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "an image was marked complete"; return 1; }
	runs_on "the refused dump" 15
}
