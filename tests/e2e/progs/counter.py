#!/usr/bin/env python3
"""counter.py DIR: the counter program in Python.

Writes "count N" lines to DIR/count.log every ~100 ms through one unbuffered file (no
O_APPEND); when DIR/go appears it checks that the log holds count 0..N-1 and exits 0 only
if it does.
"""
import os
import sys
import time

d = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("AMBER_T")
if not d:
    sys.exit("usage: counter.py DIR")
log = open(os.path.join(d, "count.log"), "wb", buffering=0)
n = 0
state = {"squares": [i * i for i in range(10000)], "name": "amber"}
while not os.path.exists(os.path.join(d, "go")):
    log.write(b"count %d\n" % n)
    n += 1
    if n == 1:
        with open(os.path.join(d, "ready.tmp"), "w") as f:
            f.write("%d\n" % os.getpid())
        os.rename(os.path.join(d, "ready.tmp"), os.path.join(d, "ready"))
    time.sleep(0.1)
if os.environ.get("AMBER_TEST_SABOTAGE") == "1":
    print("note: sabotage", file=sys.stderr)
    n += 1
with open(os.path.join(d, "count.log")) as f:
    lines = f.read().splitlines()
ok = lines == ["count %d" % i for i in range(n)]
ok_state = state["squares"][9999] == 9999 * 9999 and state["name"] == "amber"
if ok:
    print("ok: count.log holds count 0..%d" % (n - 1))
else:
    print("FAIL: count.log has %d lines, in-memory count is %d" % (len(lines), n), file=sys.stderr)
if not ok_state:
    print("FAIL: python objects changed", file=sys.stderr)
with open(os.path.join(d, "result"), "w") as f:
    f.write("0\n" if ok and ok_state else "1\n")
sys.exit(0 if ok and ok_state else 1)
