package block

import (
	"errors"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/eligibility"
	"github.com/nicpool/nicpool/ipamd/allocator"
)

func owner(uid, nic string) allocator.Owner {
	return allocator.Owner{Pod: "ns/" + uid, PodUID: uid, Interface: nic}
}

var blk0 = netip.MustParsePrefix("10.6.0.0/28")

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestApplyAllocateOrder(t *testing.T) {
	r := rangeOf(t, "10.6.0.0/24", []string{"10.6.0.10-10.6.0.13"}, nil, "")
	tests := []struct {
		name string
		recs []string // addresses held by someone
		last string
		want string // empty: full
		free int64
	}{
		{name: "fresh block starts at its first address", want: "10.6.0.10", free: 3},
		{name: "after the last one handed out", recs: []string{"10.6.0.10"}, last: "10.6.0.10", want: "10.6.0.11", free: 2},
		{name: "a released address is not reused before the others", recs: []string{"10.6.0.11"}, last: "10.6.0.11", want: "10.6.0.12", free: 2},
		{name: "wraps around to the start", recs: []string{"10.6.0.11", "10.6.0.12"}, last: "10.6.0.13", want: "10.6.0.10", free: 1},
		{name: "skips held addresses after the cursor", recs: []string{"10.6.0.12", "10.6.0.13"}, last: "10.6.0.11", want: "10.6.0.10", free: 1},
		{name: "cursor outside the block", recs: nil, last: "10.6.0.200", want: "10.6.0.10", free: 3},
		{name: "malformed cursor", recs: nil, last: "bogus", want: "10.6.0.10", free: 3},
		{name: "full", recs: []string{"10.6.0.10", "10.6.0.11", "10.6.0.12", "10.6.0.13"}, last: "10.6.0.12", want: "", free: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &v1alpha1.IPBlockStatus{Allocations: v2beta1.PoolIPAllocations{}, LastAllocated: tt.last}
			for _, a := range tt.recs {
				st.Allocations[a] = v2beta1.PoolIPAllocation{Pod: "ns/x" + a, PodUID: "x" + a, Interface: "eth0"}
			}
			res, changed := Apply(r, blk0, st, []allocator.Op{{Kind: allocator.Allocate, Owner: owner("a", "eth0")}})
			if tt.want == "" {
				if !errors.Is(res[0].Err, ErrFull) || errors.Is(res[0].Err, allocator.ErrExhausted) {
					t.Fatalf("got %+v, want ErrFull (not the pool's exhaustion)", res[0])
				}
			} else if res[0].Err != nil || res[0].Addr.String() != tt.want || !changed {
				t.Fatalf("got %+v changed=%v, want %s", res[0], changed, tt.want)
			}
			if st.Free != tt.free || st.Allocated != int64(len(st.Allocations)) {
				t.Errorf("counts: allocated %d free %d, want free %d", st.Allocated, st.Free, tt.free)
			}
			if tt.want != "" && st.LastAllocated != tt.want {
				t.Errorf("lastAllocated = %s", st.LastAllocated)
			}
		})
	}
}

