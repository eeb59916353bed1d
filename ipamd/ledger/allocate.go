package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/block"
)

// maxRounds bounds how often one allocation looks for another block after the one it
// tried filled up under it.
const maxRounds = 64

// Allocation is an address the ledger handed out or found.
type Allocation struct {
	Pool string
	Addr netip.Addr
	// Existing is true when the owner already held the address.
	Existing bool
}

// Allocate gives owner one address of the pool: the one it already holds (in this
// node's blocks of the pool, or at one of hints, the addresses its SpiderEndpoint
// records), else a new one: from this node's blocks first, then from a block it
// claims, and only when every block of the pool is claimed from another node's block.
// It fails with an *allocator.ExhaustedError only when no block has a free address
// and none is left to claim, and with ErrPoolTerminating or ErrPoolDisabled when the
// pool refuses new allocations.
func (l *Ledger) Allocate(ctx context.Context, pool string, owner allocator.Owner, hints ...netip.Addr) (Allocation, error) {
	if l.opts.Node == "" {
		return Allocation{}, ErrNoNode
	}
	ps := l.poolState(pool)
	v, err := l.ready(ctx, ps)
	if err != nil {
		return Allocation{}, err
	}
	held, err := l.held(ctx, ps, v, owner, hints)
	if err != nil {
		return Allocation{}, err
	}
	if len(held) > 0 {
		return Allocation{Pool: pool, Addr: held[0], Existing: true}, nil
	}
	if v.rng.Closed != nil {
		return Allocation{}, v.rng.Closed // before a block is claimed for it
	}
	for range maxRounds {
		c, ok := l.pick(ctx, ps, v, ahead)
		if !ok {
			err := l.claim(ctx, ps, v)
			if err == nil {
				continue
			}
			if !errors.Is(err, errNoUnclaimed) {
				return Allocation{}, err
			}
			c, ok = l.pick(ctx, ps, v, anywhere)
		}
		if !ok {
			if err := l.refreshBorrowable(ctx, ps); err != nil {
				return Allocation{}, err
			}
			if c, ok = l.pick(ctx, ps, v, anywhere); !ok {
				exhausted.WithLabelValues(pool).Inc()
				return Allocation{}, &allocator.ExhaustedError{Pool: pool, Family: v.rng.Family, Total: v.rng.Total, Allocated: v.rng.Total, Reserved: v.rng.Reserved}
			}
		}
		res, err := l.do(ctx, c.q, !c.own, allocator.Op{Kind: allocator.Allocate, Owner: owner})
		c.q.unreserve()
		switch {
		case errors.Is(err, errBlockGone):
			ps.forget(c.q)
			continue
		case err != nil:
			return Allocation{}, err
		case errors.Is(res[0].Err, block.ErrFull):
			continue
		case res[0].Err != nil:
			return Allocation{}, res[0].Err
		}
		if c.own {
			ps.mu.Lock()
			ps.cursor = res[0].Addr
			ps.mu.Unlock()
		} else {
			borrowed.WithLabelValues(pool).Inc()
		}
		return Allocation{Pool: pool, Addr: res[0].Addr, Existing: res[0].Existing}, nil
	}
	return Allocation{}, fmt.Errorf("allocate from pool %s: every block tried filled up under %d attempts; try again", pool, maxRounds)
}

// ready returns the pool's view once its records are all in blocks.
func (l *Ledger) ready(ctx context.Context, ps *poolState) (*poolView, error) {
	v, err := l.view(ctx, ps)
	if err != nil {
		return nil, err
	}
	if len(v.pool.Status.OlderLayout) == 0 {
		return v, nil
	}
	if err := l.migrate(ctx, ps); err != nil {
		return nil, err
	}
	return v, nil
}

func (ps *poolState) remember(q *queue) {
	ps.mu.Lock()
	ps.known[q.name] = q
	ps.mu.Unlock()
}

func (ps *poolState) forget(q *queue) {
	ps.mu.Lock()
	delete(ps.known, q.name)
	ps.mu.Unlock()
}

// candidate is a block an allocation may go to.
type candidate struct {
	q      *queue
	cidr   netip.Prefix
	own    bool
	cached *ipamv1alpha1.IPBlock
}

// Where pick looks for room, in the order Allocate asks.
type reach int

const (
	// ahead: this node's blocks after the address it handed out last, in address
	// order. When they are full the node claims a new block rather than wrap around,
	// so that, like host-local's next-after-last cursor, an address is reused only
	// once every other one has been used.
	ahead reach = iota
	// anywhere: all of this node's blocks from the lowest, then any block of another
	// node that the last refresh found with room, at random.
	anywhere
)

