package ledger

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// Room says whether an ADD on this node can get an address of the pool now: this
// node's blocks have a free address, another node's block has one, or a block is left
// to claim. It is exact: the cheap answers come first, and only a pool that looks full
// is confirmed by reading the API server (at most once per noneFor).
func (l *Ledger) Room(ctx context.Context, pool string) (bool, error) {
	ps := l.poolState(pool)
	v, err := l.view(ctx, ps)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if v.rng.Total == 0 {
		return false, nil
	}
	if c, ok := l.pick(ctx, ps, v, anywhere); ok {
		c.q.unreserve()
		return true, nil
	}
	if err := l.refreshBorrowable(ctx, ps); err != nil {
		return false, err
	}
	if c, ok := l.pick(ctx, ps, v, anywhere); ok {
		c.q.unreserve()
		return true, nil
	}
	return l.unclaimed(ctx, ps, v)
}

// unclaimed reports whether a block of the pool is left to claim.
func (l *Ledger) unclaimed(ctx context.Context, ps *poolState, v *poolView) (bool, error) {
	ps.claim.Lock()
	defer ps.claim.Unlock()
	ps.mu.Lock()
	cs := &ps.claims
	if cs.key != v.key {
		*cs = claimState{key: v.key, taken: map[uint64]bool{}, claimed: cs.claimed}
	}
	ps.mu.Unlock()
	if cs.recentlyNone() {
		return false, nil
	}
	if err := l.listClaimed(ctx, ps, v, cs); err != nil {
		return false, err
	}
	if n := v.layout.Count(); uint64(len(cs.taken)) < n {
		return true, nil
	}
	cs.markNone()
	return false, nil
}

// PoolRecords returns one pool's records as the pool's own status once held them:
// address → holder, from its blocks and from its status when it has not been migrated
// yet. r is a client or a cache with Indexes registered.
func PoolRecords(ctx context.Context, r client.Reader, pool string) (v2beta1.PoolIPAllocations, error) {
	var blocks ipamv1alpha1.IPBlockList
	if err := r.List(ctx, &blocks, client.MatchingFields{IndexBlockPool: pool}); err != nil {
		return nil, fmt.Errorf("list the blocks of pool %s: %w", pool, err)
	}
	out := v2beta1.PoolIPAllocations{}
	for _, b := range blocks.Items {
		for key, rec := range b.Status.Allocations {
			out[key] = rec
		}
	}
	p := &v2beta1.SpiderIPPool{}
	if err := r.Get(ctx, client.ObjectKey{Name: pool}, p); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	for key, rec := range p.Status.OlderLayout {
		out[key] = rec
	}
	return out, nil
}

// PoolsHolding returns the pools in whose blocks of this node pod UID uid holds an
// address, by the cache and by what this process wrote since.
func (l *Ledger) PoolsHolding(ctx context.Context, uid string) ([]string, error) {
	var list ipamv1alpha1.IPBlockList
	if err := l.opts.Cache.List(ctx, &list, client.MatchingFields{IndexBlockPodUID: uid}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []string
	for _, b := range list.Items {
		if !slices.Contains(out, b.Spec.Pool) {
			out = append(out, b.Spec.Pool)
		}
	}
	// The cache's copies, listed above, are the newest except for the blocks this
	// process wrote since.
	for _, q := range l.ahead.of("") {
		if slices.Contains(out, q.pool) {
			continue
		}
		b := l.ownCopy(ctx, q)
		if b == nil {
			continue
		}
		for _, rec := range b.Status.Allocations {
			if rec.PodUID == uid {
				out = append(out, q.pool)
				break
			}
		}
	}
	return out, nil
}
