#!/usr/bin/env bash
# Builds the pinned tools into bin/, skipping any whose module pins are unchanged since
# the last build (a stamp next to the binary records the hash of go.mod and go.sum).
# Usage: hack/tools/build.sh [tool|group ...]   (default: the control-plane group)
# Groups: control-plane (what `make test` needs), node (real nodes: `make up NODE=kubelet`).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

# tool → module dir : package
declare -A pkg=(
  [kube-apiserver]="k8s:./cmd/kube-apiserver"
  [kube-controller-manager]="k8s:./cmd/kube-controller-manager"
  [kube-scheduler]="k8s:./cmd/kube-scheduler"
  [controller-gen]="k8s:sigs.k8s.io/controller-tools/cmd/controller-gen"
  [etcd]="etcd:./cmd/etcd"
  [macvlan]="cni:github.com/containernetworking/plugins/plugins/main/macvlan"
  [bridge]="cni:github.com/containernetworking/plugins/plugins/main/bridge"
  [host-local]="cni:github.com/containernetworking/plugins/plugins/ipam/host-local"
  [loopback]="cni:github.com/containernetworking/plugins/plugins/main/loopback"
  [multus]="cni:gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
  [golangci-lint]="lint:github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
  [runc]="runc:github.com/opencontainers/runc"
  [containerd]="containerd:github.com/containerd/containerd/v2/cmd/containerd"
  [containerd-shim-runc-v2]="containerd:github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
  [ctr]="containerd:github.com/containerd/containerd/v2/cmd/ctr"
  [kubelet]="node:k8s.io/kubernetes/cmd/kubelet"
  [kube-proxy]="node:k8s.io/kubernetes/cmd/kube-proxy"
  [kubectl]="node:k8s.io/kubernetes/cmd/kubectl"
  [crictl]="crictl:sigs.k8s.io/cri-tools/cmd/crictl"
  [kube-apiserver-floor]="k8s-floor:./cmd/kube-apiserver"
)
# Where a tool is written under bin/, when not bin/<tool>: the API server of the lowest
# Kubernetes release nicpool supports goes to bin/floor/, which `make test-floor` puts
# first in KUBEBUILDER_ASSETS.
declare -A out=([kube-apiserver-floor]=floor/kube-apiserver)
# Build tags and cgo per tool (default: none, cgo as the environment says).
declare -A tags=(
  # runc as its release builds it: seccomp (the manifests ask for RuntimeDefault),
  # static, without cgo lookups of users and hosts.
  [runc]="seccomp netgo osusergo urfave_cli_no_docs"
  # containerd without the snapshotters that need C libraries; overlayfs stays.
  [containerd]="no_btrfs no_devmapper no_zfs"
  [containerd-shim-runc-v2]="no_btrfs no_devmapper no_zfs"
  [ctr]="no_btrfs no_devmapper no_zfs"
)
# Binaries that report their version to the cluster (a node's VERSION column is its
# kubelet's, its CONTAINER-RUNTIME its containerd's, and Helm checks a chart's kubeVersion
# against the API server's): stamped with the module's release
# as the projects' own builds do, instead of the source's placeholder
# (v0.0.0-master, 2.4.2+unknown).
declare -A versioned=([kubelet]=k8s.io/kubernetes [kube-proxy]=k8s.io/kubernetes [kubectl]=k8s.io/kubernetes
  [kube-apiserver]=k8s.io/kubernetes [kube-controller-manager]=k8s.io/kubernetes [kube-scheduler]=k8s.io/kubernetes
  [containerd]=github.com/containerd/containerd/v2 [containerd-shim-runc-v2]=github.com/containerd/containerd/v2
  [ctr]=github.com/containerd/containerd/v2 [kube-apiserver-floor]=k8s.io/kubernetes)
# Static binaries where the tool allows it (containerd's shim runs in any mount namespace).
declare -A nocgo=([containerd]=1 [containerd-shim-runc-v2]=1 [ctr]=1)
declare -A groups=(
  # kubectl: e2e/suite runs the README's commands with it.
  [control-plane]="etcd controller-gen kube-apiserver kube-controller-manager kube-scheduler kubectl macvlan bridge host-local multus"
  # golangci-lint and crictl are built on request only: no test needs them.
  [node]="runc containerd containerd-shim-runc-v2 ctr kubelet kube-proxy kubectl loopback"
  # `make test-floor`: the integration tests against the lowest supported API server.
  [floor]="kube-apiserver-floor"
)
order=()
for arg in "${@:-control-plane}"; do
  if [ -n "${groups[$arg]:-}" ]; then
    read -ra more <<<"${groups[$arg]}"
    order+=("${more[@]}")
  else
    order+=("$arg")
  fi
