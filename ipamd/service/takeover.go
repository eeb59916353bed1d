package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/ipamd/selection"
)

// adopt makes the pod's endpoint the pod's own before an ADD records into it, and
// returns it (nil when there is none). An endpoint of another pod UID is taken over
// when the pod is its successor (see successor), refused when it belongs to a
// StatefulSet ordinal that comes back and the pod is not that StatefulSet's, and
// otherwise a leftover, released and deleted. All three are decided on a fresh read,
// never on a cached copy: a cached endpoint may have been deleted and recreated
// meanwhile.
func (s *Service) adopt(ctx context.Context, pod *corev1.Pod, iface string, network api.NetworkConfig, pools []v2beta1.SpiderIPPool) (*v2beta1.SpiderEndpoint, bool, error) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	ep, err := s.endpoints.Get(ctx, key)
	if err != nil {
		return nil, false, err
	}
	stamp := pod.Annotations[annotations.EndpointUID]
	stamped := stamp != "" && stamp != annotations.NoEndpoint
	// A stamped pod expects an endpoint this node may not have cached yet: look.
	if (ep == nil && !stamped) || (ep != nil && ep.Status.Current.UID == string(pod.UID)) {
		return ep, false, nil
	}
	for range maxDecisions {
		ep, err = s.endpoints.Fresh(ctx, key)
		if err != nil {
			return nil, false, err
		}
		if ep == nil || ep.Status.Current.UID == string(pod.UID) {
			return ep, false, nil
		}
		var taken *v2beta1.SpiderEndpoint
		switch {
		case s.Switches.StatefulSets() && successor(pod, ep):
			taken, err = s.takeOver(ctx, pod, ep, iface, network, pools)
		case s.reservedForStatefulSet(ctx, pod, ep):
			set, _ := workload.EndpointStatefulSet(ep)
			return nil, false, fmt.Errorf("%w: SpiderEndpoint %s/%s holds the addresses of StatefulSet %s's pod of this name, which comes back; this pod is not controlled by StatefulSet %s: delete it, or scale the StatefulSet below this ordinal",
				errEndpointReserved, ep.Namespace, ep.Name, set, set)
		default:
			taken, err = s.discard(ctx, pod, ep)
		}
		if errors.Is(err, errEndpointMoved) {
			continue
		}
		return taken, taken != nil, err
	}
	return nil, false, errEndpointMoved
}

// successor reports whether pod may take ep over: the pod is controlled by the
// StatefulSet the endpoint names, and admission stamped it with the endpoint's UID
// (annotations.EndpointUID). The endpoint is the pod's own namespace/name by
// construction. A stamp on any other pod is ignored: the webhook strips it from other
// pods, but a pod that skipped the webhook carries whatever its author wrote.
func successor(pod *corev1.Pod, ep *v2beta1.SpiderEndpoint) bool {
	set, ok := workload.StatefulSetOf(pod.OwnerReferences)
	if !ok {
		return false
	}
	epSet, ok := workload.EndpointStatefulSet(ep)
	stamp := pod.Annotations[annotations.EndpointUID]
	return ok && epSet == set && stamp != "" && stamp != annotations.NoEndpoint && stamp == string(ep.UID)
}

// reservedForStatefulSet reports whether ep belongs to a StatefulSet pod that will
// come back, and pod is not a pod of that StatefulSet: such a pod may neither take the
// endpoint's addresses nor discard them.
func (s *Service) reservedForStatefulSet(ctx context.Context, pod *corev1.Pod, ep *v2beta1.SpiderEndpoint) bool {
	set, ok := workload.EndpointStatefulSet(ep)
	if !ok {
		return false
	}
	if own, ok := workload.StatefulSetOf(pod.OwnerReferences); ok && own == set {
		return false
	}
	return s.statefulSetWillReturn(ctx, ep.Namespace, ep.Name, nil, ep)
}

