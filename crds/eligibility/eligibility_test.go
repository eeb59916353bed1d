package eligibility

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func TestExcludes(t *testing.T) {
	yes := true
	subject := Subject{
		Namespace:       "ns",
		NamespaceLabels: func() (labels.Set, bool, error) { return labels.Set{"team": "x"}, true, nil },
		Pod:             true, PodLabels: labels.Set{"app": "db"},
		Node: "n1", NodeLabels: labels.Set{"zone": "a"},
		Network: "kube-system/macvlan",
		Multus:  &annotations.Multus{Namespace: "kube-system"},
	}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	tests := []struct {
		name string
		mod  func(*v2beta1.SpiderIPPool)
		ok   bool
		msg  string
	}{
		{name: "plain pool", mod: func(*v2beta1.SpiderIPPool) {}, ok: true},
		{name: "disabled", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.Disable = &yes }, msg: "spec.disable"},
		{name: "terminating", mod: func(p *v2beta1.SpiderIPPool) { now := metav1.NewTime(time.Now()); p.DeletionTimestamp = &now }, msg: "being deleted"},
		{name: "nodeName includes", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.NodeName = []string{"n0", "n1"} }, ok: true},
		{name: "nodeName excludes", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.NodeName = []string{"n0"} }, msg: "spec.nodeName"},
		{name: "nodeAffinity excludes", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.NodeAffinity = sel("zone", "b") }, msg: "spec.nodeAffinity"},
		{name: "nodeAffinity selects", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.NodeAffinity = sel("zone", "a") }, ok: true},
		{name: "namespaceName excludes", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.NamespaceName = []string{"other"} }, msg: "spec.namespaceName"},
		// spec.nodeName and spec.namespaceName take priority over the affinity of
		// their kind, as in spiderpool: the affinity is then not read at all.
		{name: "nodeName admits where nodeAffinity would not", mod: func(p *v2beta1.SpiderIPPool) {
			p.Spec.NodeName, p.Spec.NodeAffinity = []string{"n1"}, sel("zone", "b")
		}, ok: true},
		{name: "nodeName excludes where nodeAffinity would admit", mod: func(p *v2beta1.SpiderIPPool) {
			p.Spec.NodeName, p.Spec.NodeAffinity = []string{"n0"}, sel("zone", "a")
		}, msg: "spec.nodeName"},
		{name: "nodeName set: an invalid nodeAffinity is not read", mod: func(p *v2beta1.SpiderIPPool) {
			p.Spec.NodeName = []string{"n1"}
			p.Spec.NodeAffinity = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Bogus"}}}
		}, ok: true},
		{name: "namespaceName admits where namespaceAffinity would not", mod: func(p *v2beta1.SpiderIPPool) {
			p.Spec.NamespaceName, p.Spec.NamespaceAffinity = []string{"ns"}, sel("team", "y")
		}, ok: true},
		{name: "namespaceName excludes where namespaceAffinity would admit", mod: func(p *v2beta1.SpiderIPPool) {
			p.Spec.NamespaceName, p.Spec.NamespaceAffinity = []string{"other"}, sel("team", "x")
		}, msg: "spec.namespaceName"},
		{name: "namespaceAffinity excludes", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.NamespaceAffinity = sel("team", "y") }, msg: "spec.namespaceAffinity"},
		{name: "podAffinity excludes", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.PodAffinity = sel("app", "web") }, msg: "spec.podAffinity"},
		{name: "podAffinity selects", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.PodAffinity = sel("app", "db") }, ok: true},
		{name: "multusName with namespace", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"kube-system/macvlan"} }, ok: true},
		{name: "multusName bare, in nicpool's namespace", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"macvlan"} }, ok: true},
		{name: "multusName excludes", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"kube-system/ipvlan"} }, msg: "spec.multusName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v2beta1.SpiderIPPool{}
			p.Name, p.Spec.Subnet = "pool", "10.1.0.0/16"
			tt.mod(p)
			why, err := NewPool(p).Excludes(subject)
			if err != nil {
				t.Fatal(err)
			}
			if tt.ok != (why == "") || (why != "" && !strings.Contains(why, tt.msg)) {
				t.Errorf("Excludes = %q, want ok=%v msg %q", why, tt.ok, tt.msg)
			}
		})
	}
}

