package migrate

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

func pod(name, uid string, phase corev1.PodPhase, networks string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}, Status: corev1.PodStatus{Phase: phase}}
	if networks != "" {
		p.Annotations = map[string]string{annotations.MultusNetworks: networks}
	}
	return p
}

// detail is one endpoint entry: interface, then address/pool pairs.
func detail(iface string, v4, v6 string) v2beta1.IPAllocationDetail {
	d := v2beta1.IPAllocationDetail{Interface: iface}
	if v4 != "" {
		d.IPv4, d.IPv4Pool = ptr.To(v4+"/24"), ptr.To("v4")
	}
	if v6 != "" {
		d.IPv6, d.IPv6Pool = ptr.To(v6+"/64"), ptr.To("v6")
	}
	return d
}

func endpoint(name, uid string, ds ...v2beta1.IPAllocationDetail) v2beta1.SpiderEndpoint {
	return v2beta1.SpiderEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Status:     v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: uid, IPs: ds}},
	}
}

func poolOf(name, subnet, ips string, recs map[string]Record) Pool {
	return Pool{Object: fixtures.Pool(name, subnet, []string{ips}), Records: recs}
}

func v4Pool(recs map[string]Record) Pool {
	return poolOf("v4", "10.6.0.0/24", "10.6.0.1-10.6.0.200", recs)
}

// outcome is an entry reduced to what a test states.
type outcome struct{ addr, iface, source, outcome, reason string }

func outcomes(pp PoolPlan) []outcome {
	var out []outcome
	for _, e := range pp.Entries {
		out = append(out, outcome{e.Address, e.Interface, e.Source, e.Outcome, e.Reason})
	}
	return out
}

