package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// BenchmarkFill fills a whole pool through the ledger alone (no pods, no endpoints):
// NICPOOL_FILL_BITS (default 20, a /20 of 4,094 addresses; 16 for a /16) from
// NICPOOL_FILL_NODES (default 20) nodes, at most 200 allocations in flight. It reports
// the allocation rate and the writes and request bytes per allocation over the first
// and the last thousand allocations, the largest request, and checks that the pool
// ends exactly full.
func BenchmarkFill(b *testing.B) {
	bits, nodes := 20, 20
	if v, err := strconv.Atoi(os.Getenv("NICPOOL_FILL_BITS")); err == nil && v >= 16 && v <= 24 {
		bits = v
	}
	if v, err := strconv.Atoi(os.Getenv("NICPOOL_FILL_NODES")); err == nil && v > 0 {
		nodes = v
	}
	for range b.N {
		fill(b, bits, nodes)
	}
}

var fillRuns atomic.Int32

func fill(b *testing.B, bits, nodes int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := int(fillRuns.Add(1))
	pool := fmt.Sprintf("fill-%d", run)
	subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(200 + run), 0, 0}), bits)
	n := 1<<(32-bits) - 2
	fixtures.CreatePool(b, env.Client, fixtures.Pool(pool, subnet.String(), []string{subnet.Addr().Next().String() + "-" + lastOf(subnet).Prev().String()}))

	var count counter
	var largest atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	cfg.Wrap(count.wrap)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			for cur := largest.Load(); r.ContentLength > cur && !largest.CompareAndSwap(cur, r.ContentLength); cur = largest.Load() {
			}
			return rt.RoundTrip(r)
		})
	})
	writer, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	ls := make([]*ledger.Ledger, nodes)
	for i := range nodes {
		name := fmt.Sprintf("%s-node-%d", pool, i)
		c := startCache(b, ctx, name)
		waitPool(b, ctx, c, pool)
		ls[i] = ledger.New(ledger.Options{Node: name, Cache: c, Client: writer, Fresh: writer, Log: logr.Discard()})
	}
	count.writes.Store(0)
	count.bytes.Store(0)
	count.conflicts.Store(0)
	type sample struct {
		at            time.Time
		done          int64
		writes, bytes int64
	}
	var done atomic.Int64
	var mu sync.Mutex
	var samples []sample
	mark := func() {
		mu.Lock()
		samples = append(samples, sample{time.Now(), done.Load(), count.writes.Load(), count.bytes.Load()})
		mu.Unlock()
	}
	errs := make([]error, n)
	sem := make(chan struct{}, 200)
	b.ResetTimer()
	mark()
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			o := allocator.Owner{Pod: fmt.Sprintf("fill-%d/pod-%d", run, i), PodUID: fmt.Sprintf("uid-%d-%d", run, i), Interface: "eth0"}
			_, errs[i] = ls[i%nodes].Allocate(ctx, pool, o)
			if d := done.Add(1); d == 1000 || d == int64(n)-1000 || d%10000 == 0 {
				mark()
			}
		})
	}
	wg.Wait()
	mark()
	b.StopTimer()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				b.Errorf("allocation %d: %v", i, err)
			}
		}
	}
	_, err = ls[0].Allocate(ctx, pool, allocator.Owner{Pod: "fill/extra", PodUID: "extra", Interface: "eth0"})
	if !errors.Is(err, allocator.ErrExhausted) {
		b.Errorf("one more allocation on the full pool: %v, want exhausted", err)
	}
	span := func(from, to sample) string {
		k := float64(to.done - from.done)
		return fmt.Sprintf("%.0f allocations/s, %.2f writes and %.0f request bytes per allocation",
			k/to.at.Sub(from.at).Seconds(), float64(to.writes-from.writes)/k, float64(to.bytes-from.bytes)/k)
	}
	first, last := samples[0], samples[len(samples)-1]
	b.Logf("filled %s (%d addresses) from %d nodes in %v: %s; %d failed; %.2f conflicts per allocation; largest request %d bytes",
		subnet, n, nodes, last.at.Sub(first.at).Round(time.Millisecond), span(first, last), failed, float64(count.conflicts.Load())/float64(n), largest.Load())
	b.Logf("ledger: %s", ledgerMetrics(b))
	for i := 1; i < len(samples); i++ {
		b.Logf("  %6d → %6d allocated: %s", samples[i-1].done, samples[i].done, span(samples[i-1], samples[i]))
	}
}

func lastOf(p netip.Prefix) netip.Addr {
	a := p.Addr()
	for range 1<<(a.BitLen()-p.Bits()) - 1 {
		a = a.Next()
	}
	return a
}

// ledgerMetrics sums the ledger's counters over their labels.
func ledgerMetrics(b *testing.B) string {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "nicpool_ledger_") || f.GetType() != dto.MetricType_COUNTER {
			continue
		}
		sums := map[string]float64{}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				if l.GetName() != "pool" {
					key += l.GetValue()
				}
			}
			sums[key] += m.GetCounter().GetValue()
		}
		for k, v := range sums {
			out = append(out, fmt.Sprintf("%s{%s}=%.0f", strings.TrimPrefix(f.GetName(), "nicpool_ledger_"), k, v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
