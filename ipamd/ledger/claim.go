package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/block"
)

// errNoUnclaimed says every block of the pool exists: room is only in other nodes'.
var errNoUnclaimed = errors.New("every block of the pool is claimed")

const (
	// jumpAfter: after this many claims lost in a row the node stops walking its region
	// (it ran into another node's) and tries a random block.
	jumpAfter = 3
	// refreshAfter: after this many lost in a row it lists the pool's blocks.
	refreshAfter = 8
	// maxClaimTries bounds the creates of one claim.
	maxClaimTries = 32
	// enumerateBelow: layouts smaller than this are enumerated after a list, so that a
	// nearly full pool's last unclaimed blocks are found without guessing.
	enumerateBelow = 1 << 20
	// noneFor is how long "every block is claimed" is believed without a new list:
	// blocks are deleted only when empty and their node gone.
	noneFor = 5 * time.Second
)

// claimState is what this process knows of which blocks of a pool exist.
type claimState struct {
	key     string // the pool view this is for: a changed range starts afresh
	taken   map[uint64]bool
	free    []uint64 // after a list of a small layout: the blocks that did not exist
	next    uint64
	started bool
	misses  int
	none    time.Time // when a list last showed every block claimed
	claimed uint64    // claims made so far, to tell waiters to look again
}

// claim creates one new block of the pool for this node. Nodes start at different
// places (a hash of the node name) and walk forward, so each tends to hold a
// contiguous run of blocks; a create that fails with AlreadyExists means another node
// got there first.
func (l *Ledger) claim(ctx context.Context, ps *poolState, v *poolView) error {
	ps.mu.Lock()
	seen := ps.claims.claimed
	ps.mu.Unlock()
	ps.claim.Lock()
	defer ps.claim.Unlock()
	ps.mu.Lock()
	cs := &ps.claims
	if cs.claimed != seen {
		ps.mu.Unlock()
		return nil // another request claimed a block while this one waited: look again
	}
	if cs.key != v.key {
		*cs = claimState{key: v.key, taken: map[uint64]bool{}, claimed: cs.claimed}
	}
	ps.mu.Unlock()
	if cs.recentlyNone() {
		return errNoUnclaimed
	}
	count := v.layout.Count()
	if count == 0 {
		return errNoUnclaimed
	}
	if !cs.started {
		h := fnv.New64a()
		_, _ = h.Write([]byte(l.opts.Node))
		cs.next, cs.started = h.Sum64()%count, true
	}
	serverFailures := 0
	for range maxClaimTries {
		i, ok := cs.candidate(count)
		if !ok || cs.misses >= refreshAfter {
			if err := l.listClaimed(ctx, ps, v, cs); err != nil {
				return err
			}
			if i, ok = cs.candidate(count); !ok {
				cs.markNone()
				return errNoUnclaimed
			}
		}
		b := newBlock(v, v.layout.At(i), l.opts.Node)
		if l.beforeClaim != nil {
			l.beforeClaim(ps.name)
		}
		err := l.opts.Client.Create(ctx, b)
		switch {
		case err == nil:
			cs.taken[i], cs.next, cs.misses = true, i+1, 0
			if err := l.stillOpen(ctx, v); err != nil {
				claims.WithLabelValues(ps.name, "refused").Inc()
				return err
			}
			claims.WithLabelValues(ps.name, "claimed").Inc()
			b.ManagedFields = nil
			q := l.queue(ps.name, b.Name, v.layout.At(i))
			q.offer(b)
			ps.remember(q)
			ps.mu.Lock()
			cs.claimed++
			// The cursor moves to the new block: it is what lies ahead now.
			ps.cursor = v.layout.At(i).Addr().Prev()
			ps.mu.Unlock()
			l.opts.Log.V(1).Info("claimed block", "pool", ps.name, "block", b.Spec.CIDR)
			return nil
		case apierrors.IsAlreadyExists(err):
			claims.WithLabelValues(ps.name, "lost").Inc()
			cs.taken[i] = true
			cs.misses++
			if cs.misses >= jumpAfter {
				cs.next = rand.Uint64N(count)
			}
		default:
			serverFailures++
			pause, ok := serverRetry(err, serverFailures)
			if !ok {
				return fmt.Errorf("claim block %s of pool %s: %w", b.Spec.CIDR, ps.name, err)
			}
			time.Sleep(pause)
		}
	}
	return fmt.Errorf("claim a block of pool %s: %d creates lost to other nodes; try again", ps.name, maxClaimTries)
}

