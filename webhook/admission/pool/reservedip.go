package pool

import (
	"context"

	"net/netip"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/crds/ipranges"
)

var reservedKind = v2beta1.GroupVersion.WithKind(v2beta1.KindSpiderReservedIP).GroupKind()

// ReservedDefaulter derives a SpiderReservedIP's ipVersion from its first address
// and writes its ranges canonically.
type ReservedDefaulter struct{}

var _ admission.Defaulter[*v2beta1.SpiderReservedIP] = ReservedDefaulter{}

// Default implements admission.Defaulter.
func (ReservedDefaulter) Default(_ context.Context, r *v2beta1.SpiderReservedIP) error {
	if r.Spec.IPVersion == nil {
		for _, s := range r.Spec.IPs {
			if rg, err := ipranges.ParseRange(s, nil); err == nil {
				v := ipranges.Family(rg.From())
				r.Spec.IPVersion = &v
				break
			}
		}
	}
	r.Spec.IPs = canonicalRanges(r.Spec.IPs)
	return nil
}

// ReservedValidator checks that every address and range parses and is of the
// reservation's family, and that the family is enabled (Switches), as spiderpool's
// webhook does.
type ReservedValidator struct {
	Switches ipamconf.Switches
}

var _ admission.Validator[*v2beta1.SpiderReservedIP] = ReservedValidator{}

// validate checks r; family, whether its family must be enabled (not for an update
// that leaves the spec as it was).
func (v ReservedValidator) validate(r *v2beta1.SpiderReservedIP, family bool) error {
	p := field.NewPath("spec")
	var fam int64
	if r.Spec.IPVersion != nil {
		fam = *r.Spec.IPVersion
	}
	if err := familyEnabled(v.Switches, fam); family && err != nil {
		return apierrors.NewInvalid(reservedKind, r.Name, field.ErrorList{err})
	}
	_, errs := ipranges.ParseRanges(r.Spec.IPs, fam, netip.Prefix{}, p.Child("ips"))
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(reservedKind, r.Name, errs)
}

// ValidateCreate implements admission.Validator.
func (v ReservedValidator) ValidateCreate(_ context.Context, r *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	return nil, v.validate(r, true)
}

// ValidateUpdate implements admission.Validator.
func (v ReservedValidator) ValidateUpdate(_ context.Context, old, r *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	return nil, v.validate(r, !equality.Semantic.DeepEqual(old.Spec, r.Spec))
}

// ValidateDelete implements admission.Validator.
func (ReservedValidator) ValidateDelete(context.Context, *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	return nil, nil
}
