# The threads' cores in threads-PID.img (src/threads.c): a file that holds fewer
# threads than core-PID.img lists, more, or a record that is not the thread
# listed there is refused before anything is made; the unedited image restores.
TESTS+=(threads_image_refused)
t_threads_image_refused() {
	[ $SELFTEST = 1 ] && return 77
	local ok=0 tids n
	start_prog "$PROGS/threads" "$T" || return 1
	dump_and_gone || return 1
	n=$("$IMG_TOOLS/imgedit" "$W/img" "threads-$PID.img" -n)
	tids=$("$AMBER" show "$W/img" | jq -r '.tasks[0].core.threads | join(",")')
	[ "$n" -ge 2 ] && [ "$(tr ',' '\n' <<<"$tids" | wc -l)" = "$n" ] ||
		{ fail "threads-$PID.img holds $n records for threads $tids"; return 1; }
	refused thr_more "holds $n threads of the $((n + 1)) core-$PID.img lists" "core-$PID.img" "threads=$tids,$((PID + 7777))" || ok=1
	refused thr_fewer "holds more threads than core-$PID.img lists" "core-$PID.img" "threads=${tids%,*}" || ok=1
	refused thr_other "record 1 does not describe thread" "threads-$PID.img" "0.pid=$((PID + 7777))" || ok=1
	# a name longer than the scratch area's data half ran into amber's executor there
	head -c 600000 /dev/zero | tr '\0' A >"$W/longname"
	refused thr_name "name is 600000 bytes long" "threads-$PID.img" "0.comm=@$W/longname" || ok=1
	[ $ok = 0 ] || return 1
	unedited_restores
}

# Credentials are per thread (src/creds.c): two threads with ids, groups and
# capabilities of their own beside a root leader (progs/threadcreds.c).
TESTS+=(thread_creds)
t_thread_creds() { cycle -f "caps" -- "$PROGS/threadcreds" "$T"; }
