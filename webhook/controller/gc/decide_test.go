package gc

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name, uid string, opts ...podOpt) Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(&p)
	}
	return PodOf(&p)
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func deleting(at time.Time) podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: at} }
}

func ownedBy(set string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: set, UID: "set-uid", Controller: ptr.To(true),
		}}
	}
}

func statefulSet(name string, replicas int32) appsv1.StatefulSet {
	return appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
	}
}

// rec is one pool record: address → holder.
type rec struct{ addr, pod, uid, iface string }

// pool is the records of one pool.
func pool(name string, recs ...rec) []ledger.Record {
	var out []ledger.Record
	for _, r := range recs {
		out = append(out, ledger.Record{Pool: name, Addr: netip.MustParseAddr(r.addr),
			Holder: v2beta1.PoolIPAllocation{Pod: "ns/" + r.pod, PodUID: r.uid, Interface: r.iface}})
	}
	return out
}

// records joins the records of several pools.
func records(pools ...[]ledger.Record) []ledger.Record {
	var out []ledger.Record
	for _, p := range pools {
		out = append(out, p...)
	}
	return out
}

func endpoint(name, uid, ownerKind, ownerName string) *v2beta1.SpiderEndpoint {
	return &v2beta1.SpiderEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("ep-" + name), ResourceVersion: "7"},
		Status: v2beta1.WorkloadEndpointStatus{
			Current:             v2beta1.PodIPAllocation{UID: uid},
			OwnerControllerType: ownerKind, OwnerControllerName: ownerName,
		},
	}
}

// released renders a plan as "address reason" and "endpoint name reason" lines.
func released(p Plan) []string {
	var out []string
	for _, r := range p.Releases {
		out = append(out, fmt.Sprintf("%s %s", r.Address, r.Reason))
	}
	for _, e := range p.Endpoints {
		out = append(out, fmt.Sprintf("endpoint %s %s", e.Name, e.Reason))
	}
	return out
}

