package pool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/webhook/controller/poolcount"
)

// spiderpoolRecords decodes status.allocatedIPs as spiderpool's tools do (`jq`, its Go
// type PoolIPAllocations): a JSON string of {ip: {pod, podUid}}.
func spiderpoolRecords(t *testing.T, name string) (map[string]v2beta1.AllocatedIP, *v2beta1.SpiderIPPool) {
	t.Helper()
	p := fixtures.GetPool(t, env.Client, name)
	if p.Status.AllocatedIPs == nil {
		return nil, p
	}
	out := map[string]v2beta1.AllocatedIP{}
	if err := json.Unmarshal([]byte(*p.Status.AllocatedIPs), &out); err != nil {
		t.Fatalf("status.allocatedIPs of pool %s is not spiderpool's JSON: %v", name, err)
	}
	return out, p
}

// `kubectl get sp POOL -o jsonpath='{.status.allocatedIPs}' | jq` shows every pod of the
// pool, as on spiderpool: the pool counter writes spiderpool's string from the blocks
// an ipamd allocates in (here a node's ledger, ipamd's writer, allocating 100
// addresses one by one), a release leaves it, and allocatedIPsFrom says where the
// records are. The lag between the last allocation and the string showing it is
// logged (speed is a benchmark's, not an assertion).
func TestAllocatedIPsShowEveryPod(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const name, n = "shown", 100
	fixtures.CreatePool(t, env.Client, fixtures.Pool(name, "10.57.0.0/24", []string{"10.57.0.1-10.57.0.200"}))
	fixtures.Eventually(t, "the pool counted", func() bool { return totalIPCount(name) == 200 })
	// ipamd's writer: a node's ledger, as nicpool's service account.
	l := ledger.New(ledger.Options{Node: "node-shown", Cache: nodeCache(t, ctx, "node-shown"), Client: env.Nicpool, Fresh: env.Client, Log: logr.Discard()})
	want := map[string]v2beta1.AllocatedIP{}
	var last time.Time
	for i := range n {
		o := allocator.Owner{Pod: fmt.Sprintf("team/web-%d", i), PodUID: fmt.Sprintf("uid-shown-%d", i), Interface: "eth0"}
		a, err := l.Allocate(ctx, name, o)
		if err != nil {
			t.Fatal(err)
		}
		want[a.Addr.String()] = v2beta1.AllocatedIP{Pod: o.Pod, PodUID: o.PodUID}
		last = time.Now()
	}
	shows := func(want map[string]v2beta1.AllocatedIP) func() bool {
		return func() bool {
			got, p := spiderpoolRecords(t, name)
			if len(got) != len(want) || p.Status.AllocatedIPsFrom != v2beta1.AllocatedIPsFromBlocks {
				return false
			}
			for a, r := range want {
				if got[a] != r {
					return false
				}
			}
			return true
		}
	}
	fixtures.Eventually(t, "status.allocatedIPs lists the 100 pods", shows(want))
	t.Logf("status.allocatedIPs showed the last of %d allocations %s after it", n, time.Since(last).Round(10*time.Millisecond))
	if p := fixtures.GetPool(t, env.Client, name); p.Status.AllocatedIPCount == nil || *p.Status.AllocatedIPCount != n {
		t.Errorf("allocatedIPCount %v; want %d", p.Status.AllocatedIPCount, n)
	}

	var gone ledger.Record
	recs, _, err := ledger.List(ctx, env.Client)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Pool == name {
			gone = r
			break
		}
	}
	if _, err := l.ReleaseRecords(ctx, []ledger.Record{gone}); err != nil {
		t.Fatal(err)
	}
	delete(want, gone.Addr.String())
	fixtures.Eventually(t, "status.allocatedIPs without the released address", shows(want))
}

