# PostgreSQL 15 (Debian's postgresql-15): a cluster of its own, run as user postgres in
# the work dir (unix socket there, TCP on 127.0.0.1:42000-42099), a table with data;
# amber dumps the postmaster and its children (its System V segment, its shared buffers
# in MAP_SHARED|MAP_ANONYMOUS memory, its dynamic shared memory in /dev/shm, pipes,
# listening sockets), they are gone, amber restores them: the data must be there, a
# write must work, pg_ctl stop must be clean, and a new start must see the write (the
# shared buffers the restored checkpointer wrote out were whole).
TESTS+=(postgres)

PGBIN=/usr/lib/postgresql/15/bin

pg() { # as postgres: COMMAND...
	runuser -u postgres -- "$@"
}
pg_sql() { # SOCKET-DIR-OR-HOST SQL: the rows, unaligned
	pg "$PGBIN/psql" -X -h "$1" -p "$PG_PORT" -U postgres -d postgres -Atc "$2" 2>>"$W/psql.err"
}
pg_tree() { # the postmaster and its children: pid, ppid, command
	local p cmd
	for p in $1 $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
		# a child that is exiting (a psql connection's backend) is not the tree's
		cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
		[ -n "$cmd" ] || continue
		echo "$p $(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) $cmd"
	done
}
pg_shm() { # its System V segment (ipcs: key, id, mode, size, attaches, owners)
	awk -v key="$(printf '%d' "$1")" '$1 == key {print $1, $2, $3, $4, $7, $8, $9, $10, $11}' /proc/sysvipc/shm
}
pg_maps() { # its shared memory mappings
	awk '$6 ~ /^\/(SYSV|dev\/zero|dev\/shm)/ {print $1, $2, $6}' "/proc/$1/maps"
}
pg_cleanup() {
	pg "$PGBIN/pg_ctl" -D "$T/data" -m immediate -w stop >/dev/null 2>&1
	[ -n "${PG_KEY:-}" ] && ipcrm -M "$PG_KEY" 2>/dev/null
	return 0
}

