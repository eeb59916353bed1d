package fronttest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nicpool/nicpool/cniplugin/cni"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
)

// The front states in C the deadlines nicpool-cni states in Go: the request timeout's
// default and bounds, and how long DEL tries an unreachable ipamd. A runtime must see
// the same deadline whichever of the two answers, so each #define equals its Go
// constant.
func TestFrontDeadlinesAreTheGoPlugins(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "cniplugin", "front", "nicpool.c"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Duration{
		"DEFAULT_TIMEOUT_MS": cni.DefaultTimeout,
		"MIN_TIMEOUT_MS":     api.MinRequestTimeout,
		"MAX_TIMEOUT_MS":     api.MaxRequestTimeout,
		"DEL_WAIT_MS":        cni.DelWait,
	} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)L\b`).FindSubmatch(src)
		if m == nil {
			t.Errorf("nicpool.c defines no %s", name)
			continue
		}
		ms, _ := strconv.ParseInt(string(m[1]), 10, 64)
		if got := time.Duration(ms) * time.Millisecond; got != want {
			t.Errorf("nicpool.c: %s is %s, nicpool-cni's is %s", name, got, want)
		}
	}
}
