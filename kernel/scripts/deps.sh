#!/bin/bash
# Install the host tools the rig needs (Debian 12; rsync: the kselftests' make install).  Nothing is loaded into the
# host kernel and nothing is written to /boot: kernels only ever run in QEMU.
set -euo pipefail
need=()
for t in qemu-system-x86_64:qemu-system-x86 busybox:busybox-static cpio:cpio xz:xz-utils \
	 gcc:gcc make:make bc:bc flex:flex bison:bison pahole:dwarves perl:perl git:git \
	 patch:patch rsync:rsync; do
	command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
[ -e /usr/include/libelf.h ] || need+=(libelf-dev)
[ -e /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
[ -e /usr/include/linux/kcmp.h ] || need+=(linux-libc-dev)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
# busybox must be the static one (it runs as the guest's /init)
if command -v busybox >/dev/null && ldd "$(command -v busybox)" >/dev/null 2>&1; then
	need+=(busybox-static)
fi
if [ ${#need[@]} -gt 0 ]; then
	echo "installing: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
