package block

import (
	"math"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/allocator"
)

func rangeOf(t *testing.T, subnet string, ips, exclude []string, gw string) *allocator.Range {
	t.Helper()
	p := &v2beta1.SpiderIPPool{}
	p.Name = "p"
	p.Spec.Subnet, p.Spec.IPs, p.Spec.ExcludeIPs = subnet, ips, exclude
	if gw != "" {
		p.Spec.Gateway = &gw
	}
	r, err := allocator.NewRange(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOf(t *testing.T) {
	tests := []struct{ subnet, addr, want string }{
		{"10.6.0.0/16", "10.6.0.0", "10.6.0.0/28"},
		{"10.6.0.0/16", "10.6.0.15", "10.6.0.0/28"},
		{"10.6.0.0/16", "10.6.0.16", "10.6.0.16/28"},
		{"10.6.0.0/16", "10.6.255.254", "10.6.255.240/28"},
		{"10.6.0.0/30", "10.6.0.2", "10.6.0.0/30"}, // subnet smaller than a block
		{"10.6.0.0/32", "10.6.0.0", "10.6.0.0/32"},
		{"fd00:6::/64", "fd00:6::1f", "fd00:6::10/124"},
		{"fd00:6::/126", "fd00:6::3", "fd00:6::/126"},
	}
	for _, tt := range tests {
		got := Of(netip.MustParsePrefix(tt.subnet), netip.MustParseAddr(tt.addr))
		if got.String() != tt.want {
			t.Errorf("Of(%s, %s) = %s, want %s", tt.subnet, tt.addr, got, tt.want)
		}
	}
}

func TestName(t *testing.T) {
	tests := []struct{ pool, blk, want string }{
		{"blue", "10.6.0.16/28", "blue.10.6.0.16"},
		{"a.b", "10.6.0.0/28", "a.b.10.6.0.0"},
		{"blue", "fd00:6::10/124", "blue.fd000006000000000000000000000010"},
	}
	for _, tt := range tests {
		if got := Name(tt.pool, netip.MustParsePrefix(tt.blk)); got != tt.want {
			t.Errorf("Name(%s, %s) = %s, want %s", tt.pool, tt.blk, got, tt.want)
		}
	}
	long := strings.Repeat("a", 250)
	other := strings.Repeat("a", 249) + "b"
	for _, blk := range []string{"10.6.0.0/28", "fd00:6::/124"} {
		n1, n2 := Name(long, netip.MustParsePrefix(blk)), Name(other, netip.MustParsePrefix(blk))
		if errs := validation.IsDNS1123Subdomain(n1); len(errs) > 0 {
			t.Errorf("name of a long pool is not a valid object name: %v", errs)
		}
		if n1 == n2 {
			t.Errorf("two long pool names that differ at the end got the same block name %s", n1)
		}
	}
}

func TestLayout(t *testing.T) {
	tests := []struct {
		name    string
		r       *allocator.Range
		count   uint64
		first   string
		last    string
		outside string // a block of the subnet the layout must not have
	}{
		{name: "one range across blocks", r: rangeOf(t, "10.6.0.0/16", []string{"10.6.0.1-10.6.3.232"}, nil, ""),
			count: 63, first: "10.6.0.0/28", last: "10.6.3.224/28", outside: "10.6.3.240/28"},
		{name: "a /16 filled", r: rangeOf(t, "10.6.0.0/16", []string{"10.6.0.1-10.6.255.254"}, nil, ""),
			count: 4096, first: "10.6.0.0/28", last: "10.6.255.240/28"},
		{name: "two ranges sharing a block", r: rangeOf(t, "10.6.0.0/24", []string{"10.6.0.1-10.6.0.3", "10.6.0.9-10.6.0.40"}, nil, ""),
			count: 3, first: "10.6.0.0/28", last: "10.6.0.32/28", outside: "10.6.0.48/28"},
		{name: "gap of whole blocks", r: rangeOf(t, "10.6.0.0/24", []string{"10.6.0.1", "10.6.0.200"}, nil, ""),
			count: 2, first: "10.6.0.0/28", last: "10.6.0.192/28", outside: "10.6.0.16/28"},
		{name: "exclusion empties a block", r: rangeOf(t, "10.6.0.0/24", []string{"10.6.0.1-10.6.0.47"}, []string{"10.6.0.16-10.6.0.31"}, ""),
			count: 2, first: "10.6.0.0/28", last: "10.6.0.32/28", outside: "10.6.0.16/28"},
		{name: "subnet smaller than a block", r: rangeOf(t, "10.6.0.0/30", []string{"10.6.0.1-10.6.0.2"}, nil, ""),
			count: 1, first: "10.6.0.0/30", last: "10.6.0.0/30"},
		{name: "IPv6", r: rangeOf(t, "fd00:6::/64", []string{"fd00:6::1-fd00:6::100"}, nil, ""),
			count: 17, first: "fd00:6::/124", last: "fd00:6::100/124", outside: "fd00:6::110/124"},
		{name: "IPv6 beyond 2^64 blocks", r: rangeOf(t, "fd00::/8", []string{"fd00::1-fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"}, nil, ""),
			count: math.MaxUint64, first: "fd00::/124"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLayout(tt.r)
			if l.Count() != tt.count {
				t.Fatalf("Count = %d, want %d", l.Count(), tt.count)
			}
			if got := l.At(0).String(); got != tt.first {
				t.Errorf("At(0) = %s, want %s", got, tt.first)
			}
			if tt.last != "" {
				if got := l.At(l.Count() - 1).String(); got != tt.last {
					t.Errorf("At(last) = %s, want %s", got, tt.last)
				}
			}
			if l.Count() < 1<<20 {
				for i := range l.Count() {
					blk := l.At(i)
					if j, ok := l.Index(blk); !ok || j != i {
						t.Fatalf("Index(At(%d) = %s) = %d, %v", i, blk, j, ok)
					}
					if len(Addresses(tt.r, blk)) == 0 {
						t.Errorf("block %s has no allocatable address", blk)
					}
				}
			}
			if tt.outside != "" {
				if _, ok := l.Index(netip.MustParsePrefix(tt.outside)); ok {
					t.Errorf("Index(%s) is in the layout", tt.outside)
				}
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	r := rangeOf(t, "10.6.0.0/24", []string{"10.6.0.0-10.6.0.20"}, []string{"10.6.0.3"}, "10.6.0.1")
	got := Addresses(r, netip.MustParsePrefix("10.6.0.0/28"))
	// network address, gateway and the excluded address are not allocatable
	if len(got) != 13 || got[0].String() != "10.6.0.2" || got[1].String() != "10.6.0.4" || got[12].String() != "10.6.0.15" {
		t.Errorf("Addresses = %v", got)
	}
}

func TestAddrOfName(t *testing.T) {
	for _, blk := range []string{"10.6.0.16/28", "fd00:6::10/124", "10.6.0.0/30"} {
		p := netip.MustParsePrefix(blk)
		for _, pool := range []string{"blue", "a.b.c", strings.Repeat("x", 250)} {
			got, ok := AddrOfName(Name(pool, p), p.Addr().Is4())
			if !ok || got != p.Addr() {
				t.Errorf("AddrOfName(Name(%.10s, %s)) = %v, %v", pool, blk, got, ok)
			}
		}
	}
	for _, bad := range []string{"blue", "blue.10.6.0", "blue.x.6.0.1", "10.6.0.1"} {
		if a, ok := AddrOfName(bad, true); ok {
			t.Errorf("AddrOfName(%q) = %v, want not a block name", bad, a)
		}
	}
	if a, ok := AddrOfName("blue.fd00", false); ok {
		t.Errorf("AddrOfName of a short IPv6 label = %v", a)
	}
}
