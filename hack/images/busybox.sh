#!/usr/bin/env bash
# busybox.sh BIN [DEST]: put a static busybox for this machine's architecture at
# DEST/busybox (default BIN/busybox), the binary of hack/images' BusyboxAsAlpine image.
# It is Debian's busybox-static package, downloaded with apt-get and unpacked (not
# installed) under BIN/.deps/busybox-static once; later calls reuse it.
set -euo pipefail
bin=${1:?usage: busybox.sh BIN [DEST]}
dest=${2:-$bin}
deps="$bin/.deps/busybox-static"
if [ ! -f "$deps/.unpacked" ]; then
  echo "fetching busybox-static (apt-get download) into $deps"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download -q busybox-static 2>/dev/null) ||
    { apt-get update -q >/dev/null && (cd "$tmp" && apt-get download -q busybox-static 2>/dev/null); } ||
    { echo "the busybox image needs Debian's busybox-static package: apt-get download busybox-static failed" >&2; exit 1; }
  rm -rf "$deps" && mkdir -p "$deps"
  dpkg -x "$tmp"/busybox-static_*.deb "$deps"
  touch "$deps/.unpacked"
fi
mkdir -p "$dest"
install -m 0755 "$deps/bin/busybox" "$dest/busybox"