func TestApplyBatch(t *testing.T) {
	r := rangeOf(t, "10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, "")
	st := &v1alpha1.IPBlockStatus{}
	res, changed := Apply(r, blk0, st, []allocator.Op{
		{Kind: allocator.Allocate, Owner: owner("a", "eth0")},
		{Kind: allocator.Allocate, Owner: owner("a", "net1")}, // other interface: another address
		{Kind: allocator.Allocate, Owner: owner("a", "eth0")}, // retry in the same batch: same address
		{Kind: allocator.Allocate, Owner: owner("b", "eth0")},
		{Kind: allocator.Allocate, Owner: owner("c", "eth0")}, // block full, alone
	})
	want := []string{"10.6.0.10", "10.6.0.11", "10.6.0.10", "10.6.0.12"}
	for i, w := range want {
		if res[i].Err != nil || res[i].Addr.String() != w {
			t.Errorf("op %d: %+v, want %s", i, res[i], w)
		}
	}
	if !changed || !res[2].Existing || res[0].Existing || !errors.Is(res[4].Err, ErrFull) {
		t.Errorf("changed=%v results %+v", changed, res)
	}
	if st.Allocated != 3 || st.Free != 0 {
		t.Errorf("counts %d %d", st.Allocated, st.Free)
	}
	// A retry alone changes nothing: no write.
	if res, changed := Apply(r, blk0, st, []allocator.Op{{Kind: allocator.Allocate, Owner: owner("b", "eth0")}}); changed || !res[0].Existing {
		t.Errorf("retry changed the block: %+v", res)
	}
}

func TestApplyReleaseStillHeld(t *testing.T) {
	r := rangeOf(t, "10.6.0.0/24", []string{"10.6.0.10-10.6.0.13"}, nil, "")
	st := &v1alpha1.IPBlockStatus{}
	Apply(r, blk0, st, []allocator.Op{
		{Kind: allocator.Allocate, Owner: owner("a", "eth0")}, // .10
		{Kind: allocator.Allocate, Owner: owner("a", "net1")}, // .11
		{Kind: allocator.Allocate, Owner: owner("b", "eth0")}, // .12
	})
	tests := []struct {
		name string
		op   allocator.Op
		want []string
	}{
		{name: "another pod's address is never released", op: allocator.Op{Kind: allocator.Release, Owner: owner("x", "eth0"), Addrs: addrs("10.6.0.12")}},
		{name: "same UID under another pod name is not the holder", op: allocator.Op{Kind: allocator.Release, Owner: allocator.Owner{Pod: "evil/b", PodUID: "b", Interface: "eth0"}}},
		{name: "an owner without pod name matches nothing", op: allocator.Op{Kind: allocator.Release, Owner: allocator.Owner{PodUID: "b"}}},
		{name: "an address the owner does not hold is kept", op: allocator.Op{Kind: allocator.Release, Owner: owner("a", "eth0"), Addrs: addrs("10.6.0.11")}},
		{name: "the owner's interface", op: allocator.Op{Kind: allocator.Release, Owner: owner("a", "eth0")}, want: []string{"10.6.0.10"}},
		{name: "again: nothing", op: allocator.Op{Kind: allocator.Release, Owner: owner("a", "eth0")}},
		{name: "every interface of the pod", op: allocator.Op{Kind: allocator.Release, Owner: allocator.Owner{Pod: "ns/a", PodUID: "a"}}, want: []string{"10.6.0.11"}},
	}
	for _, tt := range tests {
		res, _ := Apply(r, blk0, st, []allocator.Op{tt.op})
		var got []string
		for _, a := range res[0].Changed {
			got = append(got, a.String())
		}
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
			t.Errorf("%s: released %v, want %v", tt.name, got, tt.want)
		}
	}
	if _, ok := st.Allocations["10.6.0.12"]; !ok || st.Allocated != 1 || st.Free != 3 {
		t.Errorf("left %v (allocated %d free %d)", st.Allocations, st.Allocated, st.Free)
	}
}

func TestApplyTransfer(t *testing.T) {
	r := rangeOf(t, "10.6.0.0/24", []string{"10.6.0.10-10.6.0.13"}, nil, "")
	st := &v1alpha1.IPBlockStatus{Allocations: v2beta1.PoolIPAllocations{
		"10.6.0.10": {Pod: "ns/web-0", PodUID: "old", Interface: "net1"},
		"10.6.0.11": {Pod: "ns/other", PodUID: "old", Interface: "eth0"}, // forged: another pod's name under the same UID
		"10.6.0.12": {Pod: "ns/web-0", PodUID: "old", Interface: "eth0"},
	}}
	next := allocator.Owner{Pod: "ns/web-0", PodUID: "new", Interface: "net1"}
	res, changed := Apply(r, blk0, st, []allocator.Op{
		{Kind: allocator.Transfer, Owner: next, FromUID: "old", Addrs: addrs("10.6.0.10")},
		{Kind: allocator.Transfer, Owner: next, FromUID: "old", Addrs: addrs("10.6.0.10")}, // repeated: already done
		{Kind: allocator.Transfer, Owner: allocator.Owner{Pod: "ns/web-0", PodUID: "new", Interface: "eth0"}, FromUID: "old", Addrs: addrs("10.6.0.11")},
		{Kind: allocator.Transfer, Owner: next, FromUID: "old", Addrs: addrs("10.6.0.12")}, // another interface's address
		{Kind: allocator.Transfer, Owner: next, FromUID: "old", Addrs: addrs("10.6.0.13")}, // nobody's
	})
	if !changed || res[0].Err != nil || res[1].Err != nil || len(res[1].Changed) != 1 {
		t.Fatalf("results %+v", res)
	}
	for i := 2; i <= 4; i++ {
		if !errors.Is(res[i].Err, allocator.ErrNotHeld) {
			t.Errorf("op %d: %v, want ErrNotHeld", i, res[i].Err)
		}
	}
	if rec := st.Allocations["10.6.0.10"]; rec.PodUID != "new" || rec.Interface != "net1" || rec.Pod != "ns/web-0" {
		t.Errorf("moved record %+v", rec)
	}
	if rec := st.Allocations["10.6.0.11"]; rec.PodUID != "old" || rec.Pod != "ns/other" {
		t.Errorf("record of another pod changed: %+v", rec)
	}
}

