// Package eligibility is nicpool's one answer to "may this SpiderIPPool serve this
// pod's interface": the pod webhook asks it at admission, ipamd on the node before it
// allocates, and the ledger at write time for the part that concerns every pod (a
// pool being deleted or disabled hands out nothing new).
package eligibility

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
)

var (
	// ErrTerminating refuses allocations from a pool that is being deleted.
	ErrTerminating = errors.New("pool is being deleted")
	// ErrDisabled refuses allocations from a pool with spec.disable: true.
	ErrDisabled = errors.New("pool is disabled")
)

// Closed returns why a pool hands out no new address to anyone (ErrTerminating,
// ErrDisabled), or nil.
func Closed(p *v2beta1.SpiderIPPool) error {
	terminating, disabled := closed(p)
	switch {
	case terminating:
		return ErrTerminating
	case disabled:
		return ErrDisabled
	}
	return nil
}

func closed(p *v2beta1.SpiderIPPool) (terminating, disabled bool) {
	return p.DeletionTimestamp != nil, p.Spec.Disable != nil && *p.Spec.Disable
}

// Pool is what eligibility depends on in a SpiderIPPool, with its selectors compiled.
// It is never modified after NewPool returns, so readers may keep it.
type Pool struct {
	Name string
	// Family is 4 or 6 (ipranges.PoolFamily); 0 when the pool says neither.
	Family      int64
	Subnet      string
	Disabled    bool
	Terminating bool
	// NamespaceNames is spec.namespaceName; empty admits every namespace.
	NamespaceNames []string
	// NamespaceSelector is spec.namespaceAffinity compiled; nil admits every namespace.
	// It is nil when spec.namespaceName is set, which takes priority (as in spiderpool).
	NamespaceSelector labels.Selector
	// PodSelector is spec.podAffinity compiled; nil admits every pod.
	PodSelector labels.Selector
	// SelectorError is set when spec.namespaceAffinity or spec.podAffinity does not
	// compile: the pool admits no pod.
	SelectorError string
	// NodeNames is spec.nodeName; empty admits every node.
	NodeNames []string
	// NodeSelector is spec.nodeAffinity compiled; nil admits every node. It is nil when
	// spec.nodeName is set, which takes priority (as in spiderpool).
	NodeSelector labels.Selector
	// NodeSelectorError is set when spec.nodeAffinity does not compile: the pool admits
	// no node.
	NodeSelectorError string
	// MultusNames is spec.multusName; empty admits every network.
	MultusNames []string
	// Generation is the pool's metadata.generation when the view was taken.
	Generation int64
}

