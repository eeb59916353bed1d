package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/block"
)

// Bounds of status.allocatedIPs: a pool with more records, or whose string would be
// longer, has it empty, and allocatedIPsFrom says why. 512 KiB keeps a pool object well
// under etcd's 1.5 MiB limit on an object, and each pool change sent to every watcher
// of pools small enough.
var (
	AllocatedIPsMaxRecords = 6000
	AllocatedIPsMaxBytes   = 512 << 10
)

// Why Recount leaves a pool's status as it is.
var (
	// ErrUnreadableStatus: the stored status does not decode (v2beta1.IPPoolStatus.Unreadable).
	ErrUnreadableStatus = errors.New("the pool's status does not decode")
	// ErrSpiderpoolRecords: status.allocatedIPs holds spiderpool's records, not migrated
	// into IPBlocks yet (v2beta1.IPPoolStatus.SpiderpoolRecords).
	ErrSpiderpoolRecords = errors.New("status.allocatedIPs holds spiderpool's records, not moved into IPBlocks yet: finish the migration with kubectl nicpool migrate from-spiderpool --apply")
)

// Recount is the one writer of a pool's status as `kubectl get sp` and spiderpool's
// tools read it: status.allocatedIPCount (the records of its blocks, plus those of the
// older layout not migrated yet), totalIPCount (the addresses it can hand out,
// reserved ones excluded) and allocatedIPs, spiderpool's string of every record
// (bounded: AllocatedIPsMaxRecords, AllocatedIPsMaxBytes) with allocatedIPsFrom. It
// writes nothing when none of them changed, and nothing on a pool whose status does
// not decode (ErrUnreadableStatus) or still holds spiderpool's records
// (ErrSpiderpoolRecords). It also corrects the free count of each block of the pool
// whose addresses changed since it was written (spec.ips, excludeIPs,
// SpiderReservedIPs), so that writers looking for room select blocks by an exact
// count. It reads the blocks from the cache, which must hold every block of the pool
// (the webhook's does), in place, copying none.
func (l *Ledger) Recount(ctx context.Context, pool string) error {
	_, _, err := l.RecountWrote(ctx, pool)
	return err
}

// RecountWrote is Recount, and says whether it wrote the pool's status (false when
// none of its fields changed, or the pool is gone) and how long the status.allocatedIPs
// it wrote is: the pool counter spaces its writes of one pool by the writes
// themselves and their size, not by recounts that changed nothing.
func (l *Ledger) RecountWrote(ctx context.Context, pool string) (wrote bool, listed int, err error) {
	ps := l.poolState(pool)
	v, err := l.view(ctx, ps)
	if apierrors.IsNotFound(err) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	st := v.pool.Status
	switch {
	case st.Unreadable != "":
		return false, 0, fmt.Errorf("pool %s: %w: %s", pool, ErrUnreadableStatus, st.Unreadable)
	case st.SpiderpoolRecords():
		return false, 0, fmt.Errorf("pool %s: %w", pool, ErrSpiderpoolRecords)
	}
	var list ipamv1alpha1.IPBlockList
	if err := l.opts.Cache.List(ctx, &list, client.MatchingFields{IndexBlockPool: pool}, client.UnsafeDisableDeepCopy); err != nil {
		return false, 0, err
	}
	allocated := int64(len(st.OlderLayout))
	var stale []blockOps
	for i := range list.Items {
		b := &list.Items[i]
		allocated += int64(len(b.Status.Allocations))
		cidr := cidrOf(b)
		if free := block.Free(block.Addresses(v.rng, cidr), b.Status.Allocations); free != b.Status.Free || int64(len(b.Status.Allocations)) != b.Status.Allocated {
			// An empty request: the write recomputes the counts from the newest copy.
			stale = append(stale, blockOps{q: l.queue(pool, b.Name, cidr)})
		}
	}
	if _, err := l.doAll(ctx, stale); err != nil {
		return false, 0, fmt.Errorf("recount the blocks of pool %s: %w", pool, err)
	}
	total := v.rng.Total
	ips, from := allocatedIPs(allocated, st.OlderLayout, list.Items)
	if len(st.OlderLayout) > 0 {
		// Not migrated yet (Migrate): the records stay where they are until then.
		ips, from = st.AllocatedIPs, st.AllocatedIPsFrom
	}
	if st.AllocatedIPCount != nil && *st.AllocatedIPCount == allocated && st.TotalIPCount != nil && *st.TotalIPCount == total &&
		st.AllocatedIPsFrom == from && (st.AllocatedIPs == nil) == (ips == nil) && (ips == nil || *st.AllocatedIPs == *ips) {
		return false, 0, nil
	}
	p := v.pool.DeepCopy()
	base := p.DeepCopy()
	p.Status.AllocatedIPCount, p.Status.TotalIPCount = &allocated, &total
	p.Status.AllocatedIPs, p.Status.AllocatedIPsFrom = ips, from
	for attempt := 1; ; attempt++ {
		err := l.opts.Client.Status().Patch(ctx, p, client.MergeFrom(base))
		if err == nil || apierrors.IsNotFound(err) {
			if err != nil || ips == nil {
				return err == nil, 0, nil
			}
			return true, len(*ips), nil
		}
		pause, ok := serverRetry(err, attempt)
		if !ok {
			return false, 0, fmt.Errorf("write the status of pool %s: %w", pool, err)
		}
		time.Sleep(pause)
	}
}

// allocatedIPs returns spiderpool's string of n records (those of the older layout and
// of blocks) and allocatedIPsFrom; above the bounds, an empty string and why.
func allocatedIPs(n int64, older v2beta1.PoolIPAllocations, blocks []ipamv1alpha1.IPBlock) (*string, string) {
	if n > int64(AllocatedIPsMaxRecords) {
		empty := ""
		return &empty, fmt.Sprintf("%s%d records are more than the %d allocatedIPs lists; every record is in the pool's IPBlocks (kubectl nicpool pools)", v2beta1.AllocatedIPsOmitted, n, AllocatedIPsMaxRecords)
	}
	recs := make(map[string]v2beta1.AllocatedIP, n)
	for key, r := range older {
		recs[key] = v2beta1.AllocatedIP{Pod: r.Pod, PodUID: r.PodUID}
	}
	for i := range blocks {
		for key, r := range blocks[i].Status.Allocations {
			recs[key] = v2beta1.AllocatedIP{Pod: r.Pod, PodUID: r.PodUID}
		}
	}
	b, _ := json.Marshal(recs) // map keys sorted: the same records make the same string
	if len(b) > AllocatedIPsMaxBytes {
		empty := ""
		return &empty, fmt.Sprintf("%s%d records take %d bytes, more than the %d allocatedIPs holds; every record is in the pool's IPBlocks (kubectl nicpool pools)", v2beta1.AllocatedIPsOmitted, n, len(b), AllocatedIPsMaxBytes)
	}
	s := string(b)
	return &s, v2beta1.AllocatedIPsFromBlocks
}
