# Children sharing the address space (CLONE_VM), one also the signal handlers
# (CLONE_SIGHAND), without being threads.
TESTS+=(clonevm)
t_clonevm() { cycle -- "$PROGS/clonevm" "$T"; }

# Processes sharing an address space their parent no longer has (it exec'd):
# clone() from the parent cannot recreate that, so the dump is refused and the
# whole tree keeps running.
TESTS+=(clonevm_split_refused)
t_clonevm_split_refused() {
	[ $SELFTEST = 1 ] && { cycle -- "$PROGS/clonevm" "$T" split; return; }
	local rc
	start_prog "$PROGS/clonevm" "$T" split || return 1
	amber_to "$W/dump.log" 30 dump -t "$PID" -D "$W/img"
	rc=$?
	[ $rc != 0 ] || { fail "a tree with an unrecreatable CLONE_VM group was dumped"; return 1; }
	grep -q "share their address space, but not through their parents" "$W/dump.log" ||
		{ fail "no reason given"; attach "$W/dump.log"; return 1; }
	[ ! -e "$W/img/inventory.img" ] || { fail "an image was marked complete"; return 1; }
	runs_on "the refused dump" 15
}
