package ledger_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// A pool holding 8,000 addresses in the older layout (status.allocatedIPs) is moved
// into blocks in place while three nodes and the webhook all try at once: every
// address stays with its holder, the pool's map is emptied, and new allocations
// avoid every migrated address.
func TestMigrate8000RecordsInPlace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 8000
	fixtures.CreatePool(t, env.Client, fixtures.Pool("legacy", "10.30.0.0/16", []string{"10.30.0.1-10.30.31.254"}))
	older := v2beta1.PoolIPAllocations{}
	want := map[netip.Addr]v2beta1.PoolIPAllocation{}
	a := netip.MustParseAddr("10.30.0.1")
	for i := range n {
		rec := v2beta1.PoolIPAllocation{Pod: fmt.Sprintf("team-%d/app-%d", i%7, i), PodUID: fmt.Sprintf("uid-legacy-%d", i), Interface: []string{"eth0", "net1"}[i%2]}
		older[a.String()] = rec
		want[a] = rec
		a = a.Next()
	}
	fixtures.WriteOlderLayout(t, env.Client, "legacy", older)
	if p := fixtures.GetPool(t, env.Client, "legacy"); len(p.Status.OlderLayout) != n {
		t.Fatalf("the pool reads with %d records of the older layout, want %d", len(p.Status.OlderLayout), n)
	}

	var ls []*ledger.Ledger
	for i := range 3 {
		ls = append(ls, nodeLedger(t, ctx, fmt.Sprintf("mig-%d", i)))
	}
	cl, clCache := clusterLedger(t, ctx)
	ls = append(ls, cl)
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() { errs[i] = l.Migrate(ctx, "legacy") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d: %v", i, err)
		}
	}
	recs := records(t, "legacy")
	if len(recs) != n {
		t.Errorf("%d records after the migration, want %d", len(recs), n)
	}
	for addr, rec := range want {
		got, ok := recs[addr]
		if !ok || got.Holder != rec || got.Block == "" {
			t.Fatalf("%s: %+v after the migration, want %+v in a block", addr, got, rec)
		}
	}
	if p := fixtures.GetPool(t, env.Client, "legacy"); len(p.Status.OlderLayout) != 0 || p.Status.AllocatedIPs != nil {
		t.Errorf("pool status after the migration: %d records of the older layout, allocatedIPs %v", len(p.Status.OlderLayout), p.Status.AllocatedIPs)
	}
	// Again: nothing to do.
	if err := ls[0].Migrate(ctx, "legacy"); err != nil {
		t.Fatal(err)
	}

	// New allocations take addresses no migrated record holds; the holders keep theirs.
	for i := range 20 {
		got, err := ls[i%3].Allocate(ctx, "legacy", allocator.Owner{Pod: "ns/new", PodUID: fmt.Sprintf("uid-new-%d", i), Interface: "eth0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, taken := want[got.Addr]; taken {
			t.Fatalf("new allocation got %s, held by %+v", got.Addr, want[got.Addr])
		}
	}
	first := netip.MustParseAddr("10.30.0.1")
	if held, err := ls[1].Held(ctx, "legacy", owner0(want[first]), first); err != nil || len(held) != 1 || held[0] != first {
		t.Errorf("holder of %s after the migration: %v %v", first, held, err)
	}
	if rel, err := ls[2].Release(ctx, "legacy", owner0(want[first]), first); err != nil || len(rel) != 1 {
		t.Errorf("release of a migrated address: %v %v", rel, err)
	}

	// The count owner keeps kubectl's figures.
	fixtures.Eventually(t, "the pool in the count owner's cache", func() bool {
		var list v2beta1.SpiderIPPoolList
		_ = clCache.List(ctx, &list)
		return len(list.Items) > 0
	})
	fixtures.Eventually(t, "the migrated counts", func() bool {
		if err := cl.Recount(ctx, "legacy"); err != nil {
			t.Fatal(err)
		}
		p := fixtures.GetPool(t, env.Client, "legacy")
		return *p.Status.AllocatedIPCount == n+20-1 && *p.Status.TotalIPCount == 8190
	})
}

func owner0(rec v2beta1.PoolIPAllocation) allocator.Owner {
	return allocator.Owner{Pod: rec.Pod, PodUID: rec.PodUID, Interface: rec.Interface}
}
