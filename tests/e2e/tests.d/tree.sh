# Process trees (tests/e2e/progs/tree.c): groups, sessions, a zombie, a pipe with
# data, a shared offset and shared anonymous memory between processes.
TESTS+=(tree)
t_tree() { cycle -- "$PROGS/tree" "$T"; }

# More children than one page of the children file holds, and than 1024 (a
# dump once kept only the first 1024 and left the others running).
TESTS+=(tree_wide)
t_tree_wide() { DUMP_TIMEOUT=120 cycle -- "$PROGS/widetree" "$T" 1100; }
