package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/allocator"
)

// Held returns the addresses of the pool that owner holds, lowest first: in this
// node's blocks of the pool, and at hints (addresses its SpiderEndpoint records, which
// may be in other nodes' blocks: those are read from the API server).
func (l *Ledger) Held(ctx context.Context, pool string, owner allocator.Owner, hints ...netip.Addr) ([]netip.Addr, error) {
	ps := l.poolState(pool)
	v, err := l.ready(ctx, ps)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return l.held(ctx, ps, v, owner, hints)
}

func (l *Ledger) held(ctx context.Context, ps *poolState, v *poolView, owner allocator.Owner, hints []netip.Addr) ([]netip.Addr, error) {
	blocks, err := l.blocksOf(ctx, ps, v, owner, hints)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, b := range blocks {
		for key, rec := range b.Status.Allocations {
			if !owner.Holds(rec) {
				continue
			}
			if a, err := netip.ParseAddr(key); err == nil && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out, nil
}

// blocksOf returns the newest known copies of the blocks of the pool that may hold
// records of owner: this node's blocks with records of its pod UID, and the blocks of
// hints.
func (l *Ledger) blocksOf(ctx context.Context, ps *poolState, v *poolView, owner allocator.Owner, hints []netip.Addr) ([]*ipamv1alpha1.IPBlock, error) {
	byName := map[string]*ipamv1alpha1.IPBlock{}
	var list ipamv1alpha1.IPBlockList
	if err := l.opts.Cache.List(ctx, &list, client.MatchingFields{IndexBlockPodUID: owner.PodUID}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if b := &list.Items[i]; b.Spec.Pool == ps.name {
			byName[b.Name] = l.queue(ps.name, b.Name, cidrOf(b)).best(b)
		}
	}
	// Blocks this process wrote since the cache last heard of them: any other block of
	// this node holding the owner's records is in the index.
	for _, q := range l.ahead.of(ps.name) {
		if byName[q.name] != nil {
			continue
		}
		if b := l.ownCopy(ctx, q); b != nil {
			byName[q.name] = b
		}
	}
	for _, a := range hints {
		if !v.rng.Subnet.Contains(a) {
			continue
		}
		blk, name := blockOf(ps.name, v.rng.Subnet, a)
		if _, ok := byName[name]; ok {
			continue
		}
		q := l.queue(ps.name, name, blk)
		var b *ipamv1alpha1.IPBlock
		cached := &ipamv1alpha1.IPBlock{}
		if err := l.opts.Cache.Get(ctx, client.ObjectKey{Name: name}, cached, client.UnsafeDisableDeepCopy); err == nil && cached.Spec.Node == l.opts.Node {
			b = q.best(cached)
		} else {
			// Another node's block: what it holds now, not what this process saw once.
			fresh, err := l.read(ctx, q)
			if errors.Is(err, errBlockGone) {
				continue
			}
			if err != nil {
				return nil, err
			}
			b = fresh
		}
		byName[name] = b
	}
	out := make([]*ipamv1alpha1.IPBlock, 0, len(byName))
	for _, b := range byName {
		out = append(out, b)
	}
	return out, nil
}

// ownCopy returns the newest copy of one of this node's blocks: the one this process
// wrote when the cache has not caught up with it, else the cached one; nil when the
// block is not this node's or this process knows no copy.
func (l *Ledger) ownCopy(ctx context.Context, q *queue) *ipamv1alpha1.IPBlock {
	cached, _ := l.cached(ctx, q)
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.bestLocked(cached)
	if b == nil || b.Spec.Node != l.opts.Node {
		if b != nil && cached == nil {
			// Another node's block, which this node's cache never holds: nothing of
			// it is this node's own until this process writes it again.
			q.ahead.mark(q, false)
		}
		return nil
	}
	return b
}

// Release removes what owner holds in the pool: the addresses in addrs, wherever their
// blocks are, or, when addrs is empty, every record of owner (of every interface when
// owner.Interface is empty) in this node's blocks of the pool. Only records still held
// by owner (allocator.Owner.Holds) are removed, so a release racing with a reallocation never
// frees an address someone else holds now. It returns what was removed; a pool or block
// that no longer exists holds nothing.
func (l *Ledger) Release(ctx context.Context, pool string, owner allocator.Owner, addrs ...netip.Addr) ([]netip.Addr, error) {
	ps := l.poolState(pool)
	v, err := l.ready(ctx, ps)
	var subnet netip.Prefix
	switch {
	case apierrors.IsNotFound(err):
		// The pool is gone; its blocks, if any are left, are still written down.
	case err != nil:
		return nil, err
	default:
		subnet = v.rng.Subnet
	}
	targets := map[string][]netip.Addr{}
	cidrs := map[string]netip.Prefix{}
	if len(addrs) > 0 {
		for _, a := range addrs {
			blk, name := blockOf(pool, subnet, a)
			targets[name], cidrs[name] = append(targets[name], a), blk
		}
	} else if v != nil {
		blocks, err := l.blocksOf(ctx, ps, v, owner, nil)
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			targets[b.Name], cidrs[b.Name] = nil, cidrOf(b)
		}
	}
	var ops []blockOps
	for name, list := range targets {
		ops = append(ops, blockOps{q: l.queue(pool, name, cidrs[name]), ops: []allocator.Op{{Kind: allocator.Release, Owner: owner, Addrs: list}}})
	}
	results, err := l.doAll(ctx, ops)
	var out []netip.Addr
	for _, res := range results {
		for _, r := range res {
			out = append(out, r.Changed...)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out, err
}

// Transfer moves addrs of the pool from the pod UID fromUID to owner (a StatefulSet
// pod taking over its predecessor's addresses): each record moves only while it is
// held by fromUID under owner's pod name and interface. Records already held by owner
// count as moved. An address held otherwise fails with allocator.ErrNotHeld.
func (l *Ledger) Transfer(ctx context.Context, pool string, owner allocator.Owner, fromUID string, addrs ...netip.Addr) error {
	ps := l.poolState(pool)
	v, err := l.ready(ctx, ps)
	if err != nil {
		return err
	}
	byBlock := map[string][]netip.Addr{}
	cidrs := map[string]netip.Prefix{}
	for _, a := range addrs {
		blk, name := blockOf(pool, v.rng.Subnet, a)
		byBlock[name], cidrs[name] = append(byBlock[name], a), blk
	}
	var ops []blockOps
	for name, list := range byBlock {
		ops = append(ops, blockOps{q: l.queue(pool, name, cidrs[name]), ops: []allocator.Op{{Kind: allocator.Transfer, Owner: owner, FromUID: fromUID, Addrs: list}}})
	}
	results, err := l.doAll(ctx, ops)
	if err != nil {
		return err
	}
	for i, res := range results {
		if res == nil {
			// The block is gone: nothing there is held by anyone.
			return fmt.Errorf("transfer %v of pool %s from pod UID %s: %w", ops[i].ops[0].Addrs, pool, fromUID, allocator.ErrNotHeld)
		}
		if res[0].Err != nil {
			return res[0].Err
		}
	}
	return nil
}

// Record is one allocated address: its pool, its holder, and where it is written.
type Record struct {
	Pool   string
	Addr   netip.Addr
	Holder v2beta1.PoolIPAllocation
	// Block is the IPBlock holding the record; empty for a record still in the pool's
	// status (the older layout, not migrated yet).
	Block string
	// Node is the node the block belongs to.
	Node string
}

// ReleaseRecords removes each record while it still names the same holder (the
// garbage collector's decisions, taken on a snapshot), batching the records of one
// block into one write. It returns the records it removed.
func (l *Ledger) ReleaseRecords(ctx context.Context, recs []Record) ([]Record, error) {
	type key struct{ pool, name string }
	groups := map[key][]Record{}
	cidrs := map[key]netip.Prefix{}
	for _, r := range recs {
		var subnet netip.Prefix
		if v, err := l.ready(ctx, l.poolState(r.Pool)); err == nil {
			subnet = v.rng.Subnet
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
		blk, name := blockOf(r.Pool, subnet, r.Addr)
		k := key{r.Pool, name}
		groups[k], cidrs[k] = append(groups[k], r), blk
	}
	var ops []blockOps
	var order [][]Record
	for k, rs := range groups {
		bo := blockOps{q: l.queue(k.pool, k.name, cidrs[k])}
		for _, r := range rs {
			owner := allocator.Owner{Pod: r.Holder.Pod, PodUID: r.Holder.PodUID, Interface: r.Holder.Interface}
			bo.ops = append(bo.ops, allocator.Op{Kind: allocator.Release, Owner: owner, Addrs: []netip.Addr{r.Addr}})
		}
		ops, order = append(ops, bo), append(order, rs)
	}
	results, err := l.doAll(ctx, ops)
	var out []Record
	for i, res := range results {
		for j, r := range res {
			if len(r.Changed) > 0 {
				out = append(out, order[i][j])
			}
		}
	}
	return out, err
}

// blockOps is one request to one block.
type blockOps struct {
	q   *queue
	ops []allocator.Op
}

// doAll sends each request to its block, all at once, and returns the results in the
// same order; a block that no longer exists answers nil (it holds nothing).
func (l *Ledger) doAll(ctx context.Context, reqs []blockOps) ([][]allocator.Result, error) {
	results := make([][]allocator.Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, r := range reqs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := l.do(ctx, r.q, false, r.ops...)
			if errors.Is(err, errBlockGone) {
				return
			}
			results[i], errs[i] = res, err
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}
