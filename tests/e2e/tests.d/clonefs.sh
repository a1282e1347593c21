# A child sharing its parent's fd table and fs (clone without CLONE_THREAD).
TESTS+=(clonefs)
t_clonefs() { cycle -- "$PROGS/clonefs" "$T"; }
