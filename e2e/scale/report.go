package scale

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Lines is the run's report, one figure per line, for a benchmark's log.
func (r *Result) Lines() []string {
	s := r.Scenario
	ok := float64(max(r.Allocated, 1))
	lines := []string{
		fmt.Sprintf("scenario: %s (set up in %s)", s, r.SetUp.Round(time.Second)),
		fmt.Sprintf("wall %s, %.0f allocations/s; %d of %d pods hold an address, %d failed their first attempt, %d ADDs in all",
			r.Wall.Round(time.Millisecond), float64(r.Allocated)/r.Wall.Seconds(), r.Allocated, s.Pods, r.FirstAttemptFailed, r.Attempts),
		fmt.Sprintf("time to address per pod: p50 %s, p99 %s, max %s; the last pod's first ADD began %s after the start",
			r.percentile(50), r.percentile(99), r.percentile(100), r.LastBegan.Round(time.Millisecond)),
		fmt.Sprintf("store: %d records; %d duplicates, %d leaked, %d pods not holding what they were given; invariants: %s",
			r.Accounting.Records, r.Accounting.Duplicates, r.Accounting.Leaked, r.Accounting.Mismatched, verdict(r.Invariants)),
	}
	apiCPU, etcdCPU := "not read", "not read"
	if r.API == nil {
		lines = append(lines,
			fmt.Sprintf("API writes, bytes and watch events NOT MEASURED: the control plane's counters could not be read after the run: %v", r.APIUnread),
			fmt.Sprintf("largest object stored: %s %s, %s", r.Largest.Resource, r.Largest.Name, bytesText(float64(r.Largest.Bytes))))
	} else {
		writes, conflicts := r.API.Writes()
		events, eventBytes := r.API.Watch()
		low, high, res := r.API.LargestBody()
		apiCPU, etcdCPU = fmt.Sprintf("%.1f s", r.API.APIServerCPU), fmt.Sprintf("%.1f s", r.API.EtcdCPU)
		lines = append(lines,
			fmt.Sprintf("API writes: %.2f per allocation (%.0f, %.0f answered 409): %s; plus %.0f Events",
				writes/ok, writes, conflicts, r.API.WriteBreakdown(), r.API.Events()),
			"API reads (GET and LIST): "+r.API.ReadBreakdown(),
			fmt.Sprintf("bytes sent: %s per allocation (%s in all); largest write %s (%s); largest object stored: %s %s, %s",
				bytesText(r.API.BodyBytes()/ok), bytesText(r.API.BodyBytes()), bodyRange(low, high), res, r.Largest.Resource, r.Largest.Name, bytesText(float64(r.Largest.Bytes))),
			fmt.Sprintf("watch events of nicpool's objects: %.2f per allocation (%s per allocation), summed over watchers: %s; %s; counted once they stopped growing, %s after the other counters",
				events/ok, bytesText(eventBytes/ok), r.API.WatchBreakdown(), bookmarkText(r.API, ok), r.WatchWait.Round(100*time.Millisecond)))
	}
	lines = append(lines, fmt.Sprintf("CPU: kube-apiserver %s, etcd %s, the %d ipamd %.1f s, plugin execs %.1f s (%s), this harness %.1f s%s; largest ipamd peak RSS %s; load average %s",
		apiCPU, etcdCPU, s.Nodes, r.IpamdCPU, r.PluginCPU, perExec(r.PluginCPU, r.PluginExecs), r.HarnessCPU, harnessPerExec(r.HarnessCPU, r.PluginExecs), bytesText(float64(r.IpamdPeakRSS)), r.Load))
	status := fmt.Sprintf("the pool's status counted every allocation %s after the last ADD", r.PoolStatusLag.Round(100*time.Millisecond))
	if r.PoolStatusBehind != nil {
		status = "POOL STATUS BEHIND: " + r.PoolStatusBehind.Error()
	}
	lines = append(lines, fmt.Sprintf("%s; the webhook (pool counter, garbage collector) used %.1f s of CPU", status, r.WebhookCPU))
	for _, p := range r.Profiles {
		lines = append(lines, "profile: "+p)
	}
	if r.Stalled {
		lines = append(lines, fmt.Sprintf("STALLED: no pod got an address for %s; the run ended there", s.Stall))
	}
	if r.Settled > 0 || r.Unsettled != nil {
		state := fmt.Sprintf("settled %s after the last ADD", r.Settled.Round(time.Second))
		if r.Unsettled != nil {
			state = "NOT SETTLED: " + r.Unsettled.Error()
		}
		lines = append(lines, "nicpool's objects, checked once ipamd finished what callers gave up on: "+state)
	}
	if r.Undeleted > 0 {
		lines = append(lines, fmt.Sprintf("%d failed sandboxes were never torn down: their DEL failed until %s after the deadline", r.Undeleted, teardownBound))
	}
	if r.Deleted {
		lines = append(lines, fmt.Sprintf("after every pod's sandbox was deleted: %d records and %d SpiderEndpoints left", r.LeftRecords, r.LeftEndpoints))
		for _, e := range r.LeftExamples {
			lines = append(lines, "  left: "+e)
		}
	}
	for _, e := range r.Accounting.Examples {
		lines = append(lines, "  problem: "+e)
	}
	shapes := make([]string, 0, len(r.Errors))
	for e := range r.Errors {
		shapes = append(shapes, e)
	}
	sort.Slice(shapes, func(i, j int) bool { return r.Errors[shapes[i]] > r.Errors[shapes[j]] })
	for i, e := range shapes {
		if i == 5 {
			lines = append(lines, fmt.Sprintf("  … and %d more kinds of error", len(shapes)-5))
			break
		}
		lines = append(lines, fmt.Sprintf("  error ×%d: %s", r.Errors[e], e))
	}
	return lines
}

