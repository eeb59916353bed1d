package selection

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
)

func TestChoose(t *testing.T) {
	pools := []v2beta1.SpiderIPPool{
		*fixtures.Pool("v4-b", "10.2.0.0/16", nil, fixtures.Default), *fixtures.Pool("v4-a", "10.1.0.0/16", nil, fixtures.Default),
		*fixtures.Pool("v6-a", "fd00:1::/64", nil, fixtures.Default), *fixtures.Pool("blue-1", "10.3.0.0/16", nil), *fixtures.Pool("blue-2", "10.4.0.0/16", nil),
	}
	pod := func(ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: ann}}
	}
	nsWith := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Annotations: map[string]string{
		"ipam.spidernet.io/default-ipv4-ippool": `["ns-v4"]`}}}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		ns      *corev1.Namespace
		iface   string
		net     api.NetworkConfig
		want    Choice
		wantErr string
	}{
		{name: "resolved entry for the interface", iface: "net1",
			pod:  pod(map[string]string{"k8s.v1.cni.cncf.io/networks": "macvlan", "ipam.spidernet.io/ippools": `[{"interface":"eth0","ipv4":["v4-a"]},{"interface":"net1","ipv4":["blue-2","blue-1"],"ipv6":["v6-a"],"cleangateway":true}]`}),
			want: Choice{Interface: "net1", IPv4: []string{"blue-2", "blue-1"}, IPv6: []string{"v6-a"}, CleanGateway: true, Source: SourcePod}},
		// Admission resolves the selection; a node never resolves it again.
		{name: "a wildcard (not expanded at admission) is refused, not expanded", iface: "net1", ns: nsWith,
			pod:     pod(map[string]string{"k8s.v1.cni.cncf.io/networks": "macvlan", "ipam.spidernet.io/ippools": `[{"interface":"eth0","ipv4":["v4-a"]},{"interface":"net1","ipv4":["blue-*"]}]`}),
			wantErr: `ipam.spidernet.io/ippools entry 1 (interface net1) names the pattern "blue-*", not a pool`},
		{name: "unnamed entries (not admitted by nicpool) are refused", iface: "net1", ns: nsWith,
			pod:     pod(map[string]string{"k8s.v1.cni.cncf.io/networks": "macvlan", "ipam.spidernet.io/ippools": `[{"ipv4":["v4-a"]},{"ipv4":["blue-1"]}]`}),
			wantErr: "ipam.spidernet.io/ippools entry 0 names no interface"},
		{name: "single-NIC annotation not converted at admission is refused", iface: "eth0", ns: nsWith,
			pod:     pod(map[string]string{"ipam.spidernet.io/ippool": `{"ipv4":["blue-2"]}`}),
			wantErr: "ipam.spidernet.io/ippool is set and ipam.spidernet.io/ippools is not"},
		{name: "namespace defaults", iface: "eth0", pod: pod(nil), ns: nsWith,
			want: Choice{Interface: "eth0", IPv4: []string{"ns-v4"}, Source: SourceNamespace}},
		{name: "network defaults", iface: "eth0", pod: pod(nil), net: api.NetworkConfig{DefaultIPv6Pools: []string{"v6-a"}, CleanGateway: true},
			want: Choice{Interface: "eth0", IPv6: []string{"v6-a"}, CleanGateway: true, Source: SourceNetwork}},
		{name: "cluster defaults, dual stack, sorted", iface: "eth0", pod: pod(nil),
			want: Choice{Interface: "eth0", IPv4: []string{"v4-a", "v4-b"}, IPv6: []string{"v6-a"}, Source: SourceCluster}},
		{name: "malformed annotation names it", iface: "eth0", pod: pod(map[string]string{"ipam.spidernet.io/ippools": `{`}),
			wantErr: "ipam.spidernet.io/ippools"},
		// Issue 10 finding 8: spiderpool refuses the interface; defaults would serve it
		// from pools its author never chose.
		{name: "an interface the annotation leaves out is refused, not served from defaults", iface: "net1", ns: nsWith,
			pod:     pod(map[string]string{"k8s.v1.cni.cncf.io/networks": "macvlan", "ipam.spidernet.io/ippools": `[{"interface":"eth0","ipv4":["v4-a"]}]`}),
			wantErr: "annotation ipam.spidernet.io/ippools names no pools for interface net1"},
		{name: "beside the single-NIC annotation (converted for eth0), other interfaces take the defaults", iface: "net1", ns: nsWith,
			pod: pod(map[string]string{"k8s.v1.cni.cncf.io/networks": "macvlan", "ipam.spidernet.io/ippools": `[{"interface":"eth0","ipv4":["v4-a"]}]`,
				"ipam.spidernet.io/ippool": `{"ipv4":["v4-a"]}`}),
			want: Choice{Interface: "net1", IPv4: []string{"ns-v4"}, Source: SourceNamespace}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Choose(tt.pod, tt.ns, tt.iface, tt.net, pools)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.IPv4, ",") != strings.Join(tt.want.IPv4, ",") || strings.Join(got.IPv6, ",") != strings.Join(tt.want.IPv6, ",") ||
				got.CleanGateway != tt.want.CleanGateway || got.Source != tt.want.Source || got.Interface != tt.want.Interface {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Candidates are tried in spiderpool's order (its ByPoolPriority): by the kind of
// affinity a pool sets, podAffinity > nodeName > nodeAffinity > namespaceName >
// namespaceAffinity > multusName, ties in the source's order.
func TestCandidateOrder(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"k": "v"}}
	with := func(f func(*v2beta1.SpiderIPPool)) func(*v2beta1.SpiderIPPool) { return f }
	pools := []v2beta1.SpiderIPPool{
		*fixtures.Pool("plain", "10.1.0.0/16", nil, fixtures.Default),
		*fixtures.Pool("multus", "10.2.0.0/16", nil, fixtures.Default, with(func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"x"} })),
		*fixtures.Pool("ns-affinity", "10.3.0.0/16", nil, fixtures.Default, with(func(p *v2beta1.SpiderIPPool) { p.Spec.NamespaceAffinity = sel })),
		*fixtures.Pool("ns-name", "10.4.0.0/16", nil, fixtures.Default, with(func(p *v2beta1.SpiderIPPool) { p.Spec.NamespaceName = []string{"ns"} })),
		*fixtures.Pool("node-affinity", "10.5.0.0/16", nil, fixtures.Default, with(func(p *v2beta1.SpiderIPPool) { p.Spec.NodeAffinity = sel })),
		*fixtures.Pool("node-name", "10.6.0.0/16", nil, fixtures.Default, with(func(p *v2beta1.SpiderIPPool) { p.Spec.NodeName = []string{"n"} })),
		*fixtures.Pool("pod-affinity", "10.7.0.0/16", nil, fixtures.Default, with(func(p *v2beta1.SpiderIPPool) { p.Spec.PodAffinity = sel })),
		// nodeName and multusName: above nodeName alone, below podAffinity.
		*fixtures.Pool("node-name-multus", "10.8.0.0/16", nil, fixtures.Default, with(func(p *v2beta1.SpiderIPPool) {
			p.Spec.NodeName, p.Spec.MultusName = []string{"n"}, []string{"x"}
		})),
		*fixtures.Pool("plain-2", "10.9.0.0/16", nil),
	}
	want := "pod-affinity,node-name-multus,node-name,node-affinity,ns-name,ns-affinity,multus,plain"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	c, err := Choose(pod, nil, "eth0", api.NetworkConfig{}, pools)
	if err != nil || strings.Join(c.IPv4, ",") != want {
		t.Errorf("cluster defaults: %v (%v), want %s", c.IPv4, err, want)
	}
	// The annotation's order decides among pools alike, not above the kinds.
	pod.Annotations = map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["plain-2","multus","plain","node-name"]}]`}
	c, err = Choose(pod, nil, "eth0", api.NetworkConfig{}, pools)
	if want := "node-name,multus,plain-2,plain"; err != nil || strings.Join(c.IPv4, ",") != want {
		t.Errorf("annotation: %v (%v), want %s", c.IPv4, err, want)
	}
}
