# What restore reads of an image, done as an attacker would: every test here
# performs the attack and passes only when restore refuses it (or, for the race,
# never yields more than the image owner's rights).  Each also restores the
# untouched image, so that a restore that refuses everything cannot pass.
# Helpers: build/tools/imgedit (edits with valid checksums), imgbloat (oversized
# files), exchange (a rename-exchange loop).
TESTS+=(image_rename_race image_foreign_file_refused image_symlink_refused
	image_hardlink_refused image_writable_refused image_unlisted_refused
	image_files_img_huge image_mm_record_huge)

IMG_TOOLS=$ROOT/build/tools
NOBODY=65534
img_as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }

# img_dump_prog USER PROG: start PROG (as root or nobody), dump it into $W/img.
img_dump_prog() {
	local who=$1 prog=$2
	if [ "$who" = nobody ]; then
		# its stdio too: restore reopens what it had open with its owner's rights
		mkdir -p "$T"
		: >"$T/out"
		: >"$T/err"
		chown $NOBODY:$NOBODY "$T/out" "$T/err"
		start_prog setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$PROGS/$prog" "$T" || return 1
	else
		start_prog "$PROGS/$prog" "$T" || return 1
	fi
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	[ "$who" = root ] || chown -R $NOBODY:$NOBODY "$W/img"
}

# Uid and effective/permitted capabilities of a running pid, as one line.
img_creds_of() { grep -E '^(Uid|CapPrm|CapEff):' "/proc/$1/status" 2>/dev/null | tr -s '\t\n' '  '; }

# Fine if uid is all $2 and no capability is held.
img_creds_are() { # PID UID
	local s
	s=$(img_creds_of "$1")
	[[ $s =~ Uid:\ $2\ $2\ $2\ $2\ CapPrm:\ 0+\ CapEff:\ 0+\ ?$ ]]
}

# img_refused DIR WHAT ERE: amber restore of DIR must fail, saying ERE,
# and leave no process with the image's pid.
img_refused() {
	local dir=$1 what=$2 want=$3 log=$W/refused.log rc
	: >"$log"
	amber_to "$log" 30 restore -d -D "$dir"
	rc=$?
	if [ $rc = 0 ]; then
		fail "$what: amber restore exited 0 (pid $PID: $(img_creds_of "$PID"))"
		kill -9 "$PID" 2>/dev/null
		wait_for 10 is_gone "$PID"
		return 1
	fi
	if ! grep -Eq -- "$want" "$log"; then
		fail "$what: refused (exit $rc) but not with '$want':"
		attach "$log" 5
		return 1
	fi
	wait_for 10 is_gone "$PID" || { fail "$what: pid $PID exists after the refusal"; return 1; }
	note "$what: refused: $(grep -v '^+ ' "$log" | tail -n 1)"
}

# img_restores DIR UID: DIR restores (detached), as UID without capabilities; then killed.
img_restores() {
	local dir=$1 uid=$2 log=$W/ok.log
	: >"$log"
	amber_to "$log" 30 restore -d -D "$dir" ||
		{ fail "the untouched image of $dir does not restore"; attach "$log"; return 1; }
	wait_for 10 is_alive "$PID" || { fail "pid $PID is not running after the restore"; return 1; }
	if [ "$uid" != 0 ] && ! img_creds_are "$PID" "$uid"; then
		fail "restored pid $PID is not uid $uid without capabilities: $(img_creds_of "$PID")"
		return 1
	fi
	kill -9 "$PID"
	wait_for 10 is_gone "$PID" || { fail "pid $PID does not go away"; return 1; }
}

