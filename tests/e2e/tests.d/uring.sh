# io_uring (progs/uring.c): idle rings, one plain with CQEs not reaped (one sent by
# another ring's MSG_RING), SQEs queued, buffers and an empty file table
# registered and an idle io-wq worker, one
# SINGLE_ISSUER | DEFER_TASKRUN with big SQEs and CQEs and a dropped SQE, one
# without an SQ array with big SQEs; after
# restore the same positions (the program compares its fdinfo counters and
# registered buffers), CQEs, queued SQEs, flags, and both rings work.
TESTS+=(uring uring_leave_running uring_busy_refused uring_image_refused uring_worker_refused uring_files_refused)
TESTS+=(uring_eventfd_refused uring_provide_refused uring_ringfd_refused uring_sqpoll_refused uring_nosqarray_refused uring_shared_refused)
TESTS+=(uring_sockets uring_sockclosed_refused uring_regfiles_refused)
uring_maps() { grep 'anon_inode:\[io_uring\]' "/proc/$PID/maps" | awk '{print $1, $2, $3}'; }
uring_maps_before() { uring_maps >"$W/uring.maps"; }
uring_maps_after() {
	uring_maps | diff -u "$W/uring.maps" - >"$W/uring.diff" && return 0
	fail "the rings' mappings differ after restore (- before, + after):"
	sed 's/^/    /' "$W/uring.diff" >>"$W/log"
	return 1
}
t_uring() { cycle -P uring_maps_before -A uring_maps_after -- "$PROGS/uring" "$T"; }

# Sockets in a ring's registered-file table (a unix stream end, a UDP socket,
# two empty slots): after restore each slot holds the restored socket at the
# fd that held it, and a send and a receive through the slots work.
t_uring_sockets() { cycle -- "$PROGS/uring" "$T" sockets; }

# A dump that leaves the program running (-R) moves the positions the kernel
# only reads while it probes the rings, and puts them back: the program's own
# checks (fdinfo counters, CQEs, queued SQEs) pass on the original rings.
t_uring_leave_running() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/uring" "$T" || return 1
	dump_leave_running "$W/dump.log" "$W/img" || return 1
	grep -q "io_uring 64/128, flags 0x10400" "$W/dump.log" ||
		{ fail "the dump did not probe ring C's flags"; attach "$W/dump.log"; return 1; }
	runs_on "the dump with -R"
}

# A read in flight on an empty pipe: the dump is refused naming the ring and
# why, and the program runs on (its read completes once the pipe has data).
t_uring_busy_refused() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/uring" "$T" busy; return; }
	start_prog "$PROGS/uring" "$T" busy || return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v &&
		{ fail "amber dump succeeded with an io_uring read in flight"; return 1; }
	grep -q "pid $PID: fd 40 is an io_uring with 1 request(s) waiting" "$W/dump.log" ||
		{ fail "the refusal does not name fd 40 and its request in flight"; attach "$W/dump.log"; return 1; }
	runs_on "the refused dump"
}

