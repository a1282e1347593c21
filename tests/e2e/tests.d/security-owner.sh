# An image grants nothing its writer could not do.  An unprivileged user's
# process (progs/owner.c, run as nobody) is dumped, its image given to nobody,
# and edited as that user could (tests/tools/imgedit recomputes the hashes) to
# point what restore does on the image's word at root's things.  Root restores
# each edited image: every one must be refused, with the reason, leaving the
# target untouched and no process behind; the unedited image must restore and
# pass the program's own checks (so the refusals are not a broken setup).

IMGEDIT=$ROOT/build/tools/imgedit
NOBODY=65534

TESTS+=(owner_image_restores owner_attacks_refused owner_creds_refused owner_switch_fails)

# Start progs/owner as nobody, dump it, give the image to nobody.
owner_dump() {
	mkdir -p "$T"
	: >"$T/out"
	: >"$T/err"
	chown "$NOBODY:$NOBODY" "$T/out" "$T/err"
	start_prog setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$PROGS/owner" "$T" ||
		return 1
	amber_to "$W/dump.log" 60 dump -t "$PID" -D "$W/img" -v ||
		{ fail "amber dump failed"; attach "$W/dump.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID still there after the dump"; return 1; }
	chown -R "$NOBODY:$NOBODY" "$W/img"
}

uids_are() { [ "$(status_field "$1" Uid)" = "$2	$2	$2	$2" ]; }
file_id() { "$AMBER" show "$W/img" | jq -r --arg p "$1" '.files[] | select(.path == $p) | .id'; }
sock_id() { "$AMBER" show "$W/img" | jq -r '.files[] | select(.kind == "FILE_UNIX_SK" and .unix_sk.name) | .id'; }

# refused NAME PATTERN FILE EDIT...: an edited copy of the image is refused
refused() {
	local name=$1 pat=$2 rc
	shift 2
	rm -rf "$W/$name"
	cp -a "$W/img" "$W/$name"
	"$IMGEDIT" "$W/$name" "$@" 2>>"$W/log" || { fail "$name: imgedit failed"; return 1; }
	amber_to "$W/$name.log" 30 restore -d -D "$W/$name"
	rc=$?
	if [ $rc = 0 ]; then
		fail "$name: root restored nobody's image edited with $(echo "$*" | cut -c1-200)"
		attach "$W/$name.log"
		return 1
	fi
	if ! grep -q -- "$pat" "$W/$name.log"; then
		fail "$name: refused, but not for the reason expected ('$pat')"
		attach "$W/$name.log"
		return 1
	fi
	if ! wait_for 10 is_gone "$PID"; then
		fail "$name: pid $PID exists after the refused restore"
		return 1
	fi
	note "$name: refused ($(grep -m1 error "$W/$name.log"))"
}

t_owner_image_restores() {
	[ $SELFTEST = 1 ] && return 77
	owner_dump || return 1
	amber_to "$W/restore.log" 30 restore -D "$W/img" -v &
	RPID=$!
	wait_for 10 is_alive "$PID" ||
		{ fail "nobody's own image did not restore"; attach "$W/restore.log"; return 1; }
	# The pid exists from the restore's first clone on, as root, until the
	# credentials are set near the end: wait for them rather than race it.
	wait_for 10 uids_are "$PID" "$NOBODY" ||
		{ fail "restored with uids $(status_field "$PID" Uid)"; return 1; }
	[ "$(stat -c %U "$T/sock")" = nobody ] || { fail "the socket file is not nobody's"; return 1; }
	touch "$T/go"
	wait "$RPID" || { fail "the restored program failed its checks"; attach_all; return 1; }
}