// What is not known is not judged: at admission there is no node nor network, and a
// node asking whether it can serve at all names no pod.
func TestUnjudgedParts(t *testing.T) {
	p := &v2beta1.SpiderIPPool{}
	p.Name, p.Spec.Subnet = "pool", "10.1.0.0/16"
	p.Spec.NodeName, p.Spec.MultusName = []string{"n0"}, []string{"other"}
	p.Spec.NamespaceName = []string{"other"}
	p.Spec.PodAffinity = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	if why, _ := NewPool(p).Excludes(Subject{}); why != "" {
		t.Errorf("an empty subject is excluded: %s", why)
	}
	if why, _ := NewPool(p).Excludes(Subject{Node: "n1"}); !strings.Contains(why, "spec.nodeName") {
		t.Errorf("a node-only subject: %q, want spec.nodeName", why)
	}
	if why, _ := NewPool(p).Excludes(Subject{Namespace: "ns", Pod: true}); !strings.Contains(why, "spec.namespaceName") {
		t.Errorf("an admission subject: %q, want spec.namespaceName", why)
	}
}

func TestClosed(t *testing.T) {
	yes := true
	p := &v2beta1.SpiderIPPool{}
	if err := Closed(p); err != nil {
		t.Errorf("open pool: %v", err)
	}
	p.Spec.Disable = &yes
	if err := Closed(p); !errors.Is(err, ErrDisabled) {
		t.Errorf("disabled pool: %v", err)
	}
	now := metav1.NewTime(time.Now())
	p.DeletionTimestamp = &now
	if err := Closed(p); !errors.Is(err, ErrTerminating) {
		t.Errorf("terminating pool: %v", err)
	}
}

// The bad inputs of spec.multusName: a bare entry names the NetworkAttachmentDefinition
// of that name in nicpool's namespace and nothing else, whatever a tenant's NAD or its
// CNI configuration is called; a namespaced entry names exactly that NAD.
func TestMultusNameCatalogue(t *testing.T) {
	m := &annotations.Multus{Namespace: "nicpool-system"}
	tests := []struct {
		name    string
		entries []string
		network string
		multus  *annotations.Multus
		msg     string // "" admits
	}{
		{name: "bare entry, nicpool's NAD", entries: []string{"prodnet"}, network: "nicpool-system/prodnet", multus: m},
		{name: "bare entry, a tenant's NAD of that name", entries: []string{"prodnet"}, network: "tenant-b/prodnet", multus: m,
			msg: "spec.multusName [prodnet] (NetworkAttachmentDefinitions [nicpool-system/prodnet]; a bare entry is in namespace nicpool-system) does not include this interface's NetworkAttachmentDefinition tenant-b/prodnet"},
		{name: "bare entry, the operator's namespace", entries: []string{"prodnet"}, network: "kube-system/prodnet", multus: &annotations.Multus{Namespace: "kube-system"}},
		{name: "namespaced entry, that NAD", entries: []string{"tenant-a/prodnet"}, network: "tenant-a/prodnet", multus: m},
		{name: "namespaced entry, another namespace's NAD of that name", entries: []string{"tenant-a/prodnet"}, network: "tenant-b/prodnet", multus: m,
			msg: "spec.multusName [tenant-a/prodnet] does not include this interface's NetworkAttachmentDefinition tenant-b/prodnet"},
		{name: "namespaced entry is not a prefix", entries: []string{"tenant-a/prod"}, network: "tenant-a/prodnet", multus: m, msg: "does not include"},
		{name: "second entry matches", entries: []string{"other", "tenant-b/prodnet"}, network: "tenant-b/prodnet", multus: m},
		{name: "interface of no known NAD", entries: []string{"prodnet"}, network: "", multus: m, msg: "this interface's is not known"},
		{name: "no multusName admits any network", network: "tenant-b/x", multus: m},
		{name: "unjudged without Multus", entries: []string{"prodnet"}, network: "tenant-b/prodnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v2beta1.SpiderIPPool{}
			p.Name, p.Spec.Subnet, p.Spec.MultusName = "pool", "10.1.0.0/16", tt.entries
			why, err := NewPool(p).Excludes(Subject{Network: tt.network, Multus: tt.multus})
			if err != nil {
				t.Fatal(err)
			}
			if (tt.msg == "") != (why == "") || !strings.Contains(why, tt.msg) {
				t.Errorf("Excludes = %q, want %q", why, tt.msg)
			}
		})
	}
}

