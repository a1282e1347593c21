# Deleted ("ghost") files (tests/e2e/progs/ghost.c): a sparse deleted file keeps its holes,
# size, mode, owner and times; an O_TMPFILE file its data and flags.  Besides the
# program's own checks, /proc's fd targets, offsets and flags must be the same after the
# restore.
TESTS+=(ghost ghost_limit ghost_limit_raised ghost_dir ghost_hardlink)

# fd targets, offsets and flags; an O_TMPFILE file's name is its inode number ("#N"),
# which a new inode cannot keep
ghost_fds() {
	local fd
	for fd in $(ls "/proc/$PID/fd" | sort -n); do
		echo "fd $fd -> $(readlink "/proc/$PID/fd/$fd" | sed 's/#[0-9]* (deleted)$/#INO (deleted)/')" \
			"$(grep -E '^(pos|flags):' "/proc/$PID/fdinfo/$fd" | tr -s '\t\n' '  ')"
	done
}
ghost_before() {
	ghost_fds >"$W/fds.before"
	grep -q '^fd 20 -> .*/sparse (deleted) pos: 5000 ' "$W/fds.before" &&
		grep -q '^fd 21 -> .*/#INO (deleted) pos: 3 flags: 020300002' "$W/fds.before" ||
		{ fail "fds 20 and 21 are not the deleted files before the dump: $(cat "$W/fds.before")"; return 1; }
}
ghost_after() {
	ghost_fds >"$W/fds.after"
	diff -u "$W/fds.before" "$W/fds.after" >>"$W/log" ||
		{ fail "fd targets, offsets or flags differ after the restore"; return 1; }
}
t_ghost() { cycle -P ghost_before -A ghost_after -- "$PROGS/ghost" "$T"; }

# 2 MiB of data in a deleted file: above the default --ghost-limit (1 MiB) the dump is
# refused, naming the file and the flag, and the program runs on.
t_ghost_limit() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	start_prog "$PROGS/ghost" "$T" big || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of a 2 MiB ghost file under a 1 MiB limit exited 0"; attach "$W/dump.log"; return 1; }
	grep -q "deleted file $T/big holds 2097152 bytes of data, more than the ghost limit of 1048576; dump with a larger --ghost-limit" "$W/dump.log" ||
		{ fail "amber dump failed without naming the file and --ghost-limit"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "the refused dump left an inventory.img"; return 1; }
	runs_on "the refused dump" 20 || return 1
	note "refused: $(grep -m1 'ghost limit' "$W/dump.log")"
}
t_ghost_limit_raised() { cycle -P ghost_before -A ghost_after -d "--ghost-limit 3M" -- "$PROGS/ghost" "$T" big; }

# An fd on a removed directory cannot be recreated: refused at dump, naming pid and fd.
t_ghost_dir() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	mkdir -p "$T/gone"
	start_prog "$PY" -c '
import os, sys, time
t = sys.argv[1]
fd = os.open(t + "/gone", os.O_RDONLY | os.O_DIRECTORY)
os.dup2(fd, 30)
os.close(fd)
os.rmdir(t + "/gone")
open(t + "/ready.tmp", "w").write(str(os.getpid()))
os.rename(t + "/ready.tmp", t + "/ready")
while not os.path.exists(t + "/go"):
    time.sleep(0.01)
os.fstat(30)
open(t + "/result", "w").write("0\n")
' "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of an fd on a removed directory exited 0"; attach "$W/dump.log"; return 1; }
	grep -q "fd 30 is $T/gone (deleted), a directory, device node or FIFO that was removed" "$W/dump.log" ||
		{ fail "amber dump failed without naming the removed directory"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump" 20 || return 1
}

# An unlinked file with another hard link: refused at dump without --link-remap.
t_ghost_hardlink() {
	[ $SELFTEST = 1 ] && return 77
	local rc
	mkdir -p "$T"
	start_prog "$PY" -c '
import os, sys, time
t = sys.argv[1]
fd = os.open(t + "/a", os.O_RDWR | os.O_CREAT, 0o600)
os.dup2(fd, 30)
os.close(fd)
os.link(t + "/a", t + "/b")
os.unlink(t + "/a")
open(t + "/ready.tmp", "w").write(str(os.getpid()))
os.rename(t + "/ready.tmp", t + "/ready")
while not os.path.exists(t + "/go"):
    time.sleep(0.01)
os.fstat(30)
open(t + "/result", "w").write("0\n")
' "$T" || return
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	rc=$?
	[ $rc != 0 ] || { fail "amber dump of an unlinked file with another link exited 0"; attach "$W/dump.log"; return 1; }
	grep -q "$T/a (/proc/$PID/fd/30) lost that name (unlinked or replaced), but 1 other hard link(s) keep it; dump with --link-remap" "$W/dump.log" ||
		{ fail "amber dump failed without naming the hard-linked file"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump" 20 || return 1
}

# O_PATH fds on a file, a symlink (O_NOFOLLOW), a directory, a FIFO and a deleted file.
TESTS+=(ghost_opath)
t_ghost_opath() { cycle -f fds -- "$PROGS/ghost-opath" "$T"; }

# --link-remap (progs/linkremap.c): an fd and a shared mapping on a file
# unlinked while another link keeps it, an fd on a file whose name now is
# another file's.  The links amber makes are gone after the restore, and the
# fd shows the name the process used.
TESTS+=(linkremap linkremap_refused linkremap_image_refused)
linkremap_links() { ls -a "$T" | grep -c '^\.amber-link-remap\.'; }
linkremap_dumped() {
	[ "$(linkremap_links)" = 2 ] || { fail "expected 2 link-remap links after the dump: $(ls -a "$T")"; return 1; }
}
linkremap_after() {
	[ "$(linkremap_links)" = 0 ] || { fail "link-remap links left after the restore: $(ls -a "$T")"; return 1; }
	local fds
	fds=$(ls -l /proc/$PID/fd/ | grep -c "$T/data (deleted)")
	[ "$fds" = 1 ] || { fail "no fd shows $T/data (deleted): $(ls -l /proc/$PID/fd/)"; return 1; }
	grep -q "$T/data (deleted)" /proc/$PID/maps || { fail "the mapping is not of $T/data (deleted)"; return 1; }
}
t_linkremap() {
	cycle -d --link-remap -B linkremap_dumped -A linkremap_after -- "$PROGS/linkremap" "$T"
}
t_linkremap_refused() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/linkremap" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded without --link-remap"; return 1; }
	grep -q "$T/[a-z]* (/proc/$PID/.*) lost that name (unlinked or replaced), but 1 other hard link(s) keep it; dump with --link-remap" "$W/dump.log" ||
		{ fail "the refusal does not name the file and --link-remap"; attach "$W/dump.log"; return 1; }
	[ "$(linkremap_links)" = 0 ] || { fail "a refused dump left links: $(ls -a "$T")"; return 1; }
	runs_on "the refused dump"
}
# An image's link-remap name must be amber's own, beside the file's name: else
# a crafted image could make restore open and then unlink any file.
t_linkremap_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 id
	start_prog "$PROGS/linkremap" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" --link-remap -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.link_remap)][0].id')
	[ -n "$id" ] && [ "$id" != null ] || { fail "no file with link_remap in the image"; return 1; }
	refused lr_other "files.img: bad entry" files.img "$id.link_remap=$T/keep" || ok=1
	refused lr_dir "files.img: bad entry" files.img "$id.link_remap=/etc/.amber-link-remap.1.0" || ok=1
	return $ok
}
