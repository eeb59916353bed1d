package pool

import (
	"fmt"
	"net/netip"
	"strings"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/ipranges"
)

// canonicalRanges merges a list of addresses and ranges into sorted, disjoint,
// non-adjacent ranges written "a" or "a-b". A list with an entry that does not
// parse is returned unchanged for the validator to report.
func canonicalRanges(list []string) []string {
	if len(list) == 0 {
		return list
	}
	var b netipx.IPSetBuilder
	for _, s := range list {
		r, err := ipranges.ParseRange(s, nil)
		if err != nil {
			return list
		}
		b.AddRange(r)
	}
	set, err := b.IPSet()
	if err != nil {
		return list
	}
	out := make([]string, 0, len(set.Ranges()))
	for _, r := range set.Ranges() {
		out = append(out, rangeString(r))
	}
	return out
}

func rangeString(r netipx.IPRange) string {
	if r.From() == r.To() {
		return r.From().String()
	}
	return r.From().String() + "-" + r.To().String()
}

// canonicalPrefix returns s masked and in netip's canonical spelling, without
// surrounding white space, or s when it does not parse.
func canonicalPrefix(s string) string {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || p.Addr().Zone() != "" {
		return s
	}
	return p.Masked().String()
}

// canonicalAddr returns s in netip's canonical spelling, without surrounding white
// space, or s when it does not parse (or carries a zone, which no pool field may).
func canonicalAddr(s string) string {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return s
	}
	return a.String()
}

// requireCanonical refuses an address field the defaulter could not put in canonical
// form (it parses, but only leniently): consumers parse strictly.
func requireCanonical(p *field.Path, value, canonical string) *field.Error {
	if value == canonical {
		return nil
	}
	return field.Invalid(p, value, fmt.Sprintf("must be written canonically, without white space: %s", canonical))
}
