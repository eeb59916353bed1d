package pod

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// Pod is the part of a pod that admission reads.
type Pod struct {
	// Namespace is the namespace of the request (a new pod's metadata may omit it).
	Namespace       string
	Name            string
	Labels          map[string]string
	Annotations     map[string]string
	OwnerReferences []metav1.OwnerReference
}

// Annotation is one annotation to set.
type Annotation struct {
	Key, Value string
}

// Decision is the outcome of admitting a pod. A pod is denied when Errs is not
// empty or Retry is set; otherwise Set and Remove are the changes to its annotations
// (none on a pod that already went through admission).
type Decision struct {
	Set      []Annotation
	Remove   []string
	Warnings []string
	// Errs are the reasons for a denial, each naming the annotation at fault.
	Errs field.ErrorList
	// Retry, when set, denies the pod for a reason that goes away by itself (its
	// SpiderEndpoint is being deleted); controllers retry the create.
	Retry string
}

// Denied reports whether the pod is refused.
func (d *Decision) Denied() bool { return len(d.Errs) > 0 || d.Retry != "" }

// Changed reports whether the pod's annotations change.
func (d *Decision) Changed() bool { return len(d.Set) > 0 || len(d.Remove) > 0 }

// Admission decides pod admission from the views of pools, namespaces and endpoints.
// It has no side effects, so dry-run requests need no special care.
type Admission struct {
	Pools      *views.Pools
	Namespaces *views.Namespaces
	Endpoints  *views.Endpoints
	// StatefulSets confirm a pod's StatefulSet controller reference; nil trusts it
	// (offline checks).
	StatefulSets *views.StatefulSets
	// Networks tells which NetworkAttachmentDefinitions have nicpool as IPAM; nil
	// when unknown.
	Networks *views.Networks
	// ClusterNetworkNicpool says that nicpool is the IPAM of the cluster network
	// (eth0), which admission cannot see for itself.
	ClusterNetworkNicpool bool
	// Switches are spiderpool-conf's IPAM switches: a pool list of a disabled family
	// is left out, and with StatefulSet addresses off no pod is stamped.
	Switches ipamconf.Switches

	parse parsers
}

// New returns an Admission reading views.
func New(v *views.All) *Admission {
	return &Admission{Pools: v.Pools, Namespaces: v.Namespaces, Endpoints: v.Endpoints, StatefulSets: v.StatefulSets, Networks: v.Networks}
}

// Decide admits a pod being created. Calling it again on a pod with its decision
// applied yields a decision with no changes.
func (a *Admission) Decide(ctx context.Context, pod *Pod) Decision {
	var d Decision
	live := views.NewLiveReads(MaxLiveReads)
	a.resolveSelections(ctx, pod, &d, live)
	if len(d.Errs) > 0 {
		return d
	}
	a.stampEndpoint(ctx, pod, &d, live)
	return d
}

// resolveSelections rewrites ipam.spidernet.io/ippools (or turns ippool into it) so
// that every entry names a concrete interface and concrete, usable pools.
func (a *Admission) resolveSelections(ctx context.Context, pod *Pod, d *Decision, live *views.LiveReads) {
	multi, hasMulti := pod.Annotations[annotations.IPPools]
	single, hasSingle := pod.Annotations[annotations.IPPool]
	var sel []annotations.PoolSelection
	// keepSingle: ippool stays on the pod beside the ippools it is turned into, as the
	// marker that tells ipamd the pod chose eth0's pools only; its other interfaces
	// take the default pools (a present ippools alone must cover every interface).
	fromSingle, keepSingle := false, false
	for _, a := range [...]Annotation{{annotations.IPPools, multi}, {annotations.IPPool, single}} {
		if err := checkSize(a.Key, a.Value); err != nil {
			d.Errs = append(d.Errs, err)
		}
	}
	if len(d.Errs) > 0 {
		return
	}
	switch {
	case hasMulti:
		parsed, errs := a.parse.poolSelections(multi)
		if len(errs) == 0 {
			errs = checkCounts(annotations.IPPools, parsed)
		}
		if len(errs) > 0 {
			d.Errs = errs
			return
		}
		ifs, errs := a.parse.podInterfaces(pod.Annotations, pod.Namespace)
		if len(errs) > 0 {
			d.Errs = errs
			return
		}
		if sel, errs = annotations.Resolve(parsed, ifs); len(errs) > 0 {
			d.Errs = errs
			return
		}
		// A pod that carries both, with ippools naming eth0 alone, is one this webhook
		// converted (or written the same way): ippool stays as its marker.
		keepSingle = hasSingle && len(sel) == 1 && sel[0].Interface == annotations.DefaultInterface
		if hasSingle && !keepSingle {
			d.Warnings = append(d.Warnings, annotations.IPPool+" is ignored and removed because "+annotations.IPPools+" is set; keep only "+annotations.IPPools)
		}
	case hasSingle:
		s, errs := a.parse.singlePoolSelection(single)
		if len(errs) == 0 {
			errs = checkCounts(annotations.IPPool, []annotations.PoolSelection{{IPv4: s.IPv4, IPv6: s.IPv6}})
		}
		if len(errs) > 0 {
			d.Errs = errs
			return
		}
		sel = []annotations.PoolSelection{{Interface: annotations.DefaultInterface, IPv4: s.IPv4, IPv6: s.IPv6, CleanGateway: s.CleanGateway}}
		fromSingle, keepSingle = true, true
	default:
		return
	}
	a.leaveOutDisabled(sel, d)
	rd := reads{namespace: pod.Namespace, namespaces: a.Namespaces, live: live}
	podLabels := labels.Set(pod.Labels)
	for i := range sel {
		var errs field.ErrorList
		at := entry{index: i, single: fromSingle}
		sel[i].IPv4, errs = a.resolvePools(ctx, sel[i].IPv4, ipv4, at, &rd, podLabels)
		d.Errs = append(d.Errs, errs...)
		sel[i].IPv6, errs = a.resolvePools(ctx, sel[i].IPv6, ipv6, at, &rd, podLabels)
		d.Errs = append(d.Errs, errs...)
	}
	if len(d.Errs) > 0 {
		return
	}
	resolved := annotations.Marshal(sel)
	if len(resolved) > MaxSelectionBytes {
		d.Errs = field.ErrorList{field.Invalid(annotations.Path(annotations.IPPools), fmt.Sprintf("<%d bytes once wildcards are expanded>", len(resolved)),
			fmt.Sprintf("its wildcards match so many pools that the resolved selection exceeds %d bytes: use narrower patterns", MaxSelectionBytes))}
		return
	}
	if !keepSingle {
		a.warnUncovered(pod, sel, d)
	}
	if !hasMulti || resolved != multi {
		d.Set = append(d.Set, Annotation{Key: annotations.IPPools, Value: resolved})
	}
	if hasSingle && !keepSingle {
		d.Remove = append(d.Remove, annotations.IPPool)
	}
}

