package allocator

import (
	"errors"
	"fmt"
	"net/netip"

	"go4.org/netipx"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/eligibility"
	"github.com/nicpool/nicpool/crds/ipranges"
)

// Order is which free address of a pool an allocation takes.
type Order int

const (
	// NextAfterLast takes the first free address after the one the pool handed out
	// last (Range.Last), wrapping around to the lowest: host-local's cursor. An address
	// is handed out again only once every other one has been, so a never-used address
	// goes before a released one, and the address released a moment ago (perhaps by a
	// garbage collector that cannot know whether its pod still runs on a partitioned
	// node) goes last.
	NextAfterLast Order = iota
	// Lowest takes the lowest free address (spiderpool's order).
	Lowest
)

// Orders are the flag values of the orders, by Order.
var Orders = []string{NextAfterLast: "next-after-last", Lowest: "lowest"}

func (o Order) String() string {
	if int(o) < len(Orders) {
		return Orders[o]
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// ParseOrder reads an Order from its flag value.
func ParseOrder(s string) (Order, error) {
	for i, name := range Orders {
		if s == name {
			return Order(i), nil
		}
	}
	return 0, fmt.Errorf("allocation order %q: must be one of %v", s, Orders)
}

// Range is what a pool can hand out: its subnet, gateway and allocatable addresses
// (spec.ips minus excludeIPs, gateway, reserved IPs, network and broadcast), and where
// the next allocation continues.
type Range struct {
	Pool   string
	Family int64
	Subnet netip.Prefix
	// Allocatable excludes reserved IPs; Total counts it.
	Allocatable *netipx.IPSet
	Total       int64
	// Reserved is how many of the pool's addresses are withheld by SpiderReservedIPs.
	Reserved int64
	// Order is which free address an allocation takes (ipamd/block applies it).
	Order Order
	// Closed, when set, is why the pool hands out no new address (Refusal): an
	// allocation for an owner that holds nothing in it fails with it. Releases and
	// transfers still apply.
	Closed error
}

// Refusal is why a pool hands out no new address to anyone: it is being deleted or
// disabled (eligibility.Closed), its stored status does not decode, or its
// status.allocatedIPs still holds spiderpool's records, which no block has yet; or nil.
// Allocations of addresses the owner already holds still answer with them: a retried
// ADD is no new allocation.
func Refusal(pool *v2beta1.SpiderIPPool) error {
	if err := eligibility.Closed(pool); err != nil {
		return fmt.Errorf("allocate from pool %s: %w", pool.Name, err)
	}
	if pool.Status.Unreadable != "" {
		return fmt.Errorf("allocate from pool %s: %w (%s): repair or remove the pool's status", pool.Name, ErrStatusUnreadable, pool.Status.Unreadable)
	}
	if pool.Status.SpiderpoolRecords() {
		return fmt.Errorf("allocate from pool %s: %w: finish the migration with kubectl nicpool migrate from-spiderpool --apply", pool.Name, ErrSpiderpoolRecords)
	}
	return nil
}

// Refusals of pools whose status nicpool cannot use.
var (
	// ErrStatusUnreadable: the pool's stored status does not decode.
	ErrStatusUnreadable = errors.New("its status does not decode")
	// ErrSpiderpoolRecords: status.allocatedIPs holds spiderpool's records, not migrated.
	ErrSpiderpoolRecords = errors.New("its status.allocatedIPs holds spiderpool's records, not moved into IPBlocks yet")
)

// NewRange computes the range of a pool. reserved may be nil.
func NewRange(pool *v2beta1.SpiderIPPool, reserved *netipx.IPSet) (*Range, error) {
	all, errs := ipranges.Allocatable(&pool.Spec, nil)
	if len(errs) > 0 {
		return nil, fmt.Errorf("pool %s: %w", pool.Name, errs.ToAggregate())
	}
	set := all
	if reserved != nil {
		var b netipx.IPSetBuilder
		b.AddSet(all)
		b.RemoveSet(reserved)
		s, err := b.IPSet()
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w", pool.Name, err)
		}
		set = s
	}
	subnet, _ := netip.ParsePrefix(pool.Spec.Subnet) // valid: Allocatable checked it
	r := &Range{
		Pool:        pool.Name,
		Family:      ipranges.Family(subnet.Addr()),
		Subnet:      subnet,
		Allocatable: set,
		Total:       ipranges.Count(set),
	}
	r.Reserved = ipranges.Count(all) - r.Total
	r.Closed = Refusal(pool)
	return r, nil
}

// CIDR writes an address of this range with the subnet's prefix length.
func (r *Range) CIDR(a netip.Addr) string { return ipranges.CIDR(a, r.Subnet) }

// ErrExhausted is matched (errors.Is) by every ExhaustedError.
var ErrExhausted = errors.New("pool exhausted")

// ExhaustedError says that a pool has no free address, with the counts an operator
// needs to act on it. Its message begins with spiderpool's words for the same cause
// (usedOut), which spiderpool's users and its own e2e suite match on in Events and CNI
// errors; nicpool's account follows.
type ExhaustedError struct {
	Pool      string
	Family    int64
	Total     int64 // allocatable addresses (excluding reserved IPs)
	Allocated int64 // addresses recorded in status.allocatedIPs
	Reserved  int64
}

// usedOut is spiderpool's phrase for a pool with no free address (its ErrIPUsedOut).
const usedOut = "all IP addresses used out"

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("%s: pool %s has no free IPv%d address: %d allocated of %d allocatable (%d more withheld by SpiderReservedIP); add addresses to spec.ips or release pods",
		usedOut, e.Pool, e.Family, e.Allocated, e.Total, e.Reserved)
}

func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Free counts the allocatable addresses not in used.
func (r *Range) Free(used map[netip.Addr]struct{}) int64 {
	n := r.Total
	for a := range used {
		if r.Allocatable.Contains(a) {
			n--
		}
	}
	return n
}