func TestDecide(t *testing.T) {
	grace := 30 * time.Second
	cases := []struct {
		name string
		snap Snapshot
		want []string
	}{{
		name: "live pod keeps every interface's address and its endpoint",
		snap: Snapshot{
			Pods:      []Pod{pod("a", "u1")},
			Records:   records(pool("p", rec{"10.0.0.1", "a", "u1", "eth0"}, rec{"10.0.0.2", "a", "u1", "net1"})),
			Endpoints: []*v2beta1.SpiderEndpoint{endpoint("a", "u1", "None", "")},
		},
	}, {
		name: "pending pod is live",
		snap: Snapshot{
			Pods:    []Pod{pod("a", "u1", phase(corev1.PodPending))},
			Records: records(pool("p", rec{"10.0.0.1", "a", "u1", "eth0"})),
		},
	}, {
		name: "pod UID gone: addresses and endpoint released",
		snap: Snapshot{
			Records:   records(pool("p", rec{"10.0.0.1", "a", "u1", "eth0"}), pool("q", rec{"fd00::1", "a", "u1", "eth0"})),
			Endpoints: []*v2beta1.SpiderEndpoint{endpoint("a", "u1", "None", "")},
		},
		want: []string{"10.0.0.1 pod-deleted", "fd00::1 pod-deleted", "endpoint a pod-deleted"},
	}, {
		name: "pod recreated under the same name with a new UID: the old UID's records go",
		snap: Snapshot{
			Pods:      []Pod{pod("a", "u2")},
			Records:   records(pool("p", rec{"10.0.0.1", "a", "u1", "eth0"}, rec{"10.0.0.2", "a", "u2", "eth0"})),
			Endpoints: []*v2beta1.SpiderEndpoint{endpoint("a", "u1", "None", "")},
		},
		want: []string{"10.0.0.1 pod-deleted", "endpoint a pod-deleted"},
	}, {
		name: "succeeded and failed pods are released",
		snap: Snapshot{
			Pods: []Pod{pod("job-a", "u1", phase(corev1.PodSucceeded)), pod("job-b", "u2", phase(corev1.PodFailed))},
			Records: records(pool("p",
				rec{"10.0.0.1", "job-a", "u1", "eth0"}, rec{"10.0.0.2", "job-b", "u2", "eth0"})),
			Endpoints: []*v2beta1.SpiderEndpoint{endpoint("job-a", "u1", "Job", "job")},
		},
		want: []string{"10.0.0.1 pod-finished", "10.0.0.2 pod-finished", "endpoint job-a pod-finished"},
	}, {
		name: "terminating within its grace is kept and rechecked at the end of it",
		snap: Snapshot{
			Pods:    []Pod{pod("a", "u1", deleting(now.Add(-10*time.Second)))},
			Records: records(pool("p", rec{"10.0.0.1", "a", "u1", "eth0"})),
		},
	}, {
		name: "terminating past deletionTimestamp plus grace is released",
		snap: Snapshot{
			Pods:    []Pod{pod("a", "u1", deleting(now.Add(-grace)))},
			Records: records(pool("p", rec{"10.0.0.1", "a", "u1", "eth0"})),
		},
		want: []string{"10.0.0.1 pod-terminating"},
	}, {
		name: "StatefulSet pod absent between delete and re-create keeps addresses and endpoint",
		snap: Snapshot{
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 2)},
			Records:      records(pool("p", rec{"10.0.0.1", "web-1", "u1", "eth0"}, rec{"10.0.0.2", "web-1", "u1", "net1"})),
			Endpoints:    []*v2beta1.SpiderEndpoint{endpoint("web-1", "u1", "StatefulSet", "web")},
		},
	}, {
		name: "StatefulSet pod recognised by name alone (no endpoint) is kept",
		snap: Snapshot{
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 1)},
			Records:      records(pool("p", rec{"10.0.0.1", "web-0", "u1", "eth0"})),
		},
	}, {
		name: "recreated StatefulSet pod not yet through CNI ADD: old UID's record awaits takeover",
		snap: Snapshot{
			Pods:         []Pod{pod("web-0", "u2", ownedBy("web"), phase(corev1.PodPending))},
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 1)},
			Records:      records(pool("p", rec{"10.0.0.1", "web-0", "u1", "eth0"})),
			Endpoints:    []*v2beta1.SpiderEndpoint{endpoint("web-0", "u1", "StatefulSet", "web")},
		},
	}, {
		name: "finished StatefulSet pod whose ordinal returns is kept for its replacement",
		snap: Snapshot{
			Pods:         []Pod{pod("web-0", "u1", ownedBy("web"), phase(corev1.PodFailed))},
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 1)},
			Records:      records(pool("p", rec{"10.0.0.1", "web-0", "u1", "eth0"})),
		},
	}, {
		name: "StatefulSet scaled down: ordinals at or above replicas released, below kept",
		snap: Snapshot{
			Pods:         []Pod{pod("web-0", "u0", ownedBy("web"))},
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 1)},
			Records: records(pool("p",
				rec{"10.0.0.1", "web-0", "u0", "eth0"}, rec{"10.0.0.2", "web-1", "u1", "eth0"}, rec{"10.0.0.3", "web-2", "u2", "eth0"})),
			Endpoints: []*v2beta1.SpiderEndpoint{endpoint("web-1", "u1", "StatefulSet", "web")},
		},
		want: []string{"10.0.0.2 statefulset-scaled-down", "10.0.0.3 statefulset-scaled-down", "endpoint web-1 statefulset-scaled-down"},
	}, {
		name: "StatefulSet with start ordinal: range is [start, start+replicas)",
		snap: Snapshot{
			StatefulSets: []appsv1.StatefulSet{func() appsv1.StatefulSet {
				s := statefulSet("web", 2)
				s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
				return s
			}()},
			Records: records(pool("p",
				rec{"10.0.0.4", "web-4", "u4", "eth0"}, rec{"10.0.0.5", "web-5", "u5", "eth0"},
				rec{"10.0.0.6", "web-6", "u6", "eth0"}, rec{"10.0.0.7", "web-7", "u7", "eth0"})),
		},
		want: []string{"10.0.0.4 statefulset-scaled-down", "10.0.0.7 statefulset-scaled-down"},
	}, {
		name: "StatefulSet gone: recorded members released",
		snap: Snapshot{
			Records:   records(pool("p", rec{"10.0.0.1", "web-0", "u1", "eth0"})),
			Endpoints: []*v2beta1.SpiderEndpoint{endpoint("web-0", "u1", "StatefulSet", "web")},
		},
		want: []string{"10.0.0.1 statefulset-gone", "endpoint web-0 statefulset-gone"},
	}, {
		name: "StatefulSet being deleted counts as gone",
		snap: Snapshot{
			StatefulSets: []appsv1.StatefulSet{func() appsv1.StatefulSet {
				s := statefulSet("web", 3)
				s.DeletionTimestamp = &metav1.Time{Time: now}
				return s
			}()},
			Records: records(pool("p", rec{"10.0.0.1", "web-0", "u1", "eth0"})),
		},
		want: []string{"10.0.0.1 statefulset-gone"},
	}, {
		name: "a live StatefulSet pod above replicas is still live",
		snap: Snapshot{
			Pods:         []Pod{pod("web-3", "u3", ownedBy("web"))},
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 1)},
			Records:      records(pool("p", rec{"10.0.0.1", "web-3", "u3", "eth0"})),
		},
	}, {
		name: "superseded: the new incarnation holds its own address of that family on that interface",
		snap: Snapshot{
			Pods:         []Pod{pod("web-0", "u2", ownedBy("web"))},
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 1)},
			Records: records(
				pool("a", rec{"10.0.0.1", "web-0", "u1", "eth0"}, rec{"10.0.0.9", "web-0", "u1", "net1"}),
				pool("b", rec{"10.1.0.1", "web-0", "u2", "eth0"}),
				pool("c", rec{"fd00::1", "web-0", "u1", "eth0"}),
			),
			Endpoints: []*v2beta1.SpiderEndpoint{endpoint("web-0", "u2", "StatefulSet", "web")},
		},
		// net1 and the IPv6 eth0 address may still be taken over; only eth0/IPv4 is orphaned.
		want: []string{"10.0.0.1 superseded"},
	}, {
		name: "a plain pod whose name merely looks like an ordinal of no set is released",
		snap: Snapshot{
			Records: records(pool("p", rec{"10.0.0.1", "batch-7", "u1", "eth0"})),
		},
		want: []string{"10.0.0.1 pod-deleted"},
	}, {
		name: "endpoint without any pod is deleted",
		snap: Snapshot{
			Endpoints: []*v2beta1.SpiderEndpoint{endpoint("orphan", "u9", "ReplicaSet", "rs")},
		},
		want: []string{"endpoint orphan pod-deleted"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.snap.Now = now
			got := released(Decide(tc.snap, Policy{TerminatingGrace: grace}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("released:\n got  %q\n want %q", got, tc.want)
			}
			// The webhook's cache keeps every pod's metadata through
			// TransformPodMetadata and finished pods through TransformPod; the same pods
			// as it keeps them decide the same.
			cached := tc.snap
			cached.Pods = nil
			for _, sp := range tc.snap.Pods {
				p := corev1.Pod{ObjectMeta: *sp.ObjectMeta, Spec: corev1.PodSpec{NodeName: sp.NodeName}, Status: corev1.PodStatus{Phase: sp.Phase}}
				p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1"}}
				p.Labels = map[string]string{"app": "x"}
				p.Annotations = map[string]string{"ipam.spidernet.io/ippools": "[]"}
				p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				kept, err := TransformPodMetadata(&metav1.PartialObjectMetadata{TypeMeta: PodMetadata().TypeMeta, ObjectMeta: p.ObjectMeta})
				if err != nil {
					t.Fatal(err)
				}
				m := kept.(*metav1.PartialObjectMetadata)
				if m.Labels != nil || m.Annotations != nil || m.ManagedFields != nil {
					t.Errorf("TransformPodMetadata kept more than the collector reads: %+v", m)
				}
				var finished *corev1.Pod
				if FinishedPods.Matches(fields.Set{"status.phase": string(p.Status.Phase)}) {
					full, err := TransformPod(&p)
					if err != nil {
						t.Fatal(err)
					}
					finished = full.(*corev1.Pod)
					if finished.Spec.Containers != nil || finished.Labels != nil || finished.ManagedFields != nil || finished.Status.Conditions != nil {
						t.Errorf("TransformPod kept more than the collector reads: %+v", finished)
					}
				}
				// The snapshot reads the node of pods on nodes that are not Ready.
				notReady := ""
				for i := range tc.snap.Nodes {
					if tc.snap.Nodes[i].Name == sp.NodeName && !nodeReady(&tc.snap.Nodes[i]) {
						notReady = sp.NodeName
					}
				}
				cached.Pods = append(cached.Pods, cachedPod(m, finished, notReady))
			}
			if got := released(Decide(cached, Policy{TerminatingGrace: grace})); !slices.Equal(got, tc.want) {
				t.Errorf("released with pods as the cache keeps them:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}

func TestDecideKeepTerminating(t *testing.T) {
	plan := Decide(Snapshot{
		Now:     now,
		Pods:    []Pod{pod("a", "u1", deleting(now.Add(-time.Hour)))},
		Records: records(pool("p", rec{"10.0.0.1", "a", "u1", "eth0"})),
	}, Policy{KeepTerminating: true})
	if got := released(plan); len(got) != 0 || !plan.Recheck.IsZero() {
		t.Errorf("KeepTerminating: released %q, recheck %v; want nothing", got, plan.Recheck)
	}
}

func onNode(name string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = name } }

func node(name string, ready corev1.ConditionStatus) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready},
		}
	}
	return n
}

