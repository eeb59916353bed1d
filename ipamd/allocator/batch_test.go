package allocator

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func owner(uid, nic string) Owner { return Owner{Pod: "ns/" + uid, PodUID: uid, Interface: nic} }

func mustRange(t *testing.T, p *v2beta1.SpiderIPPool) *Range {
	t.Helper()
	r, err := NewRange(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestApplyAllocate(t *testing.T) {
	r := mustRange(t, pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""))
	st := &v2beta1.IPPoolStatus{}
	ops := []Op{
		{Kind: Allocate, Owner: owner("a", "eth0")},
		{Kind: Allocate, Owner: owner("a", "net1")}, // same pod, other interface: another address
		{Kind: Allocate, Owner: owner("a", "eth0")}, // retry in the same batch: same address
		{Kind: Allocate, Owner: owner("b", "eth0")},
		{Kind: Allocate, Owner: owner("c", "eth0")}, // exhausted, alone
	}
	res, changed := Apply(r, st, ops)
	if !changed {
		t.Fatal("status not changed")
	}
	want := []string{"10.6.0.10", "10.6.0.11", "10.6.0.10", "10.6.0.12"}
	for i, w := range want {
		if res[i].Err != nil || res[i].Addr != netip.MustParseAddr(w) {
			t.Errorf("op %d: got %v %v, want %s", i, res[i].Addr, res[i].Err, w)
		}
	}
	if !res[2].Existing || res[0].Existing {
		t.Errorf("Existing flags: %v %v", res[0].Existing, res[2].Existing)
	}
	if !errors.Is(res[4].Err, ErrExhausted) {
		t.Errorf("op 4: want exhausted, got %v", res[4].Err)
	}
	if *st.AllocatedIPCount != 3 || *st.TotalIPCount != 3 || len(st.AllocatedIPs) != 3 {
		t.Errorf("counts: %d %d %d", *st.AllocatedIPCount, *st.TotalIPCount, len(st.AllocatedIPs))
	}
	if rec := st.AllocatedIPs["10.6.0.11"]; rec.Interface != "net1" || rec.PodUID != "a" || rec.Pod != "ns/a" {
		t.Errorf("record of 10.6.0.11 = %+v", rec)
	}
}

func TestApplyRetryReturnsExistingWithoutWrite(t *testing.T) {
	r := mustRange(t, pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""))
	st := &v2beta1.IPPoolStatus{}
	Apply(r, st, []Op{{Kind: Allocate, Owner: owner("a", "eth0")}})
	res, changed := Apply(r, st, []Op{{Kind: Allocate, Owner: owner("a", "eth0")}})
	if changed {
		t.Error("a retry must not change the pool")
	}
	if !res[0].Existing || res[0].Addr != netip.MustParseAddr("10.6.0.10") {
		t.Errorf("retry got %+v", res[0])
	}
}

func TestApplyRelease(t *testing.T) {
	r := mustRange(t, pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""))
	st := &v2beta1.IPPoolStatus{}
	Apply(r, st, []Op{{Kind: Allocate, Owner: owner("a", "eth0")}, {Kind: Allocate, Owner: owner("b", "eth0")}})
	res, changed := Apply(r, st, []Op{
		{Kind: Release, Owner: owner("a", "eth0")},                                                        // all of a/eth0
		{Kind: Release, Owner: owner("a", "eth0")},                                                        // again: nothing
		{Kind: Release, Owner: owner("x", "eth0"), Addrs: []netip.Addr{netip.MustParseAddr("10.6.0.11")}}, // not x's
	})
	if !changed || len(res[0].Changed) != 1 || len(res[1].Changed) != 0 || len(res[2].Changed) != 0 {
		t.Fatalf("results %+v", res)
	}
	if _, ok := st.AllocatedIPs["10.6.0.11"]; !ok || len(st.AllocatedIPs) != 1 || *st.AllocatedIPCount != 1 {
		t.Errorf("status after release: %+v", st.AllocatedIPs)
	}
	// An owner without interface sweeps every record of the pod UID.
	Apply(r, st, []Op{{Kind: Allocate, Owner: owner("b", "net1")}})
	res, _ = Apply(r, st, []Op{{Kind: Release, Owner: Owner{Pod: "ns/b", PodUID: "b"}}})
	if len(res[0].Changed) != 2 || len(st.AllocatedIPs) != 0 {
		t.Fatalf("sweep released %v, left %v", res[0].Changed, st.AllocatedIPs)
	}
	// The freed address is handed out again.
	res, _ = Apply(r, st, []Op{{Kind: Allocate, Owner: owner("c", "eth0")}})
	if res[0].Addr != netip.MustParseAddr("10.6.0.10") {
		t.Errorf("reuse got %v", res[0].Addr)
	}
}