// stillOpen reads the pool from the API server once a block of it was created and
// refuses the block when the pool is being deleted, gone, or another pool of the same
// name: nothing is ever recorded in it. This closes the race with the pool's
// finalizer, which lets a pool go only after a list of its blocks, read from the API
// server after the pool's deletionTimestamp was set, found each empty and deleted it
// under its resourceVersion. A block created before that timestamp was set is in that
// list (the create is followed by this read, which saw no timestamp); one created
// after is refused here. The block itself stays empty: the finalizer or, once the pool
// is gone, the Kubernetes garbage collector deletes it. It reads the pool's metadata
// alone: its status may carry spiderpool's string of up to 512 KiB of records.
func (l *Ledger) stillOpen(ctx context.Context, v *poolView) error {
	p := &metav1.PartialObjectMetadata{}
	p.SetGroupVersionKind(v2beta1.GroupVersion.WithKind("SpiderIPPool"))
	err := l.opts.Fresh.Get(ctx, client.ObjectKeyFromObject(v.pool), p)
	switch {
	case apierrors.IsNotFound(err), err == nil && p.UID != v.pool.UID:
		return fmt.Errorf("allocate from pool %s: it was deleted: %w", v.pool.Name, ErrPoolTerminating)
	case err != nil:
		return fmt.Errorf("read pool %s after claiming a block of it: %w", v.pool.Name, err)
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("allocate from pool %s: %w", v.pool.Name, ErrPoolTerminating)
	}
	return nil
}

// recentlyNone reports whether a list showed every block claimed less than noneFor ago.
func (cs *claimState) recentlyNone() bool {
	return !cs.none.IsZero() && time.Since(cs.none) < noneFor
}

func (cs *claimState) markNone() { cs.none = time.Now() }

// candidate returns the next block to try: from the list of free blocks when a list
// made one, else walking forward from next, else a random one.
func (cs *claimState) candidate(count uint64) (uint64, bool) {
	if cs.free != nil {
		for len(cs.free) > 0 {
			k := rand.IntN(len(cs.free))
			i := cs.free[k]
			cs.free[k] = cs.free[len(cs.free)-1]
			cs.free = cs.free[:len(cs.free)-1]
			if !cs.taken[i] {
				return i, true
			}
		}
		return 0, false
	}
	for range 64 {
		i := cs.next % count
		if !cs.taken[i] {
			return i, true
		}
		cs.next = i + 1
	}
	for range 8 {
		if i := rand.Uint64N(count); !cs.taken[i] {
			return i, true
		}
	}
	return 0, false
}

// listClaimed lists the names of the pool's blocks (metadata only) and records which
// exist; in a small layout it also lists those that do not.
func (l *Ledger) listClaimed(ctx context.Context, ps *poolState, v *poolView, cs *claimState) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(ipamv1alpha1.GroupVersion.WithKind("IPBlockList"))
	if err := l.opts.Fresh.List(ctx, list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, ps.name)}); err != nil {
		return fmt.Errorf("list blocks of pool %s: %w", ps.name, err)
	}
	lists.WithLabelValues(ps.name, "claimed").Inc()
	is4 := v.rng.Subnet.Addr().Is4()
	for _, item := range list.Items {
		a, ok := block.AddrOfName(item.Name, is4)
		if !ok {
			continue
		}
		if i, ok := v.layout.Index(netip.PrefixFrom(a, v.layout.Bits)); ok {
			cs.taken[i] = true
		}
	}
	cs.misses = 0
	count := v.layout.Count()
	if count >= enumerateBelow {
		cs.free = nil
		return nil
	}
	cs.free = make([]uint64, 0, int(count)-min(len(cs.taken), int(count)))
	for i := range count {
		if !cs.taken[i] {
			cs.free = append(cs.free, i)
		}
	}
	return nil
}

// newBlock is a new, empty block of the pool for node.
func newBlock(v *poolView, blk netip.Prefix, node string) *ipamv1alpha1.IPBlock {
	b := &ipamv1alpha1.IPBlock{}
	b.Name = block.Name(v.pool.Name, blk)
	// Deleting the pool deletes its blocks (the pool's finalizer waits until none
	// holds an address).
	b.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v2beta1.GroupVersion.String(), Kind: v2beta1.KindSpiderIPPool,
		Name: v.pool.Name, UID: v.pool.UID, BlockOwnerDeletion: ptr.To(false),
	}}
	b.Spec = ipamv1alpha1.IPBlockSpec{Pool: v.pool.Name, CIDR: blk.String(), Node: node}
	b.Status.Free = int64(len(block.Addresses(v.rng, blk)))
	return b
}

// refreshBorrowable reads the pool's blocks that have room, wherever they are, so that
// pick can choose among them. Concurrent callers share one read.
func (l *Ledger) refreshBorrowable(ctx context.Context, ps *poolState) error {
	ps.mu.Lock()
	seen := ps.borrowed
	ps.mu.Unlock()
	ps.borrow.Lock()
	defer ps.borrow.Unlock()
	ps.mu.Lock()
	again := ps.borrowed != seen
	ps.mu.Unlock()
	if again {
		return nil
	}
	var list ipamv1alpha1.IPBlockList
	sel := fields.AndSelectors(fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, ps.name), fields.OneTermNotEqualSelector(ipamv1alpha1.FieldFree, "0"))
	if err := l.opts.Fresh.List(ctx, &list, client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("list blocks of pool %s with free addresses: %w", ps.name, err)
	}
	lists.WithLabelValues(ps.name, "room").Inc()
	for i := range list.Items {
		b := &list.Items[i]
		b.ManagedFields = nil
		q := l.queue(ps.name, b.Name, cidrOf(b))
		q.offer(b)
		ps.remember(q)
	}
	ps.mu.Lock()
	ps.borrowed++
	ps.mu.Unlock()
	return nil
}
