#!/usr/bin/env python3
"""locks-sqlite.py DIR: a sqlite writer in WAL mode, inserting rows in a loop.

Each row i is committed on its own; DIR/rows then says how many are in.  When DIR/go
appears it checks that the table holds exactly rows 0..N-1 and that PRAGMA
integrity_check says ok, and writes DIR/result ("0" or "1").
"""
import os
import sqlite3
import sys
import time

d = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("AMBER_T")
if not d:
    sys.exit("usage: locks-sqlite.py DIR")


def put(name, text):
    tmp = os.path.join(d, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(d, name))


db = sqlite3.connect(os.path.join(d, "w.db"), timeout=30)
mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
if mode != "wal":
    sys.exit("SETUP ERROR: journal_mode is %s, not wal" % mode)
db.execute("CREATE TABLE t (i INTEGER PRIMARY KEY, s TEXT)")
db.commit()
n = 0
while not os.path.exists(os.path.join(d, "go")):
    db.execute("INSERT INTO t VALUES (?, ?)", (n, "row %d" % n))
    db.commit()
    n += 1
    put("rows", "%d\n" % n)
    if n == 1:
        put("ready", "%d\n" % os.getpid())
    time.sleep(0.02)
if os.environ.get("AMBER_TEST_SABOTAGE") == "1":
    print("note: sabotage", file=sys.stderr)
    n += 1
ok = True
rows = db.execute("SELECT i, s FROM t ORDER BY i").fetchall()
if rows == [(i, "row %d" % i) for i in range(n)]:
    print("ok: the table holds rows 0..%d" % (n - 1))
else:
    print("FAIL: the table has %d rows, %d were inserted" % (len(rows), n), file=sys.stderr)
    ok = False
check = db.execute("PRAGMA integrity_check").fetchall()
if check == [("ok",)]:
    print("ok: PRAGMA integrity_check is ok")
else:
    print("FAIL: PRAGMA integrity_check: %s" % check, file=sys.stderr)
    ok = False
db.close()
put("result", "0\n" if ok else "1\n")
sys.exit(0 if ok else 1)
