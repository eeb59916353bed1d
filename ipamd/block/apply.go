package block

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/allocator"
)

// ErrFull is the result of an allocation in a block with no free address: the caller
// tries another block. It is not the pool's exhaustion.
var ErrFull = errors.New("block has no free address")

// Apply applies ops in order to the status of block blk (modified in place) and
// returns one result per op and whether the status changed. r decides which of the
// block's addresses are allocatable; records outside it (spec shrunk, address reserved
// later) are kept and never handed out again. An allocation takes, by r.Order, the
// first free address after the one handed out last in the block, wrapping around, so
// a released address is reused as late as the block allows (allocator.NextAfterLast),
// or the lowest free one (allocator.Lowest). Releases and transfers touch a record only while
// allocator.Owner.Holds says the record is still the owner's, so a decision taken on an
// older copy never frees or moves an address someone else holds now.
func Apply(r *allocator.Range, blk netip.Prefix, st *v1alpha1.IPBlockStatus, ops []allocator.Op) ([]allocator.Result, bool) {
	if st.Allocations == nil {
		st.Allocations = v2beta1.PoolIPAllocations{}
	}
	recs := st.Allocations
	addrs := Addresses(r, blk)
	results := make([]allocator.Result, len(ops))
	changed := false
	for i, op := range ops {
		res := &results[i]
		switch op.Kind {
		case allocator.Allocate:
			if op.Owner.Pod == "" || op.Owner.PodUID == "" || op.Owner.Interface == "" {
				res.Err = fmt.Errorf("allocate in block %s: owner %+v must name a pod, its UID and an interface", blk, op.Owner)
				continue
			}
			if a, ok := allocator.HeldIn(recs, op.Owner); ok {
				res.Addr, res.Existing = a, true
				continue
			}
			if r.Closed != nil {
				res.Err = r.Closed
				continue
			}
			last := st.LastAllocated
			if r.Order == allocator.Lowest {
				last = ""
			}
			a, ok := next(addrs, recs, last)
			if !ok {
				res.Err = fmt.Errorf("block %s: %w", blk, ErrFull)
				continue
			}
			recs[a.String()] = v2beta1.PoolIPAllocation{Pod: op.Owner.Pod, PodUID: op.Owner.PodUID, Interface: op.Owner.Interface}
			st.LastAllocated = a.String()
			res.Addr, changed = a, true
		case allocator.Release:
			for key, rec := range recs {
				if !op.Owner.Holds(rec) {
					continue
				}
				a, err := netip.ParseAddr(key)
				if err != nil || (len(op.Addrs) > 0 && !slices.Contains(op.Addrs, a)) {
					continue
				}
				delete(recs, key)
				res.Changed = append(res.Changed, a)
				changed = true
			}
		case allocator.Transfer:
			from := allocator.Owner{Pod: op.Owner.Pod, PodUID: op.FromUID, Interface: op.Owner.Interface}
			for _, a := range op.Addrs {
				rec, ok := recs[a.String()]
				switch {
				case op.Owner.Interface == "":
					res.Err = fmt.Errorf("transfer %s in block %s: no interface named", a, blk)
				case ok && op.Owner.Holds(rec):
					res.Changed = append(res.Changed, a)
				case ok && from.Holds(rec):
					recs[a.String()] = v2beta1.PoolIPAllocation{Pod: op.Owner.Pod, PodUID: op.Owner.PodUID, Interface: op.Owner.Interface}
					res.Changed = append(res.Changed, a)
					changed = true
				default:
					res.Err = fmt.Errorf("transfer %s from pod UID %s to %s: %w", a, op.FromUID, op.Owner.Pod, allocator.ErrNotHeld)
				}
			}
		}
	}
	allocated, free := int64(len(recs)), Free(addrs, recs)
	if st.Allocated != allocated || st.Free != free {
		st.Allocated, st.Free, changed = allocated, free, true
	}
	return results, changed
}

// Free counts the addresses of addrs that no record holds.
func Free(addrs []netip.Addr, recs v2beta1.PoolIPAllocations) int64 {
	var n int64
	for _, a := range addrs {
		if _, taken := recs[a.String()]; !taken {
			n++
		}
	}
	return n
}

// next returns the first address of addrs after last that no record holds, wrapping
// around to the block's start.
func next(addrs []netip.Addr, recs v2beta1.PoolIPAllocations, last string) (netip.Addr, bool) {
	start := 0
	if l, err := netip.ParseAddr(last); err == nil {
		for start < len(addrs) && !l.Less(addrs[start]) {
			start++
		}
	}
	for k := range addrs {
		a := addrs[(start+k)%len(addrs)]
		if _, taken := recs[a.String()]; !taken {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Held returns the address owner holds in a block's records, if any.
func Held(st *v1alpha1.IPBlockStatus, o allocator.Owner) (netip.Addr, bool) {
	return allocator.HeldIn(st.Allocations, o)
}
