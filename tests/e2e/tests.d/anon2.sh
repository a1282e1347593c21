# More kinds of special state (issue 9): fanotify groups (progs/fanotify.c),
# inotify watches kept by file handle, BPF maps, AIO rings.
TESTS+=(fanotify fanotify_queued_refused fanotify_image_refused)

# fanotify lines of every fanotify fd of $PID: the group's flags and its marks as the
# kernel shows them (inode, device, handle, mount id: the same objects after restore).
fanotify_state() {
	local f
	for f in $(ls "/proc/$PID/fd" | sort -n); do
		[ "$(readlink "/proc/$PID/fd/$f")" = 'anon_inode:[fanotify]' ] || continue
		echo "fd $f $(grep '^flags:' "/proc/$PID/fdinfo/$f" | tr -s '\t' ' ')"
		grep '^fanotify' "/proc/$PID/fdinfo/$f" | sort | sed "s/^/fd $f /"
	done
}
fanotify_before() {
	fanotify_state >"$W/fanotify.before"
	[ "$(grep -c 'fanotify flags' "$W/fanotify.before")" = 2 ] &&
		[ "$(grep -c 'fanotify \(ino\|mnt_id\|sdev\):' "$W/fanotify.before")" = 4 ] ||
		{ fail "expected 2 fanotify groups with 4 marks: $(cat "$W/fanotify.before")"; return 1; }
}
# the file marked.txt is replaced by another: the mark must stay on the original inode
fanotify_replace() { echo new >"$T/mnt/new.txt" && mv "$T/mnt/new.txt" "$T/mnt/marked.txt"; }
fanotify_after() {
	fanotify_state >"$W/fanotify.after"
	! grep -q 'warning' "$W/restore.log" || { fail "the restore warned: $(grep warning "$W/restore.log")"; return 1; }
	diff -u "$W/fanotify.before" "$W/fanotify.after" >"$W/fanotify.diff" && return 0
	fail "fanotify fdinfo differs after restore (- before, + after):"
	sed 's/^/    /' "$W/fanotify.diff" >>"$W/log"
	return 1
}
# run "$@" with a tmpfs mounted at $T/mnt (the program's marks watch it), unmounted after
with_tmpfs() {
	local rc
	mkdir -p "$T/mnt" && mount -t tmpfs -o size=1m amber-e2e "$T/mnt" ||
		{ fail "cannot mount a tmpfs at $T/mnt"; return 1; }
	"$@"
	rc=$?
	findmnt -rn -o TARGET | grep "^$W/" | sort -r | while read -r m; do umount -l "$m"; done
	return $rc
}
t_fanotify() {
	with_tmpfs cycle -P fanotify_before -B fanotify_replace -A fanotify_after -- \
		"$PROGS/fanotify" "$T"
}

# An event queued in a group cannot be queued again: the dump is refused, naming the fd.
fanotify_queued() {
	start_prog "$PROGS/fanotify" "$T" queued || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded with a fanotify event queued"; return 1; }
	grep -q "pid $PID: fd 30 is a fanotify group with [0-9]* bytes of events queued" "$W/dump.log" ||
		{ fail "the refusal does not name fd 30 and its queued events"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}
t_fanotify_queued_refused() {
	[ $SELFTEST = 1 ] && return 77
	with_tmpfs fanotify_queued
}

# Crafted marks are refused before anything is made.
fanotify_crafted() {
	local ok=0 id
	start_prog "$PROGS/fanotify" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.fanotify)][0].id')
	[ -n "$id" ] && [ "$id" != null ] || { fail "no fanotify group in the image"; return 1; }
	refused fa_flags "unknown fanotify_init flags" files.img "$id.fanotify.init_flags=0x80000" || ok=1
	refused fa_mflags "bad mark 0" files.img "$id.fanotify.marks.0.mflags=0x1" || ok=1
	refused fa_handle "bad mark 0" files.img "$id.fanotify.marks.0.fhandle=$(printf '%0300d' 0)" || ok=1
	refused fa_relpath "bad mark 0" files.img "$id.fanotify.marks.0.path=etc/passwd" || ok=1
	refused fa_empty "bad mark 0" files.img "$id.fanotify.marks.0.mask=0" \
		"$id.fanotify.marks.0.ignored_mask=0" || ok=1
	return $ok
}
t_fanotify_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	with_tmpfs fanotify_crafted
}

