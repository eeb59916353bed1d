package annotations

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
)

// ValidateRoute checks that dst is a canonical CIDR, gw an address of the same family.
func ValidateRoute(r v2beta1.Route, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	dst, derr := ipranges.ParseSubnet(r.Dst, p.Child("dst"))
	if derr != nil {
		errs = append(errs, derr)
	}
	gw, gerr := ipranges.ParseAddr(r.Gw, p.Child("gw"))
	if gerr != nil {
		errs = append(errs, gerr)
	}
	if derr == nil && gerr == nil && dst.Addr().Is4() != gw.Is4() {
		errs = append(errs, field.Invalid(p.Child("gw"), r.Gw, "must be of the same IP family as dst "+r.Dst))
	}
	return errs
}

// RoutesFor returns the routes whose gateway lies in subnet: the ones that belong to
// the interface addressed from that subnet.
func RoutesFor(routes []v2beta1.Route, subnet netip.Prefix) []v2beta1.Route {
	var out []v2beta1.Route
	for _, r := range routes {
		if gw, err := netip.ParseAddr(r.Gw); err == nil && subnet.Contains(gw) {
			out = append(out, r)
		}
	}
	return out
}