// Issue 10 finding 7: a terminating pod past its grace on a node that is not Ready may
// still run there (partition); its addresses stay until the pod object is gone, unless
// the operator chose otherwise.
func TestDecideNotReadyNode(t *testing.T) {
	late := deleting(now.Add(-time.Hour))
	snap := Snapshot{
		Now: now,
		Pods: []Pod{
			pod("on-ready", "u1", late, onNode("ready")),
			pod("on-unknown", "u2", late, onNode("partitioned")),
			pod("on-false", "u3", late, onNode("down")),
			pod("on-unreported", "u4", late, onNode("new")),
			pod("on-deleted-node", "u5", late, onNode("gone")),
			pod("finished-on-unknown", "u6", phase(corev1.PodSucceeded), onNode("partitioned")),
		},
		Nodes: []corev1.Node{node("ready", corev1.ConditionTrue), node("partitioned", corev1.ConditionUnknown),
			node("down", corev1.ConditionFalse), node("new", "")},
		Records: pool("p",
			rec{"10.0.0.1", "on-ready", "u1", "eth0"}, rec{"10.0.0.2", "on-unknown", "u2", "eth0"},
			rec{"10.0.0.3", "on-false", "u3", "eth0"}, rec{"10.0.0.4", "on-unreported", "u4", "eth0"},
			rec{"10.0.0.5", "on-deleted-node", "u5", "eth0"}, rec{"10.0.0.6", "finished-on-unknown", "u6", "eth0"}),
	}
	got := released(Decide(snap, Policy{TerminatingGrace: 30 * time.Second}))
	want := []string{"10.0.0.1 pod-terminating", "10.0.0.5 pod-terminating", "10.0.0.6 pod-finished"}
	if !slices.Equal(got, want) {
		t.Errorf("default policy released:\n got  %q\n want %q", got, want)
	}
	got = released(Decide(snap, Policy{TerminatingGrace: 30 * time.Second, ReleaseOnNotReadyNode: true}))
	want = []string{"10.0.0.1 pod-terminating", "10.0.0.2 pod-terminating", "10.0.0.3 pod-terminating",
		"10.0.0.4 pod-terminating", "10.0.0.5 pod-terminating", "10.0.0.6 pod-finished"}
	if !slices.Equal(got, want) {
		t.Errorf("ReleaseOnNotReadyNode released:\n got  %q\n want %q", got, want)
	}
	// The pod object gone, its addresses go, whatever its node.
	snap.Pods = snap.Pods[:1]
	got = released(Decide(snap, Policy{TerminatingGrace: 30 * time.Second}))
	want = []string{"10.0.0.1 pod-terminating", "10.0.0.2 pod-deleted", "10.0.0.3 pod-deleted", "10.0.0.4 pod-deleted",
		"10.0.0.5 pod-deleted", "10.0.0.6 pod-deleted"}
	if !slices.Equal(got, want) {
		t.Errorf("pods gone:\n got  %q\n want %q", got, want)
	}
	// Nodes as the webhook's cache keeps them decide the same.
	for i := range snap.Nodes {
		snap.Nodes[i].Status.Images = []corev1.ContainerImage{{Names: []string{"app:1"}}}
		kept, err := TransformNode(&snap.Nodes[i])
		if err != nil {
			t.Fatal(err)
		}
		k := kept.(*corev1.Node)
		if k.Status.Images != nil || len(k.Status.Conditions) > 1 {
			t.Errorf("TransformNode kept more than the collector reads: %+v", k.Status)
		}
		if nodeReady(k) != nodeReady(&snap.Nodes[i]) {
			t.Errorf("node %s: ready %v after the transform, %v before", k.Name, nodeReady(k), nodeReady(&snap.Nodes[i]))
		}
	}
}

