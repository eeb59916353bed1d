package gc

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/crds/ipranges"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// Reason says why an address is released or an endpoint deleted. It is the `reason`
// label of nicpool_gc_releases_total and a key of every release log line.
type Reason string

const (
	// ReasonPodDeleted: no pod with the holder's UID exists, and it was no StatefulSet pod.
	ReasonPodDeleted Reason = "pod-deleted"
	// ReasonPodFinished: the holder pod is Succeeded or Failed.
	ReasonPodFinished Reason = "pod-finished"
	// ReasonPodTerminating: the holder pod is still terminating past its
	// deletionTimestamp plus Policy.TerminatingGrace (its node is gone or stuck, yet
	// Ready or gone: see Policy.ReleaseOnNotReadyNode).
	ReasonPodTerminating Reason = "pod-terminating"
	// ReasonStatefulSetGone: the holder was a StatefulSet pod whose StatefulSet is
	// deleted or being deleted.
	ReasonStatefulSetGone Reason = "statefulset-gone"
	// ReasonStatefulSetScaledDown: the holder was a StatefulSet pod whose ordinal is no
	// longer within the StatefulSet's replicas.
	ReasonStatefulSetScaledDown Reason = "statefulset-scaled-down"
	// ReasonSuperseded: the holder was an earlier incarnation of a StatefulSet pod, and
	// the current incarnation already holds its own address of the same family on the
	// same interface, so nothing will take this one over.
	ReasonSuperseded Reason = "superseded"
)

// restsOnAbsence is true when the decision was made because the holder's pod UID is
// missing from the snapshot. A cache that lags behind the API server produces exactly
// this mistake for a pod created moments ago, so such decisions are confirmed with a
// live read before anything is released.
func (r Reason) restsOnAbsence() bool {
	return r != ReasonPodFinished && r != ReasonPodTerminating
}

// Policy tunes the decision.
type Policy struct {
	// TerminatingGrace is how long a terminating pod keeps its addresses after its
	// deletionTimestamp (which the API server already sets to the deletion request time
	// plus the pod's grace period). It leaves the kubelet time to run CNI DEL.
	TerminatingGrace time.Duration
	// KeepTerminating keeps the addresses of terminating pods until their object is
	// gone. A pod on a partitioned node may still run after its grace period; an
	// operator who prefers a leak to the risk of handing its address out again sets it.
	KeepTerminating bool
	// ReleaseOnNotReadyNode releases a terminating pod's addresses at the end of its
	// grace even while its node is not Ready. By default they stay until the pod
	// object is gone: a node that stopped reporting may be partitioned and still run
	// the pod, and its address handed to another pod would then answer on two hosts
	// (spiderpool's zombie-on-not-ready-node distinction). The pod object goes once
	// the node comes back and finishes it, or an operator or the pod garbage collector
	// force-deletes it.
	ReleaseOnNotReadyNode bool
	// Switches: with StatefulSet addresses off (spiderpool-conf's enableStatefulSet:
	// false), StatefulSet pods are served like any other: a gone or finished
	// StatefulSet pod's addresses are released, not kept for the next pod of its name.
	Switches ipamconf.Switches
}

// Snapshot is what the collector knows of the cluster at one instant.
type Snapshot struct {
	Now          time.Time
	Pods         []Pod
	StatefulSets []appsv1.StatefulSet
	// Nodes are read for their Ready condition only.
	Nodes []corev1.Node
	// Records is every allocation record (ledger.List).
	Records   []ledger.Record
	Endpoints []*v2beta1.SpiderEndpoint
}

// Release is one pool address to give back.
type Release struct {
	Pool    string
	Address string
	// Holder is the record as decided on; the address is released only while the pool
	// still records this holder.
	Holder v2beta1.PoolIPAllocation
	Reason Reason
}

// EndpointRelease is one SpiderEndpoint to delete. UID and ResourceVersion are the
// deletion's preconditions, so an endpoint a node took over meanwhile stays.
type EndpointRelease struct {
	Namespace       string
	Name            string
	UID             types.UID
	ResourceVersion string
	PodUID          string
	Reason          Reason
}

// Plan is the outcome of Decide.
type Plan struct {
	Releases  []Release
	Endpoints []EndpointRelease
	// Recheck is the earliest instant at which something kept now becomes releasable
	// without any further event (a terminating pod reaching the end of its grace);
	// zero when there is none.
	Recheck time.Time
}

