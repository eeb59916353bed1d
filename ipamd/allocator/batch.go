package allocator

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// Owner is who an address is allocated to: one interface of one pod.
type Owner struct {
	Pod       string // namespace/name
	PodUID    string
	Interface string
}

func (o Owner) record() v2beta1.PoolIPAllocation {
	return v2beta1.PoolIPAllocation{Pod: o.Pod, PodUID: o.PodUID, Interface: o.Interface}
}

func (o Owner) owns(rec v2beta1.PoolIPAllocation) bool {
	return rec.PodUID == o.PodUID && rec.Interface == o.Interface
}

// OpKind says what an Op does to a pool.
type OpKind int

const (
	// Allocate gives Owner one address, or returns the one it already holds.
	Allocate OpKind = iota
	// Release removes the records held by Owner: the addresses in Addrs, or all of
	// Owner's records when Addrs is empty. An Owner without Interface matches every
	// record of its PodUID (sweeping a gone pod). Records of anyone else are never
	// removed.
	Release
	// Transfer moves the records of Addrs from FromUID to Owner (a StatefulSet pod
	// taking over its predecessor's addresses). Records already held by Owner count
	// as transferred.
	Transfer
)

// Op is one change requested of a pool.
type Op struct {
	Kind    OpKind
	Owner   Owner
	Addrs   []netip.Addr // Release, Transfer
	FromUID string       // Transfer
}

// Result is what an Op did. Err is per op: one exhausted allocation does not fail the
// others of its batch.
type Result struct {
	// Addr is the address of an Allocate.
	Addr netip.Addr
	// Existing is true when Allocate found an address Owner already held.
	Existing bool
	// Changed lists the addresses a Release removed or a Transfer moved.
	Changed []netip.Addr
	Err     error
}

// ErrNotHeld is returned by a Transfer whose address is held by neither side.
var ErrNotHeld = errors.New("address not held by the expected pod")

// Apply applies ops in order to status (modified in place) and returns one result per
// op and whether status changed. The range decides which addresses are free; records
// outside it (spec shrunk, address reserved later) are kept and never handed out again.
func Apply(r *Range, status *v2beta1.IPPoolStatus, ops []Op) ([]Result, bool) {
	if status.AllocatedIPs == nil {
		status.AllocatedIPs = v2beta1.PoolIPAllocations{}
	}
	recs := status.AllocatedIPs
	used := Used(recs)
	results := make([]Result, len(ops))
	changed := false
	for i, op := range ops {
		res := &results[i]
		switch op.Kind {
		case Allocate:
			if a, ok := held(recs, op.Owner); ok {
				res.Addr, res.Existing = a, true
				continue
			}
			a, err := r.Next(used, len(recs))
			if err != nil {
				res.Err = err
				continue
			}
			recs[a.String()] = op.Owner.record()
			used[a] = struct{}{}
			res.Addr, changed = a, true
		case Release:
			for key, rec := range recs {
				if rec.PodUID != op.Owner.PodUID || (op.Owner.Interface != "" && rec.Interface != op.Owner.Interface) {
					continue
				}
				a, err := netip.ParseAddr(key)
				if err != nil || (len(op.Addrs) > 0 && !contains(op.Addrs, a)) {
					continue
				}
				delete(recs, key)
				delete(used, a)
				res.Changed = append(res.Changed, a)
				changed = true
			}
		case Transfer:
			for _, a := range op.Addrs {
				rec, ok := recs[a.String()]
				switch {
				case ok && op.Owner.owns(rec):
					res.Changed = append(res.Changed, a)
				case ok && rec.PodUID == op.FromUID && rec.Interface == op.Owner.Interface:
					recs[a.String()] = op.Owner.record()
					res.Changed = append(res.Changed, a)
					changed = true
				default:
					res.Err = fmt.Errorf("transfer %s in pool %s from pod UID %s: %w", a, r.Pool, op.FromUID, ErrNotHeld)
				}
			}
		}
	}
	// totalIPCount counts what the pool can hand out, reserved addresses excluded: the
	// webhook's pool controller keeps the same figure, so the two never fight.
	n, total := int64(len(recs)), r.Total
	if status.AllocatedIPCount == nil || *status.AllocatedIPCount != n {
		status.AllocatedIPCount, changed = &n, true
	}
	if status.TotalIPCount == nil || *status.TotalIPCount != total {
		status.TotalIPCount, changed = &total, true
	}
	return results, changed
}

// Held returns the address Owner holds in a pool's status, if any.
func Held(status *v2beta1.IPPoolStatus, o Owner) (netip.Addr, bool) {
	return held(status.AllocatedIPs, o)
}

func held(recs v2beta1.PoolIPAllocations, o Owner) (netip.Addr, bool) {
	var best netip.Addr
	for key, rec := range recs {
		if !o.owns(rec) {
			continue
		}
		// Several records for one owner can only come from an older allocator; answer
		// with the lowest so that every retry sees the same address.
		if a, err := netip.ParseAddr(key); err == nil && (!best.IsValid() || a.Less(best)) {
			best = a
		}
	}
	return best, best.IsValid()
}

func contains(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if a == b {
			return true
		}
	}
	return false
}
