package scale

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// Counters is what the control plane has counted so far, read from kube-apiserver's
// and etcd's /metrics. Two readings subtracted (Sub) give what a run cost.
type Counters struct {
	At time.Time
	// Requests counts requests by group, resource, subresource, verb and code
	// (apiserver_request_total).
	Requests map[RequestKey]float64
	// Bodies sums request body sizes by group, resource and verb
	// (apiserver_request_body_size_bytes).
	Bodies map[BodyKey]Histogram
	// WatchEvents and WatchBytes count the watch events sent, summed over watchers,
	// by "resource.group" (apiserver_watch_events_total, _sizes).
	WatchEvents, WatchBytes map[string]float64
	// Watches counts the watch requests open at the reading, by "resource.group"
	// (apiserver_longrunning_requests{verb="WATCH"}); Sub keeps the later reading's.
	Watches map[string]float64
	// APIServerCPU and EtcdCPU are process_cpu_seconds_total.
	APIServerCPU, EtcdCPU float64
}

// RequestKey identifies a kind of request.
type RequestKey struct{ Group, Resource, Subresource, Verb, Code string }

// BodyKey identifies a kind of request body.
type BodyKey struct{ Group, Resource, Verb string }

// Histogram is a Prometheus histogram: Buckets[i] counts observations up to
// Bounds[i].
type Histogram struct {
	Count, Sum float64
	Bounds     []float64
	Buckets    []float64
}

// scrapeTimeout bounds one read of the control plane's /metrics. A kube-apiserver
// saturated by a run (and by whatever else the machine runs) may take tens of
// seconds to render its metrics; a run's figures are worth the wait.
const scrapeTimeout = 2 * time.Minute

// ReadCountersRetrying reads the counters like ReadCounters, trying again when a read
// fails, for up to attempts reads; the pause between two reads starts at pause and
// doubles. It returns the last error.
func ReadCountersRetrying(ctx context.Context, env *testenv.Env, attempts int, pause time.Duration) (*Counters, error) {
	var errs []error
	for i := range attempts {
		c, err := ReadCounters(ctx, env)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(append(errs, ctx.Err())...)
		case <-time.After(pause):
		}
		pause *= 2
	}
	return nil, fmt.Errorf("%d reads failed, the last: %w", len(errs), errs[len(errs)-1])
}

// ReadCounters scrapes kube-apiserver and etcd of env once, each bounded by
// scrapeTimeout.
func ReadCounters(ctx context.Context, env *testenv.Env) (*Counters, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	cfg := rest.CopyConfig(env.Config)
	cfg.Timeout = scrapeTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape kube-apiserver /metrics: %w", err)
	}
	c := &Counters{At: time.Now(), Requests: map[RequestKey]float64{}, Bodies: map[BodyKey]Histogram{},
		WatchEvents: map[string]float64{}, WatchBytes: map[string]float64{}, Watches: map[string]float64{}}
	families, err := parseMetrics(raw, "apiserver_request_total", "apiserver_request_body_size_bytes", "apiserver_watch_events_total",
		"apiserver_watch_events_sizes", "apiserver_longrunning_requests", "process_cpu_seconds_total")
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		l := labels(m)
		c.Requests[RequestKey{l["group"], l["resource"], l["subresource"], l["verb"], l["code"]}] += m.GetCounter().GetValue()
	}
	for _, m := range families["apiserver_request_body_size_bytes"].GetMetric() {
		l := labels(m)
		k := BodyKey{l["group"], l["resource"], l["verb"]}
		c.Bodies[k] = c.Bodies[k].add(histogramOf(m.GetHistogram()))
	}
	for _, m := range families["apiserver_watch_events_total"].GetMetric() {
		c.WatchEvents[groupResource(labels(m))] += m.GetCounter().GetValue()
	}
	for _, m := range families["apiserver_watch_events_sizes"].GetMetric() {
		c.WatchBytes[groupResource(labels(m))] += m.GetHistogram().GetSampleSum()
	}
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		if l := labels(m); l["verb"] == "WATCH" {
			c.Watches[groupResource(l)] += m.GetGauge().GetValue()
		}
	}
	c.APIServerCPU = cpuOf(families)
	if env.Env == nil {
		return c, nil // no etcd of its own to read
	}
	if etcd := env.Env.ControlPlane.Etcd; etcd != nil && etcd.URL != nil {
		raw, err := get(ctx, etcd.URL.String()+"/metrics")
		if err != nil {
			return nil, fmt.Errorf("scrape etcd /metrics: %w", err)
		}
		families, err := parseMetrics(raw, "process_cpu_seconds_total")
		if err != nil {
			return nil, fmt.Errorf("etcd /metrics: %w", err)
		}
		c.EtcdCPU = cpuOf(families)
	}
	return c, nil
}

