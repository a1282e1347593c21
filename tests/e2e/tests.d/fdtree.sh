# Four processes with 300 descriptions each, their own, and one they share:
# each gets exactly its own back (amber passes them to each process).
TESTS+=(fdtree)
t_fdtree() { cycle -- "$PROGS/fdtree" "$T"; }

# One description shared by 600 processes, each with one of its own on the
# same file, in a tree of more than a thousand fds (the dump's kcmp sort in
# two halves and a merge): every child writes at the one shared offset.
TESTS+=(fdtree_shared_wide)
t_fdtree_shared_wide() { DUMP_TIMEOUT=120 cycle -- "$PROGS/widefile" "$T" 600; }
