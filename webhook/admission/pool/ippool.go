package pool

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/crds/ipranges"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

var poolKind = v2beta1.GroupVersion.WithKind(v2beta1.KindSpiderIPPool).GroupKind()

// Defaulter puts a SpiderIPPool in canonical form: ipVersion from the subnet, the
// subnet masked, ips and excludeIPs merged into sorted ranges, gateway and route
// destinations canonical; and keeps the pool's finalizer, so a pool holding
// addresses is never removed under its pods.
type Defaulter struct{}

var _ admission.Defaulter[*v2beta1.SpiderIPPool] = Defaulter{}

// Default implements admission.Defaulter.
func (Defaulter) Default(_ context.Context, p *v2beta1.SpiderIPPool) error {
	s := &p.Spec
	s.Subnet = canonicalPrefix(s.Subnet)
	if s.IPVersion == nil {
		if sub, err := netip.ParsePrefix(s.Subnet); err == nil {
			v := ipranges.Family(sub.Addr())
			s.IPVersion = &v
		}
	}
	s.IPs = canonicalRanges(s.IPs)
	s.ExcludeIPs = canonicalRanges(s.ExcludeIPs)
	if s.Gateway != nil {
		gw := canonicalAddr(*s.Gateway)
		s.Gateway = &gw
	}
	for i := range s.Routes {
		s.Routes[i].Dst = canonicalPrefix(s.Routes[i].Dst)
		s.Routes[i].Gw = canonicalAddr(s.Routes[i].Gw)
	}
	if p.DeletionTimestamp == nil {
		// A terminating pool may not gain finalizers; any other keeps ours.
		controllerutil.AddFinalizer(p, v2beta1.PoolFinalizer)
	}
	return nil
}

// Validator checks SpiderIPPools against their own rules and against the other
// pools and reserved addresses, read through Reader (the API server: pools are
// created rarely, and a fresh read makes overlap checks exact).
type Validator struct {
	Reader client.Reader
	// RefuseDeleteWhileAllocated refuses the DELETE of a pool that still holds
	// addresses. Off (spiderpool's default), a DELETE is accepted: the pool, terminating,
	// serves nothing new and its finalizer keeps it until the last address is released.
	RefuseDeleteWhileAllocated bool
	// Switches refuse a pool of a disabled IP family, as spiderpool's webhook does.
	Switches ipamconf.Switches
}

var _ admission.Validator[*v2beta1.SpiderIPPool] = &Validator{}

// familyEnabled refuses a pool (or reservation) of an IP family the switches disable.
func familyEnabled(sw ipamconf.Switches, family int64) *field.Error {
	if family == 0 || sw.Family(family) {
		return nil
	}
	return field.Forbidden(field.NewPath("spec", "ipVersion"), ipamconf.Disabled(family)+": nicpool allocates no address of this family; enable it on the webhook and every ipamd, or create no object of this family")
}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, p *v2beta1.SpiderIPPool) (admission.Warnings, error) {
	probe := versionProbe(ctx, p) // answered whatever the checks decide
	if err := familyEnabled(v.Switches, ipranges.PoolFamily(&p.Spec)); err != nil {
		return probe, invalid(p.Name, field.ErrorList{err})
	}
	errs, allocatable := validateSpec(&p.Spec)
	if len(errs) == 0 {
		errs = v.validateOverlap(ctx, p, allocatable)
	}
	return probe, invalid(p.Name, errs)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(ctx context.Context, old, p *v2beta1.SpiderIPPool) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, p.Spec) {
		// Metadata only (labels, the finalizer's removal by the garbage collector):
		// never blocked, even for a pool that predates these rules.
		return nil, nil
	}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if old.Spec.Subnet != p.Spec.Subnet {
		errs = append(errs, field.Forbidden(spec.Child("subnet"), fmt.Sprintf("is immutable (was %s): create a new pool for another subnet", old.Spec.Subnet)))
	}
	if oldV, newV := ipranges.PoolFamily(&old.Spec), ipranges.PoolFamily(&p.Spec); oldV != newV {
		errs = append(errs, field.Forbidden(spec.Child("ipVersion"), fmt.Sprintf("is immutable (was %d): create a new pool for another IP family", oldV)))
	}
	if err := familyEnabled(v.Switches, ipranges.PoolFamily(&p.Spec)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, invalid(p.Name, errs)
	}
	errs, allocatable := validateSpec(&p.Spec)
	if len(errs) == 0 {
		recs, err := v.records(ctx, old.Name)
		if err != nil {
			return nil, err
		}
		errs = append(errs, keepsAllocated(recs, &p.Spec)...)
	}
	if len(errs) == 0 {
		errs = v.validateOverlap(ctx, p, allocatable)
	}
	return nil, invalid(p.Name, errs)
}