func TestApplyKeepsRecordsOutsideRange(t *testing.T) {
	r := rangeOf(t, "10.6.0.0/24", []string{"10.6.0.10"}, nil, "")
	st := &v1alpha1.IPBlockStatus{Allocations: v2beta1.PoolIPAllocations{"10.6.0.9": {Pod: "ns/z", PodUID: "z", Interface: "eth0"}}}
	res, _ := Apply(r, blk0, st, []allocator.Op{{Kind: allocator.Allocate, Owner: owner("a", "eth0")}, {Kind: allocator.Allocate, Owner: owner("b", "eth0")}})
	if res[0].Addr.String() != "10.6.0.10" || !errors.Is(res[1].Err, ErrFull) {
		t.Fatalf("results %+v", res)
	}
	if _, ok := st.Allocations["10.6.0.9"]; !ok || st.Allocated != 2 || st.Free != 0 {
		t.Errorf("a record outside the range was dropped or miscounted: %+v", st)
	}
}

// A pool being deleted or disabled hands out no new address, and still answers a
// retry with the address the owner holds and releases what is held.
func TestApplyClosedPool(t *testing.T) {
	for _, closeIt := range []func(p *v2beta1.SpiderIPPool){
		func(p *v2beta1.SpiderIPPool) { disable := true; p.Spec.Disable = &disable },
		func(p *v2beta1.SpiderIPPool) { now := metav1.Now(); p.DeletionTimestamp = &now },
	} {
		p := &v2beta1.SpiderIPPool{}
		p.Name = "p"
		p.Spec.Subnet, p.Spec.IPs = "10.6.0.0/24", []string{"10.6.0.10-10.6.0.13"}
		closeIt(p)
		r, err := allocator.NewRange(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		st := &v1alpha1.IPBlockStatus{Allocations: v2beta1.PoolIPAllocations{"10.6.0.10": {Pod: "ns/a", PodUID: "a", Interface: "eth0"}}}
		res, _ := Apply(r, blk0, st, []allocator.Op{
			{Kind: allocator.Allocate, Owner: owner("a", "eth0")},
			{Kind: allocator.Allocate, Owner: owner("b", "eth0")},
			{Kind: allocator.Release, Owner: owner("a", "eth0")},
		})
		if res[0].Err != nil || res[0].Addr.String() != "10.6.0.10" || !res[0].Existing {
			t.Errorf("retry of a holder: got %+v, want its 10.6.0.10", res[0])
		}
		if !errors.Is(res[1].Err, eligibility.ErrDisabled) && !errors.Is(res[1].Err, eligibility.ErrTerminating) {
			t.Errorf("new owner: got %+v, want the pool's refusal", res[1])
		}
		if len(res[2].Changed) != 1 || len(st.Allocations) != 0 {
			t.Errorf("release: got %+v, records left %v, want 10.6.0.10 released", res[2], st.Allocations)
		}
	}
}

// A pod UID is no secret: an owner that names the victim's UID under another pod name
// (or no name) neither releases, moves nor reuses the victim's address.
func TestOwnershipNeedsPodNameAndUID(t *testing.T) {
	r := rangeOf(t, "10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, "")
	st := &v1alpha1.IPBlockStatus{}
	victim := allocator.Owner{Pod: "prod/db", PodUID: "u1", Interface: "eth0"}
	Apply(r, blk0, st, []allocator.Op{{Kind: allocator.Allocate, Owner: victim}})
	a := netip.MustParseAddr("10.6.0.10")
	forger := allocator.Owner{Pod: "evil/x", PodUID: "u1", Interface: "eth0"} // the victim's UID, another name
	res, changed := Apply(r, blk0, st, []allocator.Op{
		{Kind: allocator.Release, Owner: forger},
		{Kind: allocator.Release, Owner: allocator.Owner{Pod: "evil/x", PodUID: "u1"}},
		{Kind: allocator.Release, Owner: allocator.Owner{PodUID: "u1", Interface: "eth0"}, Addrs: []netip.Addr{a}},
		{Kind: allocator.Transfer, Owner: allocator.Owner{Pod: "evil/x", PodUID: "u9", Interface: "eth0"}, FromUID: "u1", Addrs: []netip.Addr{a}},
		{Kind: allocator.Allocate, Owner: forger}, // not "already held": a new address
	})
	for i := range 3 {
		if len(res[i].Changed) != 0 {
			t.Errorf("release %d freed %v of another pod", i, res[i].Changed)
		}
	}
	if !errors.Is(res[3].Err, allocator.ErrNotHeld) {
		t.Errorf("transfer from another pod name: %v", res[3].Err)
	}
	if res[4].Existing || res[4].Addr == a {
		t.Errorf("allocate by the victim's UID under another name returned the victim's address: %+v", res[4])
	}
	if !changed || st.Allocations[a.String()] != (v2beta1.PoolIPAllocation{Pod: "prod/db", PodUID: "u1", Interface: "eth0"}) {
		t.Errorf("victim's record now %+v", st.Allocations[a.String()])
	}
	res, _ = Apply(r, blk0, st, []allocator.Op{{Kind: allocator.Allocate, Owner: allocator.Owner{Pod: "ns/a", PodUID: "a"}}})
	if res[0].Err == nil {
		t.Errorf("an allocation without interface was accepted: %+v", res[0])
	}
}
