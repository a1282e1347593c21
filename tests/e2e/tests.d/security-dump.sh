# The dump side of amber's security: what -D may be, and what amber may freeze.
#
# A dump writes only files it creates: -D is made by amber (0700), or is an
# existing directory (not a link) of the dumping user, not writable by group or
# others, and empty; image files are created O_EXCL|O_NOFOLLOW in it.  Each
# attack below is performed and passes only when it is refused, with the path
# and the fix named, the planted targets untouched and the process unharmed.
#
# A dump of a tree amber cannot fully see (a member traced by someone else, one
# amber's user may not ptrace, one that dies mid-dump) fails naming that pid,
# and every other process runs on; amber's own ancestors and pid 1 are refused
# before anything is frozen.
TESTS+=(dump_dir_planted_symlinks dump_dir_planted_hardlinks dump_dir_writable_by_others
	dump_dir_other_owner dump_dir_not_empty dump_dir_symlink dump_dir_fresh
	dump_dir_failed_dump_leaves_nothing
	dump_member_traced dump_member_unptraceable dump_member_exits dump_ancestors_refused)

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

# ---- trees amber cannot fully see (tests/e2e/progs/members.c: a root and three
# counting children, KIDS)

KIDS=()
members_start() { # [ARGS for members...]; PREFIX: command before it (e.g. AS_NOBODY)
	start_prog ${PREFIX[@]+"${PREFIX[@]}"} "$PROGS/members" "$T" "$@" || return 1
	read -r -d '' -a KIDS <"$T/children"
	[ ${#KIDS[@]} = 3 ] || { fail "members has ${#KIDS[@]} children: ${KIDS[*]}"; return 1; }
	note "members: root $PID, children ${KIDS[*]}"
}
grown() { [ "$(lines "$1")" -ge "$2" ]; }
counting() { # PID: its count log grows
	local log=$T/count-$1.log
	wait_for 5 grown "$log" $(($(lines "$log") + 3))
}
running() { # PID: alive and not stopped (traced or not)
	local s
	s=$(proc_state "$1")
	[ -n "$s" ] && [ "$s" != t ] && [ "$s" != T ] && [ "$s" != Z ] && [ "$s" != X ]
}
# unharmed WHAT PID [TRACER]: runs (not stopped), traced by TRACER only (none), counting
unharmed() {
	wait_for 5 running "$2" ||
		{ fail "after $1 pid $2 is not running: state '$(proc_state "$2")'"; return 1; }
	[ "$(status_field "$2" TracerPid)" = "${3:-0}" ] ||
		{ fail "after $1 pid $2 is traced by '$(status_field "$2" TracerPid)', want ${3:-0}"; return 1; }
	counting "$2" || { fail "after $1 pid $2 no longer counts"; return 1; }
}
# members_finish KILLED: go; every process passes its checks, every child exited 0
# but KILLED (if given), which died of SIGKILL
members_finish() {
	local k want got rc
	touch "$T/go"
	wait_for 30 exited "$PID"
	wait "$PID"
	rc=$?
	[ $rc = 0 ] || { fail "members exited $rc: its checks failed"; attach "$T/err"; return 1; }
	for k in "${KIDS[@]}"; do
		want="exit 0"
		[ "$k" = "${1:-}" ] && want="signal 9"
		got=$(cat "$T/status-$k" 2>/dev/null)
		[ "$got" = "$want" ] || { fail "child $k ended with '$got', want '$want'"; attach "$T/err"; return 1; }
	done
}
# the dump failed naming PATTERN (the pid), no image is left, and nothing was killed
dump_failed() { # RC PATTERN DIR
	[ "$1" != 0 ] || { fail "the dump succeeded"; attach "$W/dump.log"; return 1; }
	grep -q -- "$2" "$W/dump.log" || { fail "the failure does not say '$2'"; attach "$W/dump.log"; return 1; }
	[ ! -e "$3" ] || { fail "the failed dump left $3: $(ls -A "$3" | tr '\n' ' ')"; return 1; }
	note "amber said: $(grep -- "$2" "$W/dump.log" | head -n 1)"
}

# A member is traced by another tracer (as under gdb or strace): refused naming it
# and its tracer; the tree, frozen up to it, runs on, and that member is still
# traced by its tracer only.
t_dump_member_traced() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/members" "$T"; return; }
	local tracee tracer p
	members_start || return 1
	tracee=${KIDS[1]}
	"$PROGS/tracer" "$T" "$tracee" 2>>"$T/err" &
	tracer=$!
	echo "$tracer" >>"$W/pids"
	wait_for 5 test -e "$T/traced" || { fail "the tracer did not seize $tracee"; attach "$T/err"; return 1; }
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v
	dump_failed $? "pid $tracee is already traced by pid $tracer" "$W/img" || return 1
	for p in "$PID" "${KIDS[@]}"; do
		if [ "$p" = "$tracee" ]; then
			unharmed "the refused dump" "$p" "$tracer" || return 1
		else
			unharmed "the refused dump" "$p" || return 1
		fi
	done
	touch "$T/untrace"
	wait "$tracer"
	unharmed "its tracer left" "$tracee" || return 1
	members_finish
}

# amber as nobody over nobody's tree, one member of which is not dumpable (only
# CAP_SYS_PTRACE may trace it): the dump fails naming it, and all run on untraced.
t_dump_member_unptraceable() {
	[ $SELFTEST = 1 ] && return 77
	local p rc PREFIX=("${AS_NOBODY[@]}")
	members_start nodump=2 || return 1
	# (the files of a process that is not dumpable are root's)
	[ "$(stat -c %u "/proc/${KIDS[1]}/mem")" = 0 ] || { fail "child ${KIDS[1]} is dumpable"; return 1; }
	echo "+ (as uid $NOBODY) amber dump -t $PID -D $T/img -v" >>"$W/dump.log"
	as_nobody timeout -k 5 60 "$AMBER" dump -t "$PID" -D "$T/img" -v >>"$W/dump.log" 2>&1
	rc=$?
	dump_failed $rc "cannot ptrace pid ${KIDS[1]}: permission denied" "$T/img" || return 1
	for p in "$PID" "${KIDS[@]}"; do
		unharmed "the failed dump" "$p" || return 1
	done
	members_finish
}

# A member dies in the middle of the dump, after the tree was frozen and the
# processes before it dumped (AMBER_FAULT=ptrace:5@PID:kill: its 5th ptrace
# request, the first of its own dump, meets it SIGKILLed): the dump fails naming
# it, and the others run on.
t_dump_member_exits() {
	[ $SELFTEST = 1 ] && return 77
	local victim p rc
	members_start || return 1
	victim=${KIDS[1]}
	echo "+ AMBER_FAULT=ptrace:5@$victim:kill" >>"$W/dump.log"
	AMBER_FAULT="ptrace:5@$victim:kill" amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v -v
	rc=$?
	grep -q "fault injection: ptrace call 5 on pid $victim" "$W/dump.log" ||
		{ fail "the fault did not fire"; attach "$W/dump.log"; return 1; }
	dump_failed $rc "pid $victim exited during the dump" "$W/img" || return 1
	grep -q "dumping registers of pid ${KIDS[0]}" "$W/dump.log" ||
		{ fail "the member died before the dump was under way"; attach "$W/dump.log"; return 1; }
	for p in "$PID" "${KIDS[@]}"; do
		[ "$p" = "$victim" ] && continue
		unharmed "the failed dump" "$p" || return 1
	done
	members_finish "$victim"
}

# pid 1, amber itself, its parent, its grandparent and an ancestor further up (the
# test runner's shell) are refused with the reason, before anything is frozen or
# created.  (Every ptrace request fails too, so that a missing check could still
# not freeze this machine's processes: the test then fails on the missing reason.)
t_dump_ancestors_refused() {
	[ $SELFTEST = 1 ] && return 77
	local dir=$W/img what pat target rc bad=0 runner=$$ gp=$BASHPID
	export AMBER_FAULT='ptrace:*:EPERM'
	for what in init self parent grandparent ancestor; do
		: >"$W/$what.log"
		case $what in
		init)
			pat="pid 1 (.*) is init"
			amber_to "$W/$what.log" 30 dump -t 1 -D "$dir" -R -v
			;;
		self) # sh's pid becomes amber's
			pat="is amber itself"
			timeout -k 5 30 sh -c 'echo "+ amber dump -t $$ (itself)"; exec "$0" dump -t $$ -D "$1" -R -v' \
				"$AMBER" "$dir" >>"$W/$what.log" 2>&1
			;;
		parent) # sh forks amber (a command that is not its last)
			pat="is amber's parent"
			timeout -k 5 30 sh -c 'echo "+ amber dump -t $$ (its parent)"; "$0" dump -t $$ -D "$1" -R -v; exit $?' \
				"$AMBER" "$dir" >>"$W/$what.log" 2>&1
			;;
		grandparent) # this shell forks timeout, which forks amber
			pat="pid $gp (.*) is amber's grandparent"
			amber_to "$W/$what.log" 30 dump -t "$gp" -D "$dir" -R -v
			;;
		ancestor)
			pat="pid $runner (.*) is an ancestor of amber (3 levels up)"
			amber_to "$W/$what.log" 30 dump -t "$runner" -D "$dir" -R -v
			;;
		esac
		rc=$?
		note "$what: exit $rc: $(grep -v '^+ ' "$W/$what.log" | tail -n 1)"
		if [ $rc = 0 ] || ! grep -q "$pat" "$W/$what.log"; then
			fail "dumping $what was not refused with '$pat'"
			attach "$W/$what.log"
			bad=1
		fi
		if grep -q "dumping \|fault injection\|cannot ptrace" "$W/$what.log"; then
			fail "amber went on to freeze $what"
			bad=1
		fi
		[ ! -e "$dir" ] || { fail "amber created $dir before refusing $what"; rm -rf "$dir"; bad=1; }
	done
	unset AMBER_FAULT
	for target in 1 "$runner" "$gp"; do
		[ "$(status_field "$target" TracerPid)" = 0 ] || { fail "pid $target is left traced"; bad=1; }
	done
	[ $bad = 0 ]
}
