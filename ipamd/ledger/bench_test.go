package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// BenchmarkLayouts compares two ways to store allocation records, with the same
// load: N allocations (NICPOOL_LAYOUT_N, default 1000) from 10 nodes at once, into a
// pool of exactly N addresses, against one real API server. Each node is a process of
// its own in miniature: its own informer cache and API client. It reports, per
// allocation, the API writes (and 409 conflicts) and the request bytes sent, the
// watch events the nodes receive to keep their view current (summed over nodes), and
// the wall time.
//
//   - per-address: one object per address, created by the allocating node after a
//     random pick among the addresses its cache shows free (Kubernetes' IPAddress
//     allocator, KEP-1880); every node watches every address object.
//   - blocks: the ledger; each node watches its own blocks only.
func BenchmarkLayouts(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("NICPOOL_LAYOUT_N")); err == nil && v > 0 {
		n = v
	}
	const nodes = 10
	for _, layout := range []string{"per-address", "blocks"} {
		b.Run(layout, func(b *testing.B) {
			for iter := range b.N {
				runLayout(b, layout, n, nodes, iter)
			}
		})
	}
}

var layoutRuns atomic.Int32

type counter struct {
	writes, conflicts, bytes atomic.Int64
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		write := req.Method != http.MethodGet
		if write {
			c.writes.Add(1)
			c.bytes.Add(max(req.ContentLength, 0))
		}
		resp, err := rt.RoundTrip(req)
		if write && err == nil && resp.StatusCode == http.StatusConflict {
			c.conflicts.Add(1)
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func runLayout(b *testing.B, layout string, n, nodes, iter int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := int(layoutRuns.Add(1))
	pool := fmt.Sprintf("layout-%s-%d", layout, run)
	// n addresses from 10.(100+run).0.1 on, in a /16 of their own.
	first := netip.AddrFrom4([4]byte{10, byte(100 + run), 0, 1})
	last := first
	for range n - 1 {
		last = last.Next()
	}
	fixtures.CreatePool(b, env.Client, fixtures.Pool(pool, fmt.Sprintf("10.%d.0.0/16", 100+run), []string{first.String() + "-" + last.String()}))

	var count counter
	var events, eventBytes atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.Wrap(count.wrap)
	writer, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	type node struct {
		cache cache.Cache
		alloc func(ctx context.Context, o allocator.Owner) error
	}
	ns := make([]node, nodes)
	for i := range nodes {
		name := fmt.Sprintf("%s-node-%d", pool, i)
		opts := cache.Options{Scheme: env.Scheme, DefaultTransform: cache.TransformStripManagedFields()}
		var watched client.Object
		switch layout {
		case "per-address":
			watched = &ipamv1alpha1.IPBlock{}
			opts.ByObject = map[client.Object]cache.ByObject{watched: {Field: fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, pool)}}
		case "blocks":
			watched = &ipamv1alpha1.IPBlock{}
			opts.ByObject = map[client.Object]cache.ByObject{watched: {Field: fields.OneTermEqualSelector(ipamv1alpha1.FieldNode, name)}}
		}
		c, err := cache.New(env.Config, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := ledger.Indexes(ctx, c); err != nil {
			b.Fatal(err)
		}
		for _, obj := range []client.Object{&v2beta1.SpiderIPPool{}, &v2beta1.SpiderReservedIP{}, &ipamv1alpha1.IPBlock{}} {
			inf, err := c.GetInformer(ctx, obj)
			if err != nil {
				b.Fatal(err)
			}
			if fmt.Sprintf("%T", obj) == fmt.Sprintf("%T", watched) {
				seen := func(obj any) {
					events.Add(1)
					if data, err := json.Marshal(obj); err == nil {
						eventBytes.Add(int64(len(data)))
					}
				}
				_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
					AddFunc:    seen,
					UpdateFunc: func(_, obj any) { seen(obj) },
					DeleteFunc: seen,
				})
			}
		}
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			b.Fatal("cache did not sync")
		}
		waitPool(b, ctx, c, pool)
		ns[i].cache = c
		switch layout {
		case "per-address":
			ns[i].alloc = perAddress(c, writer, pool, first, n)
		case "blocks":
			l := ledger.New(ledger.Options{Node: name, Cache: c, Client: writer, Fresh: writer, Log: logr.Discard()})
			ns[i].alloc = func(ctx context.Context, o allocator.Owner) error {
				_, err := l.Allocate(ctx, pool, o)
				return err
			}
		}
	}
	events.Store(0)
	eventBytes.Store(0)
	count.writes.Store(0)
	count.conflicts.Store(0)
	count.bytes.Store(0)
	errs := make([]error, n)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			o := allocator.Owner{Pod: fmt.Sprintf("bench-%d/pod-%d", run, i), PodUID: fmt.Sprintf("uid-%d-%d", run, i), Interface: "eth0"}
			errs[i] = ns[i%nodes].alloc(ctx, o)
		})
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	// Let the last watch events arrive: the count settles once nothing changes for 3s.
	for prev := int64(-1); prev != events.Load(); {
		prev = events.Load()
		time.Sleep(3 * time.Second)
	}
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				b.Errorf("%s: %v", layout, err)
			}
		}
	}
	ok := float64(n - failed)
	b.ReportMetric(float64(count.writes.Load())/ok, "writes/alloc")
	b.ReportMetric(float64(count.conflicts.Load())/ok, "409s/alloc")
	b.ReportMetric(float64(count.bytes.Load())/ok, "bytes/alloc")
	b.ReportMetric(float64(events.Load())/ok, "events/alloc")
	b.ReportMetric(float64(eventBytes.Load())/ok, "event-bytes/alloc")
	b.ReportMetric(ok/wall.Seconds(), "allocs/s")
	b.Logf("%s: %d allocations from %d nodes in %v: %.2f writes (%.2f conflicts), %.0f request bytes, %.2f watch events (%.0f bytes) received per allocation; %d failed",
		layout, n, nodes, wall.Round(time.Millisecond), float64(count.writes.Load())/ok, float64(count.conflicts.Load())/ok,
		float64(count.bytes.Load())/ok, float64(events.Load())/ok, float64(eventBytes.Load())/ok, failed)
}

