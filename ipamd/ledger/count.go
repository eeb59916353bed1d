package ledger

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
)

// Recount is the one owner of the counts: it writes the pool's
// status.allocatedIPCount (the records of its blocks, plus those not migrated yet)
// and totalIPCount (the addresses it can hand out, reserved ones excluded), which
// `kubectl get sp` shows, and corrects the free count of each block of the pool whose
// addresses changed since it was written (spec.ips, excludeIPs, SpiderReservedIPs), so
// that writers looking for room select blocks by an exact count. It reads the blocks
// from the cache, which must hold every block of the pool (the webhook's does).
func (l *Ledger) Recount(ctx context.Context, pool string) error {
	ps := l.poolState(pool)
	v, err := l.view(ctx, ps)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var list ipamv1alpha1.IPBlockList
	if err := l.opts.Cache.List(ctx, &list, client.MatchingFields{IndexBlockPool: pool}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	allocated := int64(len(v.pool.Status.AllocatedIPs))
	var stale []blockOps
	for i := range list.Items {
		b := &list.Items[i]
		allocated += int64(len(b.Status.Allocations))
		cidr := cidrOf(b)
		probe := b.DeepCopy()
		setCounts(v, cidr, probe)
		if probe.Status.Free != b.Status.Free || probe.Status.Allocated != b.Status.Allocated {
			// An empty request: the write recomputes the counts from the newest copy.
			stale = append(stale, blockOps{q: l.queue(pool, b.Name, cidr)})
		}
	}
	if _, err := l.doAll(ctx, stale); err != nil {
		return fmt.Errorf("recount the blocks of pool %s: %w", pool, err)
	}
	total := v.rng.Total
	st := v.pool.Status
	if st.AllocatedIPCount != nil && *st.AllocatedIPCount == allocated && st.TotalIPCount != nil && *st.TotalIPCount == total {
		return nil
	}
	p := v.pool.DeepCopy()
	base := p.DeepCopy()
	p.Status.AllocatedIPCount, p.Status.TotalIPCount = &allocated, &total
	for attempt := 1; ; attempt++ {
		err := l.opts.Client.Status().Patch(ctx, p, client.MergeFrom(base))
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		pause, ok := serverRetry(err, attempt)
		if !ok {
			return fmt.Errorf("write the counts of pool %s: %w", pool, err)
		}
		time.Sleep(pause)
	}
}
