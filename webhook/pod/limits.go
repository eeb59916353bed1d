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
)

// checkSize refuses a selection annotation longer than MaxSelectionBytes.
func checkSize(key, value string) *field.Error {
	if len(value) <= MaxSelectionBytes {
		return nil
	}
	return field.Invalid(annotations.Path(key), fmt.Sprintf("<%d bytes>", len(value)),
		fmt.Sprintf("may be at most %d bytes: select fewer pools per interface", MaxSelectionBytes))
}