// perAddress allocates like Kubernetes' IPAddress allocator: a random address its cache
// shows free, claimed with a create; AlreadyExists means try another.
func perAddress(c client.Reader, w client.Client, pool string, first netip.Addr, n int) func(context.Context, allocator.Owner) error {
	return func(ctx context.Context, o allocator.Owner) error {
		for range 1000 {
			var list ipamv1alpha1.IPBlockList
			if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
				return err
			}
			used := make(map[string]bool, len(list.Items))
			for _, it := range list.Items {
				used[it.Spec.CIDR] = true
			}
			if len(used) >= n {
				return fmt.Errorf("no free address in %s", pool)
			}
			a := first
			for k := rand.IntN(n); k > 0; k-- {
				a = a.Next()
			}
			for used[netip.PrefixFrom(a, 32).String()] {
				if a = a.Next(); !netip.MustParsePrefix("10.0.0.0/8").Contains(a) || !a.IsValid() {
					a = first
				}
			}
			obj := &ipamv1alpha1.IPBlock{
				ObjectMeta: metav1.ObjectMeta{Name: pool + "." + a.String()},
				Spec:       ipamv1alpha1.IPBlockSpec{Pool: pool, CIDR: netip.PrefixFrom(a, 32).String()},
				Status:     ipamv1alpha1.IPBlockStatus{Allocations: v2beta1.PoolIPAllocations{a.String(): {Pod: o.Pod, PodUID: o.PodUID, Interface: o.Interface}}, Allocated: 1},
			}
			err := w.Create(ctx, obj)
			if !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		return fmt.Errorf("no address claimed after 1000 tries")
	}
}
