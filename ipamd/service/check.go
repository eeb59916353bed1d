package service

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nicpool/nicpool/crds/ipranges"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
)

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
	ep, err := s.endpoints.Get(ctx, key)
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
		c := api.IPConfig{Address: ipranges.CIDR(h.addr, subnet), Pool: h.pool.Name, Gateway: gatewayString(network)}
		resp.IPs = append(resp.IPs, c)
	}
	return resp, nil
}
