package service

import (
	"context"
	"errors"
	"fmt"
	"sort"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/coordinator"
)

// ErrNoServiceCIDRs says the cluster serves no networking.k8s.io/v1 ServiceCIDR, where
// ipamd reads the Service CIDRs coordinator routes through the node.
var ErrNoServiceCIDRs = errors.New("the cluster serves no networking.k8s.io/v1 ServiceCIDR (Kubernetes 1.33 and later), where nicpool reads the Service CIDRs coordinator routes through the node")

// ErrNoSpiderCoordinatorCRD says the API server serves no SpiderCoordinator.
var ErrNoSpiderCoordinatorCRD = errors.New(coordinator.NoCRD + ": install nicpool's (the manifests and the chart have it)")

// CoordinatorConfig answers spiderpool's coordinator plugin for a pod of this node:
// the first SpiderCoordinator by name, the cluster's Service CIDRs and the pod's
// default-route-nic annotation (ipamd/coordinator). Everything is read from the
// caches; a pod missing there is read from the API server, and a pod that is gone
// (a DEL after its deletion) is answered without its annotation.
func (s *Service) CoordinatorConfig(ctx context.Context, req *coordinator.Request) (*coordinator.Config, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if !s.SpiderCoordinators {
		return nil, ErrNoSpiderCoordinatorCRD
	}
	var coords v2beta1.SpiderCoordinatorList
	if err := s.Cache.List(ctx, &coords); err != nil {
		return nil, fmt.Errorf("list spidercoordinators: %w", err)
	}
	c := coordinator.Pick(coords.Items)
	if c == nil {
		return coordinator.Compute(nil, nil, nil)
	}
	if !s.ServiceCIDRs {
		return nil, ErrNoServiceCIDRs
	}
	var list networkingv1.ServiceCIDRList
	if err := s.Cache.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list servicecidrs: %w", err)
	}
	items := list.Items
	// Oldest first, as spiderpool orders them, so that the answer is stable.
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return items[i].Name < items[j].Name
	})
	var cidrs []string
	for _, sc := range items {
		if sc.DeletionTimestamp == nil {
			cidrs = append(cidrs, sc.Spec.CIDRs...)
		}
	}
	pod, err := s.pod(ctx, api.Pod{Namespace: req.PodNamespace, Name: req.PodName})
	if err != nil {
		return nil, fmt.Errorf("read pod %s/%s: %w", req.PodNamespace, req.PodName, err)
	}
	if pod != nil && pod.Spec.NodeName != s.Node {
		return nil, fmt.Errorf("pod %s/%s is not on node %s: ipamd answers coordinator for the pods of its own node", req.PodNamespace, req.PodName, s.Node)
	}
	return coordinator.Compute(c, cidrs, pod)
}
