package service

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
)

// poolNetwork is what a pool hands a pod besides its address, parsed and written in
// canonical form: the gateway and the pool's routes.
type poolNetwork struct {
	Gateway netip.Addr // invalid when the pool has none
	Routes  []v2beta1.Route
}

// networkOf parses a pool's gateway and routes. Admission canonicalises them, but a
// pool written before that (or while the webhook was away) reaches ipamd as written:
// an unparsable field refuses the pool before any address is taken, naming the field,
// instead of handing the CNI plugin something that fails the pod after allocation.
// What parses is returned even with an error.
func networkOf(p *v2beta1.SpiderIPPool) (poolNetwork, error) {
	var out poolNetwork
	var errs field.ErrorList
	spec := field.NewPath("spec")
	subnet, serr := ipranges.ParseSubnet(p.Spec.Subnet, spec.Child("subnet"))
	if serr != nil {
		errs = append(errs, serr)
	}
	if p.Spec.Gateway != nil && *p.Spec.Gateway != "" {
		gw, gerr := ipranges.ParseAddr(*p.Spec.Gateway, spec.Child("gateway"))
		switch {
		case gerr != nil:
			errs = append(errs, gerr)
		case serr == nil && gw.Is4() != subnet.Addr().Is4():
			errs = append(errs, field.Invalid(spec.Child("gateway"), *p.Spec.Gateway, "must be of the IP family of spec.subnet "+p.Spec.Subnet))
		default:
			out.Gateway = gw
		}
	}
	for i, r := range p.Spec.Routes {
		path := spec.Child("routes").Index(i)
		if rerrs := annotations.ValidateRoute(r, path); len(rerrs) > 0 {
			errs = append(errs, rerrs...)
			continue
		}
		dst, _ := ipranges.ParseSubnet(r.Dst, path.Child("dst"))
		gw, _ := ipranges.ParseAddr(r.Gw, path.Child("gw"))
		out.Routes = append(out.Routes, v2beta1.Route{Dst: dst.String(), Gw: gw.String()})
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("pool %s cannot serve pods: %w; correct the pool (kubectl edit spiderippool %s)", p.Name, errs.ToAggregate(), p.Name)
	}
	return out, nil
}

func gatewayString(n poolNetwork) string {
	if !n.Gateway.IsValid() {
		return ""
	}
	return n.Gateway.String()
}
