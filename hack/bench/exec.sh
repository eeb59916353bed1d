#!/usr/bin/env bash
# exec.sh [BASELINE_COMMIT]: the exec figures of the CNI plugin's front in one run, with
# the load average before and after: e2e/scale's BenchmarkLimit1000/exec (1,000 pods,
# one exec of the installed front per ADD) and cmd/nicpool-cni's BenchmarkExecAdd with
# the front of BASELINE_COMMIT (default ff96208) and this checkout's back to back.
# The baseline is built, with the flags of its own Makefile, from a `git worktree add`
# of that commit in a temporary directory outside the repository's tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
base="${1:-ff96208}"
tmp="$(mktemp -d)"
trap 'git worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/src" "$base" >/dev/null
# The baseline's own recipe for the front: its CC, FRONT_CFLAGS and FRONT_SRC.
make -s -C "$tmp/src" --no-print-directory \
  --eval 'nicpool-bench-baseline-front: ; $(or $(FRONT_CC),$(CC)) $(FRONT_CFLAGS) -o $(OUT) $(FRONT_SRC)' \
  nicpool-bench-baseline-front OUT="$tmp/nicpool"
echo "baseline front: $base ($(stat -c %s "$tmp/nicpool") bytes)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
NICPOOL_BENCH_FRONT_BASELINE="$tmp/nicpool" go test -count=1 -v -run '^$' -bench 'BenchmarkExecAdd$' -benchmem -benchtime 300x ./cmd/nicpool-cni
echo "load between: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -count=1 -v -run '^$' -bench 'BenchmarkLimit1000$/exec' -benchtime 1x -timeout 30m ./e2e/scale
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
