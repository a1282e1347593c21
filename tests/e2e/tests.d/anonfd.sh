# Anonymous-inode files (tests/e2e/progs/anonfd.c): eventfd, epoll, signalfd, timerfd,
# inotify.  Besides the program's own checks, the kernel's view of them (flags, fdinfo)
# must be the same after the restore, less what names the new objects (eventfd ids, inode
# numbers of epoll targets, the time left on timers, unread ticks).
TESTS+=(anonfd anonfd_epoll_stale)

anonfd_state() { # PID
	local p=$1 f fd
	for f in $(ls "/proc/$p/fd" | sort -n); do
		fd=/proc/$p/fdinfo/$f
		case $(readlink "/proc/$p/fd/$f") in
		anon_inode:*) printf '%s ' "$(grep '^flags:' "$fd" | tr -s '\t' ' ')" ;;&
		'anon_inode:[eventfd]') echo "fd $f anon_inode eventfd $(grep -E '^eventfd-(count|semaphore):' "$fd" | tr -s ' \n' '  ')" ;;
		'anon_inode:[eventpoll]') echo "fd $f anon_inode epoll $(awk '/^tfd:/ {print $1, $2, $3, $4, $5, $6}' "$fd" | sort | tr '\n' ';')" ;;
		'anon_inode:[signalfd]') echo "fd $f anon_inode signalfd $(grep '^sigmask:' "$fd" | tr -s '\t' ' ')" ;;
		'anon_inode:[timerfd]') echo "fd $f anon_inode timerfd $(grep -E '^(clockid|settime flags|it_interval):' "$fd" | tr '\n' ';')" ;;
		anon_inode:inotify) echo "fd $f anon_inode inotify $(sed -n 's/^inotify \(wd:[0-9a-f]* ino:[0-9a-f]* sdev:[0-9a-f]* mask:[0-9a-f]*\).*/\1/p' "$fd" | sort | tr '\n' ';')" ;;
		esac
	done
}
anonfd_before() {
	anonfd_state "$PID" >"$W/anonfd.before"
	[ "$(grep -c anon_inode "$W/anonfd.before")" = 10 ] || { fail "expected 10 anon-inode fds, found: $(cat "$W/anonfd.before")"; return 1; }
}
anonfd_after() {
	anonfd_state "$PID" >"$W/anonfd.after"
	diff -u "$W/anonfd.before" "$W/anonfd.after" >"$W/anonfd.diff" && return 0
	fail "fdinfo of the anon-inode fds differs after restore (- before, + after):"
	sed 's/^/    /' "$W/anonfd.diff" >>"$W/log"
	return 1
}
# A second between dump and restore: a CLOCK_REALTIME absolute timer must still expire at
# its wall-clock deadline (the relative ones lose that second, which the program allows).
anonfd_pause() { sleep 1; }
t_anonfd() { cycle -P anonfd_before -B anonfd_pause -A anonfd_after -- "$PROGS/anonfd" "$T"; }

# An epoll item whose fd was closed (the file lives on under another fd) comes back
# under its old fd number (fdinfo must show it as before) and reports the file's events.
anonfd_stale_before() {
	anonfd_state "$PID" >"$W/anonfd.before"
	[ "$(grep -c anon_inode "$W/anonfd.before")" = 11 ] || { fail "expected 11 anon-inode fds, found: $(cat "$W/anonfd.before")"; return 1; }
	grep -q 'epoll tfd: 46 ' "$W/anonfd.before" || { fail "epoll fd 38 does not list tfd 46: $(cat "$W/anonfd.before")"; return 1; }
}
t_anonfd_epoll_stale() { cycle -P anonfd_stale_before -A anonfd_after -- "$PROGS/anonfd" "$T" stale; }