t_postgres() {
	[ $SELFTEST = 1 ] && return 77
	[ -x "$PGBIN/postgres" ] && id postgres >/dev/null 2>&1 ||
		{ note "postgresql-15 is not installed (make setup)"; return 77; }
	PG_PORT=$((42000 + $$ % 100)) PG_KEY=
	local rc pid before after f
	mkdir -p "$T" && chmod 0777 "$T"
	pg "$PGBIN/initdb" -D "$T/data" -A trust -U postgres --no-sync >"$W/initdb.log" 2>&1 ||
		{ fail "initdb failed"; attach "$W/initdb.log"; return 1; }
	pg "$PGBIN/pg_ctl" -D "$T/data" -l "$T/pg.log" -w -t 30 \
		-o "-k $T -p $PG_PORT -c listen_addresses=127.0.0.1" start >"$W/pg_ctl.log" 2>&1 ||
		{ fail "pg_ctl start failed"; attach "$W/pg_ctl.log"; attach "$T/pg.log"; return 1; }
	pid=$(head -n 1 "$T/data/postmaster.pid")
	PG_KEY=$(awk 'NR == 7 {print $1}' "$T/data/postmaster.pid")
	echo "$pid" >>"$W/pids"
	pg_sql 127.0.0.1 "create table t (id int primary key, v text);
		insert into t select g, 'row ' || g from generate_series(1, 1000) g" >/dev/null
	before=$(pg_sql 127.0.0.1 "select count(*), sum(id) from t")
	[ "$before" = "1000|500500" ] || { fail "the table holds '$before'"; attach "$W/psql.err"; pg_cleanup; return 1; }
	pg_tree "$pid" | sort >"$W/tree.before"
	pg_shm "$PG_KEY" >"$W/shm.before"
	pg_maps "$pid" >"$W/maps.before"
	[ "$(lines "$W/shm.before")" = 1 ] && grep -q SYSV "$W/maps.before" ||
		{ fail "no System V segment of key $PG_KEY: $(cat "$W/shm.before" "$W/maps.before")"; pg_cleanup; return 1; }
	note "postmaster $pid, port $PG_PORT, $(lines "$W/tree.before") processes, segment $(cat "$W/shm.before")"

	amber_to "$W/dump.log" 60 dump -t "$pid" -D "$W/img" -v
	rc=$?
	[ $rc = 0 ] || { fail "amber dump exited with $rc"; attach "$W/dump.log"; pg_cleanup; return 1; }
	wait_for 10 eval '! kill -0 '"$pid"' 2>/dev/null' || { fail "the postmaster is still there after the dump"; pg_cleanup; return 1; }
	[ -z "$(pg_shm "$PG_KEY")" ] || { fail "the dump left the segment in place: $(pg_shm "$PG_KEY")"; pg_cleanup; return 1; }
	pg_sql 127.0.0.1 "select 1" >/dev/null && { fail "a server answers on port $PG_PORT after the dump"; pg_cleanup; return 1; }

	amber_to "$W/restore.log" 60 restore -D "$W/img" -d -v
	rc=$?
	[ $rc = 0 ] || { fail "amber restore exited with $rc"; attach "$W/restore.log"; pg_cleanup; return 1; }
	wait_for 10 is_free_running "$pid" || { fail "the postmaster $pid is not back"; pg_cleanup; return 1; }
	rc=0
	pg_tree "$pid" | sort >"$W/tree.after"
	pg_shm "$PG_KEY" >"$W/shm.after"
	pg_maps "$pid" >"$W/maps.after"
	for f in tree shm maps; do
		diff -u "$W/$f.before" "$W/$f.after" >"$W/$f.diff" && continue
		fail "$f differs after the restore (- before, + after):"
		sed 's/^/    /' "$W/$f.diff" >>"$W/log"
		rc=1
	done
	after=$(pg_sql 127.0.0.1 "select count(*), sum(id) from t")
	[ "$after" = "$before" ] || { fail "after the restore the table holds '$after', not '$before'"; rc=1; }
	pg_sql 127.0.0.1 "insert into t values (1001, 'after the restore')" >/dev/null
	after=$(pg_sql 127.0.0.1 "select v from t where id = 1001")
	[ "$after" = "after the restore" ] || { fail "a write after the restore gives '$after'"; rc=1; }
	# the unix socket too (as root: the socket file comes back root's 0755, see README)
	after=$("$PGBIN/psql" -X -h "$T" -p "$PG_PORT" -U postgres -d postgres -Atc "select count(*) from t" 2>>"$W/psql.err")
	[ "$after" = 1001 ] || { fail "through the unix socket in $T the table holds '$after'"; rc=1; }
	pg "$PGBIN/pg_ctl" -D "$T/data" -m fast -w -t 30 stop >>"$W/pg_ctl.log" 2>&1 ||
		{ fail "pg_ctl stop of the restored server failed"; attach "$W/pg_ctl.log"; rc=1; }
	grep -q "database system is shut down" "$T/pg.log" || { fail "the restored server did not shut down cleanly"; rc=1; }
	grep -E "PANIC|TRAP|terminated by signal" "$T/pg.log" >"$W/pg.bad" && { fail "the server log reports: $(head -n 3 "$W/pg.bad")"; rc=1; }
	[ -z "$(pg_shm "$PG_KEY")" ] || { fail "the stopped server left its segment: $(pg_shm "$PG_KEY")"; rc=1; }
	# what the restored server wrote out at its shutdown checkpoint is sound
	pg "$PGBIN/pg_ctl" -D "$T/data" -l "$T/pg.log" -w -t 30 \
		-o "-k $T -p $PG_PORT -c listen_addresses=127.0.0.1" start >>"$W/pg_ctl.log" 2>&1 ||
		{ fail "pg_ctl start after the restored server's stop failed"; attach "$T/pg.log"; pg_cleanup; return 1; }
	after=$(pg_sql 127.0.0.1 "select count(*), sum(id) from t")
	[ "$after" = "1001|501501" ] || { fail "a fresh start sees '$after', not 1001|501501"; rc=1; }
	pg_cleanup
	[ $rc = 0 ] || { attach "$W/restore.log"; attach "$T/pg.log" 40; attach "$W/psql.err"; }
	return $rc
}