func TestDecideRecheckAtEndOfGrace(t *testing.T) {
	del := now.Add(-10 * time.Second)
	plan := Decide(Snapshot{
		Now:     now,
		Pods:    []Pod{pod("a", "u1", deleting(del)), pod("b", "u2", deleting(del.Add(time.Minute)))},
		Records: records(pool("p", rec{"10.0.0.1", "a", "u1", "eth0"}, rec{"10.0.0.2", "b", "u2", "eth0"})),
	}, Policy{TerminatingGrace: 30 * time.Second})
	if want := del.Add(30 * time.Second); !plan.Recheck.Equal(want) {
		t.Errorf("Recheck = %v, want the earliest end of grace %v", plan.Recheck, want)
	}
}

func TestReleaseCarriesHolderAndEndpointPreconditions(t *testing.T) {
	plan := Decide(Snapshot{
		Now:       now,
		Records:   records(pool("p", rec{"10.0.0.1", "a", "u1", "net2"})),
		Endpoints: []*v2beta1.SpiderEndpoint{endpoint("a", "u1", "None", "")},
	}, Policy{})
	wantRel := Release{Pool: "p", Address: "10.0.0.1", Reason: ReasonPodDeleted,
		Holder: v2beta1.PoolIPAllocation{Pod: "ns/a", PodUID: "u1", Interface: "net2"}}
	if len(plan.Releases) != 1 || plan.Releases[0] != wantRel {
		t.Errorf("Releases = %+v, want [%+v]", plan.Releases, wantRel)
	}
	wantEp := EndpointRelease{Namespace: "ns", Name: "a", UID: "ep-a", ResourceVersion: "7", PodUID: "u1", Reason: ReasonPodDeleted}
	if len(plan.Endpoints) != 1 || plan.Endpoints[0] != wantEp {
		t.Errorf("Endpoints = %+v, want [%+v]", plan.Endpoints, wantEp)
	}
}