# A root-owned copy of the image's inventory.img (what root leaves after copying
# the image, say) and a core file saying uid 0 with every capability sit in a
# nobody-owned image directory; nobody swaps them with the real ones by name,
# in a loop, while root restores the image, many times.  A process with uid 0
# or any capability must never appear: each restore refuses, or brings back
# nobody's process as nobody.
t_image_rename_race() {
	[ $SELFTEST = 1 ] && return 77
	local npid n=60 i rc ok=0 refused=0 bad=0 xpid log=$W/race.log
	local core full
	# every capability root has here (more would be refused for that alone)
	full=0x$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
	img_dump_prog nobody counter || return 1
	npid=$PID
	core=core-$npid.img
	# the attacker's core: valid checksums, creds of root
	cp -a "$W/img" "$W/evil"
	"$IMG_TOOLS/imgedit" "$W/evil" "$core" creds.uid=0 creds.euid=0 creds.suid=0 \
		creds.fsuid=0 creds.gid=0 creds.egid=0 creds.sgid=0 creds.fsgid=0 \
		creds.cap_prm=$full creds.cap_eff=$full creds.cap_bnd=$full 2>>"$W/log" ||
		{ fail "imgedit failed"; return 1; }
	cp -p "$W/evil/$core" "$W/img/$core.evil"
	cp "$W/img/inventory.img" "$W/img/inventory.root"
	[ "$(stat -c %u "$W/img/inventory.root")" = 0 ] || { fail "inventory.root is not root's"; return 1; }
	img_restores "$W/img" $NOBODY || return 1

	# setpriv itself in the background (not the function's subshell): $! is the loop's
	# pid, which the kill below must stop, or it spins on a CPU for the rest of the run
	setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$IMG_TOOLS/exchange" "$W/img" \
		inventory.img inventory.root "$core" "$core.evil" 2>>"$W/exchange.err" &
	xpid=$!
	echo "$xpid" >>"$W/pids"
	sleep 0.2
	kill -0 "$xpid" 2>/dev/null || { fail "the exchange loop did not run: $(cat "$W/exchange.err")"; return 1; }
	for i in $(seq "$n"); do
		: >"$log"
		amber_to "$log" 30 restore -d -D "$W/img"
		rc=$?
		if [ $rc = 0 ]; then
			wait_for 5 is_alive "$npid"
			if img_creds_are "$npid" $NOBODY; then
				ok=$((ok + 1))
			else
				bad=$((bad + 1))
				note "restore $i: pid $npid came back with $(img_creds_of "$npid")"
			fi
			kill -9 "$npid" 2>/dev/null
		else
			refused=$((refused + 1))
			# a refused restore leaves nothing behind, privileged or not
			if is_alive "$npid"; then
				bad=$((bad + 1))
				note "restore $i: refused (exit $rc), yet pid $npid runs: $(img_creds_of "$npid")"
				kill -9 "$npid" 2>/dev/null
			fi
		fi
		wait_for 10 is_gone "$npid" || { fail "pid $npid does not go away"; return 1; }
	done
	kill "$xpid"
	wait "$xpid" 2>/dev/null
	note "$n restores during the exchange loop: $ok as nobody, $refused refused, $bad with more rights"
	note "refusals said, e.g.: $(grep -hv '^+ ' "$log" | tail -n 1)"
	[ $bad = 0 ] || { fail "$bad restore(s) gave more than nobody's rights"; return 1; }
	# both outcomes must have happened, or the loop did not race anything
	[ $ok -gt 0 ] || { fail "no restore succeeded during the loop"; return 1; }
	[ $refused -gt 0 ] || { fail "no restore was refused: the swaps were never seen"; return 1; }
}

# A file of another user (root) among a nobody-owned image's files is refused;
# chowned back, the image restores as nobody.
t_image_foreign_file_refused() {
	[ $SELFTEST = 1 ] && return 77
	img_dump_prog nobody counter || return 1
	chown 0:0 "$W/img/fds-$PID.img"
	img_refused "$W/img" "root's fds-$PID.img in nobody's image" "belongs to uid 0" || return 1
	chown $NOBODY:$NOBODY "$W/img/fds-$PID.img"
	chown 0:0 "$W/img/inventory.img"
	img_refused "$W/img" "root's inventory.img in nobody's image" "belongs to uid 0" || return 1
	chown $NOBODY:$NOBODY "$W/img/inventory.img"
	img_restores "$W/img" $NOBODY
}

# A symbolic link in place of an image file, even to the right content, is refused.
t_image_symlink_refused() {
	[ $SELFTEST = 1 ] && return 77
	img_dump_prog root counter || return 1
	mv "$W/img/core-$PID.img" "$W/core.real"
	ln -s "$W/core.real" "$W/img/core-$PID.img"
	img_refused "$W/img" "core-$PID.img a symlink" "symbolic link" || return 1
	rm "$W/img/core-$PID.img"
	mv "$W/core.real" "$W/img/inventory.real"
	mv "$W/img/inventory.img" "$W/img/core-$PID.img"
	ln -s inventory.real "$W/img/inventory.img"
	img_refused "$W/img" "inventory.img a symlink" "symbolic link" || return 1
	rm "$W/img/inventory.img"
	mv "$W/img/core-$PID.img" "$W/img/inventory.img"
	mv "$W/img/inventory.real" "$W/img/core-$PID.img"
	img_restores "$W/img" 0
}

# A hard link (st_nlink 2) to an image file is refused: the other name could be anyone's.
t_image_hardlink_refused() {
	[ $SELFTEST = 1 ] && return 77
	img_dump_prog root counter || return 1
	ln "$W/img/pages-$PID.img" "$W/pages.link"
	img_refused "$W/img" "pages-$PID.img with 2 links" "2 links" || return 1
	rm "$W/pages.link"
	img_restores "$W/img" 0
}