func TestDecidePlacesEachRecord(t *testing.T) {
	twoNICs := "ns/macvlan"
	cases := []struct {
		name string
		recs map[string]Record
		pods []corev1.Pod
		eps  []v2beta1.SpiderEndpoint
		opts Options
		want []outcome
	}{{
		name: "the endpoint lists the address: its interface",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a"}},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, twoNICs)},
		eps:  []v2beta1.SpiderEndpoint{endpoint("a", "u-a", detail("eth0", "10.6.0.9", ""), detail("net1", "10.6.0.5", ""))},
		want: []outcome{{"10.6.0.5", "net1", FromEndpoint, Migrate, ""}},
	}, {
		name: "no endpoint, the record names its interface (spiderpool ≥ 0.9)",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a", Interface: "net1"}},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, twoNICs)},
		want: []outcome{{"10.6.0.5", "net1", FromRecord, Migrate, ""}},
	}, {
		name: "record and endpoint disagree, the pod runs: unplaced",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a", Interface: "net2"}},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, twoNICs)},
		eps:  []v2beta1.SpiderEndpoint{endpoint("a", "u-a", detail("net1", "10.6.0.5", ""))},
		want: []outcome{{"10.6.0.5", "", "", Unplaced, "the pool record says interface net2, SpiderEndpoint ns/a says net1"}},
	}, {
		name: "a pod with one interface and no endpoint: eth0",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a"}},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, "")},
		want: []outcome{{"10.6.0.5", "eth0", FromOnlyInterface, Migrate, ""}},
	}, {
		name: "an empty interface in the endpoint (spiderpool's bug) says nothing; the only interface does",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a"}},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, "")},
		eps:  []v2beta1.SpiderEndpoint{endpoint("a", "u-a", detail("", "10.6.0.5", ""))},
		want: []outcome{{"10.6.0.5", "eth0", FromOnlyInterface, Migrate, ""}},
	}, {
		name: "a running pod with two interfaces, nothing names the interface: unplaced",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a"}},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, twoNICs)},
		want: []outcome{{"10.6.0.5", "", "", Unplaced, "no SpiderEndpoint lists it and the pool record names no interface"}},
	}, {
		name: "the same with --drop-unplaced: dropped",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a"}},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, twoNICs)},
		opts: Options{DropUnplaced: true},
		want: []outcome{{"10.6.0.5", "", "", Drop, "no SpiderEndpoint lists it and the pool record names no interface; dropped by --drop-unplaced"}},
	}, {
		name: "the pod is gone and nothing names the interface: dropped",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a"}},
		want: []outcome{{"10.6.0.5", "", "", Drop, "no SpiderEndpoint lists it and the pool record names no interface; pod UID u-a is gone"}},
	}, {
		name: "the pod finished: dropped",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-a"}},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodSucceeded, twoNICs)},
		want: []outcome{{"10.6.0.5", "", "", Drop, "no SpiderEndpoint lists it and the pool record names no interface; the pod has succeeded"}},
	}, {
		name: "a StatefulSet pod between incarnations: its endpoint keeps the address for it",
		recs: map[string]Record{"10.6.0.5": {Pod: "ns/db-0", PodUID: "u-old"}},
		eps:  []v2beta1.SpiderEndpoint{endpoint("db-0", "u-old", detail("net1", "10.6.0.5", ""))},
		want: []outcome{{"10.6.0.5", "net1", FromEndpoint, Migrate, ""}},
	}, {
		name: "one pod UID holding more addresses than its endpoint lists (spiderpool's leak): the listed one stays",
		recs: map[string]Record{
			"10.6.0.5": {Pod: "ns/a", PodUID: "u-a"},
			"10.6.0.6": {Pod: "ns/a", PodUID: "u-a"},
			"10.6.0.7": {Pod: "ns/a", PodUID: "u-a", Interface: "eth0"},
		},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, "")},
		eps:  []v2beta1.SpiderEndpoint{endpoint("a", "u-a", detail("eth0", "10.6.0.6", ""))},
		opts: Options{DropUnplaced: true},
		want: []outcome{
			{"10.6.0.5", "", "", Drop, "leaked: SpiderEndpoint ns/a gives 10.6.0.6 to interface eth0; dropped by --drop-unplaced"},
			{"10.6.0.6", "eth0", FromEndpoint, Migrate, ""},
			{"10.6.0.7", "", "", Drop, "leaked: SpiderEndpoint ns/a gives 10.6.0.6 to interface eth0; dropped by --drop-unplaced"},
		},
	}, {
		name: "two addresses for one interface and no endpoint to choose: neither",
		recs: map[string]Record{
			"10.6.0.5": {Pod: "ns/a", PodUID: "u-a", Interface: "net1"},
			"10.6.0.6": {Pod: "ns/a", PodUID: "u-a", Interface: "net1"},
		},
		pods: []corev1.Pod{pod("a", "u-a", corev1.PodRunning, twoNICs)},
		want: []outcome{
			{"10.6.0.5", "", "", Unplaced, "pod UID u-a interface net1 would hold 10.6.0.5, 10.6.0.6 in one pool"},
			{"10.6.0.6", "", "", Unplaced, "pod UID u-a interface net1 would hold 10.6.0.5, 10.6.0.6 in one pool"},
		},
	}, {
		name: "hostile or broken records",
		recs: map[string]Record{
			"10.7.0.5":  {Pod: "ns/a", PodUID: "u-a", Interface: "eth0"},
			"not-an-ip": {Pod: "ns/a", PodUID: "u-a", Interface: "eth0"},
			"10.6.0.8":  {Pod: "a", PodUID: "u-a", Interface: "eth0"},
			"10.6.0.9":  {Pod: "ns/a", Interface: "eth0"},
		},
		want: []outcome{
			{"10.6.0.8", "", "", Unplaced, "the record does not name its pod as namespace/name with a UID"},
			{"10.6.0.9", "", "", Unplaced, "the record does not name its pod as namespace/name with a UID"},
			{"10.7.0.5", "", "", Unplaced, "10.7.0.5 is outside the pool's subnet 10.6.0.0/24"},
			{"not-an-ip", "", "", Unplaced, `"not-an-ip" is not an address`},
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := Decide(Inputs{Pools: []Pool{v4Pool(c.recs)}, Pods: c.pods, Endpoints: c.eps}, c.opts)
			if diff := cmp.Diff(c.want, outcomes(plan.Pools[0]), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			blocked := false
			for _, e := range plan.Pools[0].Entries {
				blocked = blocked || e.Outcome == Unplaced
			}
			if blocked != (len(plan.Blockers) > 0) || blocked != (plan.Pools[0].State == PoolBlocked) {
				t.Errorf("unplaced records %v, but blockers %v and state %s", blocked, plan.Blockers, plan.Pools[0].State)
			}
		})
	}
}

