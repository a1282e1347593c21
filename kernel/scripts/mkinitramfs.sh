#!/bin/bash
# mkinitramfs.sh OUT.cpio.gz GUEST_SCRIPT [SRC[:DST] ...]
# busybox-static initramfs; /init mounts proc/sys/dev/tmp, runs GUEST_SCRIPT as
# /run.sh in /t, prints "KQ-EXIT <rc>" and reboots (QEMU runs with -no-reboot).
# Extra files go to /t/<basename> or to DST.  A dynamically linked SRC gets its
# shared libraries and loader copied too (to the same paths).  A directory SRC is
# copied whole.
set -euo pipefail
out=$(realpath -m "$1"); script=$2; shift 2
d=$(mktemp -d "${TMPDIR:-/tmp}/kq-initrd.XXXXXX")
trap 'rm -rf "$d"' EXIT
chmod 755 "$d"
mkdir -p "$d"/{bin,sbin,proc,sys,dev,tmp,t,mnt,etc,root,home/user}
chmod 1777 "$d/tmp"; chown 1000:1000 "$d/home/user" 2>/dev/null || true
cp "$(command -v busybox)" "$d/bin/busybox"
printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\nnobody2:x:1001:1001::/:/bin/sh\n' > "$d/etc/passwd"
printf 'root:x:0:\nuser:x:1000:\nnobody2:x:1001:\n' > "$d/etc/group"
cp "$script" "$d/run.sh"; chmod 755 "$d/run.sh"
for f in "$@"; do
	src=${f%%:*}; dst=${f#*:}; [ "$dst" = "$f" ] && dst=/t/$(basename "$src")
	mkdir -p "$d$(dirname "$dst")"
	if [ -d "$src" ]; then # a directory (the kselftests): as it is, static programs only
		cp -a "$src" "$d$dst"; chmod -R a+rX "$d$dst"; continue
	fi
	cp -L "$src" "$d$dst"; chmod a+rX "$d$dst"
	if ldd "$src" >/dev/null 2>&1; then
		for lib in $(ldd "$src" | grep -o '/[^ ]*'); do
			mkdir -p "$d$(dirname "$lib")"; cp -L "$lib" "$d$lib"
		done
	fi
done
cat > "$d/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=1777 tmpfs /tmp
echo "KQ-BOOT-OK kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)"
cd /t
sh /run.sh
echo "KQ-EXIT $? uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
reboot -f
INIT
chmod 755 "$d/init"
(cd "$d" && find . | cpio -o -H newc -R +0:+0 --quiet | gzip -1 > "$out")
echo "initramfs $out: $(stat -c %s "$out") bytes"
