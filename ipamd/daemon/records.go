package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/ipamd/metrics"
)

// DefaultRecordCheckInterval is how often ipamd checks that every address the
// endpoints of its node's live pods list is still recorded.
const DefaultRecordCheckInterval = time.Minute

// ReasonAddressUnrecorded is the Warning Event on a live pod whose SpiderEndpoint
// lists an address that no record holds any more.
const ReasonAddressUnrecorded = "AddressUnrecorded"

// recordCheck remembers, between checks, the addresses found unrecorded: one is
// reported only when a second check finds it still so (a DEL releases records before
// it updates the endpoint, and a check may fall in between).
type recordCheck struct {
	suspects map[string]bool
	reported map[string]bool
}

// CheckRecords applies invariants.EndpointAddresses (the rule `kubectl nicpool check`
// applies to the whole cluster) to the endpoints of this node's live pods: an address
// an endpoint lists whose record vanished (its block deleted, or the record removed,
// by someone with override on IPBlocks) can be given to another pod while this one
// still uses it. Found on two checks in a row, it is logged, counted in
// nicpool_ipamd_unrecorded_addresses and recorded as a Warning Event on the pod. It
// returns how many such addresses there are now.
//
// It reads this node's endpoints, pods and blocks from the cache; an address not found
// there (in another node's block) is looked up in its pool's blocks on the API
// server, once per pool and check.
func (d *Daemon) CheckRecords(ctx context.Context) (int, error) {
	var eps v2beta1.SpiderEndpointList
	if err := d.Cache.List(ctx, &eps); err != nil {
		return 0, fmt.Errorf("list this node's endpoints: %w", err)
	}
	pools := map[string]v2beta1.PoolIPAllocations{}
	found := map[string]bool{}
	confirmed := 0
	for i := range eps.Items {
		ep := &eps.Items[i]
		if ep.DeletionTimestamp != nil || ep.Status.Current.Node != d.opts.NodeName {
			continue
		}
		pod := &corev1.Pod{}
		if err := d.Cache.Get(ctx, client.ObjectKey{Namespace: ep.Namespace, Name: ep.Name}, pod); err != nil ||
			string(pod.UID) != ep.Status.Current.UID || pod.DeletionTimestamp != nil ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue // not a live pod of this endpoint: the garbage collector's
		}
		var blocks ipamv1alpha1.IPBlockList
		if err := d.Cache.List(ctx, &blocks, client.MatchingFields{ledger.IndexBlockPodUID: ep.Status.Current.UID}); err != nil {
			return 0, fmt.Errorf("list the blocks of pod UID %s: %w", ep.Status.Current.UID, err)
		}
		var lookupErr error
		lookup := func(pool string, addr netip.Addr) (v2beta1.PoolIPAllocation, bool) {
			for _, b := range blocks.Items {
				if rec, ok := b.Status.Allocations[addr.String()]; ok && b.Spec.Pool == pool {
					return rec, true
				}
			}
			recs, ok := pools[pool]
			if !ok {
				var err error
				if recs, err = ledger.PoolRecords(ctx, d.fresh, pool); err != nil {
					lookupErr = err
					return v2beta1.PoolIPAllocation{}, true // unknown: not reported
				}
				pools[pool] = recs
			}
			rec, ok := recs[addr.String()]
			return rec, ok
		}
		for _, v := range invariants.EndpointAddresses(ep, lookup, true) {
			if v.Kind != invariants.EndpointUnrecorded {
				continue
			}
			key := ep.Status.Current.UID + "/" + v.Pool + "/" + v.Address.String()
			found[key] = true
			if !d.records.suspects[key] {
				continue
			}
			confirmed++
			if d.records.reported[key] {
				continue
			}
			d.records.reported[key] = true
			msg := fmt.Sprintf("%s: pool %s no longer records this pod's address, so it may give %s to another pod while this one uses it; kubectl nicpool record %s --force writes the record again for this pod, or recreate this pod to give it a recorded address (kubectl nicpool check lists every such address)", v.Message, v.Pool, v.Address, v.Address)
			d.opts.Log.Error(nil, "an address of a live pod is not recorded", "pod", ep.Namespace+"/"+ep.Name, "podUID", ep.Status.Current.UID, "pool", v.Pool, "address", v.Address.String())
			d.recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonAddressUnrecorded, "Check", "%s", msg)
		}
		if lookupErr != nil {
			return 0, lookupErr
		}
	}
	for key := range d.records.reported {
		if !found[key] {
			delete(d.records.reported, key)
		}
	}
	d.records.suspects = found
	metrics.UnrecordedAddresses.Set(float64(confirmed))
	return confirmed, nil
}

// checkRecords runs CheckRecords every interval until ctx ends.
func (d *Daemon) checkRecords(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := d.CheckRecords(ctx); err != nil && ctx.Err() == nil {
			d.opts.Log.Error(err, "check that the addresses of this node's pods are recorded")
		}
	}
}