t_owner_attacks_refused() {
	[ $SELFTEST = 1 ] && return 77
	local secret=/root/amber-sec-$$ fifo=/run/amber-sec-fifo-$$ sock=/run/amber-sec-$$.sock
	local ghost=/usr/local/bin/amber-sec-ghost-$$ data dir fifo_id ghost_id sk ino before ok=0
	local hex svc

	echo secret >"$secret"
	chmod 600 "$secret"
	mkfifo -m 600 "$fifo"
	"$PY" -c 'import socket,sys,time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(sys.argv[1]); s.listen()
open(sys.argv[1] + ".up", "w").close(); time.sleep(120)' "$sock" &
	svc=$!
	echo "$svc" >>"$W/pids"
	wait_for 10 test -e "$sock.up" || { fail "the root service did not start"; return 1; }
	ino=$(stat -c %i "$sock")
	before=$(sha256sum "$secret" /etc/shadow)

	owner_dump || return 1
	data=$(file_id "$T/data")
	dir=$(file_id "$T/dir")
	fifo_id=$(file_id "$T/fifo")
	ghost_id=$(file_id "$T/ghost")
	sk=$(sock_id)
	[ -n "$data" ] && [ -n "$dir" ] && [ -n "$fifo_id" ] && [ -n "$ghost_id" ] && [ -n "$sk" ] ||
		{ fail "the image lacks one of the owner program's files"; return 1; }
	hex=$(printf '%s' "$sock" | od -An -v -tx1 | tr -d ' \n')00

	refused rw_root_file "may not open" files.img "$data.path=$secret" || ok=1
	refused dotdot_root_file "may not open" files.img "$data.path=/tmp/..$secret" || ok=1
	refused read_shadow "may not open" files.img "$data.path=/etc/shadow" "$data.flags=32768" ||
		ok=1
	refused root_fifo "FIFO" files.img "$fifo_id.path=$fifo" || ok=1
	refused dir_fd_root "may not open" files.img "$dir.path=/root" || ok=1
	refused ghost_setuid_bin "set-user" files.img "$ghost_id.path=$ghost" \
		"$ghost_id.mode=0104755" || ok=1
	refused ghost_setuid_own "set-user" files.img "$ghost_id.mode=0104755" || ok=1
	refused inotify_root "/root" files.img "$(file_id anon_inode:inotify).inotify.watches.0.path=/root" ||
		ok=1
	refused root_socket "$sock" files.img "$sk.unix_sk.name=$hex" || ok=1
	refused nice_minus_20 "nice" "core-$PID.img" "nice=-20" || ok=1
	refused cwd_root "working directory /root" "fs-$PID.img" "cwd=/root" || ok=1
	refused chroot_tmp "chroot" "fs-$PID.img" "root=/tmp" || ok=1
	refused page_zero "mmap_min_addr" "mm-$PID.img" "vmas.0.start=0" "vmas.0.end=4096" || ok=1

	[ ! -e "$ghost" ] || { fail "a file was created in /usr/local/bin"; rm -f "$ghost"; ok=1; }
	[ "$(sha256sum "$secret" /etc/shadow)" = "$before" ] ||
		{ fail "a root-only file changed"; ok=1; }
	[ -S "$sock" ] && [ "$(stat -c %i "$sock")" = "$ino" ] ||
		{ fail "the root service's socket was unlinked or replaced"; ok=1; }
	kill "$svc" 2>/dev/null
	rm -f "$secret" "$fifo" "$sock" "$sock.up"
	return $ok
}

t_owner_creds_refused() {
	[ $SELFTEST = 1 ] && return 77
	local many ok=0

	owner_dump || return 1
	many=$W/many
	seq -s, 1 65537 >"$many"
	refused groups_root "supplementary group 0" "core-$PID.img" "creds.groups=0,6,27,42" ||
		ok=1
	refused gid_root "gid 0" "core-$PID.img" "creds.gid=0" "creds.egid=0" || ok=1
	refused uid_root "may grant" "core-$PID.img" "creds.uid=0" "creds.euid=0" "creds.suid=0" \
		"creds.fsuid=0" || ok=1
	refused caps_prm "permitted capability set" "core-$PID.img" "creds.cap_prm=0x200000" \
		"creds.cap_eff=0x200000" || ok=1
	refused caps_inh "inheritable capability set" "core-$PID.img" "creds.cap_inh=0x200000" ||
		ok=1
	refused caps_amb "ambient capability set" "core-$PID.img" "creds.cap_amb=0x200000" || ok=1
	refused caps_bnd "bounding set" "core-$PID.img" "creds.cap_bnd=0xffffffffffffffff" || ok=1
	refused securebits_keepcaps "KEEP_CAPS" "core-$PID.img" "creds.securebits=0x10" || ok=1
	refused securebits_unknown "does not define" "core-$PID.img" "creds.securebits=0x1000" ||
		ok=1
	# (counted before the record is decoded, image.c; creds.c checks the decoded list too)
	local sk
	sk=$("$AMBER" show "$W/img" | jq -r '[.files[] | select((.unix_sk.rqueue // []) | length > 0) | .id][0]')
	refused msg_creds_root "may not claim them" files.img "$sk.unix_sk.rqueue.0.cred_uid=0" ||
		ok=1
	refused msg_creds_gid "may not claim them" files.img "$sk.unix_sk.rqueue.0.cred_gid=0" ||
		ok=1
	refused too_many_groups "kernel's limit of 65536\|than NGROUPS_MAX (65536)" \
		"core-$PID.img" "creds.groups=@$many" ||
		ok=1
	return $ok
}

# amber cannot take the owner's rights: the restore stops there, nothing is created.
t_owner_switch_fails() {
	[ $SELFTEST = 1 ] && return 77
	owner_dump || return 1
	AMBER_FAULT=setid:1:EPERM amber_to "$W/restore.log" 30 restore -d -D "$W/img" &&
		{ fail "restored although amber could not take the owner's rights"; return 1; }
	grep -q "cannot take the rights of uid $NOBODY" "$W/restore.log" ||
		{ fail "no reason given"; attach "$W/restore.log"; return 1; }
	wait_for 10 is_gone "$PID" || { fail "pid $PID exists after the failed restore"; return 1; }
}
