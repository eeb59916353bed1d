package daemon_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// An upgrade of a running node: pods addressed by an older nicpool, whose records are
// in the pool's status.allocatedIPs and whose endpoints list them, keep every address
// once the new ipamd serves them (a repeated ADD answers the same address), the
// records move into blocks with their holders, a new pod gets an address none of them
// holds, and a DEL releases a migrated record.
func TestUpgradeFromPoolStatusKeepsEveryAddress(t *testing.T) {
	ctx := context.Background()
	const n = 12
	createNamespace(t, "upg")
	createPool(t, "upg", "172.29.0.0/16", []string{"172.29.0.1-172.29.0.40"})
	sel := withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["upg"]}]`)
	var pods []*corev1.Pod
	had := map[string]string{} // pod name → its address (CIDR, as ADD answers)
	p := getPool(t, "upg")
	p.Status.AllocatedIPs = v2beta1.PoolIPAllocations{}
	a := netip.MustParseAddr("172.29.0.3")
	for i := range n {
		pod := createPod(t, "upg", fmt.Sprintf("old-%d", i), "upg-node", sel)
		pods = append(pods, pod)
		p.Status.AllocatedIPs[a.String()] = v2beta1.PoolIPAllocation{Pod: "upg/" + pod.Name, PodUID: string(pod.UID), Interface: "eth0"}
		cidr := netip.PrefixFrom(a, 16).String()
		had[pod.Name] = cidr
		ep := &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "upg", Name: pod.Name},
			Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: string(pod.UID), Node: "upg-node",
				IPs: []v2beta1.IPAllocationDetail{{Interface: "eth0", IPv4: ptr(cidr), IPv4Pool: ptr("upg")}}}}}
		if err := env.Client.Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
		a = a.Next().Next() // every other address: the new layout must skip the holes' neighbours
	}
	count := int64(n)
	p.Status.AllocatedIPCount = &count
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}

	d, _ := startDaemon(t, "upg-node")
	for _, pod := range pods {
		if got := addAll(t, d.Service, pod, "eth0"); got["eth0"] != had[pod.Name] {
			t.Errorf("%s after the upgrade: ADD answered %s, it had %s", pod.Name, got["eth0"], had[pod.Name])
		}
	}
	recs := records(t, "upg")
	for _, pod := range pods {
		pfx := netip.MustParsePrefix(had[pod.Name])
		if rec := recs[pfx.Addr().String()]; rec.PodUID != string(pod.UID) || rec.Pod != "upg/"+pod.Name || rec.Interface != "eth0" {
			t.Errorf("record of %s after the upgrade: %+v, want %s's", pfx.Addr(), rec, pod.Name)
		}
	}
	if left := len(getPool(t, "upg").Status.AllocatedIPs); left != 0 {
		t.Errorf("the pool's status still holds %d records of the older layout", left)
	}
	fresh := createPod(t, "upg", "new", "upg-node", sel)
	got := addAll(t, d.Service, fresh, "eth0")["eth0"]
	for name, cidr := range had {
		if got == cidr {
			t.Fatalf("a new pod got %s, which %s holds", got, name)
		}
	}
	if _, err := d.Service.Release(ctx, delReq(pods[0], "eth0", "c-"+string(pods[0].UID))); err != nil {
		t.Fatal(err)
	}
	if rec, held := records(t, "upg")[netip.MustParsePrefix(had[pods[0].Name]).Addr().String()]; held {
		t.Errorf("DEL of %s left its migrated record %+v", pods[0].Name, rec)
	}
	if n := len(records(t, "upg")); n != len(pods) {
		t.Errorf("%d records after one DEL and one new pod, want %d", n, len(pods))
	}
	deletePod(t, pods[0])
	checkInvariants(t, false)
}