// pick chooses the block for one allocation and reserves room in it.
func (l *Ledger) pick(ctx context.Context, ps *poolState, v *poolView, where reach) (candidate, bool) {
	// The cache's blocks of this node with a free address; the full ones are left out,
	// except those of which this process has a newer copy (below).
	var list ipamv1alpha1.IPBlockList
	_ = l.opts.Cache.List(ctx, &list, client.MatchingFields{IndexBlockRoom: ps.name}, client.UnsafeDisableDeepCopy)
	cached := make(map[string]*ipamv1alpha1.IPBlock, len(list.Items))
	for i := range list.Items {
		if b := &list.Items[i]; b.Spec.Node == l.opts.Node {
			cached[b.Name] = b
		}
	}
	ps.mu.Lock()
	started := ps.cursor.IsValid()
	ps.mu.Unlock()
	if !started {
		last := l.lastHandedOut(ctx, ps.name)
		ps.mu.Lock()
		if !ps.cursor.IsValid() {
			ps.cursor = last
		}
		ps.mu.Unlock()
	}
	ps.mu.Lock()
	cursor := ps.cursor
	if l.opts.Order == allocator.Lowest {
		cursor = netip.Addr{} // every own block, from the lowest
	}
	// Blocks the cache has not heard of yet (just claimed), does not hold (other
	// nodes') or holds as full while this process has a newer copy.
	var extra []*queue
	for name, q := range ps.known {
		if cached[name] == nil {
			extra = append(extra, q)
		}
	}
	ps.mu.Unlock()

	var own, other []candidate
	consider := func(q *queue, c *ipamv1alpha1.IPBlock) {
		b := q.best(c)
		if b == nil || b.Status.Free <= 0 {
			return
		}
		cand := candidate{q: q, cidr: q.cidr, own: b.Spec.Node == l.opts.Node, cached: c}
		switch {
		case cand.own && where == ahead && cursor.IsValid() && cand.cidr.Contains(cursor):
			if freeAfter(v, b, cursor) {
				own = append(own, cand)
			}
		case cand.own && (where == anywhere || !cursor.IsValid() || cursor.Less(cand.cidr.Addr())):
			own = append(own, cand)
		case !cand.own && where == anywhere:
			other = append(other, cand)
		}
	}
	for name, c := range cached {
		consider(l.queue(ps.name, name, cidrOf(c)), c)
	}
	for _, q := range extra {
		if !q.hasCopy() {
			continue // the cache's copy is the newest, and it has no room
		}
		// The cache's copy (full, or none yet) decides whether this process's is newer.
		c, _ := l.cached(ctx, q)
		if c != nil && c.Spec.Node != l.opts.Node {
			c = nil
		}
		consider(q, c)
	}
	sort.Slice(own, func(i, j int) bool { return own[i].cidr.Addr().Less(own[j].cidr.Addr()) })
	// Other nodes' blocks in an order of this node's own: its borrowings in flight go to
	// the same block while it has room and share that block's writes, and other
	// borrowers, each in an order of its own, mostly go to other blocks.
	rank := make(map[*queue]uint64, len(other))
	for _, c := range other {
		rank[c.q] = borrowRank(l.opts.Node, c.q.name)
	}
	sort.Slice(other, func(i, j int) bool { return rank[other[i].q] < rank[other[j].q] })
	for _, c := range append(own, other...) {
		if c.q.reserve(c.cached) {
			ps.remember(c.q)
			return c, true
		}
	}
	return candidate{}, false
}

// borrowRank is where another node's block comes in node's order of borrowing.
func borrowRank(node, blockName string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(node))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(blockName))
	return h.Sum64()
}

// lastHandedOut is where a restarted process continues: the highest address its
// blocks of the pool handed out last.
func (l *Ledger) lastHandedOut(ctx context.Context, pool string) netip.Addr {
	var list ipamv1alpha1.IPBlockList
	_ = l.opts.Cache.List(ctx, &list, client.MatchingFields{IndexBlockPool: pool}, client.UnsafeDisableDeepCopy)
	var last netip.Addr
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.Node != l.opts.Node {
			continue
		}
		if a, err := netip.ParseAddr(b.Status.LastAllocated); err == nil && last.Less(a) {
			last = a
		}
	}
	return last
}

// freeAfter reports whether the block has a free address after a.
func freeAfter(v *poolView, b *ipamv1alpha1.IPBlock, a netip.Addr) bool {
	for _, x := range block.Addresses(v.rng, cidrOf(b)) {
		if _, taken := b.Status.Allocations[x.String()]; !taken && a.Less(x) {
			return true
		}
	}
	return false
}

// best returns the newer of the cached copy and the one this process last wrote or
// read. Call with q.mu unlocked.
func (q *queue) best(cached *ipamv1alpha1.IPBlock) *ipamv1alpha1.IPBlock {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bestLocked(cached)
}

func (q *queue) bestLocked(cached *ipamv1alpha1.IPBlock) *ipamv1alpha1.IPBlock {
	if cached != nil && (q.latest == nil || !newer(q.latest.ResourceVersion, cached.ResourceVersion)) {
		q.setLatestLocked(nil) // the cache has caught up: it is the newest copy from now on
		return cached
	}
	return q.latest
}

// hasCopy reports whether this process holds a copy of the block that may be newer
// than its cache's.
func (q *queue) hasCopy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.latest != nil
}

// unreserve gives back what reserve took.
func (q *queue) unreserve() {
	q.mu.Lock()
	q.reserved--
	q.mu.Unlock()
}

// reserve takes room for one allocation if the newest known copy has it.
func (q *queue) reserve(cached *ipamv1alpha1.IPBlock) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.bestLocked(cached)
	if b == nil || b.Status.Free <= q.reserved {
		return false
	}
	q.reserved++
	return true
}
