package scale

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// The scenarios of issue 11, each on a control plane of its own. They assert
// correctness (no duplicate, no leak, the invariants) and report figures; a goal of
// the design that a run misses is logged as "goal not met", not failed.

// limit is the limit test after spiderpool's: every ADD at once on a pool of
// exactly as many addresses as pods.
func limit(pods, nodes int, mode Mode) Scenario {
	inflight := 0
	if mode == Exec && pods/nodes > KubeletDefaultMaxPods {
		// A node starts no more sandboxes at once than it may run pods, and a
		// blocked plugin process costs memory of its own.
		inflight = KubeletDefaultMaxPods
	}
	return Scenario{Name: fmt.Sprintf("limit-%d-%s", pods, mode), Pods: pods, Nodes: nodes,
		Subnet: netip.MustParsePrefix("10.90.0.0/16"), Size: pods, Mode: mode, InFlight: inflight,
		Stall: stall, AttemptTimeout: PluginRequestTimeout, Backoff: KubeletBackoff}
}

// stall ends a run in which no pod has got an address for this long: well above any
// pause of a layout that works, well below the deadlines.
const stall = 3 * time.Minute

// results keeps each scenario's result of this process, for ratios between
// scenarios measured in one run.
var results = map[string]*Result{}

// BenchmarkLimit1000: 1,000 pods, a pool of exactly 1,000, 10 ipamd, at the socket
// and through one plugin exec per ADD. Goals: under 5 s and under 10 s, at most 2
// API writes per allocation, no first-attempt failure.
func BenchmarkLimit1000(b *testing.B) {
	for _, tc := range []struct {
		mode Mode
		goal time.Duration
	}{{Socket, 5 * time.Second}, {Exec, 10 * time.Second}} {
		b.Run(string(tc.mode), func(b *testing.B) {
			r := runScenario(b, limit(1000, 10, tc.mode))
			goal(b, r.Wall < tc.goal, "wall %s, goal under %s", r.Wall.Round(time.Millisecond), tc.goal)
			if r.API != nil {
				writes, _ := r.API.Writes()
				goal(b, writes/float64(max(r.Allocated, 1)) <= 2, "%.2f API writes per allocation, goal at most 2", writes/float64(max(r.Allocated, 1)))
			}
			goal(b, r.FirstAttemptFailed == 0, "%d first-attempt failures, goal none", r.FirstAttemptFailed)
		})
	}
}

// BenchmarkLimit12000: 12,000 pods, a pool of exactly 12,000, 10 ipamd, at the
// socket. Goal: at most 12 times the 1,000-pod wall time (when that ran in this
// process), no first-attempt failure.
func BenchmarkLimit12000(b *testing.B) {
	r := runScenario(b, limit(12000, 10, Socket))
	goal(b, r.FirstAttemptFailed == 0, "%d first-attempt failures, goal none", r.FirstAttemptFailed)
	goal(b, r.Allocated == r.Scenario.Pods, "%d of %d pods hold an address", r.Allocated, r.Scenario.Pods)
	if small := results["BenchmarkLimit1000/"+string(r.Scenario.Mode)]; small != nil {
		ratio := r.Wall.Seconds() / small.Wall.Seconds()
		b.ReportMetric(ratio, "x-1000-wall")
		goal(b, ratio <= 12, "wall %.1f× the 1,000-pod run's (%s), goal at most 12×", ratio, small.Wall.Round(time.Millisecond))
	}
}

