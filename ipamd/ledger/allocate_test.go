package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// Five nodes, 201 owners, a pool of exactly 200 addresses: each of 200 owners gets a
// distinct address, the last one an exhaustion error with the pool's counts. Each node
// claims blocks of its own and, once every block is claimed, borrows from the others'.
func TestNodesFillPoolExactly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("fill", "10.20.0.0/16", []string{"10.20.0.1-10.20.0.200"}))
	const nodes, n = 5, 200
	ls := make([]*ledger.Ledger, nodes)
	for i := range nodes {
		ls[i] = nodeLedger(t, ctx, fmt.Sprintf("node-%d", i))
	}
	// Uneven demand: node 0 wants far more than its share, so it must borrow.
	nodeOf := func(i int) int {
		if i%2 == 0 {
			return 0
		}
		return 1 + i%(nodes-1)
	}
	got := make([]ledger.Allocation, n+1)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n + 1 {
		wg.Go(func() { got[i], errs[i] = ls[nodeOf(i)].Allocate(ctx, "fill", owner(i)) })
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	var exhausted []error
	for i := range n + 1 {
		if errs[i] != nil {
			if !errors.Is(errs[i], allocator.ErrExhausted) {
				t.Errorf("owner %d: %v", i, errs[i])
			}
			exhausted = append(exhausted, errs[i])
			continue
		}
		if prev, dup := seen[got[i].Addr]; dup {
			t.Errorf("address %s handed to owners %d and %d", got[i].Addr, prev, i)
		}
		seen[got[i].Addr] = i
	}
	if len(exhausted) != 1 || len(seen) != n {
		t.Fatalf("%d allocated, %d failed (%v); want %d and 1", len(seen), len(exhausted), exhausted, n)
	}
	if msg := exhausted[0].Error(); !strings.Contains(msg, "200 allocated of 200 allocatable") {
		t.Errorf("exhaustion does not carry the pool's counts: %s", msg)
	}
	recs := records(t, "fill")
	if len(recs) != n {
		t.Errorf("%d records, want %d", len(recs), n)
	}
	for a, i := range seen {
		if rec := recs[a]; rec.Holder.PodUID != owner(i).PodUID || rec.Holder.Pod != owner(i).Pod || rec.Holder.Interface != "eth0" {
			t.Errorf("record of %s = %+v, want owner %d", a, rec, i)
		}
	}
	borrowed := 0
	for _, b := range blocksOf(t, "fill") {
		if b.Status.Allocated != int64(len(b.Status.Allocations)) || b.Status.Free != 0 || len(b.Status.Allocations) > 16 {
			t.Errorf("block %s: %d records, allocated %d, free %d", b.Name, len(b.Status.Allocations), b.Status.Allocated, b.Status.Free)
		}
		for _, rec := range b.Status.Allocations {
			if b.Spec.Node != "node-0" && nodeOf(mustAtoi(t, strings.TrimPrefix(rec.PodUID, "uid-"))) == 0 {
				borrowed++
			}
		}
	}
	if borrowed == 0 {
		t.Error("node 0 wanted more than its blocks hold, yet nothing is in another node's block")
	}
	t.Logf("node 0 borrowed %d addresses from other nodes' blocks", borrowed)
}

func mustAtoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ADD retried, on the same process or after a restart, returns the same address.
func TestAllocateIsIdempotent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("again", "10.21.0.0/16", []string{"10.21.0.1-10.21.0.50"}))
	l := nodeLedger(t, ctx, "n1")
	first, err := l.Allocate(ctx, "again", owner(1))
	if err != nil || first.Existing {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := l.Allocate(ctx, "again", owner(1))
	if err != nil || !again.Existing || again.Addr != first.Addr {
		t.Fatalf("retry: %+v %v, want %s", again, err, first.Addr)
	}
	other := owner(1)
	other.Interface = "net1"
	second, err := l.Allocate(ctx, "again", other)
	if err != nil || second.Addr == first.Addr {
		t.Fatalf("another interface of the pod: %+v %v", second, err)
	}
	restarted := nodeLedger(t, ctx, "n1")
	after, err := restarted.Allocate(ctx, "again", owner(1))
	if err != nil || !after.Existing || after.Addr != first.Addr {
		t.Fatalf("after a restart: %+v %v, want %s", after, err, first.Addr)
	}
}

