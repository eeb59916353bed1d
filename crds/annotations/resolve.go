package annotations

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resolve gives every selection a concrete interface of the pod. Unnamed entries map by
// position (entry 0 → eth0, entry i → the i-th secondary interface); named entries
// must name an interface the pod has. The input must come from ParsePoolSelections.
// The result is a new slice; sel is not modified.
func Resolve(sel []PoolSelection, ifs []Interface) ([]PoolSelection, field.ErrorList) {
	p := Path(IPPools)
	out := make([]PoolSelection, len(sel))
	copy(out, sel)
	if len(sel) > len(ifs) {
		return nil, field.ErrorList{field.Invalid(p, fmt.Sprintf("%d entries", len(sel)), fmt.Sprintf("has more entries than the pod has interfaces (%s, from %s): add the networks to %s or remove entries", names(ifs), MultusNetworks, MultusNetworks))}
	}
	var errs field.ErrorList
	for i := range out {
		if out[i].Interface == "" {
			out[i].Interface = ifs[i].Name
			continue
		}
		if !hasInterface(ifs, out[i].Interface) {
			errs = append(errs, field.NotFound(p.Index(i).Child("interface"), fmt.Sprintf("%s: the pod's interfaces are %s (from %s); name one of them or fix the networks annotation", out[i].Interface, names(ifs), MultusNetworks)))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func hasInterface(ifs []Interface, name string) bool {
	for _, i := range ifs {
		if i.Name == name {
			return true
		}
	}
	return false
}

func names(ifs []Interface) string {
	n := make([]string, len(ifs))
	for i, f := range ifs {
		n[i] = f.Name
	}
	return strings.Join(n, ", ")
}
