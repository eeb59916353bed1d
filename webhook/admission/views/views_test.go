package views

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func TestPoolsView(t *testing.T) {
	v := NewPools(nil)
	ctx := context.Background()
	p := &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 1}, Spec: v2beta1.IPPoolSpec{Subnet: "fd00::/64"}}
	v.Set(p)
	v.Set(&v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 1}, Spec: v2beta1.IPPoolSpec{Subnet: "10.0.0.0/24", IPVersion: ptr.To(int64(4))}})

	got, _ := v.Get(ctx, "b", nil)
	if got == nil || got.Family != 6 || got.Disabled || got.Terminating {
		t.Fatalf("pool b = %+v; want IPv6, enabled", got)
	}
	var names []string
	v.Range(func(p *Pool) bool { names = append(names, p.Name); return true })
	if len(names) != 2 || names[0] != "a" || names[1] != "b" {
		t.Errorf("range order %v; want [a b]", names)
	}

	// A status-only update (same generation) keeps the view's entry.
	before, _ := v.Get(ctx, "b", nil)
	status := p.DeepCopy()
	status.Status.AllocatedIPCount = ptr.To(int64(3))
	v.Set(status)
	if after, _ := v.Get(ctx, "b", nil); after != before {
		t.Error("a status-only update rebuilt the pool's entry")
	}
	// A spec change and a deletion are seen.
	spec := p.DeepCopy()
	spec.Generation = 2
	spec.Spec.Disable = ptr.To(true)
	v.Set(spec)
	if after, _ := v.Get(ctx, "b", nil); !after.Disabled {
		t.Error("disable not seen")
	}
	gone := spec.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{}
	v.Set(gone)
	if after, _ := v.Get(ctx, "b", nil); !after.Terminating {
		t.Error("deletion not seen")
	}
	v.Delete("b")
	if after, _ := v.Get(ctx, "b", nil); after != nil {
		t.Error("deleted pool still in the view")
	}
	names = nil
	v.Range(func(p *Pool) bool { names = append(names, p.Name); return true })
	if len(names) != 1 || names[0] != "a" {
		t.Errorf("range after delete %v; want [a]", names)
	}
}

func TestPoolSelectors(t *testing.T) {
	p := NewPool(&v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: v2beta1.IPPoolSpec{
		Subnet:        "10.0.0.0/24",
		NamespaceName: []string{"a", "b"},
		PodAffinity:   &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}},
	}})
	if p.SelectorError == "" {
		t.Error("an invalid podAffinity compiled")
	}
	if !p.AdmitsNamespace("b") || p.AdmitsNamespace("c") {
		t.Error("namespaceName not applied")
	}
}

func TestEndpointRecordProblem(t *testing.T) {
	for _, tc := range []struct {
		ips  []v2beta1.IPAllocationDetail
		want string
	}{
		{nil, ""},
		{[]v2beta1.IPAllocationDetail{{Interface: "eth0"}, {Interface: "net1"}}, ""},
		{[]v2beta1.IPAllocationDetail{{Interface: "eth0"}, {Interface: ""}}, "status.current.ips[1] has an empty interface"},
		{[]v2beta1.IPAllocationDetail{{Interface: "net1"}, {Interface: "eth0"}, {Interface: "net1"}}, `status.current.ips[0] and [2] both record interface "net1"`},
	} {
		if got := RecordProblem(tc.ips); got != tc.want {
			t.Errorf("RecordProblem(%v) = %q; want %q", tc.ips, got, tc.want)
		}
	}
}

// The webhook's cache keeps endpoints through TransformEndpoint: the admission view of
// a kept endpoint is the view of the full one.
func TestTransformEndpointKeepsTheView(t *testing.T) {
	addr, pool := "10.0.0.1/24", "p"
	for _, ips := range [][]v2beta1.IPAllocationDetail{
		nil,
		{{Interface: "eth0", IPv4: &addr, IPv4Pool: &pool}, {Interface: "net1", IPv4: &addr}},
		{{Interface: "eth0", IPv4: &addr}, {Interface: "eth0", IPv4Pool: &pool}},
		{{Interface: "", IPv4: &addr}},
	} {
		full := &v2beta1.SpiderEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "ep-uid", ResourceVersion: "9",
				DeletionTimestamp: &metav1.Time{}, Annotations: map[string]string{"ipam.nicpool.io/attachments": "{}"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "nicpool-ipamd"}}},
			Status: v2beta1.WorkloadEndpointStatus{
				Current:             v2beta1.PodIPAllocation{UID: "pod-uid", Node: "n1", IPs: ips},
				OwnerControllerType: "StatefulSet", OwnerControllerName: "web",
			},
		}
		out, err := TransformEndpoint(full)
		if err != nil {
			t.Fatal(err)
		}
		kept := out.(*v2beta1.SpiderEndpoint)
		if got, want := *NewEndpoint(kept), *NewEndpoint(full); got != want {
			t.Errorf("view of the cached endpoint %+v; of the full one %+v", got, want)
		}
		if kept.ResourceVersion != "9" || kept.Status.Current.UID != "pod-uid" || kept.Status.OwnerControllerType != "StatefulSet" ||
			kept.Status.OwnerControllerName != "web" {
			t.Errorf("TransformEndpoint lost what the garbage collector reads: %+v", kept)
		}
		if kept.Annotations != nil || kept.ManagedFields != nil || (len(kept.Status.Current.IPs) > 0 && kept.Status.Current.IPs[0].IPv4 != nil) {
			t.Errorf("TransformEndpoint kept more than the webhook reads: %+v", kept)
		}
		if RecordProblem(ips) == "" && kept.Status.Current.IPs != nil {
			t.Errorf("TransformEndpoint kept the consistent records %+v, which no reader of the cache needs", kept.Status.Current.IPs)
		}
		if kept.Namespace != "ns" || kept.Name != "web-0" || kept.UID != "ep-uid" || kept.Status.Current.Node != "n1" {
			t.Errorf("TransformEndpoint changed the endpoint's identity: %+v", kept.ObjectMeta)
		}
	}
}
