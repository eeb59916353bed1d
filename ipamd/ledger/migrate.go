package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/block"
)

// Migrate moves the records of a pool written in the older layout (the pool's
// status.allocatedIPs) into its blocks, keeping every address with its holder, then
// empties status.allocatedIPs with a compare-and-swap on the pool: a record another
// writer added or changed meanwhile makes it start again, so nothing is lost. It is
// idempotent and safe to run from several processes at once; ipamd runs it before it
// touches a pool that still has such records, the webhook's pool controller for every
// pool. A pool whose cached copy holds no such record costs no read of the API server:
// the cache catching up with one is a pool change that brings the caller back.
func (l *Ledger) Migrate(ctx context.Context, pool string) error {
	cached := &v2beta1.SpiderIPPool{}
	if err := l.opts.Cache.Get(ctx, client.ObjectKey{Name: pool}, cached); err == nil && len(cached.Status.OlderLayout) == 0 {
		return nil
	}
	return l.migrate(ctx, l.poolState(pool))
}

func (l *Ledger) migrate(ctx context.Context, ps *poolState) error {
	ps.migrate.Lock()
	defer ps.migrate.Unlock()
	for attempt := 1; ; attempt++ {
		p := &v2beta1.SpiderIPPool{}
		if err := l.opts.Fresh.Get(ctx, client.ObjectKey{Name: ps.name}, p); err != nil {
			return err
		}
		if len(p.Status.OlderLayout) == 0 {
			return nil
		}
		// The records are of pods on every node: the blocks belong to none.
		// A record of the older layout is the newest word on its address (an older
		// nicpool wrote it there last): it replaces what a first pass wrote.
		if err := l.importRecords(ctx, p, p.Status.OlderLayout, "", false); err != nil {
			return fmt.Errorf("migrate the records of pool %s into blocks: %w", p.Name, err)
		}
		p.Status.AllocatedIPs = nil
		p.ManagedFields = nil
		err := l.opts.Client.Status().Update(ctx, p)
		switch {
		case err == nil:
			l.opts.Log.Info("moved the pool's records into blocks", "pool", p.Name)
			return nil
		case apierrors.IsConflict(err) && attempt < maxAttempts:
			continue // a record changed meanwhile: import what the pool holds now
		default:
			return fmt.Errorf("empty status.allocatedIPs of pool %s after moving its records into blocks: %w", p.Name, err)
		}
	}
}

// HeldError refuses to import a record of an address that a block already records
// for another holder.
type HeldError struct {
	Pool, Address string
	// Holder is who the block records; Wanted who the import would have written.
	Holder, Wanted v2beta1.PoolIPAllocation
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("address %s of pool %s is recorded for pod %s (UID %s, %s), not for pod %s (UID %s, %s): it is left as it is; release it (kubectl nicpool release) if that pod no longer uses it",
		e.Address, e.Pool, e.Holder.Pod, e.Holder.PodUID, e.Holder.Interface, e.Wanted.Pod, e.Wanted.PodUID, e.Wanted.Interface)
}

// Import writes records of the pool into its blocks; blocks that do not exist are
// created for this ledger's node (none for a cluster-level ledger). It is how records
// written elsewhere (another IPAM, test fixtures) enter the ledger, and it is
// idempotent. It never overwrites another holder: when a block records one of the
// addresses for someone else, it writes nothing and returns a *HeldError for each
// such address (a holder that appears while the blocks are written refuses only its
// own block, with a *HeldError too).
func (l *Ledger) Import(ctx context.Context, pool *v2beta1.SpiderIPPool, recs v2beta1.PoolIPAllocations) error {
	if err := l.HeldByOthers(ctx, pool, recs); err != nil {
		return err
	}
	return l.importRecords(ctx, pool, recs, l.opts.Node, true)
}

