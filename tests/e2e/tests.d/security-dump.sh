# The dump side of amber's security: what -D may be, and what amber may freeze.
#
# A dump writes only files it creates: -D is made by amber (0700), or is an
# existing directory (not a link) of the dumping user, not writable by group or
# others, and empty; image files are created O_EXCL|O_NOFOLLOW in it.  Each
# attack below is performed and passes only when it is refused, with the path
# and the fix named, the planted targets untouched and the process unharmed.
TESTS+=(dump_dir_planted_symlinks dump_dir_planted_hardlinks dump_dir_writable_by_others
	dump_dir_other_owner dump_dir_not_empty dump_dir_symlink dump_dir_fresh
	dump_dir_failed_dump_leaves_nothing)

NOBODY=65534
AS_NOBODY=(setpriv "--reuid=$NOBODY" "--regid=$NOBODY" --clear-groups)
as_nobody() { "${AS_NOBODY[@]}" "$@"; }

# refused_dump_dir DIR PATTERN: root's dump of $PID into DIR fails, saying PATTERN and DIR
refused_dump_dir() {
	local dir=$1 pat=$2 rc
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$dir" -v
	rc=$?
	[ $rc != 0 ] || { fail "root's dump into $dir succeeded"; attach "$W/dump.log"; return 1; }
	grep -v '^+ ' "$W/dump.log" | tail -n 1 | grep -qF -- "$dir" &&
		grep -q -- "$pat" "$W/dump.log" ||
		{ fail "the refusal of $dir does not name it and say '$pat'"; attach "$W/dump.log"; return 1; }
	note "refused $dir: $(grep -- "$pat" "$W/dump.log" | tail -n 1)"
}

# The names a dump of $PID writes (a dump -R into a fresh directory), and the ones
# written only on the way or by other trees (inventory.img.tmp, ghost files).
image_names() {
	amber_to "$W/probe.log" 60 dump -t "$PID" -D "$W/probe" -R ||
		{ fail "the probing dump -R failed"; attach "$W/probe.log"; return 1; }
	{
		ls "$W/probe"
		printf '%s\n' inventory.img.tmp ghost-0.img ghost-1.img
	} | sort -u >"$W/names"
	rm -rf "$W/probe"
	note "a dump writes: $(tr '\n' ' ' <"$W/names")"
}

# root-only files, one per image name, with known contents and an old mtime
make_secrets() {
	local n
	mkdir -m 0700 "$W/secret"
	while read -r n; do
		echo "root-only $n" >"$W/secret/$n"
		chmod 0600 "$W/secret/$n"
		touch -d '2001-02-03 04:05:06' "$W/secret/$n"
	done <"$W/names"
}
secrets_state() { # name, contents hash, size, mtime, link count, inode of every secret
	(cd "$W/secret" && for n in *; do
		echo "$n $(sha256sum <"$n" | cut -c1-16) $(stat -c '%s %Y %h %i' "$n")"
	done)
}
secrets_untouched() {
	secrets_state >"$W/secrets.after"
	diff -u "$W/secrets.before" "$W/secrets.after" >"$W/secrets.diff" && return 0
	fail "the root-only targets changed (- before, + after):"
	sed 's/^/    /' "$W/secrets.diff" >>"$W/log"
	return 1
}

# (a) links named like every image file, planted by nobody in nobody's directory,
# pointing at root-only files: root's dump into it is refused, nothing is written
# through them, and the links are still there as planted.
t_dump_dir_planted_symlinks() {
	[ $SELFTEST = 1 ] && return 77
	local n bad=0
	start_prog "$PROGS/counter" "$T" || return 1
	image_names || return 1
	make_secrets
	mkdir -m 0755 "$W/trap"
	chown $NOBODY:$NOBODY "$W/trap"
	while read -r n; do
		as_nobody ln -s "$W/secret/$n" "$W/trap/$n" || { fail "nobody could not plant $n"; return 1; }
	done <"$W/names"
	secrets_state >"$W/secrets.before"
	refused_dump_dir "$W/trap" "belongs to uid $NOBODY" || bad=1
	secrets_untouched || bad=1
	[ $bad = 0 ] || return 1
	while read -r n; do
		[ -L "$W/trap/$n" ] && [ "$(readlink "$W/trap/$n")" = "$W/secret/$n" ] ||
			{ fail "the planted link $n was replaced or removed"; bad=1; }
	done <"$W/names"
	[ "$(ls "$W/trap" | wc -l)" = "$(wc -l <"$W/names")" ] ||
		{ fail "amber wrote into the trap: $(ls "$W/trap" | tr '\n' ' ')"; bad=1; }
	[ $bad = 0 ] && note "$(wc -l <"$W/names") planted links, none followed"
	runs_on "the refused dump" 15 && [ $bad = 0 ]
}

