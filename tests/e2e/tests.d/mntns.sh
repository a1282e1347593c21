# Mount namespaces (src/ns/mnt.c, src/ns/tmpfs.c, tests/e2e/progs/mntns.c): a
# program in a mount namespace of its own, with a tmpfs (files, modes, a
# symlink, a FIFO) made shared, a slave bind of it, a read-only bind of a
# directory, a bind of a file and a proc, comes back with them (it checks its
# mountinfo, the files, EROFS, its fd and cwd); amber's mount table is the
# same before and after.
TESTS+=(mntns mntns_refused mntns_image_refused)

mnt_host() { sed 's/^[0-9]* [0-9]* //' /proc/self/mountinfo | sort; }
mnt_before() {
	mnt_host >"$W/host.mounts"
	[ "$(readlink "/proc/$PID/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] ||
		{ fail "pid $PID is in amber's mount namespace"; return 1; }
}
mnt_host_same() {
	mnt_host | diff -u "$W/host.mounts" - >"$W/mounts.diff" ||
		{ fail "amber's mount table changed (- before, + after):"; sed 's/^/    /' "$W/mounts.diff" >>"$W/log"; return 1; }
}
mnt_after() {
	[ "$(readlink "/proc/$PID/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] ||
		{ fail "pid $PID came back in amber's mount namespace"; return 1; }
	mnt_host_same
}
t_mntns() { cycle -P mnt_before -A mnt_after -- "$PROGS/mntns" "$T"; }

# A filesystem amber cannot make again (a ramfs) is refused at dump, naming
# the mount and the process; the program runs on unharmed.
t_mntns_refused() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/mntns" "$T" refuse || return 1
	mnt_host >"$W/host.mounts"
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img" &&
		{ fail "a ramfs was dumped"; return 1; }
	grep -q "pid $PID: mount [0-9]* at .*/mnt/r is a ramfs filesystem" "$W/dump.log" ||
		{ fail "no reason given"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "an image was marked complete"; return 1; }
	runs_on "the refused dump" 15 || return 1
	mnt_host_same
}

# A crafted mnt.img is refused before anything is made (refused() is
# security-owner.sh's); amber's mounts stay; the unedited image restores.
t_mntns_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 t s root
	start_prog "$PROGS/mntns" "$T" || return 1
	mnt_host >"$W/host.mounts"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	"$AMBER" show "$W/img" >"$W/show.json"
	t=$(jq '.mounts | map(.mountpoint | endswith("/mnt/t")) | index(true)' "$W/show.json")
	s=$(jq '.mounts | map(.mountpoint | endswith("/mnt/s")) | index(true)' "$W/show.json")
	root=$(jq '.mounts | map(.mountpoint == "/") | index(true)' "$W/show.json")
	[ "$t" != null ] && [ "$s" != null ] && [ "$root" != null ] ||
		{ fail "mnt.img lacks the tmpfs, its slave or the root"; return 1; }
	refused mnt_dotdot "a mount point or root that is not a plain absolute path" mnt.img \
		"$t.mountpoint=/tmp/../etc" || ok=1
	refused mnt_type "a type of filesystem amber does not make" mnt.img "$t.fstype=ext4" || ok=1
	refused mnt_cycle "a cycle of parents" mnt.img \
		"$t.parent=$(jq ".mounts[$s].id" "$W/show.json")" \
		"$s.parent=$(jq ".mounts[$t].id" "$W/show.json")" || ok=1
	refused mnt_bind "a bind mount's source is not a plain absolute path" mnt.img \
		"$s.kind=MNT_BIND" "$s.bind_src=../../etc" || ok=1
	refused mnt_pstree "pid [0-9]* is in mount namespace 0" pstree.img "0.mnt_ns=0" || ok=1
	refused mnt_root "a root mount that is not amber's root" mnt.img "$root.kind=MNT_NEW" \
		"$root.fstype=tmpfs" || ok=1
	mnt_host_same || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores || return 1
	mnt_host_same
}

# A zombie of a tree in a mount namespace of its own (an exited child not reaped yet, as a
# server's finished worker is for a moment): recorded in the tree's namespace like the
# others, so the restore takes the image, and the zombie comes back unreaped
TESTS+=(mntns_zombie)
mntz_zombie() { # the counter's one child: a zombie with exit status 3
	local kids
	kids=$(tr -d ' ' <"/proc/$PID/task/$PID/children")
	[ -n "$kids" ] && [ "$(proc_state "$kids")" = Z ] ||
		{ fail "the counter has no zombie child ('$kids', state $(proc_state "$kids"))"; return 1; }
	echo "$kids" >"$W/zombie"
}
mntz_after() {
	[ "$(tr -d ' ' <"/proc/$PID/task/$PID/children")" = "$(cat "$W/zombie")" ] &&
		[ "$(proc_state "$(cat "$W/zombie")")" = Z ] ||
		{ fail "the zombie child $(cat "$W/zombie") is not back"; return 1; }
	[ "$(readlink "/proc/$PID/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] ||
		{ fail "the counter is in amber's mount namespace"; return 1; }
	note "zombie $(cat "$W/zombie") back beside its parent's mount namespace"
}
t_mntns_zombie() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null || return 77
	cycle -P mntz_zombie -A mntz_after -- unshare --mount --propagation private \
		sh -c '(exit 3) & exec "$0" "$@"' "$PROGS/counter" "$T"
}
