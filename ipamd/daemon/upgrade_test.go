package daemon_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

// An upgrade of a running node: pods addressed by an older nicpool, whose records are
// in the pool's status.allocatedIPs and whose endpoints list them, keep every address
// once the new ipamd serves them (a repeated ADD answers the same address), the
// records move into blocks with their holders, a new pod gets an address none of them
// holds, and a DEL releases a migrated record.
func TestUpgradeFromPoolStatusKeepsEveryAddress(t *testing.T) {
	upgradeFromPoolStatus(t, "upg", "172.29", 12)
}

// BenchmarkUpgrade8000 is the same upgrade at the size issue 11 names: a pool holding
// 8,000 addresses allocated under the older layout (a status of about 1.3 MB, near
// etcd's limit) upgrades in place, every address staying with its pod. It reports
// how long the new ipamd takes to answer every pod's repeated ADD with its address,
// the migration of the 8,000 records into blocks included.
func BenchmarkUpgrade8000(b *testing.B) {
	for i := range b.N {
		b.StopTimer()
		took := upgradeFromPoolStatus(b, fmt.Sprintf("upg8000-%d", i), fmt.Sprintf("172.%d", 30+i), 8000)
		b.ReportMetric(took.Seconds(), "upgrade-s")
		b.Logf("8000 pods of the older layout served their addresses in %s after the new ipamd started (migration included); load average %s", took.Round(time.Millisecond), loadAverage())
	}
}

// upgradeFromPoolStatus writes n pods addressed by the older layout in pool name (a
// /16 of prefix16, e.g. "172.29"), starts the new ipamd as their node, checks what
// the upgrade must keep, and returns the time from ipamd's start until every pod's
// repeated ADD had answered.
func upgradeFromPoolStatus(tb testing.TB, name, prefix16 string, n int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	node := name + "-node"
	createNamespace(tb, name)
	fixtures.CreatePool(tb, env.Client, fixtures.Pool(name, prefix16+".0.0/16", []string{prefix16 + ".0.1-" + prefix16 + ".255.254"}))
	sel := withAnnotations(annotations.IPPools, fmt.Sprintf(`[{"interface":"eth0","ipv4":[%q]}]`, name))
	pods := make([]*corev1.Pod, n)
	had := make([]string, n) // pod i's address (CIDR, as ADD answers)
	base := netip.MustParseAddr(prefix16 + ".0.3")
	sem := make(chan struct{}, 32)
	parallel(tb, n, func(i int) {
		sem <- struct{}{}
		defer func() { <-sem }()
		// Every other address: the new layout must skip the holes' neighbours.
		b4 := base.As4()
		a := netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(b4[:])+uint32(2*i))))
		pod := createPod(tb, name, fmt.Sprintf("old-%d", i), node, sel)
		cidr := netip.PrefixFrom(a, 16).String()
		pods[i], had[i] = pod, cidr
		ep := &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: pod.Name},
			Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: string(pod.UID), Node: node,
				IPs: []v2beta1.IPAllocationDetail{{Interface: "eth0", IPv4: ptr(cidr), IPv4Pool: ptr(name)}}}}}
		if err := env.Client.Create(ctx, ep); err != nil {
			tb.Error(err)
		}
	})
	if tb.Failed() {
		tb.FailNow()
	}
	older := v2beta1.PoolIPAllocations{}
	for i, pod := range pods {
		older[netip.MustParsePrefix(had[i]).Addr().String()] = v2beta1.PoolIPAllocation{Pod: name + "/" + pod.Name, PodUID: string(pod.UID), Interface: "eth0"}
	}
	fixtures.WriteOlderLayout(tb, env.Client, name, older)

	began := time.Now()
	d, _ := startDaemon(tb, node)
	got := make([]string, n)
	parallel(tb, n, func(i int) {
		sem <- struct{}{}
		defer func() { <-sem }()
		got[i] = addAll(tb, d.Service, pods[i], "eth0")["eth0"]
	})
	took := time.Since(began)
	for i, pod := range pods {
		if got[i] != had[i] {
			tb.Errorf("%s after the upgrade: ADD answered %s, it had %s", pod.Name, got[i], had[i])
		}
	}
	recs := records(tb, name)
	for i, pod := range pods {
		pfx := netip.MustParsePrefix(had[i])
		if rec := recs[pfx.Addr().String()]; rec.PodUID != string(pod.UID) || rec.Pod != name+"/"+pod.Name || rec.Interface != "eth0" {
			tb.Errorf("record of %s after the upgrade: %+v, want %s's", pfx.Addr(), rec, pod.Name)
		}
	}
	if left := len(fixtures.GetPool(tb, env.Client, name).Status.OlderLayout); left != 0 {
		tb.Errorf("the pool's status still holds %d records of the older layout", left)
	}
	fresh := createPod(tb, name, "new", node, sel)
	gotNew := addAll(tb, d.Service, fresh, "eth0")["eth0"]
	for i, cidr := range had {
		if gotNew == cidr {
			tb.Fatalf("a new pod got %s, which %s holds", gotNew, pods[i].Name)
		}
	}
	if _, err := d.Service.Release(ctx, delReq(pods[0], "eth0", "c-"+string(pods[0].UID))); err != nil {
		tb.Fatal(err)
	}
	if rec, held := records(tb, name)[netip.MustParsePrefix(had[0]).Addr().String()]; held {
		tb.Errorf("DEL of %s left its migrated record %+v", pods[0].Name, rec)
	}
	if got := len(records(tb, name)); got != n {
		tb.Errorf("%d records after one DEL and one new pod, want %d", got, n)
	}
	deletePod(tb, pods[0])
	checkInvariants(tb, false)
	return took
}