# A group- or other-writable file or directory (sticky or not) is refused.
t_image_writable_refused() {
	[ $SELFTEST = 1 ] && return 77
	local m
	img_dump_prog nobody counter || return 1
	chmod g+w "$W/img/mm-$PID.img"
	img_refused "$W/img" "group-writable mm-$PID.img" "writable by group or others" || return 1
	chmod g-w,o+w "$W/img/mm-$PID.img"
	img_refused "$W/img" "other-writable mm-$PID.img" "writable by group or others" || return 1
	chmod go-w "$W/img/mm-$PID.img"
	for m in 0770 0707 1777; do
		chmod $m "$W/img"
		img_refused "$W/img" "image directory mode $m" "directory is writable" || return 1
	done
	chmod 0700 "$W/img"
	img_restores "$W/img" $NOBODY
}

# A file restore reads, present but no longer in the inventory (dropped with a
# fresh inventory, as an attacker would), is refused: every kind of file.
t_image_unlisted_refused() {
	[ $SELFTEST = 1 ] && return 77
	local f name want n=0
	img_dump_prog root mem || return 1
	[ -e "$W/img/ghost-0.img" ] || { fail "the mem image has no ghost file"; return 1; }
	for f in "$W"/img/*.img; do
		name=${f##*/}
		# restore reads neither: the dump's statistics are for amber show alone
		case $name in inventory.img | stats-*.img) continue ;; esac
		rm -rf "$W/bad"
		cp -a "$W/img" "$W/bad"
		"$IMG_TOOLS/imgedit" "$W/bad" --drop "$name" 2>>"$W/log" || { fail "imgedit --drop $name failed"; return 1; }
		[ -e "$W/bad/$name" ] || { fail "$name went with its inventory entry"; return 1; }
		want="$name is not listed"
		# without mm-PID.img (pages-PID.img, core-PID.img) nothing accounts for the mapped
		# files (the page runs, the cgroups): the counts of files.img (pagemap, cgroup.img)
		# are refused first
		case $name in
		mm-* | pages-* | core-*) want="$want|holds [0-9]+ records, more than the image's other files allow" ;;
		esac
		img_refused "$W/bad" "$name not in the inventory" "$want" || return 1
		n=$((n + 1))
	done
	note "$n unlisted files refused"
	[ $n -ge 9 ] || { fail "only $n image files were tried"; return 1; }
	img_restores "$W/img" 0
}

# amber restore of $1, logging to $2; prints "EXIT SECONDS MAXRSS_KIB".
img_measured_restore() {
	"$PY" - "$2" "$AMBER" restore -d -D "$1" <<'EOF'
import resource, subprocess, sys, time
t = time.monotonic()
with open(sys.argv[1], "ab") as log:
    try:
        rc = subprocess.call(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT, timeout=60)
    except subprocess.TimeoutExpired:
        rc = 124
print(rc, "%.2f" % (time.monotonic() - t), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
EOF
}

# img_oversized FILE MODE SIZE WANT: make $W/bad's FILE SIZE bytes (imgbloat MODE),
# with a fresh inventory; restore must refuse it within 10 s, saying WANT, its
# peak RSS under 64 MiB.
img_oversized() {
	local file=$1 mode=$2 size=$3 want=$4 rc secs rss
	rm -rf "$W/bad"
	cp -a "$W/img" "$W/bad"
	"$IMG_TOOLS/imgbloat" "$W/bad" "$file" "$mode" "$size" 2>>"$W/log" &&
		"$IMG_TOOLS/imgedit" "$W/bad" --rehash 2>>"$W/log" || { fail "could not bloat $file"; return 1; }
	note "$file: $(stat -c %s "$W/bad/$file") bytes ($mode)"
	: >"$W/bad.log"
	read -r rc secs rss < <(img_measured_restore "$W/bad" "$W/bad.log")
	note "restore: exit $rc in $secs s, max RSS $rss KiB: $(tail -n 1 "$W/bad.log")"
	[ "$rc" != 0 ] || { fail "the bloated $file was restored"; kill -9 "$PID"; return 1; }
	grep -q -- "$want" "$W/bad.log" || { fail "refused, but not saying '$want'"; attach "$W/bad.log" 5; return 1; }
	[ "${secs%.*}" -lt 10 ] || { fail "refusing took $secs s"; return 1; }
	[ "$rss" -lt 65536 ] || { fail "restore used $rss KiB to refuse it"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID exists after the refusal"; return 1; }
}

# files.img of 120 MiB: copies of its first record, far more open files than
# the process's fds and mappings account for.
t_image_files_img_huge() {
	[ $SELFTEST = 1 ] && return 77
	img_dump_prog root counter || return 1
	img_oversized files.img records $((120 << 20)) "more than the image's other files allow" || return 1
	img_restores "$W/img" 0
}

# One mm record of 60 MiB (its first VMA repeated): more than vm.max_map_count
# mappings could need.
t_image_mm_record_huge() {
	[ $SELFTEST = 1 ] && return 77
	img_dump_prog root counter || return 1
	img_oversized "mm-$PID.img" vmas $((60 << 20)) "vm.max_map_count" || return 1
	img_restores "$W/img" 0
}