# inotify watches kept by file handle (progs/inotify2.c): one whose file was replaced
# between dump and restore stays on the original inode, one on a file that no path
# reaches (a tmpfs mounted over its directory) is dumped and restored by its handle;
# one on a deleted file is refused at dump.
TESTS+=(inotify_handle inotify_deleted_refused inotify_image_refused)
inotify_lines() {
	sed -n 's/^\(inotify wd:.*\)/\1/p' "/proc/$PID/fdinfo/30" | sort
}
inotify_before() { inotify_lines >"$W/inotify.before"; }
inotify_hide() { mount -t tmpfs -o size=1m amber-e2e-hide "$T/mnt/hid"; }
inotify_replace() { echo new >"$T/mnt/new.txt" && mv "$T/mnt/new.txt" "$T/mnt/w.txt"; }
inotify_after() {
	inotify_lines >"$W/inotify.after"
	grep -q 'is kept by its file handle only' "$W/dump.log" ||
		{ fail "the dump did not keep hid/h.txt by its handle only"; return 1; }
	! grep -q 'warning' "$W/restore.log" || { fail "the restore warned: $(grep warning "$W/restore.log")"; return 1; }
	diff -u "$W/inotify.before" "$W/inotify.after" >"$W/inotify.diff" && return 0
	fail "inotify fdinfo differs after restore (- before, + after):"
	sed 's/^/    /' "$W/inotify.diff" >>"$W/log"
	return 1
}
inotify_prep() { inotify_before && inotify_hide; }
t_inotify_handle() {
	if [ $SELFTEST = 1 ]; then
		with_tmpfs cycle -- "$PROGS/inotify2" "$T"
		return
	fi
	with_tmpfs cycle -P inotify_prep -B inotify_replace -A inotify_after -- "$PROGS/inotify2" "$T"
}
inotify_deleted() {
	start_prog "$PROGS/inotify2" "$T" deleted || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded with a watch on a deleted file"; return 1; }
	grep -q "pid $PID: fd 30: inotify watch 3 is on inode [0-9]* of .*, which was deleted" "$W/dump.log" ||
		{ fail "the refusal does not name fd 30, watch 3 and the deleted inode"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}
t_inotify_deleted_refused() {
	[ $SELFTEST = 1 ] && return 77
	with_tmpfs inotify_deleted
}

# BPF maps (progs/bpfmap.c): hash, array (frozen), per-CPU array and hash, with their
# contents.  fdinfo must show the same attributes after restore (not the new map id).
TESTS+=(bpfmap bpfmap_lru_refused bpfmap_owner_refused bpfmap_image_refused)
bpfmap_state() {
	local f
	for f in $(ls "/proc/$PID/fd" | sort -n); do
		[ "$(readlink "/proc/$PID/fd/$f")" = anon_inode:bpf-map ] || continue
		echo "fd $f $(grep -E '^(flags|map_type|key_size|value_size|max_entries|map_flags|frozen):' \
			"/proc/$PID/fdinfo/$f" | tr -s '\t\n' ' ')"
	done
}
bpfmap_before() {
	bpfmap_state >"$W/bpfmap.before"
	[ "$(grep -c map_type "$W/bpfmap.before")" = 4 ] ||
		{ fail "expected 4 BPF maps: $(cat "$W/bpfmap.before")"; return 1; }
}
bpfmap_after() {
	bpfmap_state >"$W/bpfmap.after"
	diff -u "$W/bpfmap.before" "$W/bpfmap.after" >"$W/bpfmap.diff" && return 0
	fail "BPF map fdinfo differs after restore (- before, + after):"
	sed 's/^/    /' "$W/bpfmap.diff" >>"$W/log"
	return 1
}
t_bpfmap() { cycle -P bpfmap_before -A bpfmap_after -- "$PROGS/bpfmap" "$T"; }
t_bpfmap_lru_refused() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/bpfmap" "$T" lru || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded with an LRU hash map"; return 1; }
	grep -q "pid $PID: fd 34 is a BPF map of type 9 ('lru')" "$W/dump.log" ||
		{ fail "the refusal does not name fd 34 and its map type"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}