// Decide returns what to release given a snapshot. It never releases an address or
// endpoint of a live pod (present, neither finished nor terminating past its grace),
// nor of a StatefulSet pod whose ordinal will come back, even while the pod object is
// absent between deletion and re-creation.
func Decide(s Snapshot, p Policy) Plan {
	ix := newIndex(s, p)
	var plan Plan
	for _, i := range recordOrder(s.Records) {
		r := &s.Records[i]
		holder := r.Holder
		ns, name := splitPod(holder.Pod)
		v := ix.judge(ns, name, holder.PodUID)
		if v.returning && ix.superseded(ns, name, holder, r.Addr) {
			v = verdict{reason: ReasonSuperseded}
		}
		plan.Recheck = earliest(plan.Recheck, v.recheck)
		if v.reason != "" {
			plan.Releases = append(plan.Releases, Release{Pool: r.Pool, Address: r.Addr.String(), Holder: holder, Reason: v.reason})
		}
	}
	for _, ep := range sortedEndpoints(s.Endpoints) {
		v := ix.judge(ep.Namespace, ep.Name, ep.Status.Current.UID)
		plan.Recheck = earliest(plan.Recheck, v.recheck)
		if v.reason != "" {
			plan.Endpoints = append(plan.Endpoints, EndpointRelease{
				Namespace: ep.Namespace, Name: ep.Name, UID: ep.UID, ResourceVersion: ep.ResourceVersion,
				PodUID: ep.Status.Current.UID, Reason: v.reason,
			})
		}
	}
	return plan
}

// verdict is the fate of one pod UID's records. An empty reason keeps them.
type verdict struct {
	reason Reason
	// returning: the pod is absent but its StatefulSet ordinal will come back.
	returning bool
	// recheck: when a kept terminating pod reaches the end of its grace.
	recheck time.Time
}

type podName struct{ namespace, name string }

// holding is one (pod UID, interface, address family) that holds an address.
type holding struct {
	uid, iface string
	family     int64
}

type index struct {
	now      time.Time
	policy   Policy
	podByUID map[string]*Pod
	// podByName is the current pod at a name, whatever its UID.
	podByName map[podName]*Pod
	sets      map[podName]*appsv1.StatefulSet
	endpoints map[podName]*v2beta1.SpiderEndpoint
	// held is built from records on the first question superseded asks (a pass
	// without a returning StatefulSet pod whose name another pod holds asks none).
	held    map[holding]bool
	records []ledger.Record
	// notReady are the nodes whose Ready condition is not True.
	notReady map[string]bool
}

func newIndex(s Snapshot, p Policy) *index {
	ix := &index{
		now: s.Now, policy: p,
		podByUID:  make(map[string]*Pod, len(s.Pods)),
		podByName: make(map[podName]*Pod, len(s.Pods)),
		sets:      make(map[podName]*appsv1.StatefulSet, len(s.StatefulSets)),
		endpoints: make(map[podName]*v2beta1.SpiderEndpoint, len(s.Endpoints)),
		records:   s.Records,
		notReady:  map[string]bool{},
	}
	for i := range s.Nodes {
		if !nodeReady(&s.Nodes[i]) {
			ix.notReady[s.Nodes[i].Name] = true
		}
	}
	for i := range s.Pods {
		pod := &s.Pods[i]
		ix.podByUID[string(pod.UID)] = pod
		ix.podByName[podName{pod.Namespace, pod.Name}] = pod
	}
	for i := range s.StatefulSets {
		set := &s.StatefulSets[i]
		ix.sets[podName{set.Namespace, set.Name}] = set
	}
	for _, ep := range s.Endpoints {
		ix.endpoints[podName{ep.Namespace, ep.Name}] = ep
	}
	return ix
}

// judge decides the fate of the records of pod UID uid, recorded under ns/name.
func (ix *index) judge(ns, name, uid string) verdict {
	if pod, ok := ix.podByUID[uid]; ok && uid != "" {
		return ix.judgePresent(pod)
	}
	switch ix.ordinalFate(ns, name) {
	case ordinalReturns:
		return verdict{returning: true}
	case ordinalScaledDown:
		return verdict{reason: ReasonStatefulSetScaledDown}
	case ordinalSetGone:
		return verdict{reason: ReasonStatefulSetGone}
	default:
		return verdict{reason: ReasonPodDeleted}
	}
}

func (ix *index) judgePresent(pod *Pod) verdict {
	var reason Reason
	switch {
	case pod.Phase == corev1.PodSucceeded || pod.Phase == corev1.PodFailed:
		reason = ReasonPodFinished
	case pod.DeletionTimestamp != nil:
		if ix.policy.KeepTerminating {
			return verdict{}
		}
		deadline := pod.DeletionTimestamp.Add(ix.policy.TerminatingGrace)
		if ix.now.Before(deadline) {
			return verdict{recheck: deadline}
		}
		if !ix.policy.ReleaseOnNotReadyNode && ix.notReady[pod.NodeName] {
			// Kept until the pod object is gone: its deletion triggers the next pass.
			return verdict{}
		}
		reason = ReasonPodTerminating
	default:
		return verdict{}
	}
	// A finished or stuck StatefulSet pod is replaced under the same name, and the
	// replacement takes its addresses over.
	if ix.ordinalFate(pod.Namespace, pod.Name) == ordinalReturns {
		return verdict{}
	}
	return verdict{reason: reason}
}

