package inspect

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// ErrNotAllocated says no record holds an address.
var ErrNotAllocated = errors.New("not allocated")

// Holding is one allocated address and the pod interface that holds it.
type Holding struct {
	Pool      string `json:"pool"`
	Address   string `json:"address"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUID"`
	Interface string `json:"interface"`
	Holder    Holder `json:"holder"`
	// Block is the IPBlock recording the address; empty for a record in the pool's
	// status (not migrated to blocks yet).
	Block string `json:"block,omitempty"`
	// BlockNode is the node that claimed the block.
	BlockNode string `json:"blockNode,omitempty"`
	// Endpoint is empty when the holder's SpiderEndpoint records the same address,
	// pool, interface and pod UID, else what differs.
	Endpoint string `json:"endpoint,omitempty"`
}

// Who returns the records of an address: one, unless state is corrupt. It fails with
// ErrNotAllocated, naming the pools whose subnet contains the address, when there is
// none.
func Who(ctx context.Context, r client.Reader, addr netip.Addr, now time.Time) ([]Holding, error) {
	recs, _, err := ledger.List(ctx, r)
	if err != nil {
		return nil, err
	}
	var out []Holding
	for _, rec := range recs {
		if rec.Addr != addr {
			continue
		}
		h, err := holding(ctx, r, rec, now)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	if len(out) > 0 {
		return out, nil
	}
	var pools v2beta1.SpiderIPPoolList
	if err := r.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("list SpiderIPPools: %w", err)
	}
	var in []string
	for _, p := range pools.Items {
		if s, err := netip.ParsePrefix(p.Spec.Subnet); err == nil && s.Contains(addr) {
			in = append(in, p.Name)
		}
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("%s: %w, and no pool's subnet contains it", addr, ErrNotAllocated)
	}
	return nil, fmt.Errorf("%s: %w (in the subnet of %s %s)", addr, ErrNotAllocated, map[bool]string{true: "pool", false: "pools"}[len(in) == 1], strings.Join(in, ", "))
}

func holding(ctx context.Context, r client.Reader, rec ledger.Record, now time.Time) (Holding, error) {
	holder, _, err := HolderOf(ctx, r, rec.Holder, now)
	if err != nil {
		return Holding{}, err
	}
	ep, err := endpointOf(ctx, r, rec.Holder.Pod)
	if err != nil {
		return Holding{}, err
	}
	if holder.Node == "" && ep != nil {
		holder.Node = ep.Status.Current.Node
	}
	return Holding{
		Pool: rec.Pool, Address: rec.Addr.String(),
		Pod: rec.Holder.Pod, PodUID: rec.Holder.PodUID, Interface: rec.Holder.Interface,
		Holder: holder, Block: rec.Block, BlockNode: rec.Node,
		Endpoint: Disagreement(ep, rec),
	}, nil
}
