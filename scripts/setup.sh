#!/bin/bash
# Install what amber needs to build and test on Debian 12 (idempotent; as root).
# "setup.sh bench" adds what make bench needs: redis-server and a JDK for its
# redis and JVM rows, gnuplot for its plot.
set -euo pipefail

# clang-14 and libclang-rt-14-dev (libFuzzer, ASan, UBSan): the fuzz targets (make fuzz)
# runc: the rpc_runc test drives amber swrk through it (installed without criu)
# podman, busybox-static: the podman_* tests (podman with runc, a container made with podman
# import); busybox-static also the shell and nc in the runc container of rpc_runc_services
# tcpdump: the packetring_tcpdump tests (libpcap's TPACKET_V3 and V2 rings)
PKGS=(gcc make pkg-config libc6-dev protobuf-c-compiler libprotobuf-c-dev libxxhash-dev
      libcmocka-dev jq python3 tmux procps util-linux bc nftables iptables scdoc
      libnl-3-dev libnl-route-3-dev libnftables-dev iproute2
      clang-14 libclang-rt-14-dev postgresql-15 runc podman busybox-static tcpdump)
[ "${1:-}" = bench ] && PKGS+=(redis-server openjdk-17-jdk-headless gnuplot-nox)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "setup: all packages present"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "setup: missing packages: ${missing[*]}; run as root (sudo make setup)" >&2
	exit 1
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