// nodeReady reports whether the node's Ready condition is True. A node without one
// has never reported: not Ready.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// superseded reports whether the current incarnation of a StatefulSet pod already holds
// an address of the same family on the holder's interface. A takeover moves records to
// the new UID in place, so once the new UID holds its own, the old record is orphaned.
func (ix *index) superseded(ns, name string, holder v2beta1.PoolIPAllocation, addr netip.Addr) bool {
	cur, ok := ix.podByName[podName{ns, name}]
	if !ok || string(cur.UID) == holder.PodUID {
		return false
	}
	if ix.held == nil {
		ix.held = make(map[holding]bool, len(ix.records))
		for i := range ix.records {
			r := &ix.records[i]
			ix.held[holding{r.Holder.PodUID, r.Holder.Interface, ipranges.Family(r.Addr)}] = true
		}
	}
	return ix.held[holding{string(cur.UID), holder.Interface, ipranges.Family(addr)}]
}

type ordinalFate int

const (
	notStatefulSetPod ordinalFate = iota
	ordinalReturns
	ordinalScaledDown
	ordinalSetGone
)

// ordinalFate says what the StatefulSet behind a pod name intends for it. Evidence of
// StatefulSet membership is, from strongest to weakest: the controller reference of
// the pod currently at that name, the owner recorded in the pod's SpiderEndpoint, and
// the name itself ("<set>-<ordinal>" with such a set present). The last keeps a plain
// pod whose name happens to look like an ordinal of a live set; that errs on the side
// of never releasing an address that may come back. A name that is not an ordinal of
// a candidate set (workload.Ordinal) is no pod of that set.
func (ix *index) ordinalFate(ns, name string) ordinalFate {
	fate := notStatefulSetPod
	if !ix.policy.Switches.StatefulSets() {
		return fate
	}
	for _, setName := range ix.statefulSetCandidates(ns, name) {
		ordinal, ok := workload.Ordinal(setName, name)
		if !ok {
			continue
		}
		set, ok := ix.sets[podName{ns, setName}]
		if !ok {
			if ix.knownStatefulSetPod(ns, name, setName) {
				fate = max(fate, ordinalSetGone)
			}
			continue
		}
		if set.DeletionTimestamp != nil {
			fate = max(fate, ordinalSetGone)
			continue
		}
		if workload.Wants(set, ordinal) {
			return ordinalReturns
		}
		fate = ordinalScaledDown
	}
	return fate
}

// statefulSetCandidates lists the StatefulSets a pod name may belong to. The collector
// also reads these live before releasing.
func (ix *index) statefulSetCandidates(ns, name string) []string {
	var names []string
	if pod, ok := ix.podByName[podName{ns, name}]; ok {
		if set, ok := workload.StatefulSetOf(pod.OwnerReferences); ok {
			names = append(names, set)
		}
	}
	if set, ok := workload.EndpointStatefulSet(ix.endpoints[podName{ns, name}]); ok {
		names = append(names, set)
	}
	if set, _, ok := workload.SplitOrdinal(name); ok {
		names = append(names, set)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// knownStatefulSetPod is true when the name's StatefulSet membership is recorded (by an
// owner reference or the endpoint), not only guessed from the name.
func (ix *index) knownStatefulSetPod(ns, name, setName string) bool {
	if pod, ok := ix.podByName[podName{ns, name}]; ok {
		if set, ok := workload.StatefulSetOf(pod.OwnerReferences); ok && set == setName {
			return true
		}
	}
	set, ok := workload.EndpointStatefulSet(ix.endpoints[podName{ns, name}])
	return ok && set == setName
}

// splitPod splits a pool record's "namespace/name".
func splitPod(pod string) (ns, name string) {
	if i := strings.IndexByte(pod, '/'); i >= 0 {
		return pod[:i], pod[i+1:]
	}
	return "", pod
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// recordOrder is the order of records by pool, then address, for a deterministic
// plan: their indexes, 4 bytes each, where a sorted copy of a pass's records (every
// record of the cluster) would be over a hundred bytes each.
func recordOrder(recs []ledger.Record) []int32 {
	order := make([]int32, len(recs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &recs[i], &recs[j]
		if c := cmp.Compare(a.Pool, b.Pool); c != 0 {
			return c
		}
		return a.Addr.Compare(b.Addr)
	})
	return order
}

func sortedEndpoints(eps []*v2beta1.SpiderEndpoint) []*v2beta1.SpiderEndpoint {
	out := slices.Clone(eps)
	slices.SortFunc(out, func(a, b *v2beta1.SpiderEndpoint) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
