package poolcount_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/webhook/controller/poolcount"
)

var (
	env *testenv.Env
	// counted is the counter's cache: the blocks it counts from.
	counted client.Reader
	// clock is the counter's: it moves only when a test steps it, so a write that
	// shows while it stands still was not held for the end of a window.
	clock = testingclock.NewFakePassiveClock(time.Now())
)

// TestMain starts a control plane and the pool counter on it, wired as the webhook's
// manager wires it (webhook.Setup): its ledger reads the manager's cache, which holds
// every IPBlock, and writes through the manager's client.
func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) (err error) {
		if env, err = s.Start(testenv.Options{}); err != nil {
			return err
		}
		mgr, err := ctrl.NewManager(env.Config, manager.Options{
			Scheme:                 env.Scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
		})
		if err != nil {
			return err
		}
		counts := ledger.New(ledger.Options{Cache: mgr.GetClient(), Client: mgr.GetClient(), Fresh: mgr.GetAPIReader(), Log: logr.Discard()})
		c := poolcount.NewCounter(counts)
		c.Clock = clock
		if err := c.SetupWithManager(mgr); err != nil {
			return err
		}
		counted = mgr.GetCache()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- mgr.Start(ctx) }()
		s.Defer(func() error { cancel(); return <-done })
		return nil
	})
}

