package spiderpoolcrds

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	spiderpoolv2beta1 "github.com/spidernet-io/spiderpool/pkg/k8s/apis/spiderpool.spidernet.io/v2beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// nicpoolPool is a SpiderIPPool as nicpool's API server serves it: a spec as nicpool's
// pool webhook leaves it (canonical, with its finalizer) and a status as nicpool's pool
// counter writes it (webhook/controller/poolcount, ipamd/ledger.Recount): counts,
// spiderpool's string of records, and nicpool's allocatedIPsFrom beside it.
const nicpoolPool = `{
  "apiVersion": "spiderpool.spidernet.io/v2beta1", "kind": "SpiderIPPool",
  "metadata": {"name": "decoded-v4", "finalizers": ["spiderpool.spidernet.io"]},
  "spec": {"ipVersion": 4, "subnet": "10.6.0.0/16", "ips": ["10.6.0.10-10.6.0.20"], "excludeIPs": ["10.6.0.15"],
    "gateway": "10.6.0.1", "vlan": 100, "routes": [{"dst": "10.7.0.0/16", "gw": "10.6.0.1"}],
    "podAffinity": {"matchLabels": {"app": "web"}}, "namespaceName": ["default"], "nodeName": ["node-1"],
    "multusName": ["kube-system/macvlan"], "default": false, "disable": false}
}`

const nicpoolStatus = `{"status": {"allocatedIPCount": 2, "totalIPCount": 10, "allocatedIPsFrom": "IPBlocks",
  "allocatedIPs": "{\"10.6.0.10\":{\"pod\":\"default/web-0\",\"podUid\":\"uid-0\"},\"10.6.0.11\":{\"pod\":\"default/web-1\",\"podUid\":\"uid-1\"}}"}}`

// nicpoolEndpoint is a SpiderEndpoint as nicpool writes one, with the mac an external
// system recorded.
const nicpoolEndpoint = `{
  "apiVersion": "spiderpool.spidernet.io/v2beta1", "kind": "SpiderEndpoint",
  "metadata": {"namespace": "default", "name": "web-0"},
  "status": {"current": {"uid": "uid-0", "node": "node-1", "ips": [{"interface": "eth0", "ipv4": "10.6.0.10/16",
    "ipv4Pool": "decoded-v4", "ipv4Gateway": "10.6.0.1", "vlan": 100, "mac": "02:42:ac:11:00:02",
    "routes": [{"dst": "10.7.0.0/16", "gw": "10.6.0.1"}]}]},
    "ownerControllerType": "StatefulSet", "ownerControllerName": "web"}
}`

