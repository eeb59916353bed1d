package annotations

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds on the pools one selection may list: a pod's ipam.spidernet.io/ippools or
// ippool (all its interfaces and both families together), or a CNI network's default
// pools. Whoever writes them is any tenant, and every pattern is matched against
// every pool the node knows at each allocation.
const (
	// MaxPoolNames bounds the pool names and patterns of one selection (eight
	// interfaces with four pools of each family).
	MaxPoolNames = 64
	// MaxWildcards bounds the wildcard patterns of one selection.
	MaxWildcards = 16
)

// CountPools counts the pool names and patterns of lists, and the wildcard patterns
// among them.
func CountPools(lists ...[]string) (names, wildcards int) {
	for _, list := range lists {
		names += len(list)
		for _, n := range list {
			if IsWildcard(n) {
				wildcards++
			}
		}
	}
	return names, wildcards
}

// DefaultPools is one family's default pools of a CNI network: the key that lists them
// (ipam.default_ipv4_ippool, ipam.default_ipv6_ippool) and the names.
type DefaultPools struct {
	Key   string
	Names []string
}

// ValidateNetworkDefaultPools applies the bounds of a pod's selection to a network's
// default pools: at most MaxPoolNames names and patterns and MaxWildcards patterns in
// all, each a pool name or a well-formed pattern, none twice in a family. The count is
// checked before any name, so that the work stays bounded whatever the lists hold.
func ValidateNetworkDefaultPools(families ...DefaultPools) field.ErrorList {
	lists := make([][]string, len(families))
	keys := ""
	for i, f := range families {
		lists[i] = f.Names
		if i > 0 {
			keys += " and "
		}
		keys += f.Key
	}
	names, wildcards := CountPools(lists...)
	if names > MaxPoolNames {
		return field.ErrorList{field.Invalid(field.NewPath(keys), fmt.Sprintf("<%d pool names and patterns>", names),
			fmt.Sprintf("may name at most %d pools and patterns in all: list fewer default pools, or match several with one pattern, e.g. pool-*", MaxPoolNames))}
	}
	if wildcards > MaxWildcards {
		return field.ErrorList{field.Invalid(field.NewPath(keys), fmt.Sprintf("<%d wildcard patterns>", wildcards),
			fmt.Sprintf("may hold at most %d wildcard patterns: match several pools with one pattern, e.g. pool-*", MaxWildcards))}
	}
	var errs field.ErrorList
	for _, f := range families {
		seen := map[string]bool{}
		for j, name := range f.Names {
			p := field.NewPath(f.Key).Index(j)
			if err := ValidatePoolName(name, p); err != nil {
				errs = append(errs, err)
			} else if seen[name] {
				errs = append(errs, field.Duplicate(p, name))
			}
			seen[name] = true
		}
	}
	return errs
}
