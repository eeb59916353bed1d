package store_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/ipamd/store"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// newCommitter starts an informer cache of its own, as each ipamd has.
func newCommitter(t *testing.T, ctx context.Context) *store.Committer {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&v2beta1.SpiderIPPool{}, &v2beta1.SpiderReservedIP{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return store.NewCommitter(c, env.Client, env.Client, logr.Discard())
}

func createPool(t *testing.T, name, subnet string, ips ...string) {
	t.Helper()
	p := &v2beta1.SpiderIPPool{}
	p.Name = name
	p.Spec.Subnet, p.Spec.IPs = subnet, ips
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func getPool(t *testing.T, name string) *v2beta1.SpiderIPPool {
	t.Helper()
	p := &v2beta1.SpiderIPPool{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Five processes, 200 owners, 200 addresses: every owner one distinct address.
func TestConcurrentCommittersFillPoolExactly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createPool(t, "fill", "10.20.0.0/16", "10.20.0.1-10.20.0.200")
	var committers []*store.Committer
	for range 5 {
		committers = append(committers, newCommitter(t, ctx))
	}
	const n = 200
	got := make([]netip.Addr, n+1)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n + 1 { // one more than fits
		wg.Go(func() {
			owner := allocator.Owner{Pod: fmt.Sprintf("ns/p%d", i), PodUID: fmt.Sprintf("uid-%d", i), Interface: "eth0"}
			res, err := committers[i%5].Do(ctx, "fill", allocator.Op{Kind: allocator.Allocate, Owner: owner})
			if err == nil {
				err = res[0].Err
				got[i] = res[0].Addr
			}
			errs[i] = err
		})
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	failed := 0
	for i := range n + 1 {
		if errs[i] != nil {
			failed++
			if !errorsIsExhausted(errs[i]) {
				t.Errorf("owner %d: %v", i, errs[i])
			}
			continue
		}
		if prev, dup := seen[got[i]]; dup {
			t.Errorf("address %s handed to owners %d and %d", got[i], prev, i)
		}
		seen[got[i]] = i
	}
	if failed != 1 || len(seen) != n {
		t.Errorf("%d allocated, %d failed; want %d and 1", len(seen), failed, n)
	}
	p := getPool(t, "fill")
	if len(p.Status.AllocatedIPs) != n || *p.Status.AllocatedIPCount != n || *p.Status.TotalIPCount != n {
		t.Errorf("pool status: %d records, count %d, total %d", len(p.Status.AllocatedIPs), *p.Status.AllocatedIPCount, *p.Status.TotalIPCount)
	}
	for i, a := range got[:n+1] {
		if errs[i] != nil {
			continue
		}
		if rec := p.Status.AllocatedIPs[a.String()]; rec.PodUID != fmt.Sprintf("uid-%d", i) || rec.Interface != "eth0" {
			t.Errorf("record of %s = %+v, want owner %d", a, rec, i)
		}
	}

	// Releases go through the same committer and are idempotent.
	owner := allocator.Owner{Pod: "ns/p0", PodUID: "uid-0", Interface: "eth0"}
	for range 2 {
		if _, err := committers[1].Release(ctx, "fill", owner); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := committers[0].Release(ctx, "fill", allocator.Owner{Pod: "ns/p1", PodUID: "uid-1", Interface: "eth0"}, got[1]); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		p = getPool(t, "fill")
		return len(p.Status.AllocatedIPs) == n-2, nil
	})
	if err != nil || *p.Status.AllocatedIPCount != n-2 {
		t.Errorf("after two releases: %d records (%v)", len(p.Status.AllocatedIPs), err)
	}
	checkInvariants(t)
}

func TestAllocationsFromTerminatingOrDisabledPoolAreRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createPool(t, "off", "10.21.0.0/16", "10.21.0.1-10.21.0.9")
	p := getPool(t, "off")
	yes := true
	p.Spec.Disable = &yes
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	cm := newCommitter(t, ctx)
	res, err := cm.Do(ctx, "off", allocator.Op{Kind: allocator.Allocate, Owner: allocator.Owner{Pod: "ns/a", PodUID: "a", Interface: "eth0"}})
	if err != nil || !errorsIs(res[0].Err, store.ErrPoolDisabled) {
		t.Fatalf("got %v %v, want ErrPoolDisabled", res, err)
	}
	if len(getPool(t, "off").Status.AllocatedIPs) != 0 {
		t.Error("a disabled pool handed out an address")
	}
	checkInvariants(t)
}

// Group commit: 100 requests arriving together on one node go out in a handful of
// writes, not 100.
func TestRequestsQueuedDuringAWriteShareTheNextWrite(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createPool(t, "group", "10.22.0.0/16", "10.22.0.1-10.22.0.100")
	cm := newCommitter(t, ctx)
	before := writes(t, "group")
	errs := make([]error, 100)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			owner := allocator.Owner{Pod: fmt.Sprintf("ns/g%d", i), PodUID: fmt.Sprintf("g-%d", i), Interface: "eth0"}
			res, err := cm.Do(ctx, "group", allocator.Op{Kind: allocator.Allocate, Owner: owner})
			if err == nil {
				err = res[0].Err
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	n := writes(t, "group") - before
	if n < 1 || n > 10 {
		t.Errorf("100 allocations took %v pool writes; want a few (group commit)", n)
	}
	if got := len(getPool(t, "group").Status.AllocatedIPs); got != 100 {
		t.Errorf("pool holds %d addresses, want 100", got)
	}
	checkInvariants(t)
}

// checkInvariants ends every test: I1-I3 over what the API server stores.
func checkInvariants(t *testing.T) {
	t.Helper()
	if err := invariants.Check(context.Background(), env.Client, invariants.Options{}); err != nil {
		t.Errorf("invariants violated:\n%v", err)
	}
}

// writes reads nicpool_ipamd_pool_writes_total{pool, result="ok"}.
func writes(t *testing.T, pool string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "nicpool_ipamd_pool_writes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pool"] == pool && labels["result"] == "ok" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Issue 10 finding 7: an address released is handed out again only after the never
// used ones, also by a process that just started (it continues after the highest
// recorded address); allocator.Lowest restores the lowest-free order.
func TestReleasedAddressIsReusedLast(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createPool(t, "order", "10.23.0.0/16", "10.23.0.1-10.23.0.4")
	take := func(c *store.Committer, uid string) string {
		t.Helper()
		res, err := c.Do(ctx, "order", allocator.Op{Kind: allocator.Allocate, Owner: allocator.Owner{Pod: "ns/" + uid, PodUID: uid, Interface: "eth0"}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("allocate for %s: %v %+v", uid, err, res)
		}
		return res[0].Addr.String()
	}
	release := func(c *store.Committer, uid string) {
		t.Helper()
		if _, err := c.Release(ctx, "order", allocator.Owner{Pod: "ns/" + uid, PodUID: uid, Interface: "eth0"}); err != nil {
			t.Fatal(err)
		}
	}
	c := newCommitter(t, ctx)
	take(c, "a")
	take(c, "b")
	release(c, "a") // 10.23.0.1 is free again, below the cursor
	if got := take(c, "c"); got != "10.23.0.3" {
		t.Errorf("after a release, got %s, want the never-used 10.23.0.3", got)
	}
	// A restarted ipamd continues after the highest recorded address.
	restarted := newCommitter(t, ctx)
	if got := take(restarted, "d"); got != "10.23.0.4" {
		t.Errorf("restarted process got %s, want 10.23.0.4", got)
	}
	if got := take(restarted, "e"); got != "10.23.0.1" {
		t.Errorf("pool's end reached: got %s, want the released 10.23.0.1", got)
	}
	release(c, "b")
	release(c, "c")
	lowest := newCommitter(t, ctx)
	lowest.Order = allocator.Lowest
	if got := take(lowest, "f"); got != "10.23.0.2" {
		t.Errorf("lowest order got %s, want 10.23.0.2", got)
	}
	for _, uid := range []string{"d", "e", "f"} {
		release(lowest, uid)
	}
	if err := invariants.Check(ctx, env.Client, invariants.Options{}); err != nil {
		t.Error(err)
	}
}
