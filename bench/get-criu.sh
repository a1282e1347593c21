#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# bench/get-criu.sh: build upstream CRIU 4.1.1 for `make bench` to compare
# against, into $CRIU_CACHE (default /var/cache/amber-criu, outside the repo),
# and print the binary's path.  Debian 12's own criu (3.17) does not know the
# [vvar_vclock] mapping of 6.x kernels and fails on this one; 4.1.1 is the
# version Debian 13 packages, and its upstream tarball comes from Debian's
# mirror (checked against a pinned sha256).  Build dependencies via apt.
set -euo pipefail
V=4.1.1
SHA=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
URL=${CRIU_URL:-http://deb.debian.org/debian/pool/main/c/criu/criu_$V.orig.tar.xz}
C=${CRIU_CACHE:-/var/cache/amber-criu}
BIN=$C/criu-$V/criu/criu

if [ -x "$BIN" ] && "$BIN" --version 2>/dev/null | grep -q "Version: $V"; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$C"
if [ "$(id -u)" = 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		build-essential pkg-config python3 protobuf-c-compiler libprotobuf-c-dev \
		libprotobuf-dev protobuf-compiler python3-protobuf libnl-3-dev libnl-route-3-dev \
		libnet1-dev libcap-dev libaio-dev libbsd-dev libgnutls28-dev libnftables-dev \
		uuid-dev curl xz-utils >&2 ||
		{ echo "get-criu: apt-get install of CRIU's build dependencies failed" >&2; exit 1; }
fi
tarball=$C/criu_$V.orig.tar.xz
if ! echo "$SHA  $tarball" | sha256sum -c --status 2>/dev/null; then
	curl -fsSL -o "$tarball.tmp" "$URL" ||
		{ echo "get-criu: cannot download $URL (set CRIU_URL)" >&2; exit 1; }
	echo "$SHA  $tarball.tmp" | sha256sum -c --status ||
		{ echo "get-criu: $URL does not have the expected sha256; refusing it" >&2; exit 1; }
	mv "$tarball.tmp" "$tarball"
fi
rm -rf "$C/criu-$V"
tar -C "$C" -xf "$tarball"
make -C "$C/criu-$V" -j"$(nproc)" criu >&2 ||
	{ echo "get-criu: CRIU $V does not build here (see above)" >&2; exit 1; }
"$BIN" --version >&2
echo "$BIN"
