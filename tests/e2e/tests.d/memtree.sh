# A tree whose children's memory (sparse private pages, a shared region, the
# break) is rebuilt ahead of their turn, while amber drives the one before.
TESTS+=(memtree)
t_memtree() { cycle -- "$PROGS/memtree" "$T"; }
