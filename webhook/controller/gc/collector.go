package gc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// Options tune the garbage collector. Zero values take the defaults.
type Options struct {
	// Interval between periodic full passes. Default 2m.
	Interval time.Duration
	// MinAge is how long a record must be seen without its pod before it is released,
	// on top of the live read that confirms the pod's absence. nil: 30s; 0 releases
	// on first sight (the live read still confirms).
	MinAge *time.Duration
	// TerminatingGrace is how long a terminating pod keeps its addresses after its
	// deletionTimestamp, for the kubelet to run CNI DEL. nil: 30s; 0: none.
	TerminatingGrace *time.Duration
	// KeepTerminating keeps the addresses of terminating pods until their object is
	// gone, whatever their grace (see Policy.KeepTerminating).
	KeepTerminating bool
	// ReleaseOnNotReadyNode releases a terminating pod's addresses at the end of its
	// grace even while its node is not Ready (see Policy.ReleaseOnNotReadyNode). By
	// default they stay until the pod object is gone.
	ReleaseOnNotReadyNode bool
	// Switches are the webhook's (spiderpool-conf's): with StatefulSet addresses off,
	// StatefulSet pods' addresses are released like any pod's (see Policy.Switches).
	Switches ipamconf.Switches
	// Debounce delays the pass a pod or StatefulSet event triggers, so that a burst of
	// events costs one pass. Default 1s.
	Debounce time.Duration
}

// Defaults.
const (
	DefaultInterval         = 2 * time.Minute
	DefaultMinAge           = 30 * time.Second
	DefaultTerminatingGrace = 30 * time.Second
	DefaultDebounce         = time.Second
)

// liveListThreshold: with more pods to confirm in one namespace than this, one live
// LIST of the namespace is cheaper than a GET per pod.
const liveListThreshold = 5

func (o Options) withDefaults() Options {
	o.Interval = cmp.Or(o.Interval, DefaultInterval)
	o.MinAge = cmp.Or(o.MinAge, ptr.To(DefaultMinAge))
	o.TerminatingGrace = cmp.Or(o.TerminatingGrace, ptr.To(DefaultTerminatingGrace))
	o.Debounce = cmp.Or(o.Debounce, DefaultDebounce)
	return o
}

// Collector runs garbage collection passes. It is not safe for concurrent passes; the
// controller runs one at a time.
type Collector struct {
	// client lists the snapshot (from the manager's cache) and writes.
	client client.Client
	// live reads the API server directly: to confirm a pod's absence, and to re-read a
	// pool after a conflict.
	live client.Reader
	// ledger writes the releases: nicpool's one writer of allocation state.
	ledger *ledger.Ledger
	// finished, when set, holds the pods that are neither Pending nor Running (a cache
	// of FinishedPods); without it they are listed from live.
	finished client.Reader
	// informers, when set, is the cache client reads from: the snapshot's pods and
	// endpoints are then taken from its informers' stores in place.
	informers cache.Informers
	opts      Options
	clock     absenceClock
}

// NewCollector returns a collector that reads its snapshot through c, confirms through
// live, and writes through c.
func NewCollector(c client.Client, live client.Reader, opts Options) *Collector {
	l := ledger.New(ledger.Options{Cache: c, Client: c, Fresh: live, Log: log.Log.WithName("gc")})
	return &Collector{client: c, live: live, ledger: l, opts: opts.withDefaults()}
}

// Result is what one pass did.
type Result struct {
	// Released are the pool addresses this pass removed.
	Released []Release
	// DeletedEndpoints are the SpiderEndpoints this pass deleted.
	DeletedEndpoints []EndpointRelease
	// Pending counts releases waiting for MinAge.
	Pending int
	// Recheck is when a later pass may release more without any event (end of a
	// terminating pod's grace, or of a record's minimum age); zero when nothing waits.
	Recheck time.Time
}

// RunOnce forces one full pass now, without waiting for MinAge (it has no history);
// every release resting on a pod's absence is still confirmed through live. For
// end-to-end suites and benchmarks.
func RunOnce(ctx context.Context, c client.Client, live client.Reader) (Result, error) {
	return NewCollector(c, live, Options{MinAge: ptr.To(time.Duration(0))}).Pass(ctx)
}

