package allocator

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"go4.org/netipx"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func pool(subnet string, ips []string, exclude []string, gw string) *v2beta1.SpiderIPPool {
	p := &v2beta1.SpiderIPPool{}
	p.Name = "p"
	p.Spec.Subnet, p.Spec.IPs, p.Spec.ExcludeIPs = subnet, ips, exclude
	if gw != "" {
		p.Spec.Gateway = &gw
	}
	return p
}

func set(ips ...string) *netipx.IPSet {
	var b netipx.IPSetBuilder
	for _, s := range ips {
		b.Add(netip.MustParseAddr(s))
	}
	s, _ := b.IPSet()
	return s
}

func alloc(owner string, ips ...string) v2beta1.PoolIPAllocations {
	m := v2beta1.PoolIPAllocations{}
	for _, s := range ips {
		m[s] = v2beta1.PoolIPAllocation{Pod: "ns/" + owner, PodUID: owner + "-" + s, Interface: "eth0"}
	}
	return m
}

func TestNext(t *testing.T) {
	tests := []struct {
		name      string
		pool      *v2beta1.SpiderIPPool
		reserved  *netipx.IPSet
		allocated v2beta1.PoolIPAllocations
		want      string // empty: exhausted
		total     int64
	}{
		{name: "first address of the range", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""), want: "10.6.0.10", total: 3},
		{name: "network address is never handed out", pool: pool("10.6.0.0/24", []string{"10.6.0.0-10.6.0.2"}, nil, ""), want: "10.6.0.1", total: 2},
		{name: "gateway is skipped", pool: pool("10.6.0.0/24", []string{"10.6.0.1-10.6.0.3"}, nil, "10.6.0.1"), want: "10.6.0.2", total: 2},
		{name: "excluded addresses are skipped", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.20"}, []string{"10.6.0.10-10.6.0.14"}, ""), want: "10.6.0.15", total: 6},
		{name: "reserved addresses are skipped", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""), reserved: set("10.6.0.10", "10.6.0.11"), want: "10.6.0.12", total: 1},
		{name: "allocated addresses are skipped", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""), allocated: alloc("a", "10.6.0.10", "10.6.0.11"), want: "10.6.0.12", total: 3},
		{name: "last address of the range", pool: pool("10.6.0.0/24", []string{"10.6.0.250-10.6.0.254"}, nil, ""), allocated: alloc("a", "10.6.0.250", "10.6.0.251", "10.6.0.252", "10.6.0.253"), want: "10.6.0.254", total: 5},
		{name: "broadcast address is never handed out", pool: pool("10.6.0.0/24", []string{"10.6.0.254-10.6.0.255"}, nil, ""), allocated: alloc("a", "10.6.0.254"), want: "", total: 1},
		{name: "exhausted", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.11"}, nil, ""), allocated: alloc("a", "10.6.0.10", "10.6.0.11"), want: "", total: 2},
		{name: "exhausted by gateway, exclusion and reservation", pool: pool("10.6.0.0/24", []string{"10.6.0.1-10.6.0.3"}, []string{"10.6.0.2"}, "10.6.0.1"), reserved: set("10.6.0.3"), want: "", total: 0},
		{name: "gaps between ranges", pool: pool("10.6.0.0/24", []string{"10.6.0.10", "10.6.0.20-10.6.0.21"}, nil, ""), allocated: alloc("a", "10.6.0.10"), want: "10.6.0.20", total: 3},
		{name: "IPv6 first", pool: pool("fd00:6::/64", []string{"fd00:6::1-fd00:6::3"}, nil, "fd00:6::1"), want: "fd00:6::2", total: 2},
		{name: "IPv6 last address of the subnet is usable", pool: pool("fd00:6::/120", []string{"fd00:6::fe-fd00:6::ff"}, nil, ""), allocated: alloc("a", "fd00:6::fe"), want: "fd00:6::ff", total: 2},
		{name: "IPv6 exhausted", pool: pool("fd00:6::/64", []string{"fd00:6::5"}, nil, ""), allocated: alloc("a", "fd00:6::5"), want: "", total: 1},
		{name: "IPv6 large range", pool: pool("fd00:6::/64", []string{"fd00:6::1-fd00:6::ffff:ffff:ffff"}, nil, "fd00:6::1"), want: "fd00:6::2", total: 0xffffffffffff - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRange(tt.pool, tt.reserved)
			if err != nil {
				t.Fatal(err)
			}
			if r.Total != tt.total {
				t.Errorf("Total = %d, want %d", r.Total, tt.total)
			}
			got, err := r.Next(Used(tt.allocated), len(tt.allocated))
			if tt.want == "" {
				var ex *ExhaustedError
				if !errors.As(err, &ex) || !errors.Is(err, ErrExhausted) {
					t.Fatalf("Next = %v, %v; want an ExhaustedError", got, err)
				}
				if ex.Pool != "p" || ex.Allocated != int64(len(tt.allocated)) || ex.Total != tt.total {
					t.Errorf("error counts = %+v", ex)
				}
				return
			}
			if err != nil || got != netip.MustParseAddr(tt.want) {
				t.Fatalf("Next = %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestNewRangeInvalidSpec(t *testing.T) {
	_, err := NewRange(pool("10.6.0.1/24", nil, nil, ""), nil)
	if err == nil {
		t.Fatal("want an error naming spec.subnet")
	}
}

func TestExhaustedMessageNamesPoolAndCounts(t *testing.T) {
	e := &ExhaustedError{Pool: "blue", Family: 4, Total: 10, Allocated: 10, Reserved: 2}
	want := "pool blue has no free IPv4 address: 10 allocated of 10 allocatable (2 more withheld by SpiderReservedIP); add addresses to spec.ips or release pods"
	if e.Error() != want {
		t.Errorf("got %q", e.Error())
	}
}

// Issue 10 finding 7: the next allocation continues after the address handed out
// last, so a released address is reused only once every other one has been.
func TestTakeOrder(t *testing.T) {
	tests := []struct {
		name      string
		pool      *v2beta1.SpiderIPPool
		order     Order
		last      string // empty: no cursor yet
		allocated v2beta1.PoolIPAllocations
		want      string // empty: exhausted
	}{
		{name: "no cursor: the first address", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.20"}, nil, ""), want: "10.6.0.10"},
		{name: "after the last, not the lower one just freed", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.20"}, nil, ""),
			last: "10.6.0.12", allocated: alloc("a", "10.6.0.11", "10.6.0.12"), want: "10.6.0.13"},
		{name: "skips held addresses after the cursor", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.20"}, nil, ""),
			last: "10.6.0.12", allocated: alloc("a", "10.6.0.13", "10.6.0.14"), want: "10.6.0.15"},
		{name: "wraps around at the end", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""),
			last: "10.6.0.12", allocated: alloc("a", "10.6.0.10", "10.6.0.12"), want: "10.6.0.11"},
		{name: "the cursor's own address comes last", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""),
			last: "10.6.0.11", allocated: alloc("a", "10.6.0.10", "10.6.0.12"), want: "10.6.0.11"},
		{name: "next range across a gap", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.11", "10.6.0.20-10.6.0.21"}, nil, ""),
			last: "10.6.0.11", want: "10.6.0.20"},
		{name: "cursor in a gap", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.11", "10.6.0.20-10.6.0.21"}, nil, ""),
			last: "10.6.0.15", want: "10.6.0.20"},
		{name: "cursor past the range", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""),
			last: "10.6.0.200", allocated: alloc("a", "10.6.0.10"), want: "10.6.0.11"},
		{name: "cursor of the other family", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.12"}, nil, ""),
			last: "fd00::12", want: "10.6.0.10"},
		{name: "gateway after the cursor is skipped", pool: pool("10.6.0.0/24", []string{"10.6.0.1-10.6.0.3"}, nil, "10.6.0.2"),
			last: "10.6.0.1", want: "10.6.0.3"},
		{name: "exhausted", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.11"}, nil, ""),
			last: "10.6.0.10", allocated: alloc("a", "10.6.0.10", "10.6.0.11"), want: ""},
		{name: "IPv6 after the cursor", pool: pool("fd00:6::/64", []string{"fd00:6::1-fd00:6::ff"}, nil, ""),
			last: "fd00:6::9", allocated: alloc("a", "fd00:6::1"), want: "fd00:6::a"},
		{name: "lowest order ignores the cursor", pool: pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.20"}, nil, ""),
			order: Lowest, last: "10.6.0.12", allocated: alloc("a", "10.6.0.12"), want: "10.6.0.10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRange(tt.pool, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Order = tt.order
			if tt.last != "" {
				r.Last = netip.MustParseAddr(tt.last)
			}
			got, err := r.Take(Used(tt.allocated), len(tt.allocated))
			if tt.want == "" {
				if !errors.Is(err, ErrExhausted) {
					t.Fatalf("got %v %v, want exhausted", got, err)
				}
				return
			}
			if err != nil || got != netip.MustParseAddr(tt.want) {
				t.Fatalf("got %v %v, want %s", got, err, tt.want)
			}
			if r.Last != got {
				t.Errorf("Last = %v after handing out %v", r.Last, got)
			}
		})
	}
}

