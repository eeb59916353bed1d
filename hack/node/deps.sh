#!/usr/bin/env bash
# deps.sh: make sure this machine has what the local cluster's real nodes need from
# the host (`make up NODE=kubelet`, `make test-real`): nft, which kube-proxy runs in
# its nftables mode. What is missing is installed from Debian's packages with apt-get
# when run as root; otherwise the packages are named and the build stops. (The tools
# the nodes run, kubelet, containerd, runc, are built into bin/ by `make tools-node`.)
set -euo pipefail

need=() missing=()
command -v nft >/dev/null || { need+=(nftables); missing+=(nft); }

[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "real nodes need ${missing[*]} (kube-proxy's nftables mode): as root, run" >&2
  echo "  apt-get update && apt-get install ${need[*]}" >&2
  exit 1
fi
echo "real nodes need ${missing[*]} (kube-proxy's nftables mode): installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${need[@]}"