// nodeLedger is an ipamd's writer: a ledger of its own, on a cache of its node's
// blocks, as nicpool-ipamd runs it.
func nodeLedger(t *testing.T, ctx context.Context, node string) *ledger.Ledger {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, ByObject: map[client.Object]cache.ByObject{
		&ipamv1alpha1.IPBlock{}: {Field: fields.OneTermEqualSelector(ipamv1alpha1.FieldNode, node)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Indexes(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&v2beta1.SpiderIPPool{}, &v2beta1.SpiderReservedIP{}, &ipamv1alpha1.IPBlock{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return ledger.New(ledger.Options{Node: node, Cache: c, Client: env.Client, Fresh: env.Client, Log: logr.Discard()})
}

// records decodes a pool's status.allocatedIPs as spiderpool's tools do (jq, its Go
// type): a JSON string of {ip: {pod, podUid}}; nil while the counter has written none.
func records(t *testing.T, p *v2beta1.SpiderIPPool) map[string]v2beta1.AllocatedIP {
	t.Helper()
	if p.Status.AllocatedIPs == nil {
		return nil
	}
	out := map[string]v2beta1.AllocatedIP{}
	if err := json.Unmarshal([]byte(*p.Status.AllocatedIPs), &out); err != nil {
		t.Fatalf("status.allocatedIPs of pool %s is not spiderpool's JSON: %v", p.Name, err)
	}
	return out
}

// countedPool creates a pool and waits for the counter's first write of it: its
// counts and an empty string of records.
func countedPool(t *testing.T, name, subnet, ips string) *v2beta1.SpiderIPPool {
	t.Helper()
	fixtures.CreatePool(t, env.Client, fixtures.Pool(name, subnet, []string{ips}))
	var p *v2beta1.SpiderIPPool
	fixtures.Eventually(t, "pool "+name+" counted", func() bool {
		p = fixtures.GetPool(t, env.Client, name)
		return p.Status.AllocatedIPsFrom == v2beta1.AllocatedIPsFromBlocks && p.Status.AllocatedIPs != nil && len(records(t, p)) == 0
	})
	return p
}

// seen waits until the counter's cache holds every record of want in the pool's
// blocks: a window that ends before it has seen the last allocations would be written
// with what it saw, and the rest would wait for a window the test never lets pass.
func seen(t *testing.T, name string, want map[string]v2beta1.AllocatedIP) {
	t.Helper()
	fixtures.Eventually(t, fmt.Sprintf("the counter's cache holding the %d records of pool %s", len(want), name), func(ctx context.Context) (bool, error) {
		recs, err := ledger.PoolRecords(ctx, counted, name)
		if err != nil {
			return false, err
		}
		for a := range want {
			if _, ok := recs[a]; !ok {
				return false, nil
			}
		}
		return len(recs) == len(want), nil
	})
}

// quiet lets CountEvery pass on the counter's clock: every pool is quiet, not written
// for a whole window.
func quiet() { clock.SetTime(clock.Now().Add(poolcount.CountEvery)) }

func owner(pool string, i int) allocator.Owner {
	return allocator.Owner{Pod: fmt.Sprintf("team/%s-%d", pool, i), PodUID: fmt.Sprintf("uid-%s-%d", pool, i), Interface: "eth0"}
}

// shows waits until the pool's status.allocatedIPs lists exactly want, and its count
// says as many.
func shows(t *testing.T, name string, want map[string]v2beta1.AllocatedIP) {
	t.Helper()
	fixtures.Eventually(t, fmt.Sprintf("status.allocatedIPs of pool %s listing %v", name, want), func() (bool, string) {
		p := fixtures.GetPool(t, env.Client, name)
		got := records(t, p)
		if p.Status.AllocatedIPs == nil || len(got) != len(want) || p.Status.AllocatedIPCount == nil || *p.Status.AllocatedIPCount != int64(len(want)) {
			return false, fmt.Sprintf("records %v", got)
		}
		for a, r := range want {
			if got[a] != r {
				return false, fmt.Sprintf("records %v", got)
			}
		}
		return true, ""
	})
}

// Pods created right after their pool (as spiderpool's specs and many deployments
// do) show in the pool's status.allocatedIPs one by one, each before the next is
// allocated, without waiting for the end of a window: the write that gave the pool
// its counts and the CountBurst-1 allocations that follow are CountBurst writes in a
// row. Once a window has passed with nothing written, a lone change (here a pod's
// release, which spiderpool's specs read right after the pod is gone) shows at once
// again. The counter's clock stands still but where the test moves it, so only writes
// made at once can show them.
func TestChangesAreWrittenAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const name = "new"
	countedPool(t, name, "10.60.0.0/24", "10.60.0.1-10.60.0.50")
	l := nodeLedger(t, ctx, "node-new")
	want := map[string]v2beta1.AllocatedIP{}
	var held []ledger.Allocation
	for i := range poolcount.CountBurst - 1 {
		o := owner(name, i)
		a, err := l.Allocate(ctx, name, o)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, a)
		want[a.Addr.String()] = v2beta1.AllocatedIP{Pod: o.Pod, PodUID: o.PodUID}
		shows(t, name, want)
	}

	quiet()
	if gone, err := l.Release(ctx, name, owner(name, 0), held[0].Addr); err != nil || len(gone) != 1 {
		t.Fatalf("release %s: %v %v", held[0].Addr, gone, err)
	}
	delete(want, held[0].Addr.String())
	shows(t, name, want)
}

// Many allocations in a row on one pool are written together: the first few at
// once (at most CountBurst writes), the rest in one write when the window has passed.
// Counted as a watcher of the pool sees it (each write of the pool is one MODIFIED
// event with a new resourceVersion), 40 allocations make at most CountBurst+1 writes,
// and ipamd's allocations themselves write the pool none.
func TestABurstOfAllocationsIsWrittenTogether(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const name, n = "busy", 40
	p := countedPool(t, name, "10.62.0.0/24", "10.62.0.1-10.62.0.200")
	quiet()
	writes := poolWrites(t, ctx, p)

	l := nodeLedger(t, ctx, "node-busy")
	want := map[string]v2beta1.AllocatedIP{}
	for i := range n {
		o := owner(name, i)
		a, err := l.Allocate(ctx, name, o)
		if err != nil {
			t.Fatal(err)
		}
		want[a.Addr.String()] = v2beta1.AllocatedIP{Pod: o.Pod, PodUID: o.PodUID}
	}
	seen(t, name, want)

	every := func(got map[string]v2beta1.AllocatedIP) bool { return same(got, want) }
	// The first allocation is written at once, with those the counter had seen then
	// (and the next few too, up to CountBurst writes).
	first, shown := writes("the first allocation in status.allocatedIPs", func(got map[string]v2beta1.AllocatedIP) bool { return len(got) > 0 })
	// The rest wait for the end of the window, then come in one write.
	quiet()
	var rest []string
	if !every(shown) {
		rest, _ = writes(fmt.Sprintf("the %d allocations in status.allocatedIPs", n), every)
	}
	all := append(first, rest...)
	t.Logf("%d allocations, %d writes of the pool: %v", n, len(all), all)
	if len(first) != 1 {
		t.Errorf("the pool was written %d times before its first allocation showed (resourceVersions %v); want once", len(first), first)
	}
	if len(all) > poolcount.CountBurst+1 {
		t.Errorf("%d allocations wrote the pool %d times (resourceVersions %v); want at most %d: %d at once, one at the window's end", n, len(all), all, poolcount.CountBurst+1, poolcount.CountBurst)
	}
}

func same(got, want map[string]v2beta1.AllocatedIP) bool {
	if len(got) != len(want) {
		return false
	}
	for a, r := range want {
		if got[a] != r {
			return false
		}
	}
	return true
}

// poolWrites watches the writes of pool p from its resourceVersion on. The function it
// returns reads the watch until the pool's records satisfy until, and returns the
// resourceVersions it was written with until then and the records it shows;
// fixtures.Timeout only tells a write that never comes from a slow machine.
func poolWrites(t *testing.T, ctx context.Context, p *v2beta1.SpiderIPPool) func(what string, until func(map[string]v2beta1.AllocatedIP) bool) ([]string, map[string]v2beta1.AllocatedIP) {
	t.Helper()
	ww, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ww.Watch(ctx, &v2beta1.SpiderIPPoolList{}, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", p.Name)},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: p.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return func(what string, until func(map[string]v2beta1.AllocatedIP) bool) ([]string, map[string]v2beta1.AllocatedIP) {
		t.Helper()
		var rvs []string
		var last map[string]v2beta1.AllocatedIP
		timeout := time.After(fixtures.Timeout)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the pool's watch closed")
				}
				if ev.Type != watch.Modified {
					t.Fatalf("pool %s: %s event on the watch: %v", p.Name, ev.Type, ev.Object)
				}
				q := ev.Object.(*v2beta1.SpiderIPPool)
				rvs = append(rvs, q.ResourceVersion)
				if last = records(t, q); until(last) {
					return rvs, last
				}
			case <-timeout:
				t.Fatalf("waiting for %s: no such write of pool %s after %s; %d writes (%v), the last with %d records", what, p.Name, fixtures.Timeout, len(rvs), rvs, len(last))
			}
		}
	}
}