// The causes spiderpool's agent also finds at CNI ADD carry its words for them, which
// its users' alerts and its own e2e suite match in Events, between nicpool's account
// and the fix. The whole sentence is what ipamd's Event shows after "pool NAME ".
func TestSpiderpoolWording(t *testing.T) {
	m := &annotations.Multus{Namespace: "kube-system"}
	tests := []struct {
		name    string
		mod     func(*v2beta1.SpiderIPPool)
		subject Subject
		want    string
	}{
		{name: "nodeName", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.NodeName = []string{"node-1", "node-3"} },
			subject: Subject{Node: "node-2"},
			want:    `is restricted by spec.nodeName to [node-1, node-3] (unmatched Node name of IPPool vlan-a): add node "node-2" there or choose another pool`},
		{name: "nodeAffinity", mod: func(p *v2beta1.SpiderIPPool) {
			p.Spec.NodeAffinity = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}
		},
			subject: Subject{Node: "node-2", NodeLabels: labels.Set{"zone": "a"}},
			want:    `spec.nodeAffinity (zone=b) does not match the labels of node "node-2" (unmatched Node affinity of IPPool vlan-a): label the node or choose another pool`},
		{name: "multusName, eth0", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"team-a/macvlan-a"} },
			subject: Subject{Interface: "eth0", Network: "kube-system/macvlan", Multus: m},
			want: "spec.multusName [team-a/macvlan-a] does not include this interface's NetworkAttachmentDefinition kube-system/macvlan " +
				"(the spec.multusName [team-a/macvlan-a] in the IPPool vlan-a used by the Pod interface eth0 is not matched with the multusCR kube-system/macvlan specified by the Pod): " +
				"attach the interface through one of them, add kube-system/macvlan there, or choose another pool"},
		// spiderpool prints the entries as the pool writes them, in Go's list notation.
		{name: "multusName, several entries, bare ones", mod: func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"macvlan-a", "team-b/macvlan-b"} },
			subject: Subject{Interface: "net1", Network: "team-c/macvlan-c", Multus: m},
			want: "spec.multusName [macvlan-a, team-b/macvlan-b] (NetworkAttachmentDefinitions [kube-system/macvlan-a, team-b/macvlan-b]; a bare entry is in namespace kube-system) " +
				"does not include this interface's NetworkAttachmentDefinition team-c/macvlan-c " +
				"(the spec.multusName [macvlan-a team-b/macvlan-b] in the IPPool vlan-a used by the Pod interface net1 is not matched with the multusCR team-c/macvlan-c specified by the Pod): " +
				"attach the interface through one of them, add team-c/macvlan-c there, or choose another pool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v2beta1.SpiderIPPool{}
			p.Name, p.Spec.Subnet = "vlan-a", "10.1.0.0/16"
			tt.mod(p)
			why, err := NewPool(p).Excludes(tt.subject)
			if err != nil {
				t.Fatal(err)
			}
			if why != tt.want {
				t.Errorf("Excludes =\n%s\nwant\n%s", why, tt.want)
			}
		})
	}
}
