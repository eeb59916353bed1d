#!/usr/bin/env bash
# Builds the pinned tools into bin/, skipping any whose module pins are unchanged since
# the last build (a stamp next to the binary records the hash of go.mod and go.sum).
# Usage: hack/tools/build.sh [tool ...]   (default: all)
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
  [multus]="cni:gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
  [golangci-lint]="lint:github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
order=(etcd controller-gen kube-apiserver kube-controller-manager kube-scheduler macvlan bridge host-local multus)
# golangci-lint is built by `make lint` only: CI's test run does not need it.
[ $# -gt 0 ] && order=("$@")

for tool in "${order[@]}"; do
  spec=${pkg[$tool]:-}
  [ -n "$spec" ] || { echo "unknown tool $tool (known: ${!pkg[*]})" >&2; exit 2; }
  mod=${spec%%:*}; p=${spec#*:}
  dir="$root/hack/tools/$mod"
  want=$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)
  stamp="$bin/.$tool.stamp"
  if [ -x "$bin/$tool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    continue
  fi
  echo "building $tool (hack/tools/$mod)"
  (cd "$dir" && go build -o "$bin/$tool" "$p")
  echo "$want" > "$stamp"
done
