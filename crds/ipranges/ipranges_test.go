package ipranges

import (
	"net/netip"
	"strings"
	"testing"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func TestParseRange(t *testing.T) {
	cases := []struct {
		in, from, to, wantErr string
	}{
		{in: "10.0.0.1", from: "10.0.0.1", to: "10.0.0.1"},
		{in: "10.0.0.1-10.0.0.9", from: "10.0.0.1", to: "10.0.0.9"},
		{in: "fd00::1-fd00::ff", from: "fd00::1", to: "fd00::ff"},
		{in: "10.0.0.9-10.0.0.1", wantErr: "must not be greater"},
		{in: "10.0.0.1-fd00::1", wantErr: "same IP family"},
		{in: "10.0.0.300", wantErr: "must be an IP address or a range"},
		{in: "10.0.0.1/24", wantErr: "must be an IP address or a range"},
		{in: "10.0.0.1-", wantErr: "must be an IP address or a range"},
		{in: "fe80::1%eth0", wantErr: "must be an IP address or a range"},
		{in: "", wantErr: "must be an IP address or a range"},
	}
	for _, tc := range cases {
		r, err := ParseRange(tc.in, field.NewPath("spec", "ips").Index(0))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "spec.ips[0]") {
				t.Errorf("%q: want error %q at spec.ips[0], got %v", tc.in, tc.wantErr, err)
			}
			continue
		}
		if err != nil || r.From().String() != tc.from || r.To().String() != tc.to {
			t.Errorf("%q: got %v %v", tc.in, r, err)
		}
	}
}

func TestParseSubnet(t *testing.T) {
	for in, want := range map[string]string{
		"10.6.0.0/16":  "",
		"fd00:6::/64":  "",
		"10.6.0.1/16":  "use 10.6.0.0/16",
		"10.6.0.0/33":  "must be a CIDR",
		"10.6.0.0":     "must be a CIDR",
		"fd00:6::1/64": "use fd00:6::/64",
	} {
		_, err := ParseSubnet(in, field.NewPath("spec", "subnet"))
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: want %q, got %v", in, want, err)
		}
	}
}

func TestAllocatable(t *testing.T) {
	reserved := Set(mustRanges(t, "10.6.0.7"))
	cases := []struct {
		name      string
		spec      v2beta1.IPPoolSpec
		count     int64
		in, notIn []string
		wantErr   string
	}{
		{
			name:  "first and last of a /29 without gateway: network and broadcast are never handed out",
			spec:  v2beta1.IPPoolSpec{Subnet: "10.6.0.0/29", IPs: []string{"10.6.0.0-10.6.0.7"}},
			count: 6, in: []string{"10.6.0.1", "10.6.0.6"}, notIn: []string{"10.6.0.0", "10.6.0.7"},
		},
		{
			name:  "gateway, excluded and reserved removed",
			spec:  v2beta1.IPPoolSpec{Subnet: "10.6.0.0/24", IPs: []string{"10.6.0.1-10.6.0.10"}, ExcludeIPs: []string{"10.6.0.5-10.6.0.6"}, Gateway: ptr.To("10.6.0.1")},
			count: 6, in: []string{"10.6.0.2", "10.6.0.10"}, notIn: []string{"10.6.0.1", "10.6.0.5", "10.6.0.6", "10.6.0.7"},
		},
		{
			name:  "overlapping ranges merge",
			spec:  v2beta1.IPPoolSpec{Subnet: "10.6.0.0/24", IPs: []string{"10.6.0.10-10.6.0.20", "10.6.0.15-10.6.0.25", "10.6.0.25"}},
			count: 16,
		},
		{
			name:  "IPv6: no broadcast, subnet-router anycast excluded",
			spec:  v2beta1.IPPoolSpec{Subnet: "fd00::/120", IPs: []string{"fd00::-fd00::ff"}, Gateway: ptr.To("fd00::1")},
			count: 254, in: []string{"fd00::ff", "fd00::2"}, notIn: []string{"fd00::", "fd00::1"},
		},
		{
			name:  "large IPv6 range saturates",
			spec:  v2beta1.IPPoolSpec{Subnet: "fd00::/32", IPs: []string{"fd00::-fd00:0:ffff:ffff:ffff:ffff:ffff:ffff"}},
			count: 1<<63 - 1,
		},
		{
			name:  "empty ips: nothing allocatable",
			spec:  v2beta1.IPPoolSpec{Subnet: "10.6.0.0/24"},
			count: 0,
		},
		{name: "ip outside subnet", spec: v2beta1.IPPoolSpec{Subnet: "10.6.0.0/24", IPs: []string{"10.7.0.1"}}, wantErr: "spec.ips[0]: Invalid value: \"10.7.0.1\": must be inside subnet 10.6.0.0/24"},
		{name: "wrong family", spec: v2beta1.IPPoolSpec{Subnet: "10.6.0.0/24", IPs: []string{"fd00::1"}}, wantErr: "must be an IPv4 address or range"},
		{name: "excluded outside subnet", spec: v2beta1.IPPoolSpec{Subnet: "10.6.0.0/24", ExcludeIPs: []string{"10.7.0.1"}}, wantErr: "spec.excludeIPs[0]"},
		{name: "bad gateway", spec: v2beta1.IPPoolSpec{Subnet: "10.6.0.0/24", Gateway: ptr.To("x")}, wantErr: "spec.gateway"},
		{name: "bad subnet", spec: v2beta1.IPPoolSpec{Subnet: "10.6.0.1/24"}, wantErr: "spec.subnet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, errs := Allocatable(&tc.spec, reserved)
			if tc.wantErr != "" {
				if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) {
					t.Fatalf("want %q, got %v", tc.wantErr, errs)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if got := Count(s); got != tc.count {
				t.Errorf("count %d, want %d", got, tc.count)
			}
			for _, a := range tc.in {
				if !s.Contains(netip.MustParseAddr(a)) {
					t.Errorf("%s should be allocatable", a)
				}
			}
			for _, a := range tc.notIn {
				if s.Contains(netip.MustParseAddr(a)) {
					t.Errorf("%s must not be allocatable", a)
				}
			}
		})
	}
}

func mustRanges(t *testing.T, list ...string) []netipx.IPRange {
	t.Helper()
	rs, errs := ParseRanges(list, 0, netip.Prefix{}, field.NewPath("x"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return rs
}

func TestCIDR(t *testing.T) {
	if got := CIDR(netip.MustParseAddr("10.6.0.7"), netip.MustParsePrefix("10.6.0.0/16")); got != "10.6.0.7/16" {
		t.Errorf("got %s", got)
	}
}

// FuzzParseRange: every accepted range is ordered, single-family, and its text form
// parses back to the same range.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "10.0.0.1-10.0.0.9", "fd00::1-fd00::ff", "10.0.0.9-10.0.0.1", "::ffff:10.0.0.1", "1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s, field.NewPath("x"))
		if err != nil {
			return
		}
		if r.To().Less(r.From()) || r.From().Is4() != r.To().Is4() {
			t.Fatalf("%q accepted as %v", s, r)
		}
		back, err := ParseRange(r.From().String()+"-"+r.To().String(), field.NewPath("x"))
		if err != nil || back != r {
			t.Fatalf("%q → %v does not round-trip: %v %v", s, r, back, err)
		}
	})
}