# (g) hard links to the root-only files, named like image files: in nobody's
# directory and in one of root's own (0700, as if root had made it), the dump is
# refused and the files behind the links are not written.
t_dump_dir_planted_hardlinks() {
	[ $SELFTEST = 1 ] && return 77
	local n d bad=0
	start_prog "$PROGS/counter" "$T" || return 1
	image_names || return 1
	make_secrets
	mkdir -m 0755 "$W/trap"
	mkdir -m 0700 "$W/own"
	# (root plants them: fs.protected_hardlinks keeps nobody from linking root's files)
	while read -r n; do
		ln "$W/secret/$n" "$W/trap/$n" && ln "$W/secret/$n" "$W/own/$n" ||
			{ fail "cannot plant the hard link $n"; return 1; }
	done <"$W/names"
	chown $NOBODY:$NOBODY "$W/trap"
	secrets_state >"$W/secrets.before"
	refused_dump_dir "$W/trap" "belongs to uid $NOBODY" || bad=1
	[ $bad = 0 ] && { refused_dump_dir "$W/own" "is not empty" || bad=1; }
	secrets_untouched || bad=1
	[ $bad = 0 ] || return 1
	for d in trap own; do
		[ "$(ls "$W/$d" | wc -l)" = "$(wc -l <"$W/names")" ] ||
			{ fail "amber changed $d: $(ls "$W/$d" | tr '\n' ' ')"; bad=1; }
	done
	runs_on "the refused dumps" 15 && [ $bad = 0 ]
}

# (b) a directory others (or the group) may write to: they could plant links in it
t_dump_dir_writable_by_others() {
	[ $SELFTEST = 1 ] && return 77
	local m
	start_prog "$PROGS/counter" "$T" || return 1
	for m in 0777 1777 0770 0720; do
		mkdir -m "$m" "$W/d$m"
		refused_dump_dir "$W/d$m" "is writable by .*chmod go-w" || return 1
		[ -z "$(ls -A "$W/d$m")" ] || { fail "amber wrote into the mode $m directory"; return 1; }
	done
	runs_on "the refused dumps" 15
}

# (c) an empty directory that is another user's, even one only that user can write
t_dump_dir_other_owner() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/counter" "$T" || return 1
	mkdir -m 0700 "$W/theirs"
	chown $NOBODY:$NOBODY "$W/theirs"
	refused_dump_dir "$W/theirs" "belongs to uid $NOBODY, not to uid 0" || return 1
	[ -z "$(ls -A "$W/theirs")" ] || { fail "amber wrote into nobody's directory"; return 1; }
	runs_on "the refused dump" 15
}

# (d) a directory that holds something (here a previous image): refused, saying to
# remove it or take a new path, and the old image is left as it was; once removed
# as told, the dump goes through.
t_dump_dir_not_empty() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/counter" "$T" || return 1
	amber_to "$W/dump1.log" 60 dump -t "$PID" -D "$W/img" -R ||
		{ fail "the first dump -R failed"; attach "$W/dump1.log"; return 1; }
	(cd "$W/img" && sha256sum -- * >"$W/img.sums")
	refused_dump_dir "$W/img" "is not empty .*rm -r $W/img.* or give a new path" || return 1
	(cd "$W/img" && sha256sum -c --quiet "$W/img.sums" >"$W/sums.log" 2>&1) &&
		[ "$(ls "$W/img" | wc -l)" = "$(wc -l <"$W/img.sums")" ] ||
		{ fail "the refused re-dump changed the old image"; attach "$W/sums.log"; return 1; }
	rm -r "$W/img"
	amber_to "$W/dump2.log" 60 dump -t "$PID" -D "$W/img" -R ||
		{ fail "the dump into the removed (now new) path failed"; attach "$W/dump2.log"; return 1; }
	[ -e "$W/img/inventory.img" ] || { fail "no inventory.img after the second dump"; return 1; }
	runs_on "dump -R" 15
}