// Pass runs one full garbage collection pass.
func (c *Collector) Pass(ctx context.Context) (res Result, err error) {
	start := time.Now()
	defer func() {
		passDuration.Observe(time.Since(start).Seconds())
		result := "success"
		if err != nil {
			result = "error"
		}
		runsTotal.WithLabelValues(result).Inc()
		pendingReleases.Set(float64(res.Pending))
	}()
	snap, err := c.snapshot(ctx)
	if err != nil {
		return res, err
	}
	policy := Policy{TerminatingGrace: max(*c.opts.TerminatingGrace, 0), KeepTerminating: c.opts.KeepTerminating,
		ReleaseOnNotReadyNode: c.opts.ReleaseOnNotReadyNode, Switches: c.opts.Switches}
	plan := Decide(snap, policy)
	recheck := plan.Recheck
	plan, pending, ripeAt := c.ripen(plan, snap.Now)
	res.Pending = pending
	res.Recheck = earliest(recheck, ripeAt)
	if plan, err = c.confirm(ctx, snap, policy, plan); err != nil {
		return res, err
	}
	err = c.apply(ctx, snap, plan, &res)
	return res, err
}

func (c *Collector) snapshot(ctx context.Context) (Snapshot, error) {
	var (
		sets  appsv1.StatefulSetList
		nodes corev1.NodeList
	)
	// Nothing of the snapshot is modified, so the cache's objects are read in place: a
	// pass over thousands of pods copies none.
	for _, l := range []client.ObjectList{&sets, &nodes} {
		if err := c.client.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return Snapshot{}, fmt.Errorf("list %T for garbage collection: %w", l, err)
		}
	}
	pods, err := cached[*metav1.PartialObjectMetadata](ctx, c, PodMetadata(), podMetadataList())
	if err != nil {
		return Snapshot{}, err
	}
	eps, err := cached[*v2beta1.SpiderEndpoint](ctx, c, &v2beta1.SpiderEndpoint{}, &v2beta1.SpiderEndpointList{})
	if err != nil {
		return Snapshot{}, err
	}
	finished, err := c.finishedPods(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	onNotReady, err := c.podsOnNotReadyNodes(ctx, pods, nodes.Items)
	if err != nil {
		return Snapshot{}, err
	}
	records, _, err := ledger.List(ctx, c.client)
	if err != nil {
		return Snapshot{}, fmt.Errorf("list allocation records for garbage collection: %w", err)
	}
	out := make([]Pod, len(pods))
	for i, m := range pods {
		out[i] = cachedPod(m, finished[m.UID], onNotReady[m.UID])
	}
	return Snapshot{Now: time.Now(), Pods: out, StatefulSets: sets.Items, Records: records, Endpoints: eps, Nodes: nodes.Items}, nil
}

// cached lists the objects of obj's kind for a pass, to be read and not modified:
// from the store of the cache's informer when the collector has one (no copy of
// each object, where a List copies every one into its list), else through
// c.client into list.
func cached[T client.Object](ctx context.Context, c *Collector, obj client.Object, list client.ObjectList) ([]T, error) {
	if c.informers != nil {
		inf, err := c.informers.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("informer of %T for garbage collection: %w", obj, err)
		}
		if s, ok := inf.(toolscache.SharedIndexInformer); ok {
			items := s.GetStore().List()
			out := make([]T, 0, len(items))
			for _, o := range items {
				if t, ok := o.(T); ok {
					out = append(out, t)
				}
			}
			return out, nil
		}
	}
	if err := c.client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list %T for garbage collection: %w", list, err)
	}
	var out []T
	err := meta.EachListItem(list, func(o runtime.Object) error {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// cachedPod is the collector's view of a pod from its cached metadata, the pod in full
// if it finished (else nil), and its node if that node is not Ready (else "").
func cachedPod(m *metav1.PartialObjectMetadata, finished *corev1.Pod, notReadyNode string) Pod {
	p := Pod{ObjectMeta: &m.ObjectMeta}
	if finished != nil && finished.UID == m.UID {
		p.Phase, p.NodeName = finished.Status.Phase, finished.Spec.NodeName
	}
	if notReadyNode != "" {
		p.NodeName = notReadyNode
	}
	return p
}

// finishedPods returns the pods that are neither Pending nor Running, by UID: from
// the collector's cache of them, or else from the API server.
func (c *Collector) finishedPods(ctx context.Context) (map[types.UID]*corev1.Pod, error) {
	var list corev1.PodList
	var err error
	if c.finished != nil {
		err = c.finished.List(ctx, &list, client.UnsafeDisableDeepCopy)
	} else {
		err = c.live.List(ctx, &list, client.MatchingFieldsSelector{Selector: FinishedPods})
	}
	if err != nil {
		return nil, fmt.Errorf("list finished pods for garbage collection: %w", err)
	}
	out := make(map[types.UID]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].UID] = &list.Items[i]
	}
	return out, nil
}

