package annotations

import (
	"errors"
	"fmt"
)

// ErrNotResolved means a pod's pool selection is not in the form nicpool's admission
// writes: the pod reached a node without passing nicpool's pod webhook.
var ErrNotResolved = errors.New("not resolved at admission")

// Selected returns the resolved ipam.spidernet.io/ippools entry of one interface of a
// pod, as the pod webhook wrote it: every entry names its interface, and a single-NIC
// ipam.spidernet.io/ippool has become the eth0 entry (the webhook keeps ippool beside
// it as the mark of a single-NIC choice).
//
// ok is false when the pod names no pools for the interface and the defaults apply:
// the pod carries neither annotation, or it carries ippool beside ippools (it chose
// eth0's pools only). An interface that a plain ippools leaves out is an error, as with
// spiderpool: defaults would serve it from pools its author never chose. A selection
// that admission did not resolve (an entry without interface, a wildcard pattern) is
// an error wrapping ErrNotResolved; no node resolves it again.
func Selected(podAnnotations map[string]string, iface string) (sel PoolSelection, ok bool, err error) {
	v, hasPools := podAnnotations[IPPools]
	_, single := podAnnotations[IPPool]
	if !hasPools {
		if single {
			return PoolSelection{}, false, fmt.Errorf("%w: %s is set and %s is not (nicpool's pod webhook writes it): delete the pod so that it is created again through the webhook",
				ErrNotResolved, IPPool, IPPools)
		}
		return PoolSelection{}, false, nil
	}
	entries, errs := ParsePoolSelections(v)
	if len(errs) > 0 {
		return PoolSelection{}, false, errs.ToAggregate()
	}
	for i, e := range entries {
		if e.Interface == "" {
			return PoolSelection{}, false, fmt.Errorf("%w: %s entry %d names no interface (nicpool's pod webhook names every entry): delete the pod so that it is created again through the webhook",
				ErrNotResolved, IPPools, i)
		}
		for _, name := range append(append([]string(nil), e.IPv4...), e.IPv6...) {
			if IsWildcard(name) {
				return PoolSelection{}, false, fmt.Errorf("%w: %s entry %d (interface %s) names the pattern %q, not a pool (nicpool's pod webhook replaces every pattern by the pools it matches): delete the pod so that it is created again through the webhook",
					ErrNotResolved, IPPools, i, e.Interface, name)
			}
		}
	}
	for _, e := range entries {
		if e.Interface == iface {
			return e, true, nil
		}
	}
	if single {
		return PoolSelection{}, false, nil
	}
	return PoolSelection{}, false, fmt.Errorf("annotation %s names no pools for interface %s: add an entry {\"interface\":%q,\"ipv4\":[…]} for it, or remove the annotation to use default pools for every interface",
		IPPools, iface, iface)
}
