package service

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/endpoint"
)

// GC serves CNI GC: every interface of an endpoint on this node, attached through the
// request's network, whose attachment (container ID and interface, as the runtime's
// cni.dev/valid-attachments carry them) is not among the valid ones and whose own pod
// is gone or finished is released like a DEL (so a StatefulSet pod that will come back
// keeps its addresses).
//
// The network's name only narrows the search: it is what the CNI configuration calls
// itself, its author's choice, not namespaced, so two tenants' networks may share it,
// and a GC of one lists none of the other's attachments. An attachment of a pod that
// still exists with the endpoint's UID and has not finished is never garbage: its
// addresses belong to the pod (UID and interface), and its next sandbox's ADD is
// answered with them.
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
			live, err := s.podLives(ctx, ep.Namespace, ep.Name, ep.Status.Current.UID)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if live {
				s.Log.V(1).Info("GC keeps an attachment the runtime did not list: its pod is alive", "pod", ep.Namespace+"/"+ep.Name, "interface", iface, "containerID", att.ContainerID)
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

// podLives reports whether the pod namespace/name of UID uid exists and has not
// finished (Succeeded or Failed: its sandbox is gone for good).
// It reads the API server: a cache that has not yet seen the pod's deletion would keep
// garbage, one that has not seen its creation would release a live pod's addresses.
func (s *Service) podLives(ctx context.Context, namespace, name, uid string) (bool, error) {
	pod := &corev1.Pod{}
	err := s.Fresh.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read pod %s/%s: %w", namespace, name, err)
	}
	if uid == "" || string(pod.UID) != uid {
		return false, nil
	}
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed, nil
}