// podsOnNotReadyNodes returns the node of every pod on a node that is not Ready, by
// UID, read from the API server: the decision keeps a terminating pod's addresses
// while its node is not Ready. It reads nothing while no pod is terminating or every
// node is Ready.
func (c *Collector) podsOnNotReadyNodes(ctx context.Context, pods []*metav1.PartialObjectMetadata, nodes []corev1.Node) (map[types.UID]string, error) {
	terminating := false
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			terminating = true
			break
		}
	}
	if !terminating {
		return nil, nil
	}
	out := map[types.UID]string{}
	for i := range nodes {
		if nodeReady(&nodes[i]) {
			continue
		}
		list := podMetadataList()
		sel := fields.OneTermEqualSelector("spec.nodeName", nodes[i].Name)
		if err := c.live.List(ctx, list, client.MatchingFieldsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("list the pods of node %s, which is not Ready: %w", nodes[i].Name, err)
		}
		for _, p := range list.Items {
			out[p.UID] = nodes[i].Name
		}
	}
	return out, nil
}

// ripen holds back absence-based releases younger than MinAge.
func (c *Collector) ripen(plan Plan, now time.Time) (Plan, int, time.Time) {
	var keys []string
	for _, r := range plan.Releases {
		if r.Reason.restsOnAbsence() {
			keys = append(keys, r.key())
		}
	}
	for _, e := range plan.Endpoints {
		if e.Reason.restsOnAbsence() {
			keys = append(keys, e.key())
		}
	}
	ripe, next := c.clock.ripe(keys, now, max(*c.opts.MinAge, 0))
	out := Plan{Recheck: plan.Recheck}
	for _, r := range plan.Releases {
		if !r.Reason.restsOnAbsence() || ripe[r.key()] {
			out.Releases = append(out.Releases, r)
		}
	}
	for _, e := range plan.Endpoints {
		if !e.Reason.restsOnAbsence() || ripe[e.key()] {
			out.Endpoints = append(out.Endpoints, e)
		}
	}
	return out, len(keys) - len(ripe), next
}

func (r Release) key() string {
	return "pool/" + r.Pool + "/" + r.Address + "/" + r.Holder.PodUID
}

func (e EndpointRelease) key() string {
	return "endpoint/" + e.Namespace + "/" + e.Name + "/" + e.PodUID
}

// confirm re-decides every absence-based release on the API server's current view of
// the pods and StatefulSets involved, and keeps only the releases both decisions agree
// on. A pod the cache has not seen yet is found here and keeps its addresses.
func (c *Collector) confirm(ctx context.Context, snap Snapshot, policy Policy, plan Plan) (Plan, error) {
	names := map[podName]bool{}
	for _, r := range plan.Releases {
		if r.Reason.restsOnAbsence() {
			ns, name := splitPod(r.Holder.Pod)
			names[podName{ns, name}] = true
		}
	}
	for _, e := range plan.Endpoints {
		if e.Reason.restsOnAbsence() {
			names[podName{e.Namespace, e.Name}] = true
		}
	}
	if len(names) == 0 {
		return plan, nil
	}
	ix := newIndex(snap, policy)
	setNames := map[podName]bool{}
	for n := range names {
		for _, s := range ix.statefulSetCandidates(n.namespace, n.name) {
			setNames[podName{n.namespace, s}] = true
		}
	}
	pods, err := c.livePods(ctx, names)
	if err != nil {
		return Plan{}, err
	}
	sets, err := c.liveStatefulSets(ctx, setNames)
	if err != nil {
		return Plan{}, err
	}

	fresh := snap
	fresh.Pods = slices.DeleteFunc(slices.Clone(snap.Pods), func(p Pod) bool { return names[podName{p.Namespace, p.Name}] })
	fresh.Pods = append(fresh.Pods, pods...)
	fresh.StatefulSets = slices.DeleteFunc(slices.Clone(snap.StatefulSets), func(s appsv1.StatefulSet) bool {
		return setNames[podName{s.Namespace, s.Name}]
	})
	fresh.StatefulSets = append(fresh.StatefulSets, sets...)
	again := Decide(fresh, policy)

	agreed := map[string]Reason{}
	for _, r := range again.Releases {
		agreed[r.key()] = r.Reason
	}
	for _, e := range again.Endpoints {
		agreed[e.key()] = e.Reason
	}
	logger := log.FromContext(ctx)
	out := Plan{Recheck: plan.Recheck}
	for _, r := range plan.Releases {
		reason, ok := agreed[r.key()]
		if !ok {
			logger.V(1).Info("kept address: the API server disagrees with the cache", "pod", r.Holder.Pod,
				"podUID", r.Holder.PodUID, "interface", r.Holder.Interface, "pool", r.Pool, "address", r.Address)
			continue
		}
		r.Reason = reason
		out.Releases = append(out.Releases, r)
	}
	for _, e := range plan.Endpoints {
		if reason, ok := agreed[e.key()]; ok {
			e.Reason = reason
			out.Endpoints = append(out.Endpoints, e)
		}
	}
	return out, nil
}

