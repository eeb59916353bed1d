package pool

import (
	"context"

	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
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
// reservation's family.
type ReservedValidator struct{}

var _ admission.Validator[*v2beta1.SpiderReservedIP] = ReservedValidator{}

func validateReserved(r *v2beta1.SpiderReservedIP) error {
	p := field.NewPath("spec")
	var fam int64
	if r.Spec.IPVersion != nil {
		fam = *r.Spec.IPVersion
	}
	_, errs := ipranges.ParseRanges(r.Spec.IPs, fam, netip.Prefix{}, p.Child("ips"))
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(reservedKind, r.Name, errs)
}

// ValidateCreate implements admission.Validator.
func (ReservedValidator) ValidateCreate(_ context.Context, r *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	return nil, validateReserved(r)
}

// ValidateUpdate implements admission.Validator.
func (ReservedValidator) ValidateUpdate(_ context.Context, _, r *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	return nil, validateReserved(r)
}

// ValidateDelete implements admission.Validator.
func (ReservedValidator) ValidateDelete(context.Context, *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	return nil, nil
}