// TestSpiderpoolTypesDecodeNicpoolObjects stores nicpool's objects on a real API server
// with nicpool's CRDs (crds/yaml) and reads them back with spiderpool's Go types, as
// any client built on them does: the pool's status.allocatedIPs decodes into
// spiderpool's PoolIPAllocations with every record, the endpoint keeps its mac, and a
// SpiderCoordinator keeps every field with spiderpool's defaults.
func TestSpiderpoolTypesDecodeNicpoolObjects(t *testing.T) {
	ctx := context.Background()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(repoRoot(t), "bin")
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot(t), "crds", "yaml")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd from %s: %v", assets, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	// nicpool's writer: untyped, as it has no spiderpool types.
	raw, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []string{nicpoolPool, nicpoolEndpoint} {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(obj), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := raw.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == "SpiderIPPool" {
			if err := raw.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(nicpoolStatus))); err != nil {
				t.Fatalf("write the pool's status as nicpool's counter does: %v", err)
			}
		}
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := spiderpoolv2beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	spider, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var pools spiderpoolv2beta1.SpiderIPPoolList
	if err := spider.List(ctx, &pools); err != nil {
		t.Fatalf("spiderpool's types cannot list nicpool's pools: %v", err)
	}
	var pool spiderpoolv2beta1.SpiderIPPool
	if err := spider.Get(ctx, client.ObjectKey{Name: "decoded-v4"}, &pool); err != nil {
		t.Fatalf("spiderpool's types cannot read nicpool's pool: %v", err)
	}
	if pool.Status.AllocatedIPs == nil {
		t.Fatal("status.allocatedIPs is missing")
	}
	recs := spiderpoolv2beta1.PoolIPAllocations{}
	if err := json.Unmarshal([]byte(*pool.Status.AllocatedIPs), &recs); err != nil {
		t.Fatalf("status.allocatedIPs is not spiderpool's PoolIPAllocations: %v", err)
	}
	want := spiderpoolv2beta1.PoolIPAllocations{
		"10.6.0.10": {NamespacedName: "default/web-0", PodUID: "uid-0"},
		"10.6.0.11": {NamespacedName: "default/web-1", PodUID: "uid-1"},
	}
	if len(recs) != len(want) {
		t.Errorf("records %v, want %v", recs, want)
	}
	for a, r := range want {
		if recs[a] != r {
			t.Errorf("record of %s: %+v, want %+v", a, recs[a], r)
		}
	}
	if c := pool.Status.AllocatedIPCount; c == nil || *c != 2 || pool.Spec.Subnet != "10.6.0.0/16" || len(pool.Spec.Routes) != 1 {
		t.Errorf("pool as spiderpool's types read it: %+v", pool)
	}
	var ep spiderpoolv2beta1.SpiderEndpoint
	if err := spider.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web-0"}, &ep); err != nil {
		t.Fatalf("spiderpool's types cannot read nicpool's endpoint: %v", err)
	}
	if ips := ep.Status.Current.IPs; len(ips) != 1 || ips[0].MAC == nil || *ips[0].MAC != "02:42:ac:11:00:02" || ips[0].NIC != "eth0" {
		t.Errorf("endpoint as spiderpool's types read it: %+v; want eth0 with its mac kept", ep.Status.Current)
	}

	// A SpiderCoordinator as spiderpool's chart creates one, written and read back with
	// spiderpool's types: every field kept, spiderpool's defaults filled in.
	coord := &spiderpoolv2beta1.SpiderCoordinator{}
	coord.Name = "default"
	coord.Spec = spiderpoolv2beta1.CoordinatorSpec{
		Mode: ptr("auto"), PodCIDRType: ptr("auto"), HijackCIDR: []string{"169.254.0.0/16"},
		PolicyRoutes: []spiderpoolv2beta1.Route{{Dst: "10.10.0.0/16", Gw: "172.18.0.1"}},
		PodMACPrefix: ptr("0a:1b"), PodDefaultRouteNIC: ptr("net1"), VethLinkAddress: ptr("169.254.100.1"), VethMTU: ptr(1400),
	}
	if err := spider.Create(ctx, coord); err != nil {
		t.Fatalf("spiderpool's types cannot write a SpiderCoordinator: %v", err)
	}
	coord.Status = spiderpoolv2beta1.CoordinatorStatus{Phase: "Synced", OverlayPodCIDR: []string{"10.244.0.0/16"}, ServiceCIDR: []string{"10.96.0.0/12"}}
	if err := spider.Status().Update(ctx, coord); err != nil {
		t.Fatalf("spiderpool's controller cannot write a SpiderCoordinator's status: %v", err)
	}
	var back spiderpoolv2beta1.SpiderCoordinator
	if err := spider.Get(ctx, client.ObjectKey{Name: "default"}, &back); err != nil {
		t.Fatalf("spiderpool's types cannot read nicpool's SpiderCoordinator: %v", err)
	}
	s := back.Spec
	if *s.Mode != "auto" || *s.PodCIDRType != "auto" || len(s.HijackCIDR) != 1 || len(s.PolicyRoutes) != 1 || s.PolicyRoutes[0].Gw != "172.18.0.1" ||
		*s.PodMACPrefix != "0a:1b" || *s.PodDefaultRouteNIC != "net1" || *s.VethLinkAddress != "169.254.100.1" || *s.VethMTU != 1400 {
		t.Errorf("SpiderCoordinator spec as spiderpool's types read it: %+v", s)
	}
	if s.TunePodRoutes == nil || !*s.TunePodRoutes || s.HostRuleTable == nil || *s.HostRuleTable != 500 || s.PodRPFilter == nil || *s.PodRPFilter != 0 || s.TxQueueLen == nil || *s.TxQueueLen != 0 {
		t.Errorf("SpiderCoordinator without spiderpool's defaults: %+v", s)
	}
	if back.Status.Phase != "Synced" || len(back.Status.OverlayPodCIDR) != 1 || len(back.Status.ServiceCIDR) != 1 {
		t.Errorf("SpiderCoordinator status as spiderpool's types read it: %+v", back.Status)
	}
}

func ptr[T any](v T) *T { return &v }
