package manifests_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/nicpool/nicpool/e2e/binaries"
)

// GOMEMLIMIT follows each container's memory limit (resourceFieldRef, divisor 1Mi,
// then six zeros: bytes), as the kubelet computes it, and the Go runtime accepts what
// comes out: a process started with that environment runs with 95.4% of the limit.
func TestGoMemLimitFollowsTheMemoryLimit(t *testing.T) {
	if os.Getenv("NICPOOL_PRINT_MEMORY_LIMIT") == "1" {
		fmt.Println(debug.SetMemoryLimit(-1))
		return
	}
	for container, limitMiB := range map[string]int64{"webhook": 512, "ipamd": 256} {
		env, err := binaries.DeployedEnv(container)
		if err != nil {
			t.Fatal(err)
		}
		var memlimit string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "GOMEMLIMIT="); ok {
				memlimit = v
			}
		}
		if want := fmt.Sprintf("%d000000B", limitMiB); memlimit != want {
			t.Errorf("%s: GOMEMLIMIT=%q, want %s for a limit of %dMi", container, memlimit, want, limitMiB)
			continue
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestGoMemLimitFollowsTheMemoryLimit$")
		cmd.Env = append(os.Environ(), "NICPOOL_PRINT_MEMORY_LIMIT=1", "GOMEMLIMIT="+memlimit)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: a Go process with GOMEMLIMIT=%s: %v\n%s", container, memlimit, err, out)
		}
		got, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", container, out, err)
		}
		if limit := limitMiB << 20; got != limitMiB*1_000_000 || got >= limit || got < limit*95/100 {
			t.Errorf("%s: the Go runtime's memory limit is %d bytes, want %d (95.4%% of %d)", container, got, limitMiB*1_000_000, limit)
		}
	}
}
