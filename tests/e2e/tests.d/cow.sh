# Private memory inherited over fork() keeps its copy-on-write sharing (the
# program compares PFNs in /proc/PID/pagemap before the dump and after restore).
TESTS+=(cow)
t_cow() { cycle -- "$PROGS/cow" "$T"; }
