#!/bin/sh
# Runs inside the guest as /run.sh (cwd /t).  KQ_EXPECT (present|absent, or the
# one feature a single-option kernel has: children|kcmp|stat|prctl) and KQ_NAME
# come from the kernel command line.  Prints KQ-RESULT lines.
: "${KQ_EXPECT:=present}"
echo "KQ-INFO $KQ_NAME: kernel $(uname -r), expect $KQ_EXPECT"
if [ "${KQ_ORDER_ONLY:-0}" = 1 ]; then # rig.sh: kcmp's order in one more boot
	./crabi --expect="$KQ_EXPECT" --order-only
	exit $?
fi
rc=0
./crabi --expect="$KQ_EXPECT" || rc=1
./crabi --expect="$KQ_EXPECT" --user=1000 || rc=1

# ---- the series' kselftests, through the kselftest runner (as root) ----
# Each must pass where its option is on and SKIP where it is off.
if [ -x /ksft/run_kselftest.sh ] && [ "$KQ_EXPECT" != present,noipc ]; then
	(cd /ksft && ./run_kselftest.sh -t kcmp:kcmp_test -t proc:proc-pid-children \
		-t proc:proc-pid-stat-cr -t prctl:set-mm-args) >/tmp/ksft.tap 2>&1
	sed 's/^/KQ-KSFT /' /tmp/ksft.tap
	for t in kcmp:kcmp_test:kcmp proc:proc-pid-children:children proc:proc-pid-stat-cr:stat \
		 prctl:set-mm-args:prctl; do
		dir=${t%%:*}; rest=${t#*:}; name=${rest%%:*}; feat=${rest#*:}
		case $KQ_EXPECT in present | present,upstream) on=1 ;; absent) on=0 ;; "$feat") on=1 ;; *) on=0 ;; esac
		line=$(grep "selftests: $dir: $name\( \|\$\)" /tmp/ksft.tap | grep '^\(not \)\?ok' | tail -1)
		if [ $on = 1 ]; then
			case $line in "ok "*"# SKIP"*|"not ok"*|"") r=FAIL ;; "ok "*) r=PASS ;; *) r=FAIL ;; esac
			want="ok"
		else
			case $line in "ok "*"# SKIP"*) r=PASS ;; *) r=FAIL ;; esac
			want="ok # SKIP"
		fi
		echo "KQ-RESULT kselftest.$dir.$name $r '${line:-no TAP line}' (want $want)"
		[ $r = PASS ] || rc=1
	done
fi

# ---- amber inside the guest ----
# The rig copies <repo>/build/amber (plus its shared libraries) to /amber/amber
# when it exists on the host.  KQ_AMBER_EXPECT (kernel command line):
#   pass    'amber check' exits 0 (Debian's kernel, the "cr" variant)
#   seeds   amber finds the four features of the seeds (the "abi" variant, which
#           has no CHECKPOINT_RESTORE, so amber may still lack PR_SET_MM_MAP etc.)
#   missing 'amber check' exits non-zero and reports the four features absent
#   only    amber finds the one feature of KQ_EXPECT present, the other three absent
seedfeat="proc-children kcmp proc-stat-cr-fields prctl-set-mm-args"
amber_has() { # amber_has OUT present|absent: all four seed features have that state
	for f in $seedfeat; do
		echo "$1" | grep -q "^ *$f \.* *$2" || return 1
	done
}
if [ -x /amber/amber ]; then
	out=$(/amber/amber check 2>&1); arc=$?
	echo "$out" | sed 's/^/KQ-AMBER /'
	r=PASS
	case "${KQ_AMBER_EXPECT:-pass}" in
	info) ;; # bisect.sh: partial series, just show what amber finds
	pass)
		[ $arc = 0 ] && r=PASS || r=FAIL
		echo "KQ-RESULT amber.check $r 'amber check' exit $arc (want 0)" ;;
	seeds)
		amber_has "$out" present && r=PASS || r=FAIL
		echo "KQ-RESULT amber.check-seeds $r 'amber check' exit $arc; wants $seedfeat present" ;;
	missing)
		[ $arc != 0 ] && amber_has "$out" absent && r=PASS || r=FAIL
		echo "KQ-RESULT amber.check-missing $r 'amber check' exit $arc (want non-zero, $seedfeat absent)" ;;
	only)
		case $KQ_EXPECT in children) one=proc-children ;; kcmp) one=kcmp ;;
		stat) one=proc-stat-cr-fields ;; *) one=prctl-set-mm-args ;; esac
		r=PASS
		for f in $seedfeat; do
			want=absent; [ "$f" = "$one" ] && want=present
			echo "$out" | grep -q "^ *$f \.* *$want" || r=FAIL
		done
		echo "KQ-RESULT amber.check-only $r 'amber check' finds $one present and the other three absent" ;;
	esac
	[ $r = PASS ] || rc=1
	# a representative part of amber's e2e suite: dump + restore a static program
	if [ -x /amber/e2e.sh ] && [ "${KQ_AMBER_EXPECT:-pass}" = pass ]; then
		KQ_E2E_PROGS="$KQ_E2E_PROGS" sh /amber/e2e.sh || rc=1
	fi
else
	echo "KQ-SKIP amber: no build/amber on the host when the initramfs was made"
fi
exit $rc
