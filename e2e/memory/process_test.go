package memory

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nicpool/nicpool/e2e/binaries"
)

var (
	buildOnce sync.Once
	built     binaries.Set
	buildErr  error
)

// buildBinaries builds nicpool's commands once per test binary into binDir.
func buildBinaries(tb testing.TB) binaries.Set {
	tb.Helper()
	buildOnce.Do(func() { built, buildErr = binaries.Build(binDir) })
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return built
}

// settle polls p's resident set once a second until two readings in a row are
// within 1% of each other (startup's lists decoded, informers quiet), or the timeout
// passes; it returns the last reading and whether it settled.
func settle(tb testing.TB, p *binaries.Process, timeout time.Duration) (binaries.Memory, bool) {
	tb.Helper()
	prev, err := p.Memory()
	if err != nil {
		tb.Fatalf("%s: %v", p.Name, err)
	}
	cur := prev
	steady := 0
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, false, func(context.Context) (bool, error) {
		m, err := p.Memory()
		if err != nil {
			return false, err
		}
		prev, cur = cur, m
		if d := cur.RSS - prev.RSS; d*100 <= prev.RSS && -d*100 <= prev.RSS {
			steady++
		} else {
			steady = 0
		}
		return steady >= 2, nil
	})
	if aerr := p.Alive(); aerr != nil {
		tb.Fatal(aerr)
	}
	return cur, err == nil
}

// metric returns the value of the first sample of the Prometheus text exposition at
// url whose name and labels begin with series, e.g. `nicpool_gc_runs_total{result="success"}`.
func metric(ctx context.Context, url, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(body) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(string(line)), series)
		if !ok || !strings.HasPrefix(rest, " ") {
			continue
		}
		return strconv.ParseFloat(strings.TrimSpace(rest), 64)
	}
	return 0, fmt.Errorf("%s not served at %s", series, url)
}

// freeAddr is a loopback address whose port is free right now.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := binaries.FreeAddr()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
