#!/bin/bash
# runvm.sh KERNEL INITRD LOG TIMEOUT_S [kernel cmdline extras...]
# Boots under QEMU TCG (never KVM), serial console -> LOG (CRs stripped).
# Returns QEMU's rc (124 on timeout).  The guest's reboot -f ends QEMU via -no-reboot.
k=$1; i=$2; log=$3; to=$4; shift 4
timeout --foreground -k 5 "$to" qemu-system-x86_64 -accel tcg -cpu max -smp 1 -m 512 \
	-nographic -no-reboot -monitor none -serial stdio -nodefaults \
	-kernel "$k" -initrd "$i" \
	-append "console=ttyS0 panic=-1 oops=panic quiet loglevel=4 rdinit=/init $*" \
	</dev/null >"$log" 2>&1
rc=$?
tr -d '\r' < "$log" > "$log.tmp" && mv "$log.tmp" "$log"
exit $rc
