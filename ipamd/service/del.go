package service

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/ipamd/metrics"
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
	ep, err := s.endpoints.Get(ctx, key)
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
		if att, ok := endpoint.Attachments(ep)[req.Interface]; ok && att.ContainerID != "" && att.ContainerID != req.ContainerID {
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
// was the last one (one taken over is left without records, for the garbage
// collector: see endpoint.Deletable). Pools are released before: a crash in between leaves an endpoint
// entry without pool records, which the next ADD replaces and the next DEL removes.
func (s *Service) forget(ctx context.Context, key types.NamespacedName, uid, iface string) error {
	for range maxDecisions {
		ep, err := s.endpoints.Get(ctx, key)
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
		atts := endpoint.Attachments(upd)
		delete(atts, iface)
		endpoint.SetAttachments(upd, atts)
		if len(ips) == 0 && endpoint.Deletable(upd, s.Node) {
			err = s.endpoints.Delete(ctx, upd)
			if err == nil || apierrors.IsNotFound(err) {
				return nil
			}
		} else {
			if endpoint.Equal(ep, upd) {
				return nil
			}
			err = s.endpoints.Update(ctx, upd)
			if err == nil {
				return nil
			}
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
		if _, err := s.endpoints.Fresh(ctx, key); err != nil {
			return err
		}
	}
	return errEndpointMoved
}
