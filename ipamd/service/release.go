package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/eligibility"
	"github.com/nicpool/nicpool/crds/ipranges"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/ipamd/metrics"
	"github.com/nicpool/nicpool/ipamd/selection"
)

// Release serves CNI DEL for one (pod, interface). It is idempotent: an unknown pod or
// container, or addresses already released, succeed with nothing released. A
// StatefulSet pod whose ordinal will come back keeps its addresses and endpoint.
func (s *Service) Release(ctx context.Context, req *api.ReleaseRequest) (resp *api.ReleaseResponse, err error) {
	start := time.Now()
	outcome := metrics.OutcomeError
	defer func() {
		metrics.Releases.WithLabelValues(outcome).Inc()
		metrics.ReleaseDuration.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	}()
	resp = &api.ReleaseResponse{}
	if req.Interface == "" || req.Pod.Namespace == "" || req.Pod.Name == "" {
		outcome = metrics.OutcomeNothing
		return resp, nil // nothing can be held under an empty name
	}
	key := types.NamespacedName{Namespace: req.Pod.Namespace, Name: req.Pod.Name}
	t, err := s.begin(ctx, key.String())
	if err != nil {
		outcome = metrics.OutcomeBusy
		return nil, err
	}
	defer t.done()
	ctx = t.ctx
	pod, err := s.pod(ctx, req.Pod)
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "read pod "+key.String(), err)
	}
	ep, err := s.endpoint(ctx, key)
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "read SpiderEndpoint "+key.String(), err)
	}
	uid := req.Pod.UID
	if uid == "" && pod != nil {
		uid = string(pod.UID)
	}
	if uid == "" && ep != nil {
		uid = ep.Status.Current.UID
	}
	if uid == "" {
		outcome = metrics.OutcomeNothing
		return resp, nil
	}
	log := s.Log.WithValues("pod", key.String(), "podUID", uid, "interface", req.Interface, "containerID", req.ContainerID)
	ours := ep != nil && ep.Status.Current.UID == uid
	if ours && req.ContainerID != "" {
		if att, ok := attachments(ep)[req.Interface]; ok && att.ContainerID != "" && att.ContainerID != req.ContainerID {
			// A DEL for a container the interface has since moved away from.
			log.Info("DEL for an older container: the interface belongs to another one now", "current", att.ContainerID)
			outcome = metrics.OutcomeNothing
			return resp, nil
		}
	}
	owner := allocator.Owner{Pod: key.String(), PodUID: uid, Interface: req.Interface}
	extra := recordedPools(ep, uid, req.Interface)
	// The ordinal's next incarnation (maybe already created under the same name, with
	// another UID) takes these addresses over: keep them for it.
	if s.statefulSetWillReturn(ctx, key.Namespace, key.Name, pod, ep) {
		hs, err := s.heldBy(ctx, owner, ep, extra...)
		if err != nil {
			return nil, cniError(api.CodeTryAgainLater, "read what the interface holds", err)
		}
		for _, h := range hs {
			resp.Kept = append(resp.Kept, h.addr.String())
		}
		log.Info("kept addresses of a StatefulSet pod that will come back", "kept", resp.Kept)
		outcome = metrics.OutcomeKept
		return resp, nil
	}
	released, err := s.releaseAll(ctx, owner, ep, extra...)
	resp.Released = released
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "release", err)
	}
	if ours {
		if err := s.forget(ctx, key, uid, req.Interface); err != nil {
			return nil, cniError(api.CodeTryAgainLater, "remove interface "+req.Interface+" from SpiderEndpoint "+key.String(), err)
		}
	}
	outcome = metrics.OutcomeReleased
	if len(released) == 0 {
		outcome = metrics.OutcomeNothing
	}
	log.Info("released", "released", released)
	return resp, nil
}

// recordedPools lists the pools ep records for an interface of pod UID uid: where the
// interface's addresses are, even before the cache's pool index shows them.
func recordedPools(ep *v2beta1.SpiderEndpoint, uid, iface string) []string {
	var out []string
	if ep == nil || ep.Status.Current.UID != uid {
		return nil
	}
	for _, d := range ep.Status.Current.IPs {
		if d.Interface != iface {
			continue
		}
		for _, p := range []*string{d.IPv4Pool, d.IPv6Pool} {
			if p != nil {
				out = append(out, *p)
			}
		}
	}
	return out
}