done

# seccomp_env points cgo at libseccomp: the system's when its development files are
# installed, else Debian's libseccomp-dev unpacked (not installed) under bin/.deps.
seccomp_env() {
  if pkg-config --exists libseccomp 2>/dev/null && [ -e "$(pkg-config --variable=libdir libseccomp)/libseccomp.a" ]; then
    return
  fi
  local deps="$bin/.deps/libseccomp"
  if [ ! -f "$deps/.unpacked" ]; then
    echo "fetching libseccomp-dev (apt-get download) into $deps"
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -q libseccomp-dev 2>/dev/null) ||
      { apt-get update -q >/dev/null && (cd "$tmp" && apt-get download -q libseccomp-dev 2>/dev/null); } ||
      { echo "runc needs libseccomp-dev: apt-get install libseccomp-dev" >&2; rm -rf "$tmp"; return 1; }
    rm -rf "$deps" && mkdir -p "$deps"
    dpkg -x "$tmp"/libseccomp-dev_*.deb "$deps"
    rm -rf "$tmp"
    touch "$deps/.unpacked"
  fi
  local pc
  pc=$(dirname "$(find "$deps" -name libseccomp.pc | head -1)")
  export PKG_CONFIG_PATH="$pc" PKG_CONFIG_SYSROOT_DIR="$deps"
}

for tool in "${order[@]}"; do
  spec=${pkg[$tool]:-}
  [ -n "$spec" ] || { echo "unknown tool $tool (known: ${!pkg[*]}; groups: ${!groups[*]})" >&2; exit 2; }
  mod=${spec%%:*}; p=${spec#*:}
  dir="$root/hack/tools/$mod"
  ldflags=""
  if [ -n "${versioned[$tool]:-}" ]; then
    v=$(cd "$dir" && go list -m -f '{{.Version}}' "${versioned[$tool]}")
    if [ "${versioned[$tool]}" = k8s.io/kubernetes ]; then
      major=${v#v}; major=${major%%.*}; minor=${v#v*.}; minor=${minor%%.*}
      for vp in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $vp.gitVersion=$v -X $vp.gitMajor=$major -X $vp.gitMinor=$minor -X $vp.gitTreeState=clean"
      done
    else
      ldflags=" -X ${versioned[$tool]}/version.Version=${v#v}"
    fi
  fi
  # The stamp covers the flags too, where a tool has any (a change rebuilds it).
  want=$( (cat "$dir/go.mod" "$dir/go.sum"; [ -z "$ldflags" ] || echo "$ldflags") | sha256sum | cut -c1-16)
  dest="$bin/${out[$tool]:-$tool}"
  stamp="$(dirname "$dest")/.$(basename "$dest").stamp"
  mkdir -p "$(dirname "$dest")"
  if [ -x "$dest" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    continue
  fi
  echo "building $tool (hack/tools/$mod)"
  args=(-o "$dest")
  [ -z "${tags[$tool]:-}" ] || args+=(-tags "${tags[$tool]}")
  if [ "$tool" = runc ]; then
    # runc's nsenter is C: cgo, linked statically so it runs in any container.
    (seccomp_env && cd "$dir" && CGO_ENABLED=1 go build "${args[@]}" -trimpath \
      -ldflags "-extldflags -static -X main.version=$(go list -m -f '{{.Version}}' github.com/opencontainers/runc | tr -d v)" "$p")
  elif [ -n "${nocgo[$tool]:-}" ]; then
    [ -z "$ldflags" ] || args+=(-ldflags "${ldflags# }")
    (cd "$dir" && CGO_ENABLED=0 go build "${args[@]}" "$p")
  else
    [ -z "$ldflags" ] || args+=(-ldflags "${ldflags# }")
    (cd "$dir" && go build "${args[@]}" "$p")
  fi
  echo "$want" > "$stamp"
done
