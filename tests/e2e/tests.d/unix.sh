# Unix sockets (tests/e2e/progs/unix.c): descriptors in flight (SCM_RIGHTS) open nowhere
# else, zero-length datagrams, sender addresses of queued datagrams (a sender gone since),
# and a long queue of small datagrams.
TESTS+=(unix_rights unix_longq)

t_unix_rights() { cycle -- "$PROGS/unix" "$T" rights; }
t_unix_longq() { cycle -- "$PROGS/unix" "$T" longq; }
