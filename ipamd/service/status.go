package service

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/eligibility"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/ipamd/selection"
)

// Status serves CNI STATUS: ready when at least one pool the network can use on this
// node has a free address. Those pools are the network's default pools, else the
// cluster's default pools, else every pool this node may use.
func (s *Service) Status(ctx context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	if err := checkNetwork(req.Network); err != nil {
		return nil, err
	}
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
	// Only what depends on the node: no pod is known here, so neither is the
	// NetworkAttachmentDefinition that spec.multusName is judged against.
	target := eligibility.Subject{Node: s.Node, NodeLabels: nodeLabels(s.node(ctx))}
	for _, n := range names {
		p := byName[n]
		if p == nil {
			continue
		}
		if why, _ := eligibility.NewPool(p).Excludes(target); why != "" {
			continue
		}
		if _, err := allocator.NewRange(p, reserved); err != nil {
			continue
		}
		room, err := s.Ledger.Room(ctx, n)
		if err != nil {
			return nil, cniError(api.CodeTryAgainLater, "look for a free address in pool "+n, err)
		}
		resp.Ready = resp.Ready || room
	}
	if !resp.Ready {
		resp.Message = fmt.Sprintf("no free address in pools %v on node %s", names, s.Node)
	}
	return resp, nil
}
