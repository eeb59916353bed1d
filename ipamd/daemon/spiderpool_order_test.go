package daemon_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/daemon"
)

func createNode(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := env.Client.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// Eligibility and candidate order as spiderpool decides them: spec.nodeName and
// spec.namespaceName take priority over the affinity of their kind (the affinity is
// not read), and candidates are tried by the kind of affinity they set before the
// annotation's order.
func TestSpiderpoolEligibilityAndOrder(t *testing.T) {
	ctx := context.Background()
	createNode(t, "prio-node", map[string]string{"zone": "a"})
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prio", Labels: map[string]string{"team": "red"}}}); err != nil {
		t.Fatal(err)
	}
	zoneB := &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}
	teamBlue := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}
	fixtures.CreatePool(t, env.Client, fixtures.Pool("prio-plain", "10.213.0.0/16", []string{"10.213.0.1-10.213.0.9"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("prio-node", "10.214.0.0/16", []string{"10.214.0.1-10.214.0.9"},
		func(p *v2beta1.SpiderIPPool) { p.Spec.NodeName = []string{"prio-node"} }))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("prio-node-over-affinity", "10.215.0.0/16", []string{"10.215.0.1-10.215.0.9"},
		func(p *v2beta1.SpiderIPPool) { p.Spec.NodeName, p.Spec.NodeAffinity = []string{"prio-node"}, zoneB }))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("prio-ns-over-affinity", "10.216.0.0/16", []string{"10.216.0.1-10.216.0.9"},
		func(p *v2beta1.SpiderIPPool) {
			p.Spec.NamespaceName, p.Spec.NamespaceAffinity = []string{"prio"}, teamBlue
		}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("prio-eth0", "10.217.0.0/16", []string{"10.217.0.1-10.217.0.9"},
		func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"cluster-net"} }))
	d, _ := startDaemon(t, "prio-node")

	cases := []struct {
		name, pools, defaultNetwork, want string
	}{
		{name: "a nodeName pool is tried before a plain one listed first", pools: `["prio-plain","prio-node"]`, want: "prio-node"},
		{name: "nodeName admits the node where nodeAffinity would not", pools: `["prio-node-over-affinity"]`, want: "prio-node-over-affinity"},
		{name: "namespaceName admits the namespace where namespaceAffinity would not", pools: `["prio-ns-over-affinity"]`, want: "prio-ns-over-affinity"},
		{name: "eth0 matches multusName through its default network", pools: `["prio-eth0"]`, defaultNetwork: "cluster-net", want: "prio-eth0"},
		{name: "eth0 of another default network does not", pools: `["prio-eth0"]`, defaultNetwork: "prio/cluster-net"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kv := []string{annotations.IPPools, `[{"interface":"eth0","ipv4":` + tc.pools + `}]`}
			if tc.defaultNetwork != "" {
				kv = append(kv, "v1.multus-cni.io/default-network", tc.defaultNetwork)
			}
			pod := createPod(t, "prio", "pod-"+string(rune('a'+i)), "prio-node", withAnnotations(kv...))
			r, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c"))
			if tc.want == "" {
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Code != api.CodeNoPool || !strings.Contains(ae.Error(), "prio/cluster-net") {
					t.Errorf("got %+v, %v; want refused naming the interface's network prio/cluster-net", r, err)
				}
				return
			}
			if err != nil || r.IPs[0].Pool != tc.want {
				t.Errorf("got %+v, %v; want an address of %s", r, err, tc.want)
			}
		})
	}
	checkInvariants(t, false)
}

// eth0 of a pod that names no default network is attached through Multus's cluster
// network: told which it is (--multus-cluster-network), ipamd matches it against
// spec.multusName; not told, a pool that sets multusName serves no such eth0.
func TestEth0MultusNameFromTheClusterNetwork(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "clusternet")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("clusternet", "10.218.0.0/16", []string{"10.218.0.1-10.218.0.9"},
		func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"k8s-pod-network"} }))
	sel := withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["clusternet"]}]`)

	told, _ := startDaemonWith(t, "clusternet-told", func(o *daemon.Options) {
		o.Multus = annotations.Multus{ClusterNetwork: "k8s-pod-network"}
	})
	pod := createPod(t, "clusternet", "told", "clusternet-told", sel)
	if r, err := told.Service.Allocate(ctx, addReq(pod, "eth0", "c")); err != nil || r.IPs[0].Pool != "clusternet" {
		t.Errorf("cluster network nicpool-system/k8s-pod-network: got %+v, %v; want an address of clusternet", r, err)
	}

	untold, _ := startDaemon(t, "clusternet-untold")
	pod = createPod(t, "clusternet", "untold", "clusternet-untold", sel)
	var ae *api.Error
	if r, err := untold.Service.Allocate(ctx, addReq(pod, "eth0", "c")); !errors.As(err, &ae) || ae.Code != api.CodeNoPool || !strings.Contains(ae.Error(), "--multus-cluster-network") {
		t.Errorf("no cluster network known: got %+v, %v; want refused saying how to name it", r, err)
	}
	checkInvariants(t, false)
}