// leaveOutDisabled empties the pool lists of a disabled IP family, with a warning,
// before they are resolved: spiderpool drops them too, so a pod naming pools of both
// families (or a pool that cannot exist, its family being refused) still starts with
// the addresses of the enabled one.
func (a *Admission) leaveOutDisabled(sel []annotations.PoolSelection, d *Decision) {
	var left ipamconf.Left
	for i := range sel {
		var l ipamconf.Left
		sel[i].IPv4, sel[i].IPv6, l = a.Switches.LeaveOut(sel[i].IPv4, sel[i].IPv6)
		left.Add(l)
	}
	for _, fam := range left.Families() {
		d.Warnings = append(d.Warnings, fmt.Sprintf("the pod's IPv%d pools are left out: %s", fam, ipamconf.Disabled(fam)))
	}
}

// warnUncovered warns of each interface of the pod that nicpool will be asked to
// serve but a present ippools leaves out: ipamd refuses that interface's ADD, as
// spiderpool does, rather than serve it from defaults the pod's author did not choose
// (not so beside ipam.spidernet.io/ippool, which chooses eth0's pools only). Admission can
// tell for the interfaces of networks whose IPAM is nicpool, and for eth0 when told
// that nicpool serves the cluster network.
func (a *Admission) warnUncovered(pod *Pod, sel []annotations.PoolSelection, d *Decision) {
	ifs, errs := a.parse.podInterfaces(pod.Annotations, pod.Namespace)
	if len(errs) > 0 {
		return
	}
	for _, i := range ifs {
		if covered(sel, i.Name) {
			continue
		}
		var network string
		switch {
		case i.Network == "" && a.ClusterNetworkNicpool:
			network = "the cluster network"
		case i.Network != "" && a.Networks != nil && a.Networks.UsesNicpool(i.Network):
			network = "network " + i.Network
		default:
			continue
		}
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s names no pools for interface %s, whose IPAM (%s) is nicpool: its CNI ADD will fail and the pod will not start; add an entry {\"interface\":%q,\"ipv4\":[…]} for it, or remove the annotation to use default pools for every interface",
			annotations.IPPools, i.Name, network, i.Name))
	}
}

func covered(sel []annotations.PoolSelection, iface string) bool {
	for _, s := range sel {
		if s.Interface == iface {
			return true
		}
	}
	return false
}

// entry locates a selection entry in the pod's annotations, for error paths; the
// path is built only when there is an error to report.
type entry struct {
	index  int
	single bool // the entry came from ipam.spidernet.io/ippool
}

// pool is the field path of the j-th pool name of the family's list.
func (e entry) pool(fam family, j int) *field.Path {
	if e.single {
		return annotations.Path(annotations.IPPool).Child(fam.list).Index(j)
	}
	return annotations.Path(annotations.IPPools).Index(e.index).Child(fam.list).Index(j)
}

// reads is what one decision reads beyond the pod and the views: the labels of the
// pod's namespace, once, when a pool first needs them; and the API server, at most
// MaxLiveReads times in all, when a view misses.
type reads struct {
	namespace  string
	namespaces *views.Namespaces
	live       *views.LiveReads
	loaded     bool
	set        labels.Set
	found      bool
	err        error
}

func (r *reads) namespaceLabels(ctx context.Context) (labels.Set, bool, error) {
	if !r.loaded {
		r.loaded = true
		if r.namespaces != nil {
			r.set, r.found, r.err = r.namespaces.Labels(ctx, r.namespace, r.live)
		}
	}
	return r.set, r.found, r.err
}