# nobody's image holding maps: nobody may not create BPF maps where unprivileged BPF
# is disabled, so the restore refuses (and creates nothing) when it is.
t_bpfmap_owner_refused() {
	[ $SELFTEST = 1 ] && return 77
	local v
	v=$(cat /proc/sys/kernel/unprivileged_bpf_disabled)
	[ "$v" != 0 ] || { note "unprivileged BPF is allowed here: nothing to refuse"; return 77; }
	mkdir -p "$T"
	: >"$T/out"
	: >"$T/err"
	chown "$NOBODY:$NOBODY" "$T/out" "$T/err"
	start_prog "$PROGS/bpfmap" "$T" drop || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	chown -R "$NOBODY:$NOBODY" "$W/img"
	amber_to "$W/restore.log" 30 restore -d -D "$W/img" &&
		{ fail "root restored nobody's image with BPF maps"; return 1; }
	grep -q "the image's owner, uid $NOBODY, may not create BPF maps (kernel.unprivileged_bpf_disabled is $v" "$W/restore.log" ||
		{ fail "the refusal does not name the owner and the sysctl"; attach "$W/restore.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID exists after the refused restore"; return 1; }
}
# hex of each of hmap's keys or values, one a line
bpf_list() {
	"$AMBER" show "$W/img" | jq -r --argjson i "$id" ".files[\$i].bpf_map.$1[]"
}
# Crafted maps are refused before anything is made.
t_bpfmap_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 id
	start_prog "$PROGS/bpfmap" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.bpf_map.name == "hmap")][0].id')
	[ -n "$id" ] && [ "$id" != null ] || { fail "no BPF map hmap in the image"; return 1; }
	refused bpf_type "BPF map entry $id has bad attributes" files.img "$id.bpf_map.map_type=12" || ok=1
	bpf_list keys >"$W/keys" && bpf_list values >"$W/values" || { fail "cannot list the map's contents"; return 1; }
	refused bpf_key "BPF map entry $id has bad attributes" files.img \
		"$id.bpf_map.keys=0102,$(sed 1d "$W/keys" | paste -sd,)" || ok=1
	refused bpf_val "BPF map entry $id has bad attributes" files.img \
		"$id.bpf_map.values=$(sed '$d' "$W/values" | paste -sd,),00" || ok=1
	refused bpf_dup "a key given twice" files.img \
		"$id.bpf_map.keys=$(head -n1 "$W/keys"),$(sed '$d' "$W/keys" | paste -sd,)" || ok=1
	return $ok
}

# AIO contexts (progs/aio.c): two rings, one wrapped, with completed reads not
# reaped; after restore the same ids, head, tail and events, and the rings work.
TESTS+=(aio)
t_aio() { cycle -- "$PROGS/aio" "$T"; }

# A ring whose events do not fit it, whose head or tail lies outside it, or whose
# size io_setup cannot make is refused before anything is made; the unedited image
# restores.
TESTS+=(aio_image_refused)
t_aio_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 k
	start_prog "$PROGS/aio" "$T" || return 1
	dump_and_gone || return 1
	k=$("$AMBER" show "$W/img" | jq '.tasks[0].mm.vmas | map(.kind == "VMA_AIO") | index(true)')
	[ "$k" != null ] || { fail "no AIO ring in the image"; return 1; }
	refused aio_head "bad mapping table" "mm-$PID.img" "vmas.$k.aio_head=127" || ok=1
	refused aio_tail "bad mapping table" "mm-$PID.img" "vmas.$k.aio_tail=4000000000" || ok=1
	refused aio_events "bad mapping table" "mm-$PID.img" "vmas.$k.aio_events=00" || ok=1
	refused aio_nr "bad mapping table" "mm-$PID.img" "vmas.$k.aio_nr=1000" || ok=1
	refused aio_size "bad mapping table" "mm-$PID.img" "vmas.$k.end=$(("$("$AMBER" show "$W/img" | jq ".tasks[0].mm.vmas[$k].end")" + (128 << 20)))" || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores
}

# A request in flight is in no kernel interface; one that completes while the process
# is frozen moves the ring's tail, and amber refuses the dump, naming the context.
# The test completes the poll request of progs/aio.c inflight (a pipe made readable)
# once amber has read the ring; 512 MiB of memory keep the dump busy meanwhile.
TESTS+=(aio_inflight_refused)
t_aio_inflight_refused() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/aio" "$T" inflight; return; }
	start_prog "$PROGS/aio" "$T" inflight || return 1
	(
		# once amber has read the ring (its log says so), before the pages are done
		for _ in $(seq 2000); do
			grep -q "AIO context [0-9a-f]*: [0-9]* events" "$W/dump.log" 2>/dev/null && break
			sleep 0.005
		done
		echo x >"/proc/$PID/fd/100"
	) &
	local writer=$!
	amber_to "$W/dump.log" 120 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded while an AIO request was in flight"; return 1; }
	wait $writer
	grep -q "pid $PID: AIO context [0-9a-f]* had requests in flight (1 completed during the dump)" "$W/dump.log" ||
		{ fail "the refusal does not name the AIO context"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}

# Crafted watches are refused before anything is made.
inotify_crafted() {
	local ok=0 id
	start_prog "$PROGS/inotify2" "$T" || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	id=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.inotify)][0].id')
	[ -n "$id" ] && [ "$id" != null ] || { fail "no inotify fd in the image"; return 1; }
	refused in_handle "inotify entry $id: bad watch 0" files.img \
		"$id.inotify.watches.0.fhandle=$(printf '%0300d' 0)" || ok=1
	refused in_relpath "inotify entry $id: bad watch 0" files.img \
		"$id.inotify.watches.0.path=etc/shadow" || ok=1
	refused in_wd "inotify entry $id: bad watch 1" files.img "$id.inotify.watches.1.wd=-3" || ok=1
	return $ok
}
t_inotify_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	with_tmpfs inotify_crafted
}
