package allocator

import (
	"errors"
	"net/netip"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// Owner is who an address is allocated to: one interface of one pod.
type Owner struct {
	Pod       string // namespace/name
	PodUID    string
	Interface string
}

// OwnerOf is the owner a pool record names.
func OwnerOf(rec v2beta1.PoolIPAllocation) Owner {
	return Owner{Pod: rec.Pod, PodUID: rec.PodUID, Interface: rec.Interface}
}

// Holds is nicpool's one "still held by this owner" rule, for every writer that
// releases, moves or reuses a record (ipamd's committer, the garbage collector): the
// record names the same pod (namespace/name) and the same pod UID, and the same
// interface unless o.Interface is empty (every interface of that pod). A pod UID alone
// is not enough: a UID is no secret, and whoever can name one (a SpiderEndpoint
// written by hand, a stale copy) must not free or take another pod's addresses.
func (o Owner) Holds(rec v2beta1.PoolIPAllocation) bool {
	return o.Pod != "" && o.PodUID != "" && rec.Pod == o.Pod && rec.PodUID == o.PodUID &&
		(o.Interface == "" || rec.Interface == o.Interface)
}

// OpKind says what an Op does to a pool.
type OpKind int

const (
	// Allocate gives Owner one address, or returns the one it already holds.
	Allocate OpKind = iota
	// Release removes the records Owner holds (Owner.Holds): the addresses in Addrs,
	// or all of Owner's records when Addrs is empty. An Owner without Interface
	// matches every interface of its pod (sweeping a gone pod). Records of anyone else
	// are never removed.
	Release
	// Transfer moves the records of Addrs from the pod's previous incarnation (same
	// Owner.Pod and Owner.Interface, pod UID FromUID) to Owner: a StatefulSet pod
	// taking over its predecessor's addresses. A record of any other pod name or
	// interface is never moved. Records already held by Owner count as transferred.
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

// HeldIn returns the address o holds among records (a pool's or a block's), the
// lowest when an older allocator left several, so that every retry sees the same one.
func HeldIn(recs v2beta1.PoolIPAllocations, o Owner) (netip.Addr, bool) {
	var best netip.Addr
	for key, rec := range recs {
		if !o.Holds(rec) {
			continue
		}
		if a, err := netip.ParseAddr(key); err == nil && (!best.IsValid() || a.Less(best)) {
			best = a
		}
	}
	return best, best.IsValid()
}
