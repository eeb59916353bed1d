package pod

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/annotations"
)

// Bounds on what one pod may ask of admission. A pod author is any tenant: the
// work their annotations cause is capped, and a pod over a cap is refused with the
// field and the cap, before any parsing.
const (
	// MaxSelectionBytes bounds ipam.spidernet.io/ippools and ippool, as written and as
	// resolved (the API server's pod policy matches the resolved value). Real
	// selections are a few hundred bytes.
	MaxSelectionBytes = 16 << 10
	// MaxPoolNames bounds the pool names and patterns of one pod, all interfaces and
	// both families together: the bound of every selection, a network's default pools
	// too.
	MaxPoolNames = annotations.MaxPoolNames
	// MaxWildcards bounds the wildcard patterns of one pod: each is matched against
	// every pool name that starts with its literal prefix.
	MaxWildcards = annotations.MaxWildcards
	// MaxLiveReads bounds the reads of the API server one pod causes when a view
	// misses (a pool or namespace created a moment ago): whatever its annotations
	// name, the decision is otherwise made from the informers' views.
	MaxLiveReads = 1
)

// checkSize refuses a selection annotation longer than MaxSelectionBytes.
func checkSize(key, value string) *field.Error {
	if len(value) <= MaxSelectionBytes {
		return nil
	}
	return field.Invalid(annotations.Path(key), fmt.Sprintf("<%d bytes>", len(value)),
		fmt.Sprintf("may be at most %d bytes: select fewer pools per interface", MaxSelectionBytes))
}

// checkCounts refuses a selection that names more pools or wildcard patterns than
// one pod may.
func checkCounts(key string, sel []annotations.PoolSelection) field.ErrorList {
	var lists [][]string
	for _, s := range sel {
		lists = append(lists, s.IPv4, s.IPv6)
	}
	names, wildcards := annotations.CountPools(lists...)
	var errs field.ErrorList
	if names > MaxPoolNames {
		errs = append(errs, field.Invalid(annotations.Path(key), fmt.Sprintf("<%d pool names and patterns>", names),
			fmt.Sprintf("may name at most %d pools and patterns in all: select fewer pools per interface", MaxPoolNames)))
	}
	if wildcards > MaxWildcards {
		errs = append(errs, field.Invalid(annotations.Path(key), fmt.Sprintf("<%d wildcard patterns>", wildcards),
			fmt.Sprintf("may hold at most %d wildcard patterns: match several pools with one pattern, e.g. pool-*", MaxWildcards)))
	}
	return errs
}