// takeOver moves a StatefulSet pod's predecessor's endpoint to the pod: each address
// of an interface that still draws that family from the same pool is kept (its pool
// record moves to the new pod UID first), the others are released and reallocated by
// their interface's ADD. Pools are written before the endpoint, so a crash in between
// is finished by the next ADD: transfers are idempotent and the endpoint still names
// the old UID. iface is the interface of the ADD that takes over, network its CNI
// network.
func (s *Service) takeOver(ctx context.Context, pod *corev1.Pod, ep *v2beta1.SpiderEndpoint, iface string, network api.NetworkConfig, pools []v2beta1.SpiderIPPool) (*v2beta1.SpiderEndpoint, error) {
	oldUID := ep.Status.Current.UID
	log := s.Log.WithValues("pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID, "previousUID", oldUID, "endpointUID", ep.UID)
	ns := s.namespace(ctx, pod.Namespace)
	ifs, _ := annotations.PodInterfaces(pod.Annotations, pod.Namespace)
	var kept []v2beta1.IPAllocationDetail
	var extra []string
	for _, d := range ep.Status.Current.IPs {
		for _, p := range []*string{d.IPv4Pool, d.IPv6Pool} {
			if p != nil {
				extra = append(extra, *p)
			}
		}
		keep4, keep6 := s.keptFamilies(pod, ns, ifs, d, iface, network, pools)
		owner := allocator.Owner{Pod: pod.Namespace + "/" + pod.Name, PodUID: string(pod.UID), Interface: d.Interface}
		k := d
		for _, fam := range []struct {
			keep                bool
			addr, pool, gateway **string
		}{{keep4, &k.IPv4, &k.IPv4Pool, &k.IPv4Gateway}, {keep6, &k.IPv6, &k.IPv6Pool, &k.IPv6Gateway}} {
			if *fam.addr == nil {
				continue
			}
			// An address the record holds that does not parse cannot be handed over: the
			// interface's ADD allocates afresh, as for one the pool no longer holds.
			pfx, perr := netip.ParsePrefix(**fam.addr)
			ok := fam.keep && *fam.pool != nil && perr == nil
			if ok {
				var err error
				if ok, err = s.transfer(ctx, **fam.pool, owner, oldUID, pfx.Addr()); err != nil {
					return nil, err
				}
			}
			if !ok {
				log.Info("releasing an address whose pool changed or is no longer held", "interface", d.Interface, "address", **fam.addr)
				*fam.addr, *fam.pool, *fam.gateway = nil, nil, nil
			}
		}
		if k.IPv4 != nil || k.IPv6 != nil {
			log.Info("keeping interface's addresses", "interface", d.Interface, "ipv4", deref(k.IPv4), "ipv6", deref(k.IPv6))
			kept = append(kept, k)
		}
	}
	// Whatever the predecessor still holds was not kept.
	if oldUID != "" {
		if _, err := s.releaseAll(ctx, allocator.Owner{Pod: pod.Namespace + "/" + pod.Name, PodUID: oldUID}, ep, extra...); err != nil {
			return nil, err
		}
	}
	upd, err := s.rewrite(ctx, pod, ep, kept)
	if err != nil {
		return nil, err
	}
	log.Info("took over SpiderEndpoint", "kept", len(kept), "of", len(ep.Status.Current.IPs))
	return upd, nil
}

// rewrite gives ep to pod with the records kept (a subset of its predecessor's), as
// the endpoint policy lets a takeover write: this node, the pod's UID, the
// predecessor's UID appended to the endpoint's previous UIDs.
func (s *Service) rewrite(ctx context.Context, pod *corev1.Pod, ep *v2beta1.SpiderEndpoint, kept []v2beta1.IPAllocationDetail) (*v2beta1.SpiderEndpoint, error) {
	upd := ep.DeepCopy() // carries ep's UID and resourceVersion: the write's preconditions
	kind, name := workload.Controller(pod.Name, pod.OwnerReferences)
	upd.Status.Current = v2beta1.PodIPAllocation{UID: string(pod.UID), Node: s.Node, IPs: kept}
	upd.Status.OwnerControllerType, upd.Status.OwnerControllerName = kind, name
	endpoint.SetAttachments(upd, nil) // the old containers are gone; each ADD records its own
	endpoint.AppendPreviousUID(upd, ep.Status.Current.UID)
	err := s.endpoints.Update(ctx, upd)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, errEndpointMoved
	}
	if err != nil {
		return nil, err
	}
	return upd, nil
}

