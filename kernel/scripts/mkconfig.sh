#!/bin/bash
# mkconfig.sh SRC OUTDIR VARIANT: OUTDIR/.config = tinyconfig + config/base.config
# + config/VARIANT.config, then olddefconfig; checks every requested line survived.
# OUTDIR/.config is only replaced when the result differs (keeps warm builds warm).
set -euo pipefail
. "$(dirname "$(realpath "$0")")/lib.sh"
src=$1; out=$2; v=$3
frag=$KQ_KDIR/config/$v.config
[ -f "$frag" ] || kq_die "no config fragment $frag"
# one scratch dir for every variant: its kconfig tools are built once, not per variant
tmp=$KQ_WORK/cfg-scratch; mkdir -p "$tmp" "$out"; rm -f "$tmp/.config"
make -s -C "$src" O="$tmp" tinyconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$tmp" "$tmp/.config" \
	"$KQ_KDIR/config/base.config" "$frag" >/dev/null
make -s -C "$src" O="$tmp" olddefconfig >/dev/null
fail=0
# the variant's fragment overrides base.config (noipc turns SYSVIPC and EPOLL off)
over=$(sed -n 's/^\(CONFIG_[A-Z0-9_]*\)=.*/\1/p; s/^# \(CONFIG_[A-Z0-9_]*\) is not set$/\1/p' "$frag" | sort -u)
for l in $( (grep -h '^CONFIG_' "$KQ_KDIR/config/base.config" | grep -vF -f <(echo "$over" | sed 's/$/=/'); grep -h '^CONFIG_' "$frag") ); do
	grep -qx "$l" "$tmp/.config" || { [ "${l#*=}" = n ] && ! grep -q "^${l%%=*}=" "$tmp/.config"; } || \
		{ echo "MISSING: $l"; fail=1; }
done
for l in $(sed -n 's/^# \(CONFIG_[A-Z0-9_]*\) is not set$/\1/p' "$frag"); do
	! grep -q "^$l=" "$tmp/.config" || { echo "UNEXPECTED: $l is set"; fail=1; }
done
[ "${KQ_LAX:-0}" = 1 ] && fail=0   # bisect.sh: options of later patches do not exist yet
if ! cmp -s "$tmp/.config" "$out/.config"; then cp "$tmp/.config" "$out/.config"; fi
echo "config $v: $(grep -E '^(# )?CONFIG_(CHECKPOINT_RESTORE|PROC_CHILDREN|KCMP|PROC_PID_STAT_CR|PRCTL_SET_MM_ARGS)[= ]' "$out/.config" | tr '\n' ' ')"
exit $fail