func TestApplyTransfer(t *testing.T) {
	r := mustRange(t, pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""))
	st := &v2beta1.IPPoolStatus{}
	Apply(r, st, []Op{{Kind: Allocate, Owner: owner("old", "net1")}, {Kind: Allocate, Owner: owner("other", "eth0")}})
	a, b := netip.MustParseAddr("10.6.0.10"), netip.MustParseAddr("10.6.0.11")
	// The successor has its predecessor's name ("ns/old") and a new UID.
	successor := func(nic string) Owner { return Owner{Pod: "ns/old", PodUID: "new", Interface: nic} }
	res, changed := Apply(r, st, []Op{
		{Kind: Transfer, Owner: successor("net1"), FromUID: "old", Addrs: []netip.Addr{a}},
		{Kind: Transfer, Owner: successor("net1"), FromUID: "old", Addrs: []netip.Addr{a}}, // repeated: done
		{Kind: Transfer, Owner: successor("eth0"), FromUID: "old", Addrs: []netip.Addr{b}}, // someone else's
	})
	if !changed || res[0].Err != nil || res[1].Err != nil || len(res[1].Changed) != 1 {
		t.Fatalf("results %+v", res)
	}
	if !errors.Is(res[2].Err, ErrNotHeld) {
		t.Errorf("transfer of another pod's address: %v", res[2].Err)
	}
	if rec := st.AllocatedIPs["10.6.0.10"]; rec.PodUID != "new" || rec.Interface != "net1" {
		t.Errorf("record %+v", rec)
	}
	if rec := st.AllocatedIPs["10.6.0.11"]; rec.PodUID != "other" {
		t.Errorf("record of another pod changed: %+v", rec)
	}
}

func TestApplyKeepsRecordsOutsideRange(t *testing.T) {
	r := mustRange(t, pool("10.6.0.0/24", []string{"10.6.0.10"}, nil, ""))
	st := &v2beta1.IPPoolStatus{AllocatedIPs: v2beta1.PoolIPAllocations{"10.6.0.99": {Pod: "ns/z", PodUID: "z", Interface: "eth0"}}}
	res, _ := Apply(r, st, []Op{{Kind: Allocate, Owner: owner("a", "eth0")}, {Kind: Allocate, Owner: owner("b", "eth0")}})
	if res[0].Addr != netip.MustParseAddr("10.6.0.10") || !errors.Is(res[1].Err, ErrExhausted) {
		t.Fatalf("results %+v", res)
	}
	if _, ok := st.AllocatedIPs["10.6.0.99"]; !ok {
		t.Error("a record outside the range was dropped")
	}
}

// The ownership rule (Owner.Holds): a pod UID alone neither releases, nor transfers,
// nor reuses a record; the record must also name the same pod.
func TestOwnershipNeedsPodNameAndUID(t *testing.T) {
	r := mustRange(t, pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""))
	st := &v2beta1.IPPoolStatus{}
	victim := Owner{Pod: "prod/db", PodUID: "u1", Interface: "eth0"}
	Apply(r, st, []Op{{Kind: Allocate, Owner: victim}})
	a := netip.MustParseAddr("10.6.0.10")
	forger := Owner{Pod: "evil/x", PodUID: "u1", Interface: "eth0"} // the victim's UID, another name
	res, changed := Apply(r, st, []Op{
		{Kind: Release, Owner: forger},
		{Kind: Release, Owner: Owner{Pod: "evil/x", PodUID: "u1"}},
		{Kind: Release, Owner: Owner{PodUID: "u1", Interface: "eth0"}, Addrs: []netip.Addr{a}},
		{Kind: Transfer, Owner: Owner{Pod: "evil/x", PodUID: "u9", Interface: "eth0"}, FromUID: "u1", Addrs: []netip.Addr{a}},
		{Kind: Allocate, Owner: forger}, // not "already held": a new address
	})
	for i := range 3 {
		if len(res[i].Changed) != 0 {
			t.Errorf("release %d freed %v of another pod", i, res[i].Changed)
		}
	}
	if !errors.Is(res[3].Err, ErrNotHeld) {
		t.Errorf("transfer from another pod name: %v", res[3].Err)
	}
	if res[4].Existing || res[4].Addr == a {
		t.Errorf("allocate by the victim's UID under another name returned the victim's address: %+v", res[4])
	}
	if !changed || st.AllocatedIPs[a.String()] != (v2beta1.PoolIPAllocation{Pod: "prod/db", PodUID: "u1", Interface: "eth0"}) {
		t.Errorf("victim's record now %+v", st.AllocatedIPs[a.String()])
	}
	res, _ = Apply(r, st, []Op{{Kind: Allocate, Owner: Owner{Pod: "ns/a", PodUID: "a"}}})
	if res[0].Err == nil {
		t.Errorf("an allocation without interface was accepted: %+v", res[0])
	}
}

func TestHolds(t *testing.T) {
	rec := v2beta1.PoolIPAllocation{Pod: "ns/p", PodUID: "u", Interface: "net1"}
	for _, tc := range []struct {
		o    Owner
		want bool
	}{
		{Owner{Pod: "ns/p", PodUID: "u", Interface: "net1"}, true},
		{Owner{Pod: "ns/p", PodUID: "u"}, true}, // every interface of the pod
		{Owner{Pod: "ns/p", PodUID: "u", Interface: "eth0"}, false},
		{Owner{Pod: "ns/q", PodUID: "u", Interface: "net1"}, false},
		{Owner{Pod: "other/p", PodUID: "u"}, false},
		{Owner{Pod: "ns/p", PodUID: "v", Interface: "net1"}, false},
		{Owner{PodUID: "u", Interface: "net1"}, false},
		{Owner{Pod: "ns/p", Interface: "net1"}, false},
		{Owner{}, false},
	} {
		if got := tc.o.Holds(rec); got != tc.want {
			t.Errorf("%+v.Holds(%+v) = %v, want %v", tc.o, rec, got, tc.want)
		}
	}
	if !OwnerOf(rec).Holds(rec) {
		t.Error("a record's own owner does not hold it")
	}
}