// ValidateDelete implements admission.Validator. A pool that still holds addresses is
// deleted the way spiderpool deletes it: the DELETE is accepted with a warning, and
// the pool stays, terminating and serving nothing new, until its finalizer sees the
// last address released. With RefuseDeleteWhileAllocated, such a DELETE is refused.
func (v *Validator) ValidateDelete(ctx context.Context, p *v2beta1.SpiderIPPool) (admission.Warnings, error) {
	recs, err := v.records(ctx, p.Name)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	if !v.RefuseDeleteWhileAllocated {
		return admission.Warnings{fmt.Sprintf("pool %s still has %d allocated address(es) (%s): it serves nothing new and is removed once they are released", p.Name, len(recs), holders(recs, nil))}, nil
	}
	return nil, apierrors.NewForbidden(v2beta1.GroupVersion.WithResource("spiderippools").GroupResource(), p.Name,
		fmt.Errorf("the pool still has %d allocated address(es) (%s): delete those pods, or wait until their addresses are released, then delete the pool", len(recs), holders(recs, nil)))
}

// records reads the pool's allocation records (its blocks, and its status before
// migration) from the API server.
func (v *Validator) records(ctx context.Context, pool string) (v2beta1.PoolIPAllocations, error) {
	if v.Reader == nil {
		return nil, nil
	}
	recs, err := ledger.PoolRecords(ctx, v.Reader, pool)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("read the addresses pool %s holds: %w", pool, err))
	}
	return recs, nil
}

func invalid(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(poolKind, name, errs)
}

// validateSpec checks one pool on its own and returns its allocatable addresses
// (reserved addresses not yet removed).
func validateSpec(s *v2beta1.IPPoolSpec) (field.ErrorList, *netipx.IPSet) {
	spec := field.NewPath("spec")
	subnet, serr := ipranges.ParseSubnet(s.Subnet, spec.Child("subnet"))
	if serr != nil {
		return field.ErrorList{serr}, nil
	}
	fam := ipranges.Family(subnet.Addr())
	var errs field.ErrorList
	if s.IPVersion != nil && *s.IPVersion != fam {
		errs = append(errs, field.Invalid(spec.Child("ipVersion"), *s.IPVersion, fmt.Sprintf("must be %d, the family of subnet %s", fam, subnet)))
	}
	if s.Gateway != nil && *s.Gateway != "" {
		gw, err := ipranges.ParseAddr(*s.Gateway, spec.Child("gateway"))
		if err == nil {
			err = requireCanonical(spec.Child("gateway"), *s.Gateway, gw.String())
		}
		switch {
		case err != nil:
			errs = append(errs, err)
		case !subnet.Contains(gw):
			errs = append(errs, field.Invalid(spec.Child("gateway"), *s.Gateway, fmt.Sprintf("must be inside subnet %s", subnet)))
		}
	}
	errs = append(errs, validateRoutes(s.Routes, subnet, spec.Child("routes"))...)
	for _, sel := range []struct {
		name string
		s    *metav1.LabelSelector
	}{{"podAffinity", s.PodAffinity}, {"namespaceAffinity", s.NamespaceAffinity}, {"nodeAffinity", s.NodeAffinity}} {
		if sel.s == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(sel.s); err != nil {
			errs = append(errs, field.Invalid(spec.Child(sel.name), sel.s.String(), "must be a valid label selector: "+err.Error()))
		}
	}
	set, aerrs := ipranges.Allocatable(s, nil)
	errs = append(errs, aerrs...)
	return errs, set
}

func validateRoutes(routes []v2beta1.Route, subnet netip.Prefix, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i, r := range routes {
		ip := p.Index(i)
		if rerrs := annotations.ValidateRoute(r, ip); len(rerrs) > 0 {
			errs = append(errs, rerrs...)
			continue
		}
		// What ValidateRoute accepts the defaulter writes canonically; consumers parse
		// strictly, so anything else is refused here.
		var cerrs field.ErrorList
		for _, e := range []*field.Error{requireCanonical(ip.Child("dst"), r.Dst, canonicalPrefix(r.Dst)), requireCanonical(ip.Child("gw"), r.Gw, canonicalAddr(r.Gw))} {
			if e != nil {
				cerrs = append(cerrs, e)
			}
		}
		dst, derr := netip.ParsePrefix(r.Dst)
		gw, gerr := netip.ParseAddr(r.Gw)
		if len(cerrs) > 0 || derr != nil || gerr != nil {
			errs = append(errs, cerrs...)
			continue
		}
		if dst.Bits() == 0 {
			errs = append(errs, field.Invalid(ip.Child("dst"), r.Dst, "must not be a default route: the pool's spec.gateway is the default route"))
		}
		if dst.Addr().Is4() != subnet.Addr().Is4() {
			errs = append(errs, field.Invalid(ip.Child("dst"), r.Dst, fmt.Sprintf("must be of the family of subnet %s", subnet)))
		}
		if !subnet.Contains(gw) {
			errs = append(errs, field.Invalid(ip.Child("gw"), r.Gw, fmt.Sprintf("must be inside subnet %s: the next hop must be reachable from the pod's interface", subnet)))
		}
		if prev, dup := seen[dst.String()]; dup {
			errs = append(errs, field.Duplicate(ip.Child("dst"), fmt.Sprintf("%s is already routed by spec.routes[%d]; keep one route per destination", r.Dst, prev)))
		}
		seen[dst.String()] = i
	}
	return errs
}