// The collector guesses a set from a name with workload.SplitOrdinal.
func TestParseOrdinal(t *testing.T) {
	for name, want := range map[string]int{"web-0": 0, "web-12": 12, "my-set-3": 3} {
		if _, got, ok := workload.SplitOrdinal(name); !ok || got != want {
			t.Errorf("SplitOrdinal(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"web", "web-", "-1", "web-x", "web-01", "web-+1"} {
		if _, got, ok := workload.SplitOrdinal(name); ok {
			t.Errorf("SplitOrdinal(%q) = %d; want no ordinal", name, got)
		}
	}
}

// With StatefulSet addresses off (spiderpool-conf's enableStatefulSet: false), a gone or
// finished StatefulSet pod's addresses and endpoint are released as any pod's, though
// its ordinal comes back; the same snapshots keep them with the switch on.
func TestDecideStatefulSetAddressesOff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snap     Snapshot
		released []string
	}{{
		name: "StatefulSet pod absent between delete and re-create",
		snap: Snapshot{
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 2)},
			Records:      records(pool("p", rec{"10.0.0.1", "web-1", "u1", "eth0"})),
			Endpoints:    []*v2beta1.SpiderEndpoint{endpoint("web-1", "u1", "StatefulSet", "web")},
		},
		released: []string{"10.0.0.1 pod-deleted", "endpoint web-1 pod-deleted"},
	}, {
		name: "recreated StatefulSet pod not yet through CNI ADD",
		snap: Snapshot{
			Pods:         []Pod{pod("web-0", "u2", ownedBy("web"), phase(corev1.PodPending))},
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 1)},
			Records:      records(pool("p", rec{"10.0.0.1", "web-0", "u1", "eth0"})),
			Endpoints:    []*v2beta1.SpiderEndpoint{endpoint("web-0", "u1", "StatefulSet", "web")},
		},
		released: []string{"10.0.0.1 pod-deleted", "endpoint web-0 pod-deleted"},
	}, {
		name: "finished StatefulSet pod whose ordinal returns",
		snap: Snapshot{
			Pods:         []Pod{pod("web-0", "u1", ownedBy("web"), phase(corev1.PodFailed))},
			StatefulSets: []appsv1.StatefulSet{statefulSet("web", 1)},
			Records:      records(pool("p", rec{"10.0.0.1", "web-0", "u1", "eth0"})),
		},
		released: []string{"10.0.0.1 pod-finished"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.snap.Now = now
			if got := released(Decide(tc.snap, Policy{})); len(got) != 0 {
				t.Errorf("switch on: released %q, want everything kept for the returning ordinal", got)
			}
			if got := released(Decide(tc.snap, Policy{Switches: ipamconf.Switches{NoStatefulSet: true}})); !slices.Equal(got, tc.released) {
				t.Errorf("switch off: released\n got  %q\n want %q", got, tc.released)
			}
		})
	}
}