// BenchmarkFill16: a /16 pool (65,534 addresses) filled by 20 ipamd at the socket,
// each node running at most 100 ADDs at once (as the 1,000-pod limit test's nodes
// do). Goals: every address allocated, no first-attempt failure, no object over
// 256 KiB, bytes per allocation at 60,000 allocated within 2× of the figure at
// 1,000, a rate not below the 1,000-pod limit test's.
func BenchmarkFill16(b *testing.B) {
	s := Scenario{Name: "fill16", Pods: 65534, Nodes: 20, Subnet: netip.MustParsePrefix("10.96.0.0/16"), Mode: Socket, InFlight: 100,
		Stall: stall, AttemptTimeout: PluginRequestTimeout, Backoff: KubeletBackoff, SampleEvery: 1000}
	r := runScenario(b, s)
	for _, l := range r.Windows(5000) {
		b.Log(l)
	}
	goal(b, r.Allocated == r.Scenario.Pods, "%d of %d pods hold an address", r.Allocated, r.Scenario.Pods)
	goal(b, r.FirstAttemptFailed == 0, "%d first-attempt failures, goal none", r.FirstAttemptFailed)
	goal(b, r.Largest.Bytes < 256<<10, "largest object stored %s (%s %s), goal under 256 KiB", bytesText(float64(r.Largest.Bytes)), r.Largest.Resource, r.Largest.Name)
	early, err1 := r.window(0, 2000)
	late, err2 := r.window(59000, 61000)
	if err1 != nil || err2 != nil {
		goal(b, false, "bytes per allocation at 1,000 and at 60,000 allocated not measured: the pool did not reach them")
	} else {
		b.Logf("at 1,000 allocated: %s", early)
		b.Logf("at 60,000 allocated: %s", late)
		ratio := late.Bytes / early.Bytes
		b.ReportMetric(ratio, "x-bytes-60k/1k")
		goal(b, ratio <= 2, "bytes per allocation at 60,000 allocated %.1f× the figure at 1,000, goal at most 2×", ratio)
	}
	if small := results["BenchmarkLimit1000/"+string(r.Scenario.Mode)]; small != nil {
		rate, smallRate := float64(r.Allocated)/r.Wall.Seconds(), float64(small.Allocated)/small.Wall.Seconds()
		goal(b, rate >= smallRate, "%.0f allocations/s, the 1,000-pod limit test %.0f/s: goal not below", rate, smallRate)
	}
}

// BenchmarkWatchFanout: 1,000 pods on 10 ipamd, then on 100. Goal: watch events per
// allocation, summed over the instances, within 1.5× of each other. Both the events
// counted and those caused by writes are compared: the API server also sends each
// watch a bookmark about once a minute, which grows with the watches open and the
// run's length, not with the allocations (Counters.Bookmarks).
func BenchmarkWatchFanout(b *testing.B) {
	type perAlloc struct{ all, written float64 }
	per := map[int]perAlloc{}
	for _, nodes := range []int{10, 100} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			s := limit(1000, nodes, Socket)
			s.Name = fmt.Sprintf("fanout-%d", nodes)
			r := runScenario(b, s)
			if r.API != nil {
				ok := float64(max(r.Allocated, 1))
				events, _ := r.API.Watch()
				p := perAlloc{all: events / ok}
				if bm, known := r.API.Bookmarks(); known {
					p.written = (events - bm) / ok
				}
				per[nodes] = p
			}
		})
	}
	few, many := per[10], per[100]
	if few.all > 0 && many.all > 0 {
		ratio := many.all / few.all
		b.Logf("watch events per allocation: %.2f on 10 ipamd, %.2f on 100: %.2f×", few.all, many.all, ratio)
		goal(b, ratio <= 1.5, "watch events per allocation grow %.2f× from 10 to 100 ipamd, goal at most 1.5×", ratio)
	}
	if few.written > 0 && many.written > 0 {
		ratio := many.written / few.written
		b.Logf("watch events per allocation caused by writes (bookmarks left out): %.2f on 10 ipamd, %.2f on 100: %.2f×", few.written, many.written, ratio)
		goal(b, ratio <= 1.5, "watch events per allocation caused by writes grow %.2f× from 10 to 100 ipamd, goal at most 1.5×", ratio)
	}
}

// runScenario applies NICPOOL_SCALE_* to s, runs it once on a control plane of its
// own, logs and reports its figures, and fails on what is wrong whatever the speed:
// a duplicate, a leak, a broken invariant.
func runScenario(b *testing.B, s Scenario) *Result {
	b.Helper()
	s, err := s.FromEnv()
	if err != nil {
		b.Fatal(err)
	}
	var r *Result
	for b.Loop() {
		env, err := testenv.Start(testenv.Options{})
		if err != nil {
			b.Fatal(err)
		}
		r, err = Run(context.Background(), env, bins, s)
		if stopErr := env.Stop(); stopErr != nil {
			b.Logf("stop control plane: %v", stopErr)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, l := range r.Lines() {
		b.Log(l)
	}
	for name, v := range r.Metrics() {
		b.ReportMetric(v, name)
	}
	if a := r.Accounting; a.Duplicates+a.Leaked+a.Mismatched > 0 {
		b.Errorf("%d duplicates, %d leaked, %d pods not holding what they were given", a.Duplicates, a.Leaked, a.Mismatched)
	}
	if r.Invariants != nil {
		b.Errorf("invariants violated: %v", r.Invariants)
	}
	results[b.Name()] = r
	return r
}

// goal logs whether a goal of the design is met; missing one is a figure, not a
// failure.
func goal(b *testing.B, met bool, format string, args ...any) {
	b.Helper()
	state := "goal met"
	if !met {
		state = "GOAL NOT MET"
	}
	b.Logf("%s: %s", state, fmt.Sprintf(format, args...))
}