# Crafted ring records are refused before anything is made; the unedited image
# restores.
t_uring_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 id ida k hex
	start_prog "$PROGS/uring" "$T" || return 1
	dump_and_gone || return 1
	id=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.io_uring)][0].id')
	[ -n "$id" ] && [ "$id" != null ] || { fail "no io_uring in the image"; return 1; }
	ida=$("$AMBER" show "$W/img" | jq -r '[.files[] | select(.io_uring.files)][0].id')
	[ -n "$ida" ] && [ "$ida" != null ] || { fail "no io_uring with registrations in the image"; return 1; }
	k=$("$AMBER" show "$W/img" | jq '.tasks[0].mm.vmas | map(.kind == "VMA_IO_URING") | index(true)')
	[ "$k" != null ] || { fail "no io_uring mapping in the image"; return 1; }
	local bad="is not a ring amber dumps"
	refused ur_sq "$bad" files.img "$id.io_uring.sq_entries=6" || ok=1
	refused ur_cq "$bad" files.img "$id.io_uring.cq_entries=4" || ok=1
	refused ur_flags "$bad" files.img "$id.io_uring.flags=0x2" || ok=1
	refused ur_head "$bad" files.img "$id.io_uring.sq_head=4000000000" || ok=1
	refused ur_tail "$bad" files.img "$id.io_uring.cq_tail=5" || ok=1
	refused ur_rings "$bad" files.img "$id.io_uring.rings=00" || ok=1
	refused ur_sqes "$bad" files.img "$id.io_uring.sqes=$(printf '%0200d' 0)" || ok=1
	refused ur_files "$bad" files.img "$ida.io_uring.files=0" || ok=1
	refused ur_nfilefds "$bad" files.img "$ida.io_uring.file_fds=-1,-1" || ok=1
	refused ur_filefds "registers fd 40 in slot 1, which is no fd of pid $PID placed before its rings" files.img \
		"$ida.io_uring.file_fds=-1,40,-1" || ok=1
	refused ur_nbufs "$bad" files.img "$ida.io_uring.buf_len=8192,100" || ok=1
	refused ur_buflen "$bad" files.img "$ida.io_uring.buf_len=8192,5,100" || ok=1
	refused ur_bufaddr "$bad" files.img "$ida.io_uring.buf_addr=0,0,140737488351232" || ok=1
	# positions in the rings' bytes that are not a ring's: the SQ tail 100 ahead
	hex=$("$AMBER" show "$W/img" | jq -r ".files[] | select(.id == $id) | .io_uring.rings")
	refused ur_sqtail "$bad" files.img "$id.io_uring.rings=$(echo "$hex" | head -c 8)ffffffff$(echo "$hex" | tail -c +17)" || ok=1
	refused ur_vma_off "not an io_uring's of the process" "mm-$PID.img" "vmas.$k.pgoff=4096" || ok=1
	refused ur_vma_file "not an io_uring's of the process" "mm-$PID.img" \
		"vmas.$k.file_id=$("$AMBER" show "$W/img" | jq '[.files[] | select(.io_uring | not)][0].id')" || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores
}

# What amber does not restore is refused at dump, naming the ring and what; the
# program runs on and its ring works (progs/uring.c's modes).
uring_refused() { # MODE PATTERN (@PID@: the program's pid)
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/uring" "$T" "$1"; return; }
	start_prog "$PROGS/uring" "$T" "$1" || return 1
	set -- "$1" "${2//@PID@/$PID}"
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	dump_refused $? "$2"
}
t_uring_worker_refused() {
	uring_refused worker "pid @PID@: fd 40 is an io_uring and thread [0-9]* is an io_uring worker at work (iou-wrk-@PID@"
}
t_uring_files_refused() {
	uring_refused files "pid @PID@: fd 40 is an io_uring with a file registered in slot 0 (pipe:\[[0-9]*\]); fdinfo names it only"
}
# A regular file, a pipe's two ends and a socket registered: which open file a
# slot holds only kcmp()'s KCMP_IOURING_FILE tells (amber's kernel series;
# the kernel rig restores this program on it).  Here the dump is refused,
# naming the first slot's file and the kernel support.
t_uring_regfiles_refused() {
	uring_refused regfiles "pid @PID@: fd 40 is an io_uring with a file registered in slot 0 ([^)]*/a-directory-whose-name-alone-is-longer-than-sixty-four-characters-long/data.txt); fdinfo names it only.*KCMP_IOURING_FILE"
}
t_uring_sockclosed_refused() {
	uring_refused sockclosed "pid @PID@: fd 40 is an io_uring with socket:\[[0-9]*\] registered in slot 1, which no fd of the process holds"
}
t_uring_provide_refused() {
	uring_refused provide "pid @PID@: fd 40 is an io_uring with buffers provided by IORING_OP_PROVIDE_BUFFERS (group 0)"
}
t_uring_ringfd_refused() {
	uring_refused ringfd "pid @PID@ has an io_uring registered by index 5 (IORING_REGISTER_RING_FDS"
}
t_uring_eventfd_refused() { uring_refused eventfd "pid @PID@: fd 40 is an io_uring with an eventfd registered"; }
t_uring_sqpoll_refused() { uring_refused sqpoll "pid @PID@: fd 40 is an io_uring with a polling thread (IORING_SETUP_SQPOLL"; }
t_uring_nosqarray_refused() {
	uring_refused nosqarray "pid @PID@: fd 40 is an io_uring without an SQ array (IORING_SETUP_NO_SQARRAY) of 8 SQEs; amber cannot tell"
}
t_uring_shared_refused() { uring_refused shared "fd 40 (io_uring) is shared with pid"; }
