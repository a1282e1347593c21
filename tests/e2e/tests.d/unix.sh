# Unix sockets (tests/e2e/progs/unix.c): descriptors in flight (SCM_RIGHTS) open nowhere
# else, zero-length datagrams, sender addresses of queued datagrams (a sender gone since),
# and a long queue of small datagrams.
TESTS+=(unix_rights unix_longq)

t_unix_rights() { cycle -- "$PROGS/unix" "$T" rights; }
# more than 65536 datagrams: peeking at the n-th costs n in the kernel, so the dump of
# 66000 takes minutes (3.5 on a quiet 2-core VM with 6.18)
t_unix_longq() { DUMP_TIMEOUT=900 cycle -- "$PROGS/unix" "$T" longq; }
