#!/bin/bash
# fetch.sh: download linux-source-6.12 (and Debian's prebuilt 6.12 kernel) into
# $KQ_WORK/debs, unpack the source into $KQ_WORK/tree and apply the series.
# The patched tree is reused as long as the .deb and the series are unchanged,
# so warm runs rebuild only what changed.
set -euo pipefail
. "$(dirname "$(realpath "$0")")/lib.sh"
mkdir -p "$KQ_WORK/debs"; chmod 755 "$KQ_WORK" "$KQ_WORK/debs"
cd "$KQ_WORK/debs"

# --- linux-source-6.12 (version not pinned: whatever apt offers now) ---
ver=$(apt-cache policy "$KQ_PKG" | sed -n 's/^ *Candidate: //p')
[ -n "$ver" ] && [ "$ver" != "(none)" ] || { apt-get update -qq; ver=$(apt-cache policy "$KQ_PKG" | sed -n 's/^ *Candidate: //p'); }
[ -n "$ver" ] && [ "$ver" != "(none)" ] || kq_die "apt has no $KQ_PKG"
deb=$(ls "${KQ_PKG}_$(echo "$ver" | sed 's/:/%3a/')_all.deb" 2>/dev/null || true)
if [ -z "$deb" ]; then
	rm -f "${KQ_PKG}"_*.deb
	apt-get download -qq "$KQ_PKG" 2>/dev/null || { apt-get update -qq; apt-get download -qq "$KQ_PKG" 2>/dev/null; } \
		|| kq_die "cannot download $KQ_PKG"
	deb=$(ls "${KQ_PKG}"_*_all.deb)
fi
echo "source: $deb"

# --- Debian's prebuilt 6.12 kernel (reference boot); only ./boot is extracted ---
if [ "${KQ_DEBIAN:-1}" = 1 ]; then
	V=$(apt-cache depends linux-headers-6.12-amd64 | sed -n 's/.*Depends: linux-headers-\(.*\)-amd64$/\1/p' | head -1)
	[ -n "$V" ] || kq_die "cannot resolve the Debian 6.12 kernel ABI"
	if [ ! -e "$KQ_WORK/debian/vmlinuz-$V-amd64" ]; then
		ls linux-image-"$V"-amd64-unsigned_*.deb >/dev/null 2>&1 || \
			apt-get download -qq "linux-image-$V-amd64-unsigned" 2>/dev/null || \
			{ apt-get update -qq; apt-get download -qq "linux-image-$V-amd64-unsigned" 2>/dev/null; } || \
			kq_die "cannot download linux-image-$V-amd64-unsigned"
		rm -rf "$KQ_WORK/debian"; mkdir -p "$KQ_WORK/debian"
		dpkg-deb --fsys-tarfile linux-image-"$V"-amd64-unsigned_*.deb | \
			tar -x -C "$KQ_WORK/debian" --wildcards './boot/vmlinuz-*' './boot/config-*'
		mv "$KQ_WORK"/debian/boot/* "$KQ_WORK/debian/"; rmdir "$KQ_WORK/debian/boot"
		rm -f linux-image-*.deb   # 100 MB of modules we do not use
	fi
	echo "debian: $KQ_WORK/debian/vmlinuz-$V-amd64"
fi

# --- unpacked + patched tree, keyed by the .deb and the series ---
key="$(basename "$deb") $(kq_series_hash)"
T=$KQ_WORK/tree
if [ -f "$T/.kq-stamp" ] && [ "$(cat "$T/.kq-stamp")" = "$key" ]; then
	echo "tree: reusing $T ($key)"
	exit 0
fi
apply_series() {
	rm -rf "$T/.kq-applied"; mkdir -p "$T/.kq-applied"
	for p in $(kq_series); do
		patch -d "$T" -p1 --quiet --forward --batch < "$p" || kq_die "$(basename "$p") does not apply"
		cp "$p" "$T/.kq-applied/"
		echo "applied $(basename "$p")"
	done
	echo "$key" > "$T/.kq-stamp"
}
# same source, different series: revert the old one (keeps the mtimes of all
# other files, so the O= build dirs stay warm), then apply the new one
if [ -f "$T/.kq-stamp" ] && [ "$(cut -d' ' -f1 "$T/.kq-stamp")" = "$(basename "$deb")" ] && \
   [ -d "$T/.kq-applied" ]; then
	kq_stage "series changed: reverting the old one"
	ok=1
	for p in $(ls "$T"/.kq-applied/*.patch 2>/dev/null | sort -r); do
		patch -d "$T" -p1 -R --quiet --batch < "$p" || { ok=0; break; }
	done
	if [ $ok = 1 ]; then
		rm -f "$T/.kq-stamp"
		apply_series
		exit 0
	fi
	echo "revert failed; unpacking afresh"
fi
kq_stage "unpack $deb"
rm -rf "$T" "$T.new"; mkdir -p "$T.new"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/src/linux-source-6.12.tar.xz | tar -xJ -C "$T.new"
mv "$T.new/linux-source-6.12" "$T"; rmdir "$T.new"
kq_stage "apply the series with patch -p1"
apply_series