// livePods reads the pods currently at the given names from the API server.
func (c *Collector) livePods(ctx context.Context, names map[podName]bool) ([]Pod, error) {
	byNamespace := map[string][]string{}
	for n := range names {
		byNamespace[n.namespace] = append(byNamespace[n.namespace], n.name)
	}
	var out []Pod
	for ns, list := range byNamespace {
		if len(list) > liveListThreshold {
			var pods corev1.PodList
			if err := c.live.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				return nil, fmt.Errorf("confirm absent pods in namespace %s: %w", ns, err)
			}
			for i := range pods.Items {
				if names[podName{ns, pods.Items[i].Name}] {
					out = append(out, PodOf(&pods.Items[i]))
				}
			}
			continue
		}
		for _, name := range list {
			var p corev1.Pod
			err := c.live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
			switch {
			case err == nil:
				out = append(out, PodOf(&p))
			case !apierrors.IsNotFound(err):
				return nil, fmt.Errorf("confirm pod %s/%s is absent: %w", ns, name, err)
			}
		}
	}
	return out, nil
}

// liveStatefulSets reads the given StatefulSets from the API server.
func (c *Collector) liveStatefulSets(ctx context.Context, names map[podName]bool) ([]appsv1.StatefulSet, error) {
	var out []appsv1.StatefulSet
	for n := range names {
		var s appsv1.StatefulSet
		err := c.live.Get(ctx, client.ObjectKey{Namespace: n.namespace, Name: n.name}, &s)
		switch {
		case err == nil:
			out = append(out, s)
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("confirm StatefulSet %s/%s: %w", n.namespace, n.name, err)
		}
	}
	return out, nil
}

// apply deletes the planned endpoints, then removes the planned pool records.
//
// Endpoints go first: an endpoint is what lets a recreated StatefulSet pod take
// addresses over, so once it is gone no node can claim the records this pass releases
// next. The other order, interrupted between the two writes, would leave an endpoint
// naming addresses that are free again. If an endpoint changed since the decision (a
// node took it over), that pod UID's records are left for the next pass.
func (c *Collector) apply(ctx context.Context, snap Snapshot, plan Plan, res *Result) error {
	logger := log.FromContext(ctx)
	var errs []error
	blocked := map[string]bool{}
	for _, e := range plan.Endpoints {
		ep := &v2beta1.SpiderEndpoint{}
		ep.Namespace, ep.Name = e.Namespace, e.Name
		err := c.client.Delete(ctx, ep, client.Preconditions{UID: &e.UID, ResourceVersion: &e.ResourceVersion})
		switch {
		case err == nil:
			endpointDeletionsTotal.WithLabelValues(string(e.Reason)).Inc()
			res.DeletedEndpoints = append(res.DeletedEndpoints, e)
			logger.Info("deleted endpoint", "endpoint", e.Namespace+"/"+e.Name, "podUID", e.PodUID, "reason", e.Reason)
		case apierrors.IsNotFound(err):
			// Already gone (CNI DEL or another pass): nothing left to do.
		case apierrors.IsConflict(err):
			blocked[e.PodUID] = true
			logger.V(1).Info("endpoint changed since the decision; left for the next pass",
				"endpoint", e.Namespace+"/"+e.Name, "podUID", e.PodUID)
		default:
			blocked[e.PodUID] = true
			errs = append(errs, fmt.Errorf("delete SpiderEndpoint %s/%s of pod UID %s: %w", e.Namespace, e.Name, e.PodUID, err))
		}
	}

	var recs []ledger.Record
	planned := map[string]Release{}
	for _, r := range plan.Releases {
		a, err := netip.ParseAddr(r.Address)
		if blocked[r.Holder.PodUID] || err != nil {
			continue
		}
		recs = append(recs, ledger.Record{Pool: r.Pool, Addr: a, Holder: r.Holder})
		planned[r.Pool+"/"+a.String()] = r
	}
	// The ledger removes each record only while it still names the planned holder
	// (allocator.Owner.Holds): an address released, or released and handed to another
	// pod since the snapshot, is left alone.
	done, err := c.ledger.ReleaseRecords(ctx, recs)
	if err != nil {
		errs = append(errs, fmt.Errorf("release addresses: %w", err))
	}
	for _, d := range done {
		r := planned[d.Pool+"/"+d.Addr.String()]
		releasesTotal.WithLabelValues(string(r.Reason)).Inc()
		res.Released = append(res.Released, r)
		logger.Info("released address", "pod", r.Holder.Pod, "podUID", r.Holder.PodUID,
			"interface", r.Holder.Interface, "pool", r.Pool, "address", r.Address, "reason", r.Reason)
	}
	slices.SortFunc(res.Released, func(a, b Release) int {
		return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Address, b.Address))
	})
	return errors.Join(errs...)
}
