package ledger

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// List returns every allocation record of the cluster, sorted by pool and address:
// the records of every IPBlock, and those of pools not migrated yet (status.allocatedIPs).
// It is the one place that knows where records are; the invariant checker, the garbage
// collector and kubectl-nicpool read through it. Records whose key is not an address
// are left out and reported in the second result, for checkers.
func List(ctx context.Context, r client.Reader) ([]Record, []error, error) {
	var blocks ipamv1alpha1.IPBlockList
	if err := r.List(ctx, &blocks); err != nil {
		return nil, nil, fmt.Errorf("list IPBlocks: %w", err)
	}
	var pools v2beta1.SpiderIPPoolList
	if err := r.List(ctx, &pools); err != nil {
		return nil, nil, fmt.Errorf("list SpiderIPPools: %w", err)
	}
	var out []Record
	var bad []error
	for _, b := range blocks.Items {
		for key, rec := range b.Status.Allocations {
			a, err := netip.ParseAddr(key)
			if err != nil {
				bad = append(bad, fmt.Errorf("IPBlock %s: record key %q is not an address", b.Name, key))
				continue
			}
			out = append(out, Record{Pool: b.Spec.Pool, Addr: a, Holder: rec, Block: b.Name, Node: b.Spec.Node})
		}
	}
	for _, p := range pools.Items {
		for key, rec := range p.Status.AllocatedIPs {
			a, err := netip.ParseAddr(key)
			if err != nil {
				bad = append(bad, fmt.Errorf("pool %s: record key %q is not an address", p.Name, key))
				continue
			}
			out = append(out, Record{Pool: p.Name, Addr: a, Holder: rec})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pool != out[j].Pool {
			return out[i].Pool < out[j].Pool
		}
		return out[i].Addr.Less(out[j].Addr)
	})
	return out, bad, nil
}
