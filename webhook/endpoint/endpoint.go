// Package endpoint validates SpiderEndpoints: every record names one interface of
// the pod, once, with addresses that parse, and the endpoint names the pod UID that
// holds it — the facts ipamd's StatefulSet takeover and the garbage collector rely on.
package endpoint

import (
	"context"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

var kind = v2beta1.GroupVersion.WithKind(v2beta1.KindSpiderEndpoint).GroupKind()

// Validator checks SpiderEndpoints on create and update.
type Validator struct{}

var _ admission.Validator[*v2beta1.SpiderEndpoint] = Validator{}

// Validate returns what is wrong with an endpoint.
func Validate(e *v2beta1.SpiderEndpoint) field.ErrorList {
	cur := field.NewPath("status", "current")
	var errs field.ErrorList
	if e.Status.Current.UID == "" {
		errs = append(errs, field.Required(cur.Child("uid"), "the metadata.uid of the pod that holds these addresses"))
	}
	seen := map[string]int{}
	for i, d := range e.Status.Current.IPs {
		p := cur.Child("ips").Index(i)
		if err := annotations.ValidateInterfaceName(d.Interface, p.Child("interface")); err != nil {
			errs = append(errs, err)
		} else if prev, dup := seen[d.Interface]; dup {
			errs = append(errs, field.Duplicate(p.Child("interface"), fmt.Sprintf("%s is already recorded by status.current.ips[%d]; keep one record per interface", d.Interface, prev)))
		} else {
			seen[d.Interface] = i
		}
		errs = append(errs, address(d.IPv4, true, p.Child("ipv4"))...)
		errs = append(errs, address(d.IPv6, false, p.Child("ipv6"))...)
		if d.IPv4 == nil && d.IPv6 == nil {
			errs = append(errs, field.Required(p, "an ipv4 or ipv6 address for interface "+d.Interface))
		}
	}
	return errs
}

func address(s *string, v4 bool, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	pfx, err := netip.ParsePrefix(*s)
	want := "an IPv4 address with the pool's prefix length, e.g. 10.6.0.10/16"
	if !v4 {
		want = "an IPv6 address with the pool's prefix length, e.g. fd00:6::10/64"
	}
	if err != nil || pfx.Addr().Is4() != v4 || pfx.Addr().Zone() != "" {
		return field.ErrorList{field.Invalid(p, *s, "must be "+want)}
	}
	return nil
}

func invalid(e *v2beta1.SpiderEndpoint) error {
	if errs := Validate(e); len(errs) > 0 {
		return apierrors.NewInvalid(kind, e.Name, errs)
	}
	return nil
}

// ValidateCreate implements admission.Validator.
func (Validator) ValidateCreate(_ context.Context, e *v2beta1.SpiderEndpoint) (admission.Warnings, error) {
	return nil, invalid(e)
}

// ValidateUpdate implements admission.Validator.
func (Validator) ValidateUpdate(_ context.Context, _, e *v2beta1.SpiderEndpoint) (admission.Warnings, error) {
	if e.DeletionTimestamp != nil {
		// Removing finalizers from a terminating endpoint must never be blocked.
		return nil, nil
	}
	return nil, invalid(e)
}

// ValidateDelete implements admission.Validator.
func (Validator) ValidateDelete(context.Context, *v2beta1.SpiderEndpoint) (admission.Warnings, error) {
	return nil, nil
}