// Sub is what was counted between before and c.
func (c *Counters) Sub(before *Counters) *Counters {
	d := &Counters{At: c.At, Requests: map[RequestKey]float64{}, Bodies: map[BodyKey]Histogram{},
		WatchEvents: map[string]float64{}, WatchBytes: map[string]float64{}, Watches: c.Watches,
		APIServerCPU: c.APIServerCPU - before.APIServerCPU, EtcdCPU: c.EtcdCPU - before.EtcdCPU}
	for k, v := range c.Requests {
		if v -= before.Requests[k]; v != 0 {
			d.Requests[k] = v
		}
	}
	for k, h := range c.Bodies {
		if h = h.sub(before.Bodies[k]); h.Count != 0 {
			d.Bodies[k] = h
		}
	}
	for k, v := range c.WatchEvents {
		if v -= before.WatchEvents[k]; v != 0 {
			d.WatchEvents[k] = v
			d.WatchBytes[k] = c.WatchBytes[k] - before.WatchBytes[k]
		}
	}
	return d
}

// Resources nobody in a run writes or watches for an allocation: the API server's
// own leases, and Events, which ipamd writes only for failed ADDs and which are
// reported on their own.
func housekeeping(resource string) bool { return resource == "leases" || resource == "events" }

// mutating verbs of apiserver_request_total.
func mutating(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// Writes counts the mutating requests of an allocation: every resource but leases
// and events. conflicts is how many of them were answered 409.
func (c *Counters) Writes() (writes, conflicts float64) {
	for k, v := range c.Requests {
		if mutating(k.Verb) && !housekeeping(k.Resource) {
			writes += v
			if k.Code == "409" {
				conflicts += v
			}
		}
	}
	return writes, conflicts
}

// Events counts the Events written (failed ADDs).
func (c *Counters) Events() float64 {
	var n float64
	for k, v := range c.Requests {
		if mutating(k.Verb) && k.Resource == "events" {
			n += v
		}
	}
	return n
}

// WriteBreakdown lists the writes by resource and verb, with their 409s, largest
// count first.
func (c *Counters) WriteBreakdown() string {
	return c.breakdown(func(k RequestKey) bool { return mutating(k.Verb) && !housekeeping(k.Resource) })
}

// ReadBreakdown lists the reads (GET and LIST, not WATCH) by resource and verb, largest
// count first: what the nodes read directly rather than from their caches.
func (c *Counters) ReadBreakdown() string {
	return c.breakdown(func(k RequestKey) bool { return (k.Verb == "GET" || k.Verb == "LIST") && !housekeeping(k.Resource) })
}

// breakdown lists the requests that keep selects by resource and verb, with their
// 409s, largest count first.
func (c *Counters) breakdown(keep func(RequestKey) bool) string {
	type row struct {
		name         string
		n, conflicts float64
	}
	rows := map[string]*row{}
	for k, v := range c.Requests {
		if !keep(k) {
			continue
		}
		name := k.Resource
		if k.Subresource != "" {
			name += "/" + k.Subresource
		}
		name += " " + k.Verb
		r := rows[name]
		if r == nil {
			r = &row{name: name}
			rows[name] = r
		}
		r.n += v
		if k.Code == "409" {
			r.conflicts += v
		}
	}
	list := make([]*row, 0, len(rows))
	for _, r := range rows {
		list = append(list, r)
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].n > list[j].n || list[i].n == list[j].n && list[i].name < list[j].name
	})
	parts := make([]string, 0, len(list))
	for _, r := range list {
		s := fmt.Sprintf("%s %.0f", r.name, r.n)
		if r.conflicts > 0 {
			s += fmt.Sprintf(" (%.0f× 409)", r.conflicts)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// BodyBytes sums the bodies of the writes counted by Writes.
func (c *Counters) BodyBytes() float64 {
	var n float64
	for k, h := range c.Bodies {
		if !housekeeping(k.Resource) {
			n += h.Sum
		}
	}
	return n
}

// LargestBody bounds the largest request body of the writes counted by Writes:
// it is more than low and at most high bytes (the histogram's resolution is 100 kB).
// high is +Inf past the last bucket, 0 when nothing was written.
func (c *Counters) LargestBody() (low, high float64, resource string) {
	for k, h := range c.Bodies {
		if housekeeping(k.Resource) || h.Count == 0 {
			continue
		}
		l, u := h.maxRange()
		if u > high || u == high && l > low {
			low, high, resource = l, u, k.Resource
		}
	}
	return low, high, resource
}

// Watch sums the watch events sent for nicpool's API groups, and their bytes: the
// fan-out of allocation state to the nodes.
func (c *Counters) Watch() (events, bytes float64) {
	for k, v := range c.WatchEvents {
		if _, group, _ := strings.Cut(k, "."); ours(group) {
			events += v
			bytes += c.WatchBytes[k]
		}
	}
	return events, bytes
}

// Bookmarks estimates how many of the watch events Watch counts no write caused: the
// API server sends each watch a bookmark about once a minute, however little
// changes, so they grow with the watches open and the run's length, not with the
// allocations. The estimate is the events per watch of nicpool's resources that no
// request wrote during the run (every event of those is a bookmark), times every watch
// of nicpool's resources; ok is false when every resource was written or none was
// watched.
func (c *Counters) Bookmarks() (bookmarks float64, ok bool) {
	written := map[string]bool{}
	for k, v := range c.Requests {
		if mutating(k.Verb) && v > 0 {
			written[groupResource(map[string]string{"group": k.Group, "resource": k.Resource})] = true
		}
	}
	var quietEvents, quietWatches float64
	for k, n := range c.Watches {
		if _, group, _ := strings.Cut(k, "."); ours(group) && !written[k] {
			quietEvents += c.WatchEvents[k]
			quietWatches += n
		}
	}
	if quietWatches == 0 {
		return 0, false
	}
	return quietEvents / quietWatches * c.ourWatches(), true
}

// ourWatches counts the watches of nicpool's resources open at the reading.
func (c *Counters) ourWatches() float64 {
	var n float64
	for k, v := range c.Watches {
		if _, group, _ := strings.Cut(k, "."); ours(group) {
			n += v
		}
	}
	return n
}

// WatchBreakdown lists watch events by resource, nicpool's groups first, most
// first; the rest (relists of pods and nodes, the API server's own informers) is
// summed.
func (c *Counters) WatchBreakdown() string {
	var keys []string
	var others, otherBytes float64
	for k, v := range c.WatchEvents {
		if _, group, _ := strings.Cut(k, "."); ours(group) {
			keys = append(keys, k)
		} else {
			others += v
			otherBytes += c.WatchBytes[k]
		}
	}
	sort.Slice(keys, func(i, j int) bool { return c.WatchEvents[keys[i]] > c.WatchEvents[keys[j]] })
	parts := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f (%s)", k, c.WatchEvents[k], bytesText(c.WatchBytes[k])))
	}
	parts = append(parts, fmt.Sprintf("other resources %.0f (%s)", others, bytesText(otherBytes)))
	return strings.Join(parts, ", ")
}

func (h Histogram) add(o Histogram) Histogram {
	if h.Bounds == nil {
		return o
	}
	out := Histogram{Count: h.Count + o.Count, Sum: h.Sum + o.Sum, Bounds: h.Bounds, Buckets: slices.Clone(h.Buckets)}
	for i := range out.Buckets {
		if i < len(o.Buckets) {
			out.Buckets[i] += o.Buckets[i]
		}
	}
	return out
}

func (h Histogram) sub(o Histogram) Histogram {
	out := Histogram{Count: h.Count - o.Count, Sum: h.Sum - o.Sum, Bounds: h.Bounds, Buckets: slices.Clone(h.Buckets)}
	for i := range out.Buckets {
		if i < len(o.Buckets) {
			out.Buckets[i] -= o.Buckets[i]
		}
	}
	return out
}

// maxRange is the bucket the largest observation fell in.
func (h Histogram) maxRange() (low, high float64) {
	for i, n := range h.Buckets {
		if n >= h.Count {
			if i > 0 {
				low = h.Bounds[i-1]
			}
			return low, h.Bounds[i]
		}
	}
	if len(h.Bounds) > 0 {
		low = h.Bounds[len(h.Bounds)-1]
	}
	return low, math.Inf(1)
}

func histogramOf(p *dto.Histogram) Histogram {
	h := Histogram{Count: float64(p.GetSampleCount()), Sum: p.GetSampleSum()}
	for _, b := range p.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		h.Bounds = append(h.Bounds, b.GetUpperBound())
		h.Buckets = append(h.Buckets, float64(b.GetCumulativeCount()))
	}
	return h
}

