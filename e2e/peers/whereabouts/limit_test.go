package whereabouts

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/nicpool/nicpool/e2e/testenv"

	"github.com/k8snetworkplumbingwg/whereabouts/pkg/logging"
)

// cp is the package's one control plane.
var cp *ControlPlane

func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) (err error) {
		// whereabouts logs at debug level to stderr and client-go's leader election
		// logs every attempt; a plugin's stderr goes to the container runtime, not here.
		if os.Getenv("WHEREABOUTS_PEER_LOG") == "" {
			logging.SetLogStderr(false)
			klog.SetLogger(logr.Discard())
		}
		cp, err = Start(s)
		return err
	})
}

// TestTwentyFromTwoNodes checks the harness: twenty pods on two nodes all get an
// address from whereabouts, each a different one, recorded in its pool as returned.
func TestTwentyFromTwoNodes(t *testing.T) {
	o := Options{Pods: 20, Nodes: 2, Namespace: "harness", Range: "10.80.0.0/24", RangeStart: "10.80.0.1", RangeEnd: "10.80.0.50", Attempts: 1}
	r, err := Run(cp, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Allocated) != o.Pods {
		t.Errorf("%d of %d pods got an address; errors: %v", len(r.Allocated), o.Pods, r.Errors)
	}
	leaked, err := Check(cp, o, r)
	if err != nil {
		t.Error(err)
	}
	if len(leaked) > 0 {
		t.Errorf("addresses held by pods whose ADD failed: %v", leaked)
	}
}

// BenchmarkWhereaboutsLimit1000 is nicpool's limit test (ipamd/daemon
// BenchmarkLimit1000) run with whereabouts: 1000 pods, one range of exactly 1000
// addresses, 10 nodes, every ADD at once against one real API server. A failed ADD
// is re-run at once (new container ID) as a kubelet would, up to three attempts per
// pod ($WHEREABOUTS_BENCH_ATTEMPTS for more).
var limitRuns atomic.Int32

func BenchmarkWhereaboutsLimit1000(b *testing.B) {
	const pods, nodes = 1000, 10
	attempts := 3
	if v, err := strconv.Atoi(os.Getenv("WHEREABOUTS_BENCH_ATTEMPTS")); err == nil && v > 0 {
		attempts = v // a kubelet retries without end; three bounds the run near 6 minutes
	}
	for range b.N {
		// Fresh names on every run (-count), which share the package's control plane.
		iter := int(limitRuns.Add(1) - 1)
		b.StopTimer()
		// 10.X.0.1-10.X.3.232: exactly 1000 addresses.
		o := Options{
			Pods: pods, Nodes: nodes, Namespace: fmt.Sprintf("wb-limit-%d", iter),
			Range: fmt.Sprintf("10.%d.0.0/16", 90+iter), RangeStart: fmt.Sprintf("10.%d.0.1", 90+iter), RangeEnd: fmt.Sprintf("10.%d.3.232", 90+iter),
			Attempts: attempts,
		}
		load := LoadAverage()
		before, err := Scrape(b.Context(), cp.Config)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r, err := Run(cp, o)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		after, err := Scrape(b.Context(), cp.Config)
		if err != nil {
			b.Fatal(err)
		}
		d := after.Sub(before)
		ok := len(r.Allocated)
		writes := Total(d.Writes)
		b.Logf("whereabouts limit test: %d pods, range of %d, %d nodes: wall %v, %.1f allocations/s, %d allocated, %d pods' first ADD failed, %d gave up after %d attempts, %d ADDs run (%d hung)",
			pods, pods, nodes, r.Wall.Round(time.Millisecond), float64(ok)/r.Wall.Seconds(), ok, r.FirstAttemptFailed, r.GaveUp, o.Attempts, r.Attempts, r.Hung)
		b.Logf("API: %.2f writes per allocation (%d writes: %v), %.1f reads per allocation (%d: %v), responses by code %v",
			float64(writes)/float64(max(ok, 1)), writes, d.Writes, float64(Total(d.Reads))/float64(max(ok, 1)), Total(d.Reads), d.Reads, d.Codes)
		b.Logf("per ADD attempt p50 %v p99 %v; per pod until allocated p50 %v p99 %v",
			Percentile(r.AttemptLatency, 50).Round(time.Millisecond), Percentile(r.AttemptLatency, 99).Round(time.Millisecond),
			Percentile(r.PodLatency, 50).Round(time.Millisecond), Percentile(r.PodLatency, 99).Round(time.Millisecond))
		b.Logf("CPU: kube-apiserver %.1f s; machine load average %s before, %s after", d.CPU, load, LoadAverage())
		b.ReportMetric(r.Wall.Seconds(), "wall-s")
		b.ReportMetric(float64(ok)/r.Wall.Seconds(), "allocs/s")
		b.ReportMetric(float64(writes)/float64(max(ok, 1)), "writes/alloc")
		b.ReportMetric(float64(d.Codes["409"]), "conflicts")
		b.ReportMetric(float64(r.FirstAttemptFailed), "first-add-failed")
		b.ReportMetric(float64(Percentile(r.AttemptLatency, 50).Milliseconds()), "p50-ms")
		b.ReportMetric(float64(Percentile(r.AttemptLatency, 99).Milliseconds()), "p99-ms")
		b.ReportMetric(d.CPU, "apiserver-cpu-s")
		// Benchmark output is cut after ten lines: the error tally goes on one line.
		kinds := make([]string, 0, len(r.Errors))
		for msg := range r.Errors {
			kinds = append(kinds, msg)
		}
		sort.Slice(kinds, func(i, j int) bool { return r.Errors[kinds[i]] > r.Errors[kinds[j]] })
		tally := make([]string, len(kinds))
		for i, msg := range kinds {
			tally[i] = fmt.Sprintf("×%d %q", r.Errors[msg], msg)
		}
		b.Logf("ADD errors: %s", strings.Join(tally, "; "))
		leaked, err := Check(cp, o, r)
		if err != nil {
			b.Errorf("after the run: %v", err)
		}
		// An ADD that failed after its write landed leaves an address behind; a
		// runtime's DEL of the failed sandbox (not run here) or whereabouts'
		// reconciler would release it.
		b.Logf("check: %d addresses held by pods whose every ADD failed %v", len(leaked), leaked)
		b.ReportMetric(float64(len(leaked)), "leaked")
	}
}
