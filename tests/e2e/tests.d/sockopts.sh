# Socket options (tests/e2e/progs/sockopts.c, src/net/sk-opts.c): TCP
# listeners in one SO_REUSEPORT group, an established connection, UDP over
# IPv4 and IPv6, unix pairs, each with options set; after restore every one
# reads back as before, and the filters, the group and IP_FREEBIND still work.
TESTS+=(sockopts sockopts_image_refused sockopts_owner_refused)

t_sockopts() {
	cycle -d "--tcp-established" -r "--tcp-established" -- "$PROGS/sockopts" "$T"
}
