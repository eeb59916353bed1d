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
	// Order is which free address Take chooses; Last is the address handed out last,
	// where NextAfterLast continues (invalid: from the lowest). Take advances Last.
	Order Order
	Last  netip.Addr
	// Closed, when set, is why the pool hands out no new address (Refusal): an
	// allocation for an owner that holds nothing in it fails with it. Releases and
	// transfers still apply.
	Closed error
}

// Refusal is why a pool hands out no new address to anyone: it is being deleted or
// disabled (eligibility.Closed), or nil. Allocations of addresses the owner already
// holds still answer with them: a retried ADD is no new allocation.
func Refusal(pool *v2beta1.SpiderIPPool) error {
	if err := eligibility.Closed(pool); err != nil {
		return fmt.Errorf("allocate from pool %s: %w", pool.Name, err)
	}
	return nil
}

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
// needs to act on it.
type ExhaustedError struct {
	Pool      string
	Family    int64
	Total     int64 // allocatable addresses (excluding reserved IPs)
	Allocated int64 // addresses recorded in status.allocatedIPs
	Reserved  int64
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("pool %s has no free IPv%d address: %d allocated of %d allocatable (%d more withheld by SpiderReservedIP); add addresses to spec.ips or release pods",
		e.Pool, e.Family, e.Allocated, e.Total, e.Reserved)
}

func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Used parses the addresses recorded in a pool's status.
func Used(allocated v2beta1.PoolIPAllocations) map[netip.Addr]struct{} {
	used := make(map[netip.Addr]struct{}, len(allocated))
	for s := range allocated {
		if a, err := netip.ParseAddr(s); err == nil {
			used[a] = struct{}{}
		}
	}
	return used
}

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

// Take returns the free address the range's Order chooses, or an ExhaustedError, and
// remembers it in Last. allocated is the number of records of the pool, for the error.
func (r *Range) Take(used map[netip.Addr]struct{}, allocated int) (netip.Addr, error) {
	if r.Order == NextAfterLast {
		if a, ok := r.after(used, r.Last); ok {
			r.Last = a
			return a, nil
		}
	}
	a, err := r.Next(used, allocated)
	if err == nil {
		r.Last = a
	}
	return a, err
}

// after returns the first allocatable address greater than last that is not in used.
func (r *Range) after(used map[netip.Addr]struct{}, last netip.Addr) (netip.Addr, bool) {
	if !last.IsValid() || last.BitLen() != r.Subnet.Addr().BitLen() {
		return netip.Addr{}, false
	}
	for _, rg := range r.Allocatable.Ranges() {
		if !last.Less(rg.To()) {
			continue // all of it at or before the cursor
		}
		from := rg.From()
		if !last.Less(from) {
			from = last.Next()
		}
		for a := from; a.IsValid() && !rg.To().Less(a); a = a.Next() {
			if _, taken := used[a]; !taken {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// Next returns the lowest allocatable address not in used, or an ExhaustedError.
// allocated is the number of records of the pool, for the error.
func (r *Range) Next(used map[netip.Addr]struct{}, allocated int) (netip.Addr, error) {
	for _, rg := range r.Allocatable.Ranges() {
		for a := rg.From(); a.IsValid() && !rg.To().Less(a); a = a.Next() {
			if _, taken := used[a]; !taken {
				return a, nil
			}
		}
	}
	return netip.Addr{}, &ExhaustedError{Pool: r.Pool, Family: r.Family, Total: r.Total, Allocated: int64(allocated), Reserved: r.Reserved}
}