// Windows reports the cost per allocation as the pool filled, one line per step of
// size allocations.
func (r *Result) Windows(step int64) []string {
	var lines []string
	for from := int64(0); from < int64(r.Allocated); from += step {
		w, err := r.window(from, from+step)
		if err != nil {
			continue
		}
		lines = append(lines, w.String())
	}
	return lines
}

func (w Window) String() string {
	return fmt.Sprintf("allocated %6d–%6d: %6.0f/s, %.2f writes, %s sent, %.1f watch events (%s), %.2f ms of kube-apiserver CPU per allocation",
		w.From, w.To, w.Rate, w.Writes, bytesText(w.Bytes), w.WatchEvents, bytesText(w.WatchBytes), w.APIServerCPU*1000)
}

// Metrics are the figures a benchmark reports with ReportMetric.
// The API server's figures are left out when its counters were not read.
func (r *Result) Metrics() map[string]float64 {
	ok := float64(max(r.Allocated, 1))
	m := map[string]float64{
		"wall-s":           r.Wall.Seconds(),
		"allocs/s":         float64(r.Allocated) / r.Wall.Seconds(),
		"allocated":        float64(r.Allocated),
		"first-failed":     float64(r.FirstAttemptFailed),
		"largest-obj-KiB":  float64(r.Largest.Bytes) / 1024,
		"ipamd-cpu-s":      r.IpamdCPU,
		"webhook-cpu-s":    r.WebhookCPU,
		"status-lag-ms":    float64(r.PoolStatusLag.Milliseconds()),
		"harness-cpu-s":    r.HarnessCPU,
		"p99-ms":           float64(r.percentile(99).Milliseconds()),
		"last-began-ms":    float64(r.LastBegan.Milliseconds()),
		"duplicates+leaks": float64(r.Accounting.Duplicates + r.Accounting.Leaked + r.Accounting.Mismatched),
	}
	if r.PluginExecs > 0 {
		m["plugin-cpu-ms/exec"] = r.PluginCPU * 1000 / float64(r.PluginExecs)
	}
	if r.API != nil {
		writes, conflicts := r.API.Writes()
		events, _ := r.API.Watch()
		m["writes/alloc"] = writes / ok
		m["conflicts"] = conflicts
		m["bytes/alloc"] = r.API.BodyBytes() / ok
		m["watch-ev/alloc"] = events / ok
		if bm, known := r.API.Bookmarks(); known {
			m["watch-ev-written/alloc"] = (events - bm) / ok
		}
		m["apiserver-cpu-s"] = r.API.APIServerCPU
	}
	return m
}

// bookmarkText says how many of the watch events were bookmarks rather than writes.
func bookmarkText(c *Counters, allocated float64) string {
	bm, ok := c.Bookmarks()
	if !ok {
		return "bookmarks not estimated (every resource of nicpool's was written)"
	}
	events, _ := c.Watch()
	return fmt.Sprintf("about %.0f of them bookmarks (the API server's heartbeat to each of %.0f watches, estimated from the resources nobody wrote), %.2f per allocation caused by writes",
		bm, c.ourWatches(), (events-bm)/allocated)
}

func (r *Result) percentile(p int) time.Duration {
	if len(r.PodLatency) == 0 {
		return 0
	}
	i := min(len(r.PodLatency)*p/100, len(r.PodLatency)-1)
	return r.PodLatency[i].Round(time.Millisecond)
}

// perExec is the plugin's CPU time per run, or "none run".
func perExec(cpu float64, execs int) string {
	if execs == 0 {
		return "none run"
	}
	return fmt.Sprintf("%.1f ms each of %d", cpu*1000/float64(execs), execs)
}

// harnessPerExec is the harness's CPU per plugin run, when it ran the plugin.
func harnessPerExec(cpu float64, execs int) string {
	if execs == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.1f ms per plugin run)", cpu*1000/float64(execs))
}

func bodyRange(low, high float64) string {
	switch {
	case high == 0:
		return "none"
	case math.IsInf(high, 1):
		return fmt.Sprintf("over %s", bytesText(low))
	}
	return fmt.Sprintf("%s–%s", bytesText(low), bytesText(high))
}

func verdict(err error) string {
	if err == nil {
		return "hold"
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) > 3 {
		return fmt.Sprintf("VIOLATED (%d): %s …", len(lines), strings.Join(lines[:3], "; "))
	}
	return "VIOLATED: " + strings.Join(lines, "; ")
}
