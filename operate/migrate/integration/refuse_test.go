package integration

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/operate/migrate"
)

// What the migration does when the cluster moves between its plan and its apply: a
// record of spiderpool's string given to another pod (same count) refuses the pool,
// naming the address; an address that nicpool already records for another pod is never
// overwritten: the pool is refused with that address and its holder named, and none of
// its records is written. Once the cause is dealt with, the next run migrates it.
func TestApplyRefusesWhatChangedSinceThePlan(t *testing.T) {
	ctx := context.Background()
	c := suite.env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "moving"}}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "moving", Name: name},
			Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, other := pod("a"), pod("b"), pod("other")
	rec := func(p *corev1.Pod) map[string]string {
		return map[string]string{"pod": "moving/" + p.Name, "podUid": string(p.UID), "interface": "net1"}
	}
	spiderpoolPool(t, "swapped", "10.150.0.0/24", "", "10.150.0.10-10.150.0.50", map[string]map[string]string{"10.150.0.10": rec(a)})
	spiderpoolPool(t, "taken", "10.151.0.0/24", "", "10.151.0.10-10.151.0.200", map[string]map[string]string{"10.151.0.10": rec(b), "10.151.0.100": rec(a)})

	plan, err := migrate.Run(ctx, c, discovery(t), migrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Blockers) > 0 {
		t.Fatalf("blockers: %v", plan.Blockers)
	}
	// Between plan and apply: swapped's one address goes to another pod (the count
	// stays 1) ...
	setString(t, "swapped", map[string]map[string]string{"10.150.0.10": rec(other)})
	err = migrate.Apply(ctx, c, onlyPools(plan, "swapped"), logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "changed since the plan was made (10.150.0.10 is now pod moving/other's") {
		t.Errorf("apply after a record changed: %v; want refused naming 10.150.0.10", err)
	}
	if s := spiderpoolString(t, "swapped"); !strings.Contains(s, string(other.UID)) {
		t.Errorf("pool swapped's string after the refusal: %s; want it kept", s)
	}
	if n := len(blocksOf(t, "swapped")); n != 0 {
		t.Errorf("pool swapped has %d blocks after the refusal; want none written", n)
	}

	// ... and nicpool already records taken's 10.151.0.10 for another pod.
	taken := &v2beta1.SpiderIPPool{}
	if err := c.Get(ctx, client.ObjectKey{Name: "taken"}, taken); err != nil {
		t.Fatal(err)
	}
	if err := migrate.InstallCRDs(ctx, c, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	l := ledger.New(ledger.Options{Node: nodeName, Cache: c, Client: c, Fresh: c, Log: logr.Discard()})
	holder := v2beta1.PoolIPAllocation{Pod: "moving/other", PodUID: string(other.UID), Interface: "net2"}
	if err := l.Import(ctx, taken, v2beta1.PoolIPAllocations{"10.151.0.10": holder}); err != nil {
		t.Fatal(err)
	}
	err = migrate.Apply(ctx, c, onlyPools(plan, "taken"), logr.Discard())
	if err == nil || !strings.Contains(err.Error(), "nothing of it was written") || !strings.Contains(err.Error(), "address 10.151.0.10 of pool taken is recorded for pod moving/other") {
		t.Errorf("apply over another holder: %v; want refused naming 10.151.0.10 and moving/other", err)
	}
	got := map[string]v2beta1.PoolIPAllocation{}
	for _, blk := range blocksOf(t, "taken") {
		for k, v := range blk.Status.Allocations {
			got[k] = v
		}
	}
	if len(got) != 1 || got["10.151.0.10"] != holder {
		t.Errorf("pool taken's records after the refusal: %v; want only the other holder's 10.151.0.10 (nothing half-imported)", got)
	}
	if s := spiderpoolString(t, "taken"); !strings.Contains(s, "10.151.0.100") {
		t.Errorf("pool taken's string after the refusal: %s; want it kept", s)
	}

	// Dealt with (the other pod's record released), a new run migrates both.
	if _, err := l.ReleaseRecords(ctx, []ledger.Record{{Pool: "taken", Addr: netip.MustParseAddr("10.151.0.10"), Holder: holder}}); err != nil {
		t.Fatal(err)
	}
	plan, err = migrate.Run(ctx, c, discovery(t), migrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate.Apply(ctx, c, onlyPools(plan, "swapped", "taken"), logr.Discard()); err != nil {
		t.Fatalf("apply once dealt with: %v", err)
	}
	for pool, want := range map[string]map[string]*corev1.Pod{
		"swapped": {"10.150.0.10": other},
		"taken":   {"10.151.0.10": b, "10.151.0.100": a},
	} {
		got := map[string]string{}
		for _, blk := range blocksOf(t, pool) {
			for k, v := range blk.Status.Allocations {
				got[k] = v.PodUID
			}
		}
		if len(got) != len(want) {
			t.Errorf("pool %s records %v; want %d", pool, got, len(want))
		}
		for addr, p := range want {
			if got[addr] != string(p.UID) {
				t.Errorf("pool %s: %s recorded for %q; want pod %s", pool, addr, got[addr], p.Name)
			}
		}
	}
	if err := invariants.Check(ctx, c, invariants.Options{}); err != nil {
		t.Errorf("invariants: %v", err)
	}
}

// onlyPools is plan restricted to the named pools (the package's other tests leave
// pools of their own).
func onlyPools(plan migrate.Plan, names ...string) migrate.Plan {
	var keep []migrate.PoolPlan
	for _, pp := range plan.Pools {
		for _, n := range names {
			if pp.Name == n {
				keep = append(keep, pp)
			}
		}
	}
	plan.Pools = keep
	plan.Pods = nil
	return plan
}

func setString(t *testing.T, pool string, recs map[string]map[string]string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderIPPool"))
	if err := suite.env.Client.Get(context.Background(), client.ObjectKey{Name: pool}, u); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(recs)
	if err := unstructured.SetNestedField(u.Object, string(data), "status", "allocatedIPs"); err != nil {
		t.Fatal(err)
	}
	if err := suite.env.Client.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

func blocksOf(t *testing.T, pool string) []ipamv1alpha1.IPBlock {
	t.Helper()
	var list ipamv1alpha1.IPBlockList
	if err := suite.env.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []ipamv1alpha1.IPBlock
	for _, b := range list.Items {
		if b.Spec.Pool == pool {
			out = append(out, b)
		}
	}
	return out
}