// A pool of many records is written less often than a small one: each write costs a
// window per poolcount.CountBytes of status.allocatedIPs, so every watcher of pools
// (each ipamd, the webhook) receives about CountBytes a second of it at most, not a
// whole string each second. Here the string is between one and two CountBytes long:
// after a quiet spell, a burst of allocations writes it at most
// ceil(CountBurst/2) times at once (a small pool: CountBurst, the test above), and
// the rest once the clock has moved two windows.
func TestALargePoolIsWrittenLessOften(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const name = "large"
	countedPool(t, name, "10.64.0.0/22", "10.64.0.1-10.64.3.254")
	l := nodeLedger(t, ctx, "node-large")
	// Records of the longest pod names a namespace and name may have: about 330 bytes
	// each in the string, so 450 records make more than one CountBytes.
	long := func(i int) allocator.Owner {
		o := owner(name, i)
		o.Pod = fmt.Sprintf("team/%0253d", i)
		return o
	}
	want := map[string]v2beta1.AllocatedIP{}
	allocate := func(i int) {
		o := long(i)
		a, err := l.Allocate(ctx, name, o)
		if err != nil {
			t.Fatal(err)
		}
		want[a.Addr.String()] = v2beta1.AllocatedIP{Pod: o.Pod, PodUID: o.PodUID}
	}
	for i := range 450 {
		allocate(i)
	}
	seen(t, name, want)
	for range 20 {
		quiet()
	}
	shows(t, name, want)
	p := fixtures.GetPool(t, env.Client, name)
	if n := len(*p.Status.AllocatedIPs); n <= poolcount.CountBytes || n > 2*poolcount.CountBytes {
		t.Fatalf("status.allocatedIPs of pool %s is %d bytes; the test needs between %d and %d", name, n, poolcount.CountBytes, 2*poolcount.CountBytes)
	}
	// A quiet spell: the pool may be written CountBurst windows' worth at once.
	for range 2 * poolcount.CountBurst {
		quiet()
	}
	writes := poolWrites(t, ctx, p)
	for i := 450; i < 490; i++ {
		allocate(i)
	}
	seen(t, name, want)
	first, shown := writes("the first allocation of the burst", func(got map[string]v2beta1.AllocatedIP) bool { return len(got) > 450 })
	var rest []string
	for !same(shown, want) {
		quiet()
		quiet()
		var more []string
		more, shown = writes("the burst's allocations in status.allocatedIPs", func(got map[string]v2beta1.AllocatedIP) bool { return same(got, want) })
		rest = append(rest, more...)
	}
	all := append(first, rest...)
	t.Logf("%d bytes of status.allocatedIPs, 40 allocations, %d writes of the pool: %v", len(*p.Status.AllocatedIPs), len(all), all)
	if at := (poolcount.CountBurst + 1) / 2; len(all) > at+1 {
		t.Errorf("40 allocations wrote a pool of %d bytes of records %d times (resourceVersions %v); want at most %d: %d at once, one once two windows have passed", len(*p.Status.AllocatedIPs), len(all), all, at+1, at)
	}
}
