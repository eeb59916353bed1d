package annotations

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// PoolSelection is one entry of ipam.spidernet.io/ippools: the pools one interface
// draws its addresses from, tried in order.
type PoolSelection struct {
	Interface    string   `json:"interface,omitempty"`
	IPv4         []string `json:"ipv4,omitempty"`
	IPv6         []string `json:"ipv6,omitempty"`
	CleanGateway bool     `json:"cleangateway,omitempty"`
}

// SinglePoolSelection is the value of ipam.spidernet.io/ippool: the pools of eth0.
type SinglePoolSelection struct {
	// Interface is accepted and ignored, as spiderpool ignores it (its own e2e suite
	// writes it): the single form always selects eth0's pools.
	Interface    string   `json:"interface,omitempty"`
	IPv4         []string `json:"ipv4,omitempty"`
	IPv6         []string `json:"ipv6,omitempty"`
	CleanGateway bool     `json:"cleangateway,omitempty"`
}

// Pools returns the pool names of one family.
func (s PoolSelection) Pools(family int64) []string {
	if family == v2beta1.IPv6 {
		return s.IPv6
	}
	return s.IPv4
}

// ParsePoolSelections parses ipam.spidernet.io/ippools. It checks the shape only: a
// non-empty list, each entry with at least one pool, valid pool names or wildcard
// patterns, valid interface names, all entries named or none, no interface twice.
// Matching entries to the pod's interfaces is Resolve's job.
func ParsePoolSelections(value string) ([]PoolSelection, field.ErrorList) {
	p := Path(IPPools)
	var sel []PoolSelection
	if err := strictUnmarshal(value, &sel); err != nil {
		return nil, field.ErrorList{field.Invalid(p, value, fmt.Sprintf("must be a JSON list such as [{\"interface\":\"eth0\",\"ipv4\":[\"pool-a\"]}]: %v", err))}
	}
	if len(sel) == 0 {
		return nil, field.ErrorList{field.Required(p, "at least one entry {\"interface\":…,\"ipv4\":[…],\"ipv6\":[…]}; remove the annotation to use default pools")}
	}
	var errs field.ErrorList
	named, seen := 0, map[string]int{}
	for i, s := range sel {
		ip := p.Index(i)
		errs = append(errs, validatePoolLists(s.IPv4, s.IPv6, ip)...)
		if s.Interface == "" {
			continue
		}
		named++
		if err := ValidateInterfaceName(s.Interface, ip.Child("interface")); err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[s.Interface]; dup {
			errs = append(errs, field.Invalid(ip.Child("interface"), s.Interface, fmt.Sprintf("duplicate: entry %d already selects this interface; each interface may appear once", prev)))
			continue
		}
		seen[s.Interface] = i
	}
	if named > 0 && named < len(sel) {
		errs = append(errs, field.Invalid(p, value, "either every entry names its \"interface\" or none does (then entries map to eth0, net1, … by position); do not mix the two"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return sel, nil
}

// ParseSinglePoolSelection parses ipam.spidernet.io/ippool.
func ParseSinglePoolSelection(value string) (SinglePoolSelection, field.ErrorList) {
	p := Path(IPPool)
	var s SinglePoolSelection
	if err := strictUnmarshal(value, &s); err != nil {
		return s, field.ErrorList{field.Invalid(p, value, fmt.Sprintf("must be a JSON object such as {\"ipv4\":[\"pool-a\"],\"ipv6\":[\"pool-b\"]}: %v", err))}
	}
	if errs := validatePoolLists(s.IPv4, s.IPv6, p); len(errs) > 0 {
		return s, errs
	}
	return s, nil
}

func validatePoolLists(v4, v6 []string, p *field.Path) field.ErrorList {
	if len(v4) == 0 && len(v6) == 0 {
		return field.ErrorList{field.Required(p, "at least one pool in \"ipv4\" or \"ipv6\"")}
	}
	var errs field.ErrorList
	for fam, list := range map[string][]string{"ipv4": v4, "ipv6": v6} {
		seen := map[string]bool{}
		for j, name := range list {
			jp := p.Child(fam).Index(j)
			if err := ValidatePoolName(name, jp); err != nil {
				errs = append(errs, err)
			} else if seen[name] {
				errs = append(errs, field.Duplicate(jp, name))
			}
			seen[name] = true
		}
	}
	return errs
}

// IsWildcard reports whether a pool name is a pattern (path.Match syntax).
func IsWildcard(name string) bool {
	return strings.ContainsAny(name, "*?[")
}

// ValidatePoolName accepts a SpiderIPPool name or a path.Match pattern.
func ValidatePoolName(name string, p *field.Path) *field.Error {
	if name == "" {
		return field.Required(p, "a SpiderIPPool name")
	}
	if IsWildcard(name) {
		if _, err := path.Match(name, ""); err != nil {
			return field.Invalid(p, name, "malformed wildcard: use *, ? and [...] as in shell patterns, e.g. pool-*")
		}
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.Invalid(p, name, "must be a SpiderIPPool name: "+strings.Join(msgs, "; "))
	}
	return nil
}

// ParseNamespaceDefaultPools parses a namespace default-pool annotation: a JSON list of
// pool names.
func ParseNamespaceDefaultPools(key, value string) ([]string, field.ErrorList) {
	p := Path(key)
	var names []string
	if err := strictUnmarshal(value, &names); err != nil {
		return nil, field.ErrorList{field.Invalid(p, value, fmt.Sprintf("must be a JSON list of pool names such as [\"pool-a\"]: %v", err))}
	}
	var errs field.ErrorList
	for i, n := range names {
		if err := ValidatePoolName(n, p.Index(i)); err != nil {
			errs = append(errs, err)
		}
	}
	return names, errs
}

// ParseRoutes parses ipam.spidernet.io/routes.
func ParseRoutes(value string) ([]v2beta1.Route, field.ErrorList) {
	p := Path(Routes)
	var routes []v2beta1.Route
	if err := strictUnmarshal(value, &routes); err != nil {
		return nil, field.ErrorList{field.Invalid(p, value, fmt.Sprintf("must be a JSON list such as [{\"dst\":\"10.7.0.0/16\",\"gw\":\"10.6.0.1\"}]: %v", err))}
	}
	var errs field.ErrorList
	for i, r := range routes {
		errs = append(errs, ValidateRoute(r, p.Index(i))...)
	}
	return routes, errs
}

// Marshal encodes resolved selections in the annotation's canonical form. The output
// is stable, so encoding a parsed canonical value yields the same string.
func Marshal(sel []PoolSelection) string {
	b, err := json.Marshal(sel)
	if err != nil {
		panic(err) // only strings, lists and bools: cannot fail
	}
	return string(b)
}
