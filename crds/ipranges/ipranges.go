// Package ipranges parses the address notations of the spiderpool API (subnets in CIDR
// form, single addresses and "first-last" ranges) with net/netip, and computes the set
// of addresses a pool may hand out. It knows nothing of storage or of pods.
package ipranges

import (
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"strings"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// Family returns the spiderpool ipVersion (4 or 6) of an address. IPv4-mapped IPv6
// addresses count as IPv6, as they are written.
func Family(a netip.Addr) int64 {
	if a.Is4() {
		return v2beta1.IPv4
	}
	return v2beta1.IPv6
}

// PoolFamily is a pool's IP family: spec.ipVersion, else the family of spec.subnet; 0
// when neither says (a subnet that does not parse). Every component reads a pool's
// family through it.
func PoolFamily(s *v2beta1.IPPoolSpec) int64 {
	if s.IPVersion != nil {
		return *s.IPVersion
	}
	if sub, err := netip.ParsePrefix(s.Subnet); err == nil {
		return Family(sub.Addr())
	}
	return 0
}

// ParseSubnet parses a subnet that must be in canonical CIDR form (no host bits).
func ParseSubnet(s string, path *field.Path) (netip.Prefix, *field.Error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, field.Invalid(path, s, "must be a CIDR such as 10.6.0.0/16 or fd00:6::/64")
	}
	if p.Masked() != p {
		return netip.Prefix{}, field.Invalid(path, s, fmt.Sprintf("must be in canonical form with no host bits set: use %s", p.Masked()))
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, field.Invalid(path, s, "must not carry an IPv6 zone")
	}
	return p, nil
}

// ParseAddr parses a single address without zone or prefix length.
func ParseAddr(s string, path *field.Path) (netip.Addr, *field.Error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, field.Invalid(path, s, "must be an IP address such as 10.6.0.1 or fd00:6::1")
	}
	return a, nil
}

// ParseRange parses "a" or "a-b" (a ≤ b, same family) into an inclusive range.
func ParseRange(s string, path *field.Path) (netipx.IPRange, *field.Error) {
	first, last, isRange := strings.Cut(s, "-")
	from, ferr := ParseAddr(first, path)
	if ferr != nil {
		return netipx.IPRange{}, field.Invalid(path, s, "must be an IP address or a range \"first-last\" such as 10.6.0.10-10.6.0.99")
	}
	if !isRange {
		return netipx.IPRangeFrom(from, from), nil
	}
	to, terr := ParseAddr(last, path)
	if terr != nil {
		return netipx.IPRange{}, field.Invalid(path, s, "must be an IP address or a range \"first-last\" such as 10.6.0.10-10.6.0.99")
	}
	if from.Is4() != to.Is4() {
		return netipx.IPRange{}, field.Invalid(path, s, "both ends of a range must be of the same IP family")
	}
	if to.Less(from) {
		return netipx.IPRange{}, field.Invalid(path, s, "the first address of a range must not be greater than the last")
	}
	return netipx.IPRangeFrom(from, to), nil
}

// ParseRanges parses a list of addresses and ranges. Each must be of the given family
// (when family is 4 or 6) and, when subnet is valid, inside it. Errors name the index.
func ParseRanges(list []string, family int64, subnet netip.Prefix, path *field.Path) ([]netipx.IPRange, field.ErrorList) {
	var errs field.ErrorList
	out := make([]netipx.IPRange, 0, len(list))
	for i, s := range list {
		p := path.Index(i)
		r, err := ParseRange(s, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if family != 0 && Family(r.From()) != family {
			errs = append(errs, field.Invalid(p, s, fmt.Sprintf("must be an IPv%d address or range", family)))
			continue
		}
		if subnet.IsValid() && (!subnet.Contains(r.From()) || !subnet.Contains(r.To())) {
			errs = append(errs, field.Invalid(p, s, fmt.Sprintf("must be inside subnet %s", subnet)))
			continue
		}
		out = append(out, r)
	}
	return out, errs
}

// Set builds an IPSet from ranges.
func Set(ranges ...[]netipx.IPRange) *netipx.IPSet {
	var b netipx.IPSetBuilder
	for _, rs := range ranges {
		for _, r := range rs {
			b.AddRange(r)
		}
	}
	s, _ := b.IPSet()
	return s
}

// Allocatable is the set of addresses a pool may hand out: spec.ips, minus
// spec.excludeIPs, minus the gateway, minus reserved, minus the subnet's network
// and (IPv4) broadcast addresses. Errors name the offending spec field.
func Allocatable(spec *v2beta1.IPPoolSpec, reserved *netipx.IPSet) (*netipx.IPSet, field.ErrorList) {
	specPath := field.NewPath("spec")
	subnet, serr := ParseSubnet(spec.Subnet, specPath.Child("subnet"))
	if serr != nil {
		return nil, field.ErrorList{serr}
	}
	family := Family(subnet.Addr())
	ips, errs := ParseRanges(spec.IPs, family, subnet, specPath.Child("ips"))
	excl, eerrs := ParseRanges(spec.ExcludeIPs, family, subnet, specPath.Child("excludeIPs"))
	errs = append(errs, eerrs...)
	var b netipx.IPSetBuilder
	for _, r := range ips {
		b.AddRange(r)
	}
	for _, r := range excl {
		b.RemoveRange(r)
	}
	if spec.Gateway != nil && *spec.Gateway != "" {
		gw, gerr := ParseAddr(*spec.Gateway, specPath.Child("gateway"))
		if gerr != nil {
			errs = append(errs, gerr)
		} else {
			b.Remove(gw)
		}
	}
	b.Remove(subnet.Addr())
	if subnet.Addr().Is4() && subnet.Bits() < 31 {
		b.Remove(netipx.PrefixLastIP(subnet))
	}
	if reserved != nil {
		b.RemoveSet(reserved)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	s, err := b.IPSet()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(specPath, err)}
	}
	return s, nil
}

// Count returns the number of addresses in s, saturating at math.MaxInt64 (large IPv6
// ranges).
func Count(s *netipx.IPSet) int64 {
	if s == nil {
		return 0
	}
	total := new(big.Int)
	for _, r := range s.Ranges() {
		total.Add(total, rangeSize(r))
	}
	if !total.IsInt64() {
		return math.MaxInt64
	}
	return total.Int64()
}

func rangeSize(r netipx.IPRange) *big.Int {
	from := new(big.Int).SetBytes(r.From().AsSlice())
	to := new(big.Int).SetBytes(r.To().AsSlice())
	n := new(big.Int).Sub(to, from)
	return n.Add(n, big.NewInt(1))
}

// CIDR writes addr with the prefix length of subnet, the form SpiderEndpoint records.
func CIDR(addr netip.Addr, subnet netip.Prefix) string {
	return netip.PrefixFrom(addr, subnet.Bits()).String()
}