// HeldByOthers reads, from the API server, the blocks recs would be written into and
// returns a *HeldError for each address they record for another holder.
func (l *Ledger) HeldByOthers(ctx context.Context, pool *v2beta1.SpiderIPPool, recs v2beta1.PoolIPAllocations) error {
	subnet, err := netip.ParsePrefix(pool.Spec.Subnet)
	if err != nil {
		return fmt.Errorf("pool %s spec.subnet %q: %w", pool.Name, pool.Spec.Subnet, err)
	}
	blocks := map[string]*ipamv1alpha1.IPBlock{}
	var errs []error
	for key, want := range recs {
		a, err := netip.ParseAddr(key)
		if err != nil || !subnet.Contains(a) {
			continue // left out by the import, which says so
		}
		name := block.Name(pool.Name, block.Of(subnet, a))
		b, seen := blocks[name]
		if !seen {
			b = &ipamv1alpha1.IPBlock{}
			if err := l.opts.Fresh.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("read block %s: %w", name, err)
				}
				b = nil
			}
			blocks[name] = b
		}
		if b == nil {
			continue
		}
		if cur, ok := b.Status.Allocations[a.String()]; ok && cur != want {
			errs = append(errs, &HeldError{Pool: pool.Name, Address: a.String(), Holder: cur, Wanted: want})
		}
	}
	return errors.Join(errs...)
}

// importRecords writes recs into the pool's blocks; keepOthers refuses an address a
// block records for another holder, else the record becomes what recs says.
func (l *Ledger) importRecords(ctx context.Context, pool *v2beta1.SpiderIPPool, recs v2beta1.PoolIPAllocations, node string, keepOthers bool) error {
	subnet, err := netip.ParsePrefix(pool.Spec.Subnet)
	if err != nil {
		return fmt.Errorf("pool %s spec.subnet %q: %w", pool.Name, pool.Spec.Subnet, err)
	}
	byBlock := map[netip.Prefix]v2beta1.PoolIPAllocations{}
	for key, rec := range recs {
		a, err := netip.ParseAddr(key)
		if err != nil || !subnet.Contains(a) {
			l.opts.Log.Info("record left out: its address is not in the pool's subnet", "pool", pool.Name, "address", key, "pod", rec.Pod)
			continue
		}
		blk := block.Of(subnet, a)
		if byBlock[blk] == nil {
			byBlock[blk] = v2beta1.PoolIPAllocations{}
		}
		byBlock[blk][a.String()] = rec
	}
	ps := l.poolState(pool.Name)
	v, err := l.view(ctx, ps)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 8)
	for blk, part := range byBlock {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := l.importBlock(ctx, v, blk, part, node, keepOthers); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// importBlock writes recs into one block, creating it when it does not exist.
func (l *Ledger) importBlock(ctx context.Context, v *poolView, blk netip.Prefix, recs v2beta1.PoolIPAllocations, node string, keepOthers bool) error {
	name := block.Name(v.pool.Name, blk)
	q := l.queue(v.pool.Name, name, blk)
	create := true // most blocks of a pool being migrated do not exist yet
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if create {
			b := newBlock(v, blk, node)
			b.Status.Allocations = recs
			setCounts(v, blk, b)
			err := l.opts.Client.Create(ctx, b)
			if err == nil {
				b.ManagedFields = nil
				q.offer(b)
				return nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create block %s: %w", name, err)
			}
			create = false
		}
		cur, err := l.read(ctx, q)
		if errors.Is(err, errBlockGone) {
			create = true
			continue
		}
		if err != nil {
			return err
		}
		if cur.Spec.Pool != v.pool.Name || cur.Spec.CIDR != blk.String() {
			return fmt.Errorf("IPBlock %s holds %s of pool %s, not %s of pool %s", name, cur.Spec.CIDR, cur.Spec.Pool, blk, v.pool.Name)
		}
		upd := cur.DeepCopy()
		if upd.Status.Allocations == nil {
			upd.Status.Allocations = v2beta1.PoolIPAllocations{}
		}
		changed := false
		for key, rec := range recs {
			cur, held := upd.Status.Allocations[key]
			switch {
			case cur == rec:
			case held && keepOthers:
				return &HeldError{Pool: v.pool.Name, Address: key, Holder: cur, Wanted: rec}
			default:
				upd.Status.Allocations[key], changed = rec, true
			}
		}
		if !changed {
			return nil
		}
		setCounts(v, blk, upd)
		err = l.opts.Client.Patch(ctx, upd, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			upd.ManagedFields = nil
			q.offer(upd)
			return nil
		case apierrors.IsConflict(err):
			continue
		default:
			return fmt.Errorf("write block %s: %w", name, err)
		}
	}
	return fmt.Errorf("write block %s: %d conflicts in a row", name, maxAttempts)
}

// setCounts sets a block's allocated and free counts from its records.
func setCounts(v *poolView, blk netip.Prefix, b *ipamv1alpha1.IPBlock) {
	b.Status.Allocated = int64(len(b.Status.Allocations))
	b.Status.Free = block.Free(block.Addresses(v.rng, blk), b.Status.Allocations)
}