// A released address is reused only after every other address of the node's blocks.
func TestReleasedAddressIsReusedLast(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("order", "10.22.0.0/16", []string{"10.22.0.1-10.22.0.30"}))
	l := nodeLedger(t, ctx, "n1")
	a0, err := l.Allocate(ctx, "order", owner(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Release(ctx, "order", owner(0)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 30; i++ {
		a, err := l.Allocate(ctx, "order", owner(i))
		if err != nil {
			t.Fatal(err)
		}
		if a.Addr == a0.Addr {
			t.Fatalf("allocation %d reused %s, released earlier, while others were never used", i, a0.Addr)
		}
	}
	last, err := l.Allocate(ctx, "order", owner(30))
	if err != nil || last.Addr != a0.Addr {
		t.Fatalf("the 30th allocation got %v %v, want the released %s", last.Addr, err, a0.Addr)
	}
}

// --allocation-order=lowest: a released address is the next one handed out, and a
// node fills the lowest free address of its blocks.
func TestLowestOrderReusesTheLowestFree(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("lowest", "10.23.0.0/16", []string{"10.23.0.1-10.23.0.30"}))
	l := ledger.New(ledger.Options{Node: "n1", Order: allocator.Lowest, Cache: startCache(t, ctx, "n1"), Client: env.Client, Fresh: env.Client, Log: logr.Discard()})
	var got []netip.Addr
	for i := range 3 {
		a, err := l.Allocate(ctx, "lowest", owner(i))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Addr)
	}
	if _, err := l.Release(ctx, "lowest", owner(0)); err != nil {
		t.Fatal(err)
	}
	again, err := l.Allocate(ctx, "lowest", owner(3))
	if err != nil || again.Addr != got[0] {
		t.Fatalf("after releasing %s (of %v) the next allocation got %v %v, want the released one", got[0], got, again.Addr, err)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1].Next() {
			t.Errorf("allocations %v are not consecutive from the lowest of the block", got)
		}
	}
}

func TestTerminatingOrDisabledPoolRefusesNewAllocations(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("off", "10.23.0.0/16", []string{"10.23.0.1-10.23.0.9"}))
	l := nodeLedger(t, ctx, "n1")
	held, err := l.Allocate(ctx, "off", owner(1))
	if err != nil {
		t.Fatal(err)
	}
	p := fixtures.GetPool(t, env.Client, "off")
	p.Spec.Disable = ptr.To(true)
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Each try is a new pod: one the ledger served before its cache saw the pool
	// disabled holds its address, which is returned to it again, not refused.
	var a ledger.Allocation
	next := 2
	fixtures.Eventually(t, "the ledger to refuse the disabled pool", func() bool {
		a, err = l.Allocate(ctx, "off", owner(next))
		next++
		return errors.Is(err, ledger.ErrPoolDisabled)
	})
	if a.Addr.IsValid() {
		t.Errorf("a disabled pool handed out %s", a.Addr)
	}
	// What an owner holds is still returned, and released.
	if again, err := l.Allocate(ctx, "off", owner(1)); err != nil || again.Addr != held.Addr {
		t.Errorf("holder of a disabled pool: %+v %v", again, err)
	}
	if rel, err := l.Release(ctx, "off", owner(1)); err != nil || len(rel) != 1 {
		t.Errorf("release from a disabled pool: %v %v", rel, err)
	}
}