// transfer moves one address of the predecessor (pod UID from) to owner. false when
// the pool no longer holds it for the predecessor (released by GC, pool gone): the
// interface's ADD then allocates afresh.
func (s *Service) transfer(ctx context.Context, pool string, owner allocator.Owner, from string, addr netip.Addr) (bool, error) {
	err := s.Ledger.Transfer(ctx, pool, owner, from, addr)
	switch {
	case apierrors.IsNotFound(err), errors.Is(err, allocator.ErrNotHeld):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// keptFamilies reports which of the predecessor's addresses on an interface may stay:
// the interface still exists and draws that family from the address's pool, whatever
// picked the pools (pod annotation, namespace defaults, CNI network defaults, cluster
// defaults: design.md I5). The request describes only its own interface's CNI network;
// another interface whose choice falls to the cluster defaults may have network
// defaults this request cannot see, and keeps its addresses here: its own ADD, which
// sees them, releases those of a pool its network no longer names (take).
func (s *Service) keptFamilies(pod *corev1.Pod, ns *corev1.Namespace, ifs []annotations.Interface, d v2beta1.IPAllocationDetail, iface string, network api.NetworkConfig, pools []v2beta1.SpiderIPPool) (v4, v6 bool) {
	if d.Interface == "" {
		return false, false // spiderpool's bug 1 record: not an interface of anything
	}
	exists := false
	for _, i := range ifs {
		exists = exists || i.Name == d.Interface
	}
	if !exists {
		return false, false
	}
	own := d.Interface == iface
	if !own {
		network = api.NetworkConfig{}
	}
	choice, _, err := s.chooseEnabled(pod, ns, d.Interface, network, pools)
	if err != nil {
		return false, false
	}
	if !own && choice.Source == selection.SourceCluster {
		return true, true
	}
	return choice.Allows(v2beta1.IPv4, deref(d.IPv4Pool)), choice.Allows(v2beta1.IPv6, deref(d.IPv6Pool))
}

// discard releases what the leftover endpoint's pod (its namespace/name, the UID it
// records) still holds, and deletes the endpoint with its UID and resourceVersion as
// preconditions. Records of any other pod stay, whatever UID the endpoint names.
//
// An endpoint of this node that no pod took over before is deleted. Any other (of
// another node, or with previous UIDs) is not this ipamd's to delete (the endpoint
// policy refuses it): the pod takes it over with no records instead.
func (s *Service) discard(ctx context.Context, pod *corev1.Pod, ep *v2beta1.SpiderEndpoint) (*v2beta1.SpiderEndpoint, error) {
	var extra []string
	for _, d := range ep.Status.Current.IPs {
		for _, p := range []*string{d.IPv4Pool, d.IPv6Pool} {
			if p != nil {
				extra = append(extra, *p)
			}
		}
	}
	if uid := ep.Status.Current.UID; uid != "" {
		released, err := s.releaseAll(ctx, allocator.Owner{Pod: ep.Namespace + "/" + ep.Name, PodUID: uid}, ep, extra...)
		if err != nil {
			return nil, err
		}
		s.Log.Info("released leftover SpiderEndpoint of another pod UID", "endpoint", ep.Namespace+"/"+ep.Name, "previousUID", uid, "released", released)
	}
	if !endpoint.Deletable(ep, s.Node) {
		return s.rewrite(ctx, pod, ep, nil)
	}
	err := s.endpoints.Delete(ctx, ep)
	switch {
	case apierrors.IsConflict(err):
		return nil, errEndpointMoved
	case err != nil && !apierrors.IsNotFound(err):
		return nil, err
	}
	return nil, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
