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

// ValidateCreate implements admission.Validator: r's family is enabled, and its
// addresses and ranges parse and are of that family.
func (v ReservedValidator) ValidateCreate(_ context.Context, r *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	if err := familyEnabled(v.Switches, reservedFamily(r)); err != nil {
		return nil, apierrors.NewInvalid(reservedKind, r.Name, field.ErrorList{err})
	}
	return nil, validRanges(r)
}

// ValidateUpdate implements admission.Validator: a changed spec as ValidateCreate
// checks it; one left as it was is not refused for a family disabled since.
func (v ReservedValidator) ValidateUpdate(ctx context.Context, old, r *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	if !equality.Semantic.DeepEqual(old.Spec, r.Spec) {
		return v.ValidateCreate(ctx, r)
	}
	return nil, validRanges(r)
}

// validRanges checks that every address and range of r parses and is of its family.
func validRanges(r *v2beta1.SpiderReservedIP) error {
	_, errs := ipranges.ParseRanges(r.Spec.IPs, reservedFamily(r), netip.Prefix{}, field.NewPath("spec", "ips"))
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(reservedKind, r.Name, errs)
}

// reservedFamily is r's spec.ipVersion, 0 when unset.
func reservedFamily(r *v2beta1.SpiderReservedIP) int64 {
	if r.Spec.IPVersion != nil {
		return *r.Spec.IPVersion
	}
	return 0
}

// ValidateDelete implements admission.Validator.
func (ReservedValidator) ValidateDelete(context.Context, *v2beta1.SpiderReservedIP) (admission.Warnings, error) {
	return nil, nil
}