// forget removes an interface from the pod's endpoint, deleting the endpoint when it
// was the last one. Pools are released before: a crash in between leaves an endpoint
// entry without pool records, which the next ADD replaces and the next DEL removes.
func (s *Service) forget(ctx context.Context, key types.NamespacedName, uid, iface string) error {
	for range maxDecisions {
		ep, err := s.endpoint(ctx, key)
		if err != nil {
			return err
		}
		if ep == nil || ep.Status.Current.UID != uid {
			return nil
		}
		upd := ep.DeepCopy()
		ips := upd.Status.Current.IPs[:0]
		for _, d := range upd.Status.Current.IPs {
			if d.Interface != iface {
				ips = append(ips, d)
			}
		}
		upd.Status.Current.IPs = ips
		atts := attachments(upd)
		delete(atts, iface)
		setAttachments(upd, atts)
		if len(ips) == 0 {
			uidp, rv := upd.UID, upd.ResourceVersion
			err = s.Client.Delete(ctx, upd, client.Preconditions{UID: &uidp, ResourceVersion: &rv})
			metrics.EndpointWrites.WithLabelValues("delete", result(err)).Inc()
			if err == nil || apierrors.IsNotFound(err) {
				s.removed(key, uidp)
				return nil
			}
		} else {
			if equalEndpoint(ep, upd) {
				return nil
			}
			err = s.Client.Update(ctx, upd)
			metrics.EndpointWrites.WithLabelValues("update", result(err)).Inc()
			if err == nil {
				s.remember(key, upd)
				return nil
			}
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
		if _, err := s.freshEndpoint(ctx, key); err != nil {
			return err
		}
	}
	return errEndpointMoved
}

// Check serves CNI CHECK: the addresses the (pod, interface) holds now.
func (s *Service) Check(ctx context.Context, req *api.CheckRequest) (*api.CheckResponse, error) {
	pod, err := s.pod(ctx, req.Pod)
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "read pod", err)
	}
	uid := req.Pod.UID
	if uid == "" && pod != nil {
		uid = string(pod.UID)
	}
	if uid == "" {
		return nil, cniError(api.CodeUnknownContainer, fmt.Sprintf("pod %s/%s is unknown", req.Pod.Namespace, req.Pod.Name), nil)
	}
	key := types.NamespacedName{Namespace: req.Pod.Namespace, Name: req.Pod.Name}
	ep, err := s.endpoint(ctx, key)
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "read SpiderEndpoint "+key.String(), err)
	}
	resp := &api.CheckResponse{}
	// The endpoint this process wrote names the pools at once; the cache's pool index
	// may not have caught up with the ADD yet.
	hs, err := s.heldBy(ctx, allocator.Owner{Pod: key.String(), PodUID: uid, Interface: req.Interface}, ep, recordedPools(ep, uid, req.Interface)...)
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "read what the interface holds", err)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].addr.Less(hs[j].addr) })
	for _, h := range hs {
		subnet, _ := netip.ParsePrefix(h.pool.Spec.Subnet)
		network, _ := networkOf(h.pool)
		c := api.IPConfig{Address: ipranges.CIDR(h.addr, subnet), Pool: h.pool.Name, Vlan: h.pool.Spec.Vlan, Gateway: gatewayString(network)}
		resp.IPs = append(resp.IPs, c)
	}
	return resp, nil
}

// GC serves CNI GC: every interface of an endpoint on this node, attached through the
// request's network, whose attachment is not among the valid ones is released like a
// DEL (so a StatefulSet pod that will come back keeps its addresses).
func (s *Service) GC(ctx context.Context, req *api.GCRequest) (*api.GCResponse, error) {
	valid := map[api.Attachment]bool{}
	for _, a := range req.ValidAttachments {
		valid[a] = true
	}
	var list v2beta1.SpiderEndpointList
	if err := s.Cache.List(ctx, &list, client.MatchingFields{IndexEndpointNode: s.Node}); err != nil {
		return nil, cniError(api.CodeTryAgainLater, "list endpoints", err)
	}
	resp := &api.GCResponse{}
	var errs []error
	for _, ep := range list.Items {
		for iface, att := range attachments(&ep) {
			if att.Network != req.Network.Name || valid[api.Attachment{ContainerID: att.ContainerID, Interface: iface}] {
				continue
			}
			r, err := s.Release(ctx, &api.ReleaseRequest{
				Attachment: api.Attachment{ContainerID: att.ContainerID, Interface: iface},
				Pod:        api.Pod{Namespace: ep.Namespace, Name: ep.Name, UID: ep.Status.Current.UID},
				Network:    req.Network,
			})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			resp.Released = append(resp.Released, r.Released...)
		}
	}
	if len(errs) > 0 {
		return resp, cniError(api.CodeTryAgainLater, "garbage collection", errors.Join(errs...))
	}
	return resp, nil
}

// Status serves CNI STATUS: ready when at least one pool the network can use on this
// node has a free address. Those pools are the network's default pools, else the
// cluster's default pools, else every pool this node may use.
func (s *Service) Status(ctx context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	pools, err := s.pools(ctx)
	if err != nil {
		return nil, cniError(api.CodeTryAgainLater, "list pools", err)
	}
	byName := map[string]*v2beta1.SpiderIPPool{}
	for i := range pools {
		byName[pools[i].Name] = &pools[i]
	}
	var names []string
	names = append(names, req.Network.DefaultIPv4Pools...)
	names = append(names, req.Network.DefaultIPv6Pools...)
	if len(names) == 0 {
		c, _ := selection.Choose(&corev1.Pod{}, nil, "eth0", api.NetworkConfig{}, pools)
		names = append(c.IPv4, c.IPv6...)
	}
	if len(names) == 0 {
		for _, p := range pools {
			names = append(names, p.Name)
		}
		sort.Strings(names)
	}
	reserved, _ := ledger.ReservedSet(ctx, s.Cache)
	resp := &api.StatusResponse{}
	// Only what depends on the node and network: no pod is known here.
	target := eligibility.Subject{Node: s.Node, NodeLabels: nodeLabels(s.node(ctx)), Networks: []string{req.Network.Name}}
	for _, n := range names {
		p := byName[n]
		if p == nil {
			continue
		}
		if why, _ := eligibility.NewPool(p).Excludes(target); why != "" {
			continue
		}
		r, err := allocator.NewRange(p, reserved)
		if err != nil {
			continue
		}
		room, err := s.Ledger.Room(ctx, n)
		if err != nil {
			return nil, cniError(api.CodeTryAgainLater, "look for a free address in pool "+n, err)
		}
		// The allocated count is the pool's as its count owner last wrote it.
		resp.Pools = append(resp.Pools, api.PoolStatus{Name: n, Total: r.Total, Allocated: ptr.Deref(p.Status.AllocatedIPCount, 0)})
		resp.Ready = resp.Ready || room
	}
	if !resp.Ready {
		resp.Message = fmt.Sprintf("no free address in pools %v on node %s", names, s.Node)
	}
	return resp, nil
}
