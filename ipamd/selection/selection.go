// Package selection decides which SpiderIPPools one interface of a pod draws from: the
// pod's ipam.spidernet.io/ippools entry for that interface as admission resolved it,
// else the namespace's default pools, the CNI network's default pools, and the
// cluster's default pools. Whether a pool may serve the pod is crds/eligibility's.
// Pure logic over objects the caller read.
package selection

import (
	"fmt"
	"path"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
	"github.com/nicpool/nicpool/ipamd/api"
)

// Where a Choice comes from, for logs and errors.
const (
	SourcePod       = "pod annotation " + annotations.IPPools
	SourceNamespace = "namespace default pools"
	SourceNetwork   = "CNI network default pools"
	SourceCluster   = "cluster default pools (spec.default: true)"
)

// Choice is the pools an interface draws from, in the order to try them.
type Choice struct {
	Interface    string
	IPv4, IPv6   []string
	CleanGateway bool
	Source       string
}

// Pools returns the pool names of one family.
func (c Choice) Pools(family int64) []string {
	if family == v2beta1.IPv6 {
		return c.IPv6
	}
	return c.IPv4
}

// Allows reports whether the interface may keep an address of pool for family: the
// pool is among the choice's pools of that family. A StatefulSet pod's interface keeps
// only such addresses, at a takeover and at each of its own ADDs.
func (c Choice) Allows(family int64, pool string) bool {
	return pool != "" && slices.Contains(c.Pools(family), pool)
}

// Families lists the IP families the interface needs, IPv4 first.
func (c Choice) Families() []int64 {
	var f []int64
	if len(c.IPv4) > 0 {
		f = append(f, v2beta1.IPv4)
	}
	if len(c.IPv6) > 0 {
		f = append(f, v2beta1.IPv6)
	}
	return f
}

// Choose returns the pools of one interface. pools is every pool the caller knows, for
// the wildcard patterns of default pools and the cluster defaults; ns may be nil. The pod's own choice is read
// as admission resolved it (annotations.Selected); a selection that admission did not
// resolve, or an ippools that leaves the interface out, is an error that names the
// annotation and what to fix.
//
// Each family's pools are in the order spiderpool tries them: by the kind of affinity
// a pool sets (podAffinity, then nodeName, nodeAffinity, namespaceName,
// namespaceAffinity, multusName), pools alike in that keeping the order of their
// source (the annotation's order; cluster defaults by name).
func Choose(pod *corev1.Pod, ns *corev1.Namespace, iface string, network api.NetworkConfig, pools []v2beta1.SpiderIPPool) (Choice, error) {
	c, err := choose(pod, ns, iface, network, pools)
	if err != nil {
		return c, err
	}
	byName := make(map[string]*v2beta1.SpiderIPPool, len(pools))
	for i := range pools {
		byName[pools[i].Name] = &pools[i]
	}
	byPriority(c.IPv4, byName)
	byPriority(c.IPv6, byName)
	return c, nil
}

// Priority ranks a pool as spiderpool orders candidates (its ByPoolPriority): each
// kind of affinity the pool sets weighs more than all the kinds after it together.
func Priority(p *v2beta1.SpiderIPPool) int {
	rank := 0
	for _, set := range []bool{
		p.Spec.PodAffinity != nil,
		len(p.Spec.NodeName) > 0,
		p.Spec.NodeAffinity != nil,
		len(p.Spec.NamespaceName) > 0,
		p.Spec.NamespaceAffinity != nil,
		len(p.Spec.MultusName) > 0,
	} {
		rank <<= 1
		if set {
			rank |= 1
		}
	}
	return rank
}

// byPriority orders names by Priority, highest first, keeping the order of pools of
// one rank; a name of no known pool ranks as a pool without affinity.
func byPriority(names []string, byName map[string]*v2beta1.SpiderIPPool) {
	rank := func(n string) int {
		if p := byName[n]; p != nil {
			return Priority(p)
		}
		return 0
	}
	sort.SliceStable(names, func(i, j int) bool { return rank(names[i]) > rank(names[j]) })
}

func choose(pod *corev1.Pod, ns *corev1.Namespace, iface string, network api.NetworkConfig, pools []v2beta1.SpiderIPPool) (Choice, error) {
	s, ok, err := annotations.Selected(pod.Annotations, iface)
	if err != nil {
		return Choice{}, err
	}
	if ok {
		// Concrete pool names (Selected refuses any other): admission bounded them.
		return Choice{Interface: iface, IPv4: s.IPv4, IPv6: s.IPv6, CleanGateway: s.CleanGateway, Source: SourcePod}, nil
	}
	c := Choice{Interface: iface, CleanGateway: network.CleanGateway}
	if ns != nil {
		var v4, v6 []string
		if v, ok := ns.Annotations[annotations.NamespaceDefaultIPv4Pool]; ok {
			names, errs := annotations.ParseNamespaceDefaultPools(annotations.NamespaceDefaultIPv4Pool, v)
			if len(errs) > 0 {
				return Choice{}, fmt.Errorf("namespace %s: %w", ns.Name, errs.ToAggregate())
			}
			v4 = names
		}
		if v, ok := ns.Annotations[annotations.NamespaceDefaultIPv6Pool]; ok {
			names, errs := annotations.ParseNamespaceDefaultPools(annotations.NamespaceDefaultIPv6Pool, v)
			if len(errs) > 0 {
				return Choice{}, fmt.Errorf("namespace %s: %w", ns.Name, errs.ToAggregate())
			}
			v6 = names
		}
		if len(v4)+len(v6) > 0 {
			c.IPv4, c.IPv6, c.Source = expand(v4, pools), expand(v6, pools), SourceNamespace
			return c, nil
		}
	}
	if len(network.DefaultIPv4Pools)+len(network.DefaultIPv6Pools) > 0 {
		c.IPv4, c.IPv6, c.Source = expand(network.DefaultIPv4Pools, pools), expand(network.DefaultIPv6Pools, pools), SourceNetwork
		return c, nil
	}
	c.Source = SourceCluster
	for _, p := range sorted(pools) {
		if p.Spec.Default == nil || !*p.Spec.Default {
			continue
		}
		if ipranges.PoolFamily(&p.Spec) == v2beta1.IPv6 {
			c.IPv6 = append(c.IPv6, p.Name)
		} else {
			c.IPv4 = append(c.IPv4, p.Name)
		}
	}
	return c, nil
}

// expand replaces wildcard patterns by the matching pool names, sorted.
func expand(names []string, pools []v2beta1.SpiderIPPool) []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, n := range names {
		if !annotations.IsWildcard(n) {
			add(n)
			continue
		}
		for _, p := range sorted(pools) {
			if ok, _ := path.Match(n, p.Name); ok {
				add(p.Name)
			}
		}
	}
	return out
}

func sorted(pools []v2beta1.SpiderIPPool) []v2beta1.SpiderIPPool {
	out := append([]v2beta1.SpiderIPPool(nil), pools...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