// keepsAllocated refuses a spec that no longer makes an allocated address
// allocatable (removed from ips, excluded, or made the gateway). Reserved addresses
// are left out: reserving an address later does not take it from its pod.
func keepsAllocated(recs v2beta1.PoolIPAllocations, s *v2beta1.IPPoolSpec) field.ErrorList {
	if len(recs) == 0 {
		return nil
	}
	set, errs := ipranges.Allocatable(s, nil)
	if len(errs) > 0 {
		return errs
	}
	var lost []string
	for addr := range recs {
		a, err := netip.ParseAddr(addr)
		if err != nil || !set.Contains(a) {
			lost = append(lost, addr)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec"), fmt.Sprintf("would make %d allocated address(es) unallocatable (%s): keep them in spec.ips and out of spec.excludeIPs and spec.gateway until their pods release them", len(lost), holders(recs, lost)))}
}

// holders lists up to three addresses (of only, or of all when only is nil) with
// the pod interface that holds each.
func holders(alloc v2beta1.PoolIPAllocations, only []string) string {
	addrs := only
	if addrs == nil {
		for a := range alloc {
			addrs = append(addrs, a)
		}
	}
	sort.Slice(addrs, func(i, j int) bool {
		a, aerr := netip.ParseAddr(addrs[i])
		b, berr := netip.ParseAddr(addrs[j])
		if aerr != nil || berr != nil {
			return addrs[i] < addrs[j]
		}
		return a.Less(b)
	})
	const show = 3
	parts := make([]string, 0, show+1)
	for i, a := range addrs {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(addrs)-show))
			break
		}
		h := alloc[a]
		parts = append(parts, fmt.Sprintf("%s held by pod %s interface %s", a, h.Pod, h.Interface))
	}
	return strings.Join(parts, ", ")
}

// validateOverlap refuses a pool whose allocatable addresses overlap another pool's
// in the same subnet, or whose subnet overlaps another pool's different subnet (the
// node could not tell which interface an address belongs to).
func (v *Validator) validateOverlap(ctx context.Context, p *v2beta1.SpiderIPPool, mine *netipx.IPSet) field.ErrorList {
	if v.Reader == nil {
		return nil
	}
	spec := field.NewPath("spec")
	var pools v2beta1.SpiderIPPoolList
	if err := v.Reader.List(ctx, &pools); err != nil {
		return field.ErrorList{field.InternalError(spec, fmt.Errorf("list SpiderIPPools: %w", err))}
	}
	reserved, err := ledger.ReservedSet(ctx, v.Reader)
	if err != nil {
		return field.ErrorList{field.InternalError(spec, err)}
	}
	subnet, err := netip.ParsePrefix(p.Spec.Subnet)
	if err != nil {
		return nil // reported by validateSpec
	}
	mine = minus(mine, reserved)
	var errs field.ErrorList
	for i := range pools.Items {
		o := &pools.Items[i]
		if o.Name == p.Name {
			continue
		}
		os, err := netip.ParsePrefix(o.Spec.Subnet)
		if err != nil {
			continue
		}
		if os != subnet {
			if os.Overlaps(subnet) {
				errs = append(errs, field.Invalid(spec.Child("subnet"), p.Spec.Subnet, fmt.Sprintf("overlaps subnet %s of SpiderIPPool %s: pools of different subnets must not overlap; use subnet %s and split the addresses with spec.ips, or choose a disjoint subnet", os, o.Name, os)))
			}
			continue
		}
		theirs, aerrs := ipranges.Allocatable(&o.Spec, nil)
		if len(aerrs) > 0 {
			continue
		}
		theirs = minus(theirs, reserved)
		if mine.Overlaps(theirs) {
			errs = append(errs, field.Invalid(spec.Child("ips"), strings.Join(p.Spec.IPs, ","), fmt.Sprintf("overlaps the allocatable addresses of SpiderIPPool %s in the same subnet (%s): an address may belong to one pool only; narrow spec.ips or add the overlap to spec.excludeIPs", o.Name, overlap(mine, theirs))))
		}
	}
	return errs
}

func minus(s, remove *netipx.IPSet) *netipx.IPSet {
	if s == nil || remove == nil {
		return s
	}
	var b netipx.IPSetBuilder
	b.AddSet(s)
	b.RemoveSet(remove)
	out, _ := b.IPSet()
	return out
}

func overlap(a, b *netipx.IPSet) string {
	var bld netipx.IPSetBuilder
	bld.AddSet(a)
	bld.Intersect(b)
	s, _ := bld.IPSet()
	rs := s.Ranges()
	parts := make([]string, 0, 3)
	for i, r := range rs {
		if i == 2 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, rangeString(r))
	}
	return strings.Join(parts, ", ")
}
