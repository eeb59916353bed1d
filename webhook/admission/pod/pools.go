package pod

import (
	"context"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/eligibility"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// family is an IP family as the pool lists of an annotation entry name it.
type family struct {
	version int64
	list    string // "ipv4" or "ipv6"
	other   string
}

var (
	ipv4 = family{version: v2beta1.IPv4, list: "ipv4", other: "ipv6"}
	ipv6 = family{version: v2beta1.IPv6, list: "ipv6", other: "ipv4"}
)

func (f family) name() string { return fmt.Sprintf("IPv%d", f.version) }

// resolvePools checks every name of one pool list and expands wildcards into the
// usable pools of the family, in name order. The result keeps the first occurrence
// of each pool.
func (a *Admission) resolvePools(ctx context.Context, names []string, fam family, at entry, rd *reads, podLabels labels.Set) ([]string, field.ErrorList) {
	if len(names) == 0 {
		return names, nil
	}
	if !anyWildcard(names) {
		// The common case: concrete names, checked in place, no new list.
		var errs field.ErrorList
		for j, name := range names {
			if err := a.checkNamed(ctx, name, fam, at, j, rd, podLabels); err != nil {
				errs = append(errs, err)
			}
		}
		return names, errs
	}
	out := make([]string, 0, len(names))
	seen := make(map[string]bool, len(names))
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	var errs field.ErrorList
	for j, name := range names {
		if !annotations.IsWildcard(name) {
			if err := a.checkNamed(ctx, name, fam, at, j, rd, podLabels); err != nil {
				errs = append(errs, err)
			}
			add(name)
			continue
		}
		matched, err := a.expand(ctx, name, fam, at.pool(fam, j), rd, podLabels)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range matched {
			add(m)
		}
	}
	return out, errs
}

func anyWildcard(names []string) bool {
	for _, n := range names {
		if annotations.IsWildcard(n) {
			return true
		}
	}
	return false
}

// checkNamed checks one concrete pool name.
func (a *Admission) checkNamed(ctx context.Context, name string, fam family, at entry, j int, rd *reads, podLabels labels.Set) *field.Error {
	pool, err := a.Pools.Get(ctx, name, rd.live)
	p := func() *field.Path { return at.pool(fam, j) }
	if err != nil {
		return field.InternalError(p(), fmt.Errorf("read SpiderIPPool %s: %w", name, err))
	}
	if pool == nil {
		return field.Invalid(p(), name, "no SpiderIPPool of this name exists: create it or name an existing pool (kubectl get spiderippools)")
	}
	if pool.Family != fam.version {
		return field.Invalid(p(), name, fmt.Sprintf("is an IPv%d pool (subnet %s) but is listed under %q: move it to %q or name an %s pool", pool.Family, pool.Subnet, fam.list, fam.other, fam.name()))
	}
	reason, err := a.excludes(ctx, pool, rd, podLabels)
	if err != nil {
		return field.InternalError(p(), err)
	}
	if reason != "" {
		return field.Invalid(p(), name, "SpiderIPPool "+reason)
	}
	return nil
}

// expand returns the usable pools of the family whose names match pattern.
func (a *Admission) expand(ctx context.Context, pattern string, fam family, p *field.Path, rd *reads, podLabels labels.Set) ([]string, *field.Error) {
	var candidates []*views.Pool
	// Only names that start with the pattern's literal prefix can match it.
	prefix := pattern[:strings.IndexAny(pattern, `*?[\`)]
	a.Pools.RangePrefix(prefix, func(pool *views.Pool) bool {
		if ok, _ := path.Match(pattern, pool.Name); ok {
			candidates = append(candidates, pool)
		}
		return true
	})
	if len(candidates) == 0 {
		// Nothing of that name in the view: a pool created a moment ago may not have
		// reached the informer yet. This is the deny path, so read the API server.
		live, err := a.Pools.List(ctx, rd.live)
		if err != nil {
			return nil, field.InternalError(p, fmt.Errorf("list SpiderIPPools: %w", err))
		}
		for _, pool := range live {
			if ok, _ := path.Match(pattern, pool.Name); ok {
				candidates = append(candidates, pool)
			}
		}
	}
	var matched, rejected []string
	for _, pool := range candidates {
		if pool.Family != fam.version {
			rejected = append(rejected, fmt.Sprintf("%s is IPv%d", pool.Name, pool.Family))
			continue
		}
		reason, err := a.excludes(ctx, pool, rd, podLabels)
		if err != nil {
			return nil, field.InternalError(p, err)
		}
		if reason != "" {
			rejected = append(rejected, pool.Name+" "+reason)
			continue
		}
		matched = append(matched, pool.Name)
	}
	if len(matched) > 0 {
		return matched, nil
	}
	msg := fmt.Sprintf("wildcard matches no %s SpiderIPPool this pod may use", fam.name())
	if len(rejected) > 0 {
		const show = 3
		more := ""
		if len(rejected) > show {
			more = fmt.Sprintf("; and %d more", len(rejected)-show)
			rejected = rejected[:show]
		}
		msg += " (" + strings.Join(rejected, "; ") + more + ")"
	}
	return nil, field.Invalid(p, pattern, msg+": create a matching pool or correct the pattern")
}

// excludes returns why the pool may not serve the pod, as a sentence that ends with
// the fix, or "" when it may. At admission the pod has neither node nor network yet:
// only the namespace and the pod are judged.
func (a *Admission) excludes(ctx context.Context, pool *views.Pool, rd *reads, podLabels labels.Set) (string, error) {
	return pool.Excludes(eligibility.Subject{
		Namespace:       rd.namespace,
		NamespaceLabels: func() (labels.Set, bool, error) { return rd.namespaceLabels(ctx) },
		Pod:             true,
		PodLabels:       podLabels,
	})
}
