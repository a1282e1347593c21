# A tree that pivot_root()ed into a root of its own, as a container runtime
# makes one (tests/e2e/progs/mntroot-static.c, run by unshare --mount --fork
# --pid --mount-proc): the work dir is its rootfs, bound onto itself with a
# host file bound on its /etc/hostname, a proc and a tmpfs inside.  amber
# dumps it with --external mnt[/etc/hostname]:hn and restores it with --root
# and --external mnt[hn]:ANOTHER-FILE: the program finds its rootfs, proc
# and tmpfs, and reads the other file at /etc/hostname.  Restores without
# --root, without the external, or of an image whose root mount's path
# climbs out (..) are refused before anything is made.  amber's mount table
# is the same throughout.
TESTS+=(mntroot)

MR_PIDS=

mr_host() { sed 's/^[0-9]* [0-9]* //' /proc/self/mountinfo | sort; }

# restore the image edited with EDITS, with ARGS: refused for PATTERN, nothing made
mr_refused() { # NAME PATTERN EDITS -- ARGS...
	local name=$1 pat=$2 edits=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do edits+=("$1"); shift; done
	shift
	rm -rf "$W/$name"
	cp -a "$W/img" "$W/$name"
	[ ${#edits[@]} = 0 ] || "$IMGEDIT" "$W/$name" "${edits[@]}" 2>>"$W/log" ||
		{ fail "$name: imgedit failed"; return 1; }
	amber_to "$W/$name.log" 30 restore -d -D "$W/$name" -v "$@" &&
		{ fail "$name: the image was restored"; return 1; }
	grep -q -- "$pat" "$W/$name.log" || { fail "$name: refused, but not for '$pat'"; attach "$W/$name.log"; return 1; }
	grep -q -e "restoring task" -e "made the tree's mount namespace" "$W/$name.log" &&
		{ fail "$name: refused only once something was made"; attach "$W/$name.log"; return 1; }
	mr_host | diff -u "$W/host.mounts" - >"$W/mounts.diff" ||
		{ fail "$name: amber's mount table changed:"; attach "$W/mounts.diff"; return 1; }
	note "$name: refused ($(grep -m1 error "$W/$name.log"))"
}

# the rootfs in $T, the program run pivot_root()ed into it: MR_INIT its pid 1
mr_start() {
	local init
	mkdir -p "$T/etc" "$T/proc" "$T/tmp" || { fail "cannot make the rootfs"; return 1; }
	cp "$PROGS/mntroot-static" "$T/mntroot" && : >"$T/etc/hostname" &&
		echo "rootfs $$ $RANDOM" >"$T/rootfs.marker" && echo before >"$W/hn.before" &&
		echo after >"$W/hn.after" || { fail "cannot fill the rootfs"; return 1; }
	mr_host >"$W/host.mounts"
	start_prog unshare --mount --fork --pid --mount-proc "$T/mntroot" "$T" "$W/hn.before" || return 1
	init=$(awk '{print $1}' "/proc/$PID/task/$PID/children")
	MR_PIDS="$MR_PIDS $init"
	[ "$(status_field "$init" NSpid | awk '{print $2}')" = 1 ] ||
		{ fail "pid $init (unshare's child) is not pid 1 of its namespace"; return 1; }
	[ "$(readlink "/proc/$init/root")" = / ] && [ -e "/proc/$init/root/rootfs.marker" ] ||
		{ fail "pid $init did not pivot_root into $T"; return 1; }
	MR_INIT=$init
}

# the restored init H: pid 1 of its own namespaces, amber's mounts unchanged, the
# program passing its checks with the restore's /etc/hostname (hn.after)
mr_check_restored() {
	local h=$1
	[ "$(status_field "$h" NSpid | awk '{print $2}')" = 1 ] ||
		{ fail "the restored init $h is not pid 1 of its namespace"; return 1; }
	[ "$(readlink "/proc/$h/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] ||
		{ fail "the restored init is in amber's mount namespace"; return 1; }
	mr_host | diff -u "$W/host.mounts" - >"$W/mounts.diff" ||
		{ fail "amber's mount table changed with the restore:"; attach "$W/mounts.diff"; return 1; }
	touch "$T/go"
	wait_for 30 test -e "$T/result" && [ "$(cat "$T/result")" = 0 ] ||
		{ fail "the restored program failed its checks"; attach "$T/err"; return 1; }
	[ "$(cat "$T/seen")" = after ] ||
		{ fail "/etc/hostname inside reads '$(cat "$T/seen")', not the --external file"; return 1; }
	wait_for 10 is_gone "$h" || { fail "the restored init $h did not end"; return 1; }
}

mntroot_body() {
	local init h root ok=0
	mr_start || return 1
	init=$MR_INIT
	amber_to "$W/dump.log" 60 dump -t "$init" -D "$W/img" -v --external 'mnt[/etc/hostname]:hn' ||
		{ fail "dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$init" || { fail "pid $init still there after the dump"; return 1; }
	"$AMBER" show "$W/img" >"$W/show.json"
	root=$(jq '.mounts | map(.mountpoint == "/") | index(true)' "$W/show.json")
	[ "$(jq -r ".mounts[$root].kind" "$W/show.json")" = MNT_ROOT ] &&
		[ "$(jq -r '.mounts[] | select(.mountpoint == "/etc/hostname") | .ext_key' "$W/show.json")" = hn ] ||
		{ fail "mnt.img lacks the root or the external mount"; attach "$W/show.json"; return 1; }

	mr_refused noroot "give it with --root DIR" -- --external 'mnt[hn]:'"$W/hn.after" || ok=1
	mr_refused noext "give its source with --external mnt\[hn\]:PATH" -- --root "$T" || ok=1
	mr_refused dotdot "a mount point or root that is not a plain absolute path" \
		mnt.img "$root.root=/../../etc" -- --root "$T" --external 'mnt[hn]:'"$W/hn.after" || ok=1
	[ $ok = 0 ] || return 1

	amber_to "$W/restore.log" 60 restore -d --pidfile "$W/pidfile" -D "$W/img" -v \
		--root "$T" --external 'mnt[hn]:'"$W/hn.after" ||
		{ fail "restore failed"; attach "$W/restore.log"; return 1; }
	h=$(cat "$W/pidfile")
	MR_PIDS="$MR_PIDS $h"
	mr_check_restored "$h"
}

# mr_run BODY: BODY run, the trees it left killed
mr_run() {
	local rc p
	"$1"
	rc=$?
	# their command lines (/mntroot /) do not name the work dir: cleanup_test misses them
	for p in $MR_PIDS; do
		kill -9 "$p" 2>/dev/null
	done
	MR_PIDS=
	return $rc
}

t_mntroot() {
	[ $SELFTEST = 1 ] && return 77
	command -v unshare >/dev/null && command -v jq >/dev/null || return 77
	mr_run mntroot_body
}