// An address of another node's block (a StatefulSet pod that moved, or a borrowed
// address) is found, moved and released through the addresses its endpoint records.
func TestOtherNodesBlockThroughHints(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("moved", "10.24.0.0/16", []string{"10.24.0.1-10.24.0.40"}))
	a, b := nodeLedger(t, ctx, "node-a"), nodeLedger(t, ctx, "node-b")
	old := allocator.Owner{Pod: "ns/web-0", PodUID: "old", Interface: "net1"}
	got, err := a.Allocate(ctx, "moved", old)
	if err != nil {
		t.Fatal(err)
	}
	next := allocator.Owner{Pod: "ns/web-0", PodUID: "new", Interface: "net1"}
	// Without the hint node b does not see node a's block.
	if held, err := b.Held(ctx, "moved", old); err != nil || len(held) != 0 {
		t.Fatalf("node b sees %v %v without a hint", held, err)
	}
	// A forged takeover under another pod's name moves nothing.
	forged := allocator.Owner{Pod: "evil/web-0", PodUID: "new", Interface: "net1"}
	if err := b.Transfer(ctx, "moved", forged, "old", got.Addr); !errors.Is(err, allocator.ErrNotHeld) {
		t.Fatalf("forged transfer: %v, want ErrNotHeld", err)
	}
	if err := b.Transfer(ctx, "moved", next, "old", got.Addr); err != nil {
		t.Fatal(err)
	}
	again, err := b.Allocate(ctx, "moved", next, got.Addr)
	if err != nil || !again.Existing || again.Addr != got.Addr {
		t.Fatalf("the new pod's ADD on node b: %+v %v, want %s", again, err, got.Addr)
	}
	if rec := records(t, "moved")[got.Addr]; rec.Holder.PodUID != "new" || rec.Node != "node-a" {
		t.Errorf("record after the takeover: %+v", rec)
	}
	// The predecessor's release (a late DEL on node a) frees nothing of the successor's.
	if rel, err := a.Release(ctx, "moved", old, got.Addr); err != nil || len(rel) != 0 {
		t.Errorf("release by the predecessor: %v %v", rel, err)
	}
	if rel, err := b.Release(ctx, "moved", next, got.Addr); err != nil || len(rel) != 1 {
		t.Errorf("release by the successor: %v %v", rel, err)
	}
	if len(records(t, "moved")) != 0 {
		t.Error("records left after the release")
	}
}

// The garbage collector's releases remove a record only while it names the holder the
// decision was taken on.
func TestReleaseRecordsOnlyWhileStillHeld(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("gc", "10.25.0.0/16", []string{"10.25.0.1-10.25.0.40"}))
	n := nodeLedger(t, ctx, "n1")
	gc, _ := clusterLedger(t, ctx)
	var addrs []netip.Addr
	for i := range 3 {
		a, err := n.Allocate(ctx, "gc", owner(i))
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a.Addr)
	}
	stale := owner(1)
	stale.PodUID = "uid-earlier" // the snapshot saw another holder
	rel, err := gc.ReleaseRecords(ctx, []ledger.Record{
		{Pool: "gc", Addr: addrs[0], Holder: holder(owner(0))},
		{Pool: "gc", Addr: addrs[1], Holder: holder(stale)},
		{Pool: "gc", Addr: addrs[2], Holder: holder(owner(2))},
		{Pool: "gone", Addr: netip.MustParseAddr("10.99.0.1"), Holder: holder(owner(9))},
	})
	if err != nil || len(rel) != 2 {
		t.Fatalf("released %+v, %v; want the records of owners 0 and 2", rel, err)
	}
	recs := records(t, "gc")
	if _, ok := recs[addrs[1]]; !ok || len(recs) != 1 {
		t.Errorf("records left: %v", recs)
	}
}

func holder(o allocator.Owner) v2beta1.PoolIPAllocation {
	return v2beta1.PoolIPAllocation{Pod: o.Pod, PodUID: o.PodUID, Interface: o.Interface}
}