// Released addresses go to the back of the line: in a batch of allocations and
// releases, an address freed is handed out only after every never-used one.
func TestApplyReusesReleasedAddressesLast(t *testing.T) {
	r := mustRange(t, pool("10.6.0.0/24", []string{"10.6.0.10-10.6.0.13"}, nil, ""))
	st := &v2beta1.IPPoolStatus{}
	Apply(r, st, []Op{{Kind: Allocate, Owner: owner("a", "eth0")}, {Kind: Allocate, Owner: owner("b", "eth0")}})
	res, _ := Apply(r, st, []Op{
		{Kind: Release, Owner: owner("a", "eth0")}, // frees 10.6.0.10
		{Kind: Allocate, Owner: owner("c", "eth0")},
		{Kind: Allocate, Owner: owner("d", "eth0")},
		{Kind: Allocate, Owner: owner("e", "eth0")},
	})
	var got []string
	for _, r := range res[1:] {
		got = append(got, r.Addr.String())
	}
	if want := []string{"10.6.0.12", "10.6.0.13", "10.6.0.10"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("handed out %v, want %v", got, want)
	}
}

func TestParseOrder(t *testing.T) {
	for _, o := range []Order{NextAfterLast, Lowest} {
		if got, err := ParseOrder(o.String()); err != nil || got != o {
			t.Errorf("ParseOrder(%q) = %v, %v", o, got, err)
		}
	}
	if _, err := ParseOrder("random"); err == nil || !strings.Contains(err.Error(), "next-after-last") {
		t.Errorf("ParseOrder(random) = %v, want an error listing the orders", err)
	}
}
