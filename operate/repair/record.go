package repair

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/operate/inspect"
)

// ErrNotListed: no SpiderEndpoint lists the address.
var ErrNotListed = errors.New("no SpiderEndpoint lists the address")

// Recording is what record does with the address a pod's endpoint lists.
type Recording struct {
	Address   string `json:"address"`
	Pool      string `json:"pool"`
	Pod       string `json:"pod"`
	PodUID    string `json:"podUID"`
	Interface string `json:"interface"`
	// Recorded is true when the record was written; WouldRecord, in a dry run, when it
	// would be.
	Recorded    bool `json:"recorded"`
	WouldRecord bool `json:"wouldRecord,omitempty"`
	// Refused says why nothing is written; empty when the record may be written.
	Refused string `json:"refused,omitempty"`
}

// Record writes the allocation record of addr for the pod whose SpiderEndpoint lists
// it, when no record holds it (kubectl nicpool check's endpoint-address-unrecorded):
// the pod is live with the endpoint's UID, one endpoint lists the address, no pool
// records it, and the pool still hands it out (in its range, not reserved, not
// disabled or being deleted). The record is written through the ledger, which
// refuses it if another holder took the address meanwhile. Otherwise it writes
// nothing and says why. ErrNotListed when no endpoint lists addr.
func Record(ctx context.Context, c client.Client, addr netip.Addr, now time.Time, log logr.Logger, opts Options) (*Recording, error) {
	var eps v2beta1.SpiderEndpointList
	if err := c.List(ctx, &eps); err != nil {
		return nil, fmt.Errorf("list SpiderEndpoints: %w", err)
	}
	type listing struct {
		ep   *v2beta1.SpiderEndpoint
		d    v2beta1.IPAllocationDetail
		pool string
	}
	var found []listing
	for i := range eps.Items {
		ep := &eps.Items[i]
		for _, d := range ep.Status.Current.IPs {
			for _, a := range []struct{ cidr, pool *string }{{d.IPv4, d.IPv4Pool}, {d.IPv6, d.IPv6Pool}} {
				if a.cidr == nil || a.pool == nil {
					continue
				}
				if p, err := netip.ParsePrefix(*a.cidr); err == nil && p.Addr().Unmap() == addr {
					found = append(found, listing{ep, d, *a.pool})
				}
			}
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%s: %w", addr, ErrNotListed)
	}
	f := found[0]
	r := &Recording{Address: addr.String(), Pool: f.pool, Pod: f.ep.Namespace + "/" + f.ep.Name, PodUID: f.ep.Status.Current.UID, Interface: f.d.Interface}
	if len(found) > 1 {
		var who []string
		for _, l := range found {
			who = append(who, l.ep.Namespace+"/"+l.ep.Name+" ("+l.d.Interface+")")
		}
		r.Refused = fmt.Sprintf("%d SpiderEndpoints list %s: %s; two pods use it: delete all but one of them (kubectl delete pod -n NAMESPACE NAME) and each other gets an address of its own", len(found), addr, strings.Join(who, ", "))
		return r, nil
	}
	recs, _, err := ledger.List(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if rec.Addr == addr {
			r.Refused = fmt.Sprintf("pool %s records %s for pod %s (UID %s) interface %s: kubectl nicpool who %s shows that holder, and kubectl nicpool check whether the endpoint disagrees", rec.Pool, addr, rec.Holder.Pod, rec.Holder.PodUID, rec.Holder.Interface, addr)
			return r, nil
		}
	}
	holder, _, err := inspect.HolderOf(ctx, c, v2beta1.PoolIPAllocation{Pod: r.Pod, PodUID: r.PodUID, Interface: r.Interface}, now)
	if err != nil {
		return nil, err
	}
	if holder.State != inspect.StateLive {
		r.Refused = fmt.Sprintf("the endpoint's pod %s (UID %s) is %s (%s): nobody uses %s; the garbage collector deletes the endpoint, or a cluster admin runs kubectl delete spiderendpoint -n %s %s", r.Pod, r.PodUID, holder.State, holder.Detail, addr, f.ep.Namespace, f.ep.Name)
		return r, nil
	}
	pool := &v2beta1.SpiderIPPool{}
	if err := c.Get(ctx, client.ObjectKey{Name: r.Pool}, pool); err != nil {
		r.Refused = fmt.Sprintf("the endpoint names pool %s, which cannot be read (%v): delete pod %s (kubectl delete pod -n %s %s) and it gets an address of a pool that exists", r.Pool, err, r.Pod, f.ep.Namespace, f.ep.Name)
		return r, client.IgnoreNotFound(err)
	}
	reserved, err := ledger.ReservedSet(ctx, c)
	if err != nil {
		return nil, err
	}
	rng, err := allocator.NewRange(pool, reserved)
	switch {
	case err != nil:
		r.Refused = err.Error()
	case rng.Closed != nil:
		r.Refused = fmt.Sprintf("%v: nicpool writes no new record in it; delete pod %s (kubectl delete pod -n %s %s) so that it gets an address of a pool that serves", rng.Closed, r.Pod, f.ep.Namespace, f.ep.Name)
	case !rng.Allocatable.Contains(addr):
		r.Refused = fmt.Sprintf("%s is not one of pool %s's addresses (outside spec.ips, in spec.excludeIPs or a SpiderReservedIP): delete pod %s (kubectl delete pod -n %s %s) and it gets one that is", addr, r.Pool, r.Pod, f.ep.Namespace, f.ep.Name)
	}
	if r.Refused != "" {
		return r, nil
	}
	if opts.DryRun {
		r.WouldRecord = true
		return r, nil
	}
	l := ledger.New(ledger.Options{Cache: c, Client: c, Fresh: c, Log: log})
	rec := v2beta1.PoolIPAllocations{addr.String(): {Pod: r.Pod, PodUID: r.PodUID, Interface: r.Interface}}
	var held *ledger.HeldError
	switch err := l.Import(ctx, pool, rec); {
	case errors.As(err, &held):
		r.Refused = "another pod took the address meanwhile: " + held.Error()
		return r, nil
	case err != nil:
		return r, fmt.Errorf("record %s: %w", addr, err)
	}
	r.Recorded = true
	if err := l.Recount(ctx, r.Pool); err != nil {
		return r, fmt.Errorf("recount pool %s: %w", r.Pool, err)
	}
	return r, nil
}
