# Process trees (tests/e2e/progs/tree.c): groups, sessions, a zombie, a pipe with
# data, a shared offset and shared anonymous memory between processes.
TESTS+=(tree)
t_tree() { cycle -- "$PROGS/tree" "$T"; }
