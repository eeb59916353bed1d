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

// Malformed is one thing List found wrong with how records are written, with the
// object at fault and, when it concerns one, the pool and address.
type Malformed struct {
	// Block is the IPBlock at fault; empty for a pool's status.
	Block string
	// Pool is the pool of the records concerned, when known.
	Pool string
	// Addr is the address concerned; invalid when the problem concerns none.
	Addr    netip.Addr
	Message string
}

func (m *Malformed) Error() string { return m.Message }

func malformed(block, pool string, addr netip.Addr, format string, args ...any) error {
	return &Malformed{Block: block, Pool: pool, Addr: addr, Message: fmt.Sprintf(format, args...)}
}

// List returns every allocation record of the cluster, sorted by pool and address:
// the records of every IPBlock, and those of pools not migrated yet (status.allocatedIPs).
// It is the one place that knows where records are; the invariant checker, the garbage
// collector and kubectl-nicpool read through it. What is wrong with how records are
// written (a key that is not an address, a record outside its block, a block whose
// counts disagree with its records, an address in two places) is reported in the
// second result, for checkers (each a *Malformed); such records are left out or listed
// once.
func List(ctx context.Context, r client.Reader) ([]Record, []error, error) {
	// Read only: from a cache, the cached objects are read in place, not copied.
	var blocks ipamv1alpha1.IPBlockList
	if err := r.List(ctx, &blocks, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list IPBlocks: %w", err)
	}
	var pools v2beta1.SpiderIPPoolList
	if err := r.List(ctx, &pools, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("list SpiderIPPools: %w", err)
	}
	// Sized once: a garbage collection pass lists every record of the cluster.
	n := 0
	for i := range blocks.Items {
		n += len(blocks.Items[i].Status.Allocations)
	}
	for i := range pools.Items {
		n += len(pools.Items[i].Status.OlderLayout)
	}
	out := make([]Record, 0, n)
	var bad []error
	type poolAddr struct {
		pool string
		addr netip.Addr
	}
	where := make(map[poolAddr]string, n) // → the object that records it
	add := func(r Record, in string) {
		k := poolAddr{r.Pool, r.Addr}
		if prev, dup := where[k]; dup {
			bad = append(bad, malformed(r.Block, r.Pool, r.Addr, "I3: %s of pool %s is recorded in %s and in %s", r.Addr, r.Pool, prev, in))
			return
		}
		where[k] = in
		out = append(out, r)
	}
	for _, b := range blocks.Items {
		cidr, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			bad = append(bad, malformed(b.Name, b.Spec.Pool, netip.Addr{}, "IPBlock %s: spec.cidr %q is not a CIDR", b.Name, b.Spec.CIDR))
		}
		if b.Status.Allocated != int64(len(b.Status.Allocations)) {
			bad = append(bad, malformed(b.Name, b.Spec.Pool, netip.Addr{}, "IPBlock %s: status.allocated is %d but %d addresses are recorded", b.Name, b.Status.Allocated, len(b.Status.Allocations)))
		}
		in := "IPBlock " + b.Name
		for key, rec := range b.Status.Allocations {
			a, err := netip.ParseAddr(key)
			if err != nil {
				bad = append(bad, malformed(b.Name, b.Spec.Pool, netip.Addr{}, "IPBlock %s: record key %q is not an address", b.Name, key))
				continue
			}
			if cidr.IsValid() && !cidr.Contains(a) {
				bad = append(bad, malformed(b.Name, b.Spec.Pool, a, "IPBlock %s: %s is outside the block's %s", b.Name, a, cidr))
			}
			add(Record{Pool: b.Spec.Pool, Addr: a, Holder: rec, Block: b.Name, Node: b.Spec.Node}, in)
		}
	}
	for _, p := range pools.Items {
		in := "the status of pool " + p.Name
		for key, rec := range p.Status.OlderLayout {
			a, err := netip.ParseAddr(key)
			if err != nil {
				bad = append(bad, malformed("", p.Name, netip.Addr{}, "pool %s: record key %q is not an address", p.Name, key))
				continue
			}
			add(Record{Pool: p.Name, Addr: a, Holder: rec}, in)
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
