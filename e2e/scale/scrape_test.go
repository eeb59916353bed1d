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