// parseMetrics parses the families named in a text exposition; the others are
// skipped line by line first. A busy kube-apiserver's /metrics is megabytes of
// histograms this package never reads, and parsing them all cost this process about
// 0.1 CPU-second per reading: run time on the machine the run measures.
func parseMetrics(raw []byte, names ...string) (map[string]*dto.MetricFamily, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	kept := make([]byte, 0, 64<<10)
	for line := range bytes.Lines(raw) {
		if want[familyOf(line)] {
			kept = append(kept, line...)
		}
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(kept))
}

// familyOf is the metric family a line of a text exposition belongs to: the name in
// "# HELP name …" and "# TYPE name …", else the sample's name less a histogram's or
// summary's _bucket, _sum or _count.
func familyOf(line []byte) string {
	if rest, ok := bytes.CutPrefix(line, []byte("# ")); ok {
		f := bytes.Fields(rest)
		if len(f) < 2 {
			return ""
		}
		return string(f[1])
	}
	end := bytes.IndexAny(line, "{ ")
	if end < 0 {
		return ""
	}
	name := line[:end]
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := bytes.CutSuffix(name, []byte(suffix)); ok {
			return string(base)
		}
	}
	return string(name)
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func groupResource(l map[string]string) string {
	if l["group"] == "" {
		return l["resource"]
	}
	return l["resource"] + "." + l["group"]
}

func cpuOf(families map[string]*dto.MetricFamily) float64 {
	for _, m := range families["process_cpu_seconds_total"].GetMetric() {
		return m.GetCounter().GetValue()
	}
	return 0
}

func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// bytesText renders a byte count for a person.
func bytesText(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}
