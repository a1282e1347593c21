# Four processes with 300 descriptions each, their own, and one they share:
# each gets exactly its own back (amber passes them to each process).
TESTS+=(fdtree)
t_fdtree() { cycle -- "$PROGS/fdtree" "$T"; }