// Above its bound, status.allocatedIPs is empty and the pool says why where `kubectl
// describe sp` shows it: allocatedIPsFrom and an Event; the blocks keep every record.
func TestAllocatedIPsBounded(t *testing.T) {
	ctx := context.Background()
	const name = "bounded"
	n := ledger.AllocatedIPsMaxRecords + 1
	fixtures.CreatePool(t, env.Client, fixtures.Pool(name, "10.58.0.0/16", []string{"10.58.0.1-10.58.255.254"}))
	recs := v2beta1.PoolIPAllocations{}
	a := netip.MustParseAddr("10.58.0.1")
	for i := range n {
		recs[a.String()] = v2beta1.PoolIPAllocation{Pod: fmt.Sprintf("team/p-%d", i), PodUID: fmt.Sprintf("uid-bounded-%d", i), Interface: "eth0"}
		a = a.Next()
	}
	setAllocated(t, name, recs)
	wantFrom := fmt.Sprintf("%s%d records are more than the %d allocatedIPs lists; every record is in the pool's IPBlocks (kubectl nicpool pools)", v2beta1.AllocatedIPsOmitted, n, ledger.AllocatedIPsMaxRecords)
	fixtures.Eventually(t, "allocatedIPs empty, allocatedIPsFrom saying why", func() bool {
		p := fixtures.GetPool(t, env.Client, name)
		return p.Status.AllocatedIPs != nil && *p.Status.AllocatedIPs == "" && p.Status.AllocatedIPsFrom == wantFrom &&
			p.Status.AllocatedIPCount != nil && *p.Status.AllocatedIPCount == int64(n)
	})
	fixtures.Eventually(t, "an AllocatedIPsOmitted Event on the pool", func() bool {
		return hasEvent(t, name, poolcount.EventAllocatedIPsOmitted, "status.allocatedIPs is empty: ")
	})
	if got, err := ledger.PoolRecords(ctx, env.Client, name); err != nil || len(got) != n {
		t.Errorf("the blocks hold %d records (%v); want %d", len(got), err, n)
	}
	setAllocated(t, name, nil)
	fixtures.Eventually(t, "allocatedIPs back once the pool is small again", func() bool {
		p := fixtures.GetPool(t, env.Client, name)
		return p.Status.AllocatedIPs != nil && *p.Status.AllocatedIPs == "{}" && p.Status.AllocatedIPsFrom == v2beta1.AllocatedIPsFromBlocks
	})
}

// A pool whose status the counter cannot use is left as it is, with an Event naming
// why: spiderpool's records not migrated yet (the counter must not replace them), or
// a status that does not decode. Every other pool is still counted.
func TestCounterLeavesBadPoolsWithAnEvent(t *testing.T) {
	ctx := context.Background()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("bad-spiderpool", "10.59.0.0/24", []string{"10.59.0.1-10.59.0.9"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("bad-status", "10.59.1.0/24", []string{"10.59.1.1-10.59.1.9"}))
	// The counter's first write of a new pool (its counts and records) comes after the
	// pool is created, and would replace a status written in between: the statuses
	// below are written once it is done, as they are found on pools counted before.
	for _, name := range []string{"bad-spiderpool", "bad-status"} {
		fixtures.Eventually(t, "pool "+name+" counted", func() bool { return totalIPCount(name) == 9 })
	}
	str := `{"10.59.0.5":{"pod":"team/old","podUid":"uid-old"}}`
	// As spiderpool left it: its string, nothing of nicpool's.
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"allocatedIPs": str, "allocatedIPsFrom": nil}})
	if err := env.Nicpool.Status().Patch(ctx, fixtures.GetPool(t, env.Client, "bad-spiderpool"), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	fixtures.StoreAllocatedIPsAs(t, env.Client, env.Nicpool, "bad-status", []int{1, 2})
	fixtures.Eventually(t, "a SpiderpoolRecordsNotMigrated Event", func() bool {
		return hasEvent(t, "bad-spiderpool", poolcount.EventSpiderpoolRecords, "kubectl nicpool migrate from-spiderpool --apply")
	})
	fixtures.Eventually(t, "a PoolStatusUnreadable Event", func() bool {
		return hasEvent(t, "bad-status", poolcount.EventPoolStatusUnreadable, "status.allocatedIPs is neither spiderpool's string nor an older nicpool's records")
	})
	if p := fixtures.GetPool(t, env.Client, "bad-spiderpool"); p.Status.AllocatedIPs == nil || *p.Status.AllocatedIPs != str || p.Status.AllocatedIPsFrom != "" {
		t.Errorf("spiderpool's records were replaced: allocatedIPs %v from %q", p.Status.AllocatedIPs, p.Status.AllocatedIPsFrom)
	}
	fixtures.CreatePool(t, env.Client, fixtures.Pool("bad-neighbour", "10.59.2.0/24", []string{"10.59.2.1-10.59.2.9"}))
	fixtures.Eventually(t, "another pool counted", func() bool { return totalIPCount("bad-neighbour") == 9 })
	for _, name := range []string{"bad-spiderpool", "bad-status", "bad-neighbour"} {
		_ = env.Client.Delete(ctx, fixtures.GetPool(t, env.Client, name))
	}
}

// nodeCache is a cache as an ipamd has it: its node's blocks, with the ledger's indexes.
func nodeCache(t *testing.T, ctx context.Context, node string) cache.Cache {
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
	return c
}

// hasEvent reports whether pool has an Event of reason whose message contains part.
func hasEvent(t *testing.T, pool, reason, part string) bool {
	t.Helper()
	var evs corev1.EventList
	if err := env.Client.List(context.Background(), &evs, client.MatchingFields{"involvedObject.name": pool, "reason": reason}); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, part) {
			return true
		}
	}
	return false
}