func TestDecidePools(t *testing.T) {
	done := poolOf("done", "10.8.0.0/24", "10.8.0.1-10.8.0.9", nil)
	unreadable := poolOf("unreadable", "10.9.0.0/24", "10.9.0.1-10.9.0.9", nil)
	unreadable.Unreadable = "status.allocatedIPs is not spiderpool's JSON: invalid character"
	bad := poolOf("bad", "10.10.0.0/24", "10.11.0.1-10.11.0.9", map[string]Record{})
	dual := poolOf("v6", "fd00:6::/64", "fd00:6::1-fd00:6::ff", map[string]Record{"fd00:6::5": {Pod: "ns/a", PodUID: "u-a"}})
	plan := Decide(Inputs{
		Pools:     []Pool{done, unreadable, bad, dual},
		Pods:      []corev1.Pod{pod("a", "u-a", corev1.PodRunning, "ns/macvlan")},
		Endpoints: []v2beta1.SpiderEndpoint{endpoint("a", "u-a", detail("net1", "10.6.0.5", "fd00:6::5"))},
	}, Options{})
	states := map[string]string{}
	for _, p := range plan.Pools {
		states[p.Name] = p.State
	}
	want := map[string]string{"done": PoolDone, "unreadable": PoolBlocked, "bad": PoolBlocked, "v6": PoolPending}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("states (-want +got)\n%s", diff)
	}
	if len(plan.Blockers) != 2 || !strings.Contains(plan.Blockers[0].Message, "pool bad: nicpool cannot use this pool's spec") ||
		!strings.Contains(plan.Blockers[1].Message, "pool unreadable: status.allocatedIPs is not spiderpool's JSON") {
		t.Errorf("blockers: %+v", plan.Blockers)
	}
	want6 := map[netip.Prefix]Placement{netip.MustParsePrefix("fd00:6::/124"): {Records: v2beta1.PoolIPAllocations{"fd00:6::5": {Pod: "ns/a", PodUID: "u-a", Interface: "net1"}}}}
	if got := plan.Pools[3].PlacedByBlock(netip.MustParsePrefix("fd00:6::/64")); !cmp.Equal(got, want6) {
		t.Errorf("placed IPv6: %v", got)
	}
}

// A migrated block is for the node of most of its records' pods, so that each node's
// ipamd finds its pods' records among its own blocks.
func TestPlacedBlocksFollowThePods(t *testing.T) {
	onNode := func(p corev1.Pod, node string) corev1.Pod { p.Spec.NodeName = node; return p }
	gone := endpoint("c", "u-c", detail("eth0", "10.6.0.7", ""))
	gone.Status.Current.Node = "node-b"
	plan := Decide(Inputs{
		Pools: []Pool{v4Pool(map[string]Record{
			"10.6.0.5":  {Pod: "ns/a", PodUID: "u-a", Interface: "eth0"},
			"10.6.0.6":  {Pod: "ns/b", PodUID: "u-b", Interface: "eth0"},
			"10.6.0.7":  {Pod: "ns/c", PodUID: "u-c", Interface: "eth0"}, // a StatefulSet ordinal between pods
			"10.6.0.20": {Pod: "ns/d", PodUID: "u-d", Interface: "eth0"},
		})},
		Pods: []corev1.Pod{
			onNode(pod("a", "u-a", corev1.PodRunning, ""), "node-a"),
			onNode(pod("b", "u-b", corev1.PodRunning, ""), "node-b"),
			onNode(pod("d", "u-d", corev1.PodRunning, ""), "node-a"),
		},
		Endpoints: []v2beta1.SpiderEndpoint{gone},
	}, Options{})
	nodes := map[string]string{}
	for blk, pl := range plan.Pools[0].PlacedByBlock(netip.MustParsePrefix("10.6.0.0/24")) {
		nodes[blk.String()] = fmt.Sprintf("%s %d", pl.Node, len(pl.Records))
	}
	want := map[string]string{"10.6.0.0/28": "node-b 3", "10.6.0.16/28": "node-a 1"}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("blocks (-want +got)\n%s", diff)
	}
}

func TestDecideWarns(t *testing.T) {
	plan := Decide(Inputs{
		Pools: []Pool{v4Pool(map[string]Record{"10.6.0.5": {Pod: "ns/a", PodUID: "u-new", Interface: "eth0"}})},
		Pods:  []corev1.Pod{pod("a", "u-new", corev1.PodRunning, "")},
		Endpoints: []v2beta1.SpiderEndpoint{
			endpoint("a", "u-old", detail("eth0", "10.6.0.5", "")),
			endpoint("b", "u-b", detail("", "10.6.0.6", "")),
		},
	}, Options{})
	if len(plan.Blockers) != 0 {
		t.Errorf("blockers: %v", plan.Blockers)
	}
	want := []Problem{
		{Message: "SpiderEndpoint ns/a belongs to pod UID u-old, but pool v4 records 10.6.0.5 for pod UID u-new; kubectl nicpool check will report it after the migration"},
		{Message: "SpiderEndpoint ns/b records an address under an empty interface (spiderpool's bug): nicpool cannot update it", Fix: "after the migration: kubectl delete pod -n ns b"},
	}
	if diff := cmp.Diff(want, plan.Warnings); diff != "" {
		t.Errorf("warnings (-want +got)\n%s", diff)
	}
}
