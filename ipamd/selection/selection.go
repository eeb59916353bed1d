// Package selection decides which SpiderIPPools one interface of a pod draws from: the
// pod's ipam.spidernet.io/ippools entry for that interface as admission resolved it,
// else the namespace's default pools, the CNI network's default pools, and the
// cluster's default pools; and whether a pool may serve the pod at all (disabled, terminating,
// node, namespace, pod affinity, multusName). Pure logic over objects the caller read.
package selection

import (
	"fmt"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
// wildcard expansion and cluster defaults; ns may be nil. The pod's own choice is read
// as admission resolved it (annotations.Selected); a selection that admission did not
// resolve, or an ippools that leaves the interface out, is an error that names the
// annotation and what to fix.
func Choose(pod *corev1.Pod, ns *corev1.Namespace, iface string, network api.NetworkConfig, pools []v2beta1.SpiderIPPool) (Choice, error) {
	s, ok, err := annotations.Selected(pod.Annotations, iface)
	if err != nil {
		return Choice{}, err
	}
	if ok {
		return Choice{Interface: iface, IPv4: expand(s.IPv4, pools), IPv6: expand(s.IPv6, pools), CleanGateway: s.CleanGateway, Source: SourcePod}, nil
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

// Target is what a pool's eligibility depends on.
type Target struct {
	Pod       *corev1.Pod
	Namespace *corev1.Namespace // nil when unknown: namespaceAffinity then excludes
	Node      *corev1.Node      // nil when unknown: nodeAffinity then excludes
	NodeName  string
	// Networks are the names the interface's network goes by: its
	// NetworkAttachmentDefinition "namespace/name" and its CNI network name.
	Networks []string
}

// Eligible returns nil when the pool may serve the target, else why not, phrased for
// an operator.
func Eligible(p *v2beta1.SpiderIPPool, t Target) error {
	switch {
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("pool %s is being deleted", p.Name)
	case p.Spec.Disable != nil && *p.Spec.Disable:
		return fmt.Errorf("pool %s is disabled (spec.disable)", p.Name)
	case len(p.Spec.NodeName) > 0 && !has(p.Spec.NodeName, t.NodeName):
		return fmt.Errorf("pool %s spec.nodeName does not include node %s", p.Name, t.NodeName)
	case len(p.Spec.NamespaceName) > 0 && !has(p.Spec.NamespaceName, t.Pod.Namespace):
		return fmt.Errorf("pool %s spec.namespaceName does not include namespace %s", p.Name, t.Pod.Namespace)
	}
	if p.Spec.NodeAffinity != nil && !matches(p.Spec.NodeAffinity, nodeLabels(t.Node)) {
		return fmt.Errorf("pool %s spec.nodeAffinity does not select node %s", p.Name, t.NodeName)
	}
	if p.Spec.NamespaceAffinity != nil && !matches(p.Spec.NamespaceAffinity, nsLabels(t.Namespace)) {
		return fmt.Errorf("pool %s spec.namespaceAffinity does not select namespace %s", p.Name, t.Pod.Namespace)
	}
	if p.Spec.PodAffinity != nil && !matches(p.Spec.PodAffinity, t.Pod.Labels) {
		return fmt.Errorf("pool %s spec.podAffinity does not select pod %s/%s", p.Name, t.Pod.Namespace, t.Pod.Name)
	}
	if len(p.Spec.MultusName) > 0 && !multusMatch(p.Spec.MultusName, t.Networks) {
		return fmt.Errorf("pool %s spec.multusName %v does not include this interface's network %v", p.Name, p.Spec.MultusName, t.Networks)
	}
	return nil
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false // the webhook rejects malformed selectors; one that slips through selects nothing
	}
	return s.Matches(labels.Set(l))
}

func nodeLabels(n *corev1.Node) map[string]string {
	if n == nil {
		return nil
	}
	return n.Labels
}

func nsLabels(n *corev1.Namespace) map[string]string {
	if n == nil {
		return nil
	}
	return n.Labels
}

// multusMatch accepts "namespace/name" entries exactly and bare "name" entries against
// the name part of each network.
func multusMatch(entries, networks []string) bool {
	for _, e := range entries {
		for _, n := range networks {
			if n == "" {
				continue
			}
			bare := n
			if _, after, ok := strings.Cut(n, "/"); ok {
				bare = after
			}
			if e == n || (!strings.Contains(e, "/") && (e == bare || e == n)) {
				return true
			}
		}
	}
	return false
}