# (e) -D naming a symbolic link is refused, even to an empty directory of root's
# own ("link/" too), and so is a dangling one: whoever can change a link would
# choose where the image goes.
t_dump_dir_symlink() {
	[ $SELFTEST = 1 ] && return 77
	start_prog "$PROGS/counter" "$T" || return 1
	mkdir -m 0700 "$W/real"
	ln -s "$W/real" "$W/link"
	ln -s "$W/nowhere" "$W/dangling"
	refused_dump_dir "$W/link" "is a symbolic link" || return 1
	refused_dump_dir "$W/link/" "is a symbolic link" || return 1
	refused_dump_dir "$W/dangling" "is a symbolic link" || return 1
	[ -z "$(ls -A "$W/real")" ] || { fail "amber wrote through the link into $W/real"; return 1; }
	[ ! -e "$W/nowhere" ] || { fail "amber created the dangling link's target"; return 1; }
	runs_on "the refused dumps" 15
}

# (f) a path that does not exist: amber makes it, 0700 and root's whatever the
# umask, and the image restores.
t_dump_dir_fresh() {
	[ $SELFTEST = 1 ] && return 77
	local exe rc mode
	start_prog "$PROGS/counter" "$T" || return 1
	exe=$(readlink "/proc/$PID/exe")
	(umask 000 && amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/new/" -v) ||
		{ fail "the dump into a new path failed"; attach "$W/dump.log"; return 1; }
	mode=$(stat -c '%a %u %F' "$W/new")
	[ "$mode" = "700 0 directory" ] || { fail "the new image directory is '$mode', not '700 0 directory'"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	(exec timeout -k 5 60 "$AMBER" restore -D "$W/new" >>"$W/restore.log" 2>&1) &
	RPID=$!
	echo "$RPID" >>"$W/pids"
	wait_for 20 is_restored "$PID" "$exe" || { fail "pid $PID not restored"; attach_all; return 1; }
	touch "$T/go"
	wait "$RPID"
	rc=$?
	[ $rc = 0 ] || { fail "the restored counter exited $rc"; attach_all; return 1; }
}

# A failed dump removes what it wrote (and the directory if amber made it), so that
# the same -D works for the next attempt.
t_dump_dir_failed_dump_leaves_nothing() {
	[ $SELFTEST = 1 ] && return 77
	local rc d
	start_prog "$PROGS/counter" "$T" || return 1
	mkdir -m 0700 "$W/own"
	for d in "$W/img" "$W/own"; do
		echo "+ AMBER_FAULT=rename:*:EIO" >>"$W/dump.log"
		AMBER_FAULT='rename:*:EIO' amber_to "$W/dump.log" 60 dump -t "$PID" -D "$d" -v -v
		rc=$?
		[ $rc != 0 ] || { fail "the dump into $d succeeded despite the fault"; return 1; }
		grep -q "fault injection" "$W/dump.log" || { fail "the fault did not fire"; attach "$W/dump.log"; return 1; }
	done
	[ ! -e "$W/img" ] || { fail "the failed dump left the directory it made: $(ls -A "$W/img" | tr '\n' ' ')"; return 1; }
	[ -d "$W/own" ] && [ -z "$(ls -A "$W/own")" ] ||
		{ fail "the failed dump left files in $W/own: $(ls -A "$W/own" | tr '\n' ' ')"; return 1; }
	amber_to "$W/dump2.log" 60 dump -t "$PID" -D "$W/own" -R ||
		{ fail "a second dump into $W/own failed"; attach "$W/dump2.log"; return 1; }
	[ -e "$W/own/inventory.img" ] || { fail "no inventory.img after the second dump"; return 1; }
	runs_on "the failed dumps and dump -R" 15
}
