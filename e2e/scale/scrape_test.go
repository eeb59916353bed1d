package scale

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// A control plane too busy to answer its first scrapes is read again; one that never
// answers is reported with how many reads failed.
func TestReadCountersRetrying(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("# TYPE apiserver_request_total counter\n" +
			`apiserver_request_total{group="ipam.nicpool.io",resource="ipblocks",subresource="",verb="PATCH",code="200"} 7` + "\n"))
	}))
	defer srv.Close()
	env := &testenv.Env{Config: &rest.Config{Host: srv.URL}}
	ctx := context.Background()

	c, err := ReadCountersRetrying(ctx, env, 3, time.Millisecond)
	if err != nil {
		t.Fatalf("third read: %v", err)
	}
	if writes, _ := c.Writes(); writes != 7 {
		t.Errorf("read %v writes, want 7", writes)
	}

	calls.Store(0)
	_, err = ReadCountersRetrying(ctx, env, 2, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "2 reads failed") {
		t.Errorf("two reads of a busy server: %v, want an error saying both failed", err)
	}
}

// A run whose counters could not be read still reports what it found, and says
// which figures are missing rather than reporting zeros.
func TestReportWithoutCounters(t *testing.T) {
	r := &Result{Scenario: Scenario{Name: "s", Pods: 3, Nodes: 1, Mode: Socket}, Wall: time.Second, Allocated: 3,
		APIUnread: context.DeadlineExceeded}
	text := strings.Join(r.Lines(), "\n")
	for _, want := range []string{"3 of 3 pods hold an address", "NOT MEASURED", context.DeadlineExceeded.Error()} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	m := r.Metrics()
	if _, ok := m["writes/alloc"]; ok || m["allocated"] != 3 {
		t.Errorf("metrics %v: want the allocations and no API figure", m)
	}
}

// Bookmarks are told apart from the events writes caused by the resources nobody
// wrote: 100 watches of reserved IPs got 100 events (one bookmark each), so the 400
// watches of nicpool's four resources got about 400 bookmarks; the pods' events are
// not nicpool's and count for nothing.
func TestBookmarksEstimatedFromResourcesNobodyWrote(t *testing.T) {
	c := &Counters{
		Requests: map[RequestKey]float64{
			{Group: "ipam.nicpool.io", Resource: "ipblocks", Verb: "PATCH", Code: "200"}:                 300,
			{Group: "spiderpool.spidernet.io", Resource: "spiderendpoints", Verb: "POST", Code: "201"}:   1000,
			{Group: "spiderpool.spidernet.io", Resource: "spiderippools", Verb: "GET", Code: "200"}:      50,
			{Group: "spiderpool.spidernet.io", Resource: "spiderreservedips", Verb: "LIST", Code: "200"}: 5,
		},
		WatchEvents: map[string]float64{
			"ipblocks.ipam.nicpool.io": 400, "spiderendpoints.spiderpool.spidernet.io": 1100,
			"spiderippools.spiderpool.spidernet.io": 100, "spiderreservedips.spiderpool.spidernet.io": 100, "pods": 5000,
		},
		Watches: map[string]float64{
			"ipblocks.ipam.nicpool.io": 100, "spiderendpoints.spiderpool.spidernet.io": 100,
			"spiderippools.spiderpool.spidernet.io": 100, "spiderreservedips.spiderpool.spidernet.io": 100, "pods": 100,
		},
	}
	if bm, ok := c.Bookmarks(); !ok || bm != 400 {
		t.Errorf("bookmarks %v (%v), want 400", bm, ok)
	}
	if events, _ := c.Watch(); events != 1700 {
		t.Errorf("watch events of nicpool's resources %v, want 1700", events)
	}

	c.Requests[RequestKey{Group: "spiderpool.spidernet.io", Resource: "spiderreservedips", Verb: "POST", Code: "201"}] = 1
	c.Requests[RequestKey{Group: "spiderpool.spidernet.io", Resource: "spiderippools", Verb: "PUT", Code: "200"}] = 1
	if bm, ok := c.Bookmarks(); ok {
		t.Errorf("every resource written: bookmarks estimated at %v, want no estimate", bm)
	}
}

// Only the families asked for are parsed, a histogram's bucket, sum and count lines
// with them; a family whose name another one's starts with is not taken for it.
func TestParseMetricsKeepsTheFamiliesAskedFor(t *testing.T) {
	raw := []byte(`# HELP apiserver_request_body_size_bytes Request body size.
# TYPE apiserver_request_body_size_bytes histogram
apiserver_request_body_size_bytes_bucket{group="g",resource="r",verb="create",le="1000"} 2
apiserver_request_body_size_bytes_bucket{group="g",resource="r",verb="create",le="+Inf"} 3
apiserver_request_body_size_bytes_sum{group="g",resource="r",verb="create"} 2500
apiserver_request_body_size_bytes_count{group="g",resource="r",verb="create"} 3
# HELP apiserver_request_total Requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",group="g",resource="r",subresource="",verb="POST"} 3
# HELP apiserver_request_total_other Not asked for.
# TYPE apiserver_request_total_other counter
apiserver_request_total_other 9
# HELP process_cpu_seconds_total CPU.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
`)
	families, err := parseMetrics(raw, "apiserver_request_body_size_bytes", "process_cpu_seconds_total")
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 2 || families["apiserver_request_total"] != nil || families["apiserver_request_total_other"] != nil {
		t.Errorf("parsed families %v, want the two asked for", families)
	}
	h := families["apiserver_request_body_size_bytes"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 2500 || len(h.GetBucket()) != 2 {
		t.Errorf("histogram %v, want count 3, sum 2500 and its two buckets", h)
	}
	if cpu := cpuOf(families); cpu != 12.5 {
		t.Errorf("CPU %v, want 12.5", cpu)
	}
}
