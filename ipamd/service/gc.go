package service

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/endpoint"
)

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
		for iface, att := range endpoint.Attachments(&ep) {
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
