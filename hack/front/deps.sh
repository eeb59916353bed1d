#!/usr/bin/env bash
# deps.sh PLATFORM... [qemu]: make sure this machine can compile the CNI plugin's front
# (cniplugin/front/nicpool.c, static against musl) for each os/arch given, and, with
# `qemu`, run its arm64, ppc64le and s390x builds under qemu-user (as the front's tests
# do). What is
# missing is installed from Debian's packages with apt-get when run as root; otherwise
# the packages are named and the build stops.
#
#   the host:      musl-gcc (musl-tools)
#   another arch:  <triple>-linux-musl-gcc (musl-dev:<arch> through
#                  `dpkg --add-architecture`, and gcc-<triple>-linux-gnu, which it drives)
#   qemu:          qemu-{aarch64,ppc64le,s390x}-static (qemu-user-static), and the
#                  arm64, ppc64le and s390x compilers
set -euo pipefail

host="$(go env GOOS)/$(go env GOARCH)"
need=() archs=() missing=()

# cross PLATFORM: the musl compiler, its Debian architecture, and the GNU cross
# compiler it drives with its package.
cross() {
  case $1 in
    linux/amd64) echo "x86_64-linux-musl-gcc amd64 x86_64-linux-gnu-gcc gcc-x86-64-linux-gnu" ;;
    linux/arm64) echo "aarch64-linux-musl-gcc arm64 aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu" ;;
    linux/ppc64le) echo "powerpc64le-linux-musl-gcc ppc64el powerpc64le-linux-gnu-gcc gcc-powerpc64le-linux-gnu" ;;
    linux/s390x) echo "s390x-linux-musl-gcc s390x s390x-linux-gnu-gcc gcc-s390x-linux-gnu" ;;
    *) return 1 ;;
  esac
}

platforms=()
for p in "$@"; do
  if [ "$p" = qemu ]; then
    for q in aarch64 ppc64le s390x; do
      command -v "qemu-$q-static" >/dev/null || { need+=(qemu-user-static); missing+=("qemu-$q-static"); break; }
    done
    platforms+=(linux/arm64 linux/ppc64le linux/s390x)
  else
    platforms+=("$p")
  fi
done

for p in "${platforms[@]}"; do
  if [ "$p" = "$host" ]; then
    command -v musl-gcc >/dev/null || { need+=(musl-tools); missing+=(musl-gcc); }
    continue
  fi
  read -r cc arch gnucc gnu < <(cross "$p") || { echo "the CNI plugin's front: no musl cross compiler known for $p (known: linux/amd64, linux/arm64, linux/ppc64le, linux/s390x)" >&2; exit 1; }
  if ! command -v "$cc" >/dev/null || ! command -v "$gnucc" >/dev/null; then
    need+=("musl-dev:$arch" "$gnu") archs+=("$arch") missing+=("$cc")
  fi
done

[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "the CNI plugin's front needs ${missing[*]}: as root, run" >&2
  for a in "${archs[@]}"; do echo "  dpkg --add-architecture $a" >&2; done
  echo "  apt-get update && apt-get install ${need[*]}" >&2
  exit 1
fi
echo "the CNI plugin's front needs ${missing[*]}: installing ${need[*]}"
for a in "${archs[@]}"; do
  dpkg --print-foreign-architectures | grep -qx "$a" || dpkg --add-architecture "$a"
done
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${need[@]}"