// NewPool takes the eligibility view of a pool.
func NewPool(p *v2beta1.SpiderIPPool) *Pool {
	terminating, disabled := closed(p)
	out := &Pool{
		Name:           p.Name,
		Family:         ipranges.PoolFamily(&p.Spec),
		Subnet:         p.Spec.Subnet,
		Disabled:       disabled,
		Terminating:    terminating,
		NamespaceNames: p.Spec.NamespaceName,
		NodeNames:      p.Spec.NodeName,
		MultusNames:    p.Spec.MultusName,
		Generation:     p.Generation,
	}
	// As in spiderpool, spec.nodeName and spec.namespaceName take priority over the
	// affinity of their kind: where the name list is set, the affinity is not read.
	var err error
	if len(out.NamespaceNames) == 0 {
		if out.NamespaceSelector, err = selector(p.Spec.NamespaceAffinity); err != nil {
			out.SelectorError = "spec.namespaceAffinity: " + err.Error()
		}
	}
	if out.PodSelector, err = selector(p.Spec.PodAffinity); err != nil {
		out.SelectorError = "spec.podAffinity: " + err.Error()
	}
	if len(out.NodeNames) == 0 {
		if out.NodeSelector, err = selector(p.Spec.NodeAffinity); err != nil {
			out.NodeSelectorError = "spec.nodeAffinity: " + err.Error()
		}
	}
	return out
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// AdmitsNamespace reports whether spec.namespaceName admits the namespace.
func (p *Pool) AdmitsNamespace(ns string) bool {
	return len(p.NamespaceNames) == 0 || slices.Contains(p.NamespaceNames, ns)
}

// Subject is who asks for an address. A part left empty is not judged: at admission
// the pod has no node and no network yet; a node asking whether it can serve at all
// names no pod.
type Subject struct {
	// Namespace is the pod's namespace; "" leaves spec.namespaceName and
	// spec.namespaceAffinity unjudged.
	Namespace string
	// NamespaceLabels reads the namespace's labels, only when a pool's
	// namespaceAffinity needs them; found false (no such namespace) excludes.
	NamespaceLabels func() (set labels.Set, found bool, err error)
	// Pod says whether spec.podAffinity is judged against PodLabels.
	Pod       bool
	PodLabels labels.Set
	// Node is the node's name; "" leaves spec.nodeName and spec.nodeAffinity
	// unjudged. NodeLabels nil is a node whose labels are unknown.
	Node       string
	NodeLabels labels.Set
	// Interface is the pod's interface the address is for, as the runtime names it
	// (CNI_IFNAME), for the messages; "" when there is none (admission, a node asking
	// whether it can serve at all).
	Interface string
	// Network is the NetworkAttachmentDefinition ("namespace/name") that attaches the
	// interface, as the pod's annotations name it (annotations.Multus.Network); ""
	// when none is known. Never the CNI configuration's name, which the NAD's author
	// chooses.
	Network string
	// Multus says how a bare spec.multusName entry reads; nil leaves spec.multusName
	// unjudged (at admission; on a node asking whether it can serve at all).
	Multus *annotations.Multus
}

// Excludes returns why the pool may not serve the subject, as a sentence that starts
// with what of the pool excludes it and ends with the fix, or "" when it may. The
// error is a failed read of the namespace's labels.
//
// Where the cause is one spiderpool's agent also finds at CNI ADD (a node or network
// the pool is not for), the sentence carries spiderpool's own words for it in
// parentheses before the fix: spiderpool's users match those words in Events, and its
// own e2e suite waits for them. The causes the webhook refuses at admission keep
// nicpool's words alone (spiderpool never says them there).
func (p *Pool) Excludes(s Subject) (string, error) {
	switch {
	case p.Terminating:
		return "is being deleted: choose another pool", nil
	case p.Disabled:
		return "is disabled (spec.disable: true): enable it or choose another pool", nil
	case p.SelectorError != "" && (s.Namespace != "" || s.Pod):
		return "has an invalid " + p.SelectorError + ": fix the pool or choose another", nil
	case p.NodeSelectorError != "" && s.Node != "":
		return "has an invalid " + p.NodeSelectorError + ": fix the pool or choose another", nil
	case s.Node != "" && len(p.NodeNames) > 0 && !slices.Contains(p.NodeNames, s.Node):
		return fmt.Sprintf("is restricted by spec.nodeName to [%s] (unmatched Node name of IPPool %s): add node %q there or choose another pool",
			strings.Join(p.NodeNames, ", "), p.Name, s.Node), nil
	case s.Node != "" && p.NodeSelector != nil && !p.NodeSelector.Matches(s.NodeLabels):
		return fmt.Sprintf("spec.nodeAffinity (%s) does not match the labels of node %q (unmatched Node affinity of IPPool %s): label the node or choose another pool",
			p.NodeSelector, s.Node, p.Name), nil
	case s.Namespace != "" && !p.AdmitsNamespace(s.Namespace):
		return fmt.Sprintf("is restricted by spec.namespaceName to [%s]: add namespace %q there or choose another pool", strings.Join(p.NamespaceNames, ", "), s.Namespace), nil
	}
	if s.Namespace != "" && p.NamespaceSelector != nil {
		var set labels.Set
		found := false
		if s.NamespaceLabels != nil {
			var err error
			if set, found, err = s.NamespaceLabels(); err != nil {
				return "", fmt.Errorf("read namespace %s: %w", s.Namespace, err)
			}
		}
		if !found || !p.NamespaceSelector.Matches(set) {
			return fmt.Sprintf("spec.namespaceAffinity (%s) does not match the labels of namespace %q: label the namespace or choose another pool", p.NamespaceSelector, s.Namespace), nil
		}
	}
	if s.Pod && p.PodSelector != nil && !p.PodSelector.Matches(s.PodLabels) {
		return fmt.Sprintf("spec.podAffinity (%s) does not match the pod's labels: label the pod or choose another pool", p.PodSelector), nil
	}
	if s.Multus != nil && len(p.MultusNames) > 0 {
		return p.excludesNetwork(*s.Multus, s.Interface, s.Network), nil
	}
	return "", nil
}

// excludesNetwork judges spec.multusName: an entry "namespace/name" admits exactly
// that NetworkAttachmentDefinition, a bare entry the one of that name in the
// namespace m names (nicpool's own, as spiderpool reads a bare entry in its own).
func (p *Pool) excludesNetwork(m annotations.Multus, iface, network string) string {
	read := make([]string, len(p.MultusNames))
	for i, e := range p.MultusNames {
		read[i] = m.Qualify(e)
		if network != "" && read[i] == network {
			return ""
		}
	}
	entries := "spec.multusName [" + strings.Join(p.MultusNames, ", ") + "]"
	if !slices.Equal(read, p.MultusNames) {
		entries += " (NetworkAttachmentDefinitions [" + strings.Join(read, ", ") + "]; a bare entry is in namespace " + m.Namespace + ")"
	}
	if network == "" {
		return entries + " admits only interfaces attached through those NetworkAttachmentDefinitions, and this interface's is not known: name it in the pod's " +
			annotations.MultusNetworks + " (or, for eth0, " + annotations.MultusDefaultNetwork + " or ipamd's --multus-cluster-network), or choose another pool"
	}
	return fmt.Sprintf("%s does not include this interface's NetworkAttachmentDefinition %s (%s): attach the interface through one of them, add %s there, or choose another pool",
		entries, network, p.multusUnmatched(iface, network), network)
}

// multusUnmatched is spiderpool's sentence for an interface whose
// NetworkAttachmentDefinition spec.multusName does not include: the entries as the pool
// writes them, in Go's list notation as spiderpool prints them (its e2e suite builds
// the same sentence from the pool's spec), and the interface's NAD.
func (p *Pool) multusUnmatched(iface, network string) string {
	return fmt.Sprintf("the spec.multusName [%s] in the IPPool %s used by the Pod interface %s is not matched with the multusCR %s specified by the Pod",
		strings.Join(p.MultusNames, " "), p.Name, iface, network)
}
