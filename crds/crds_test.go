package crds_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds"
	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/local"
	"github.com/nicpool/nicpool/e2e/testenv"
)

// TestMain discards controller-runtime's log (see testenv.Main).
func TestMain(m *testing.M) { testenv.Main(m, nil) }

// The checked-in CRD YAML and deepcopy code must be what controller-gen makes from the
// types now; otherwise `make generate` was forgotten.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := testenv.RepoRoot()
	gen := filepath.Join(testenv.BinDir(), "controller-gen")
	tmp := t.TempDir()
	run := func(args ...string) []byte {
		cmd := exec.Command(gen, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("controller-gen %v: %v\n%s", args, err, out)
		}
		return out
	}
	run("crd", "paths=./crds/api/...", "output:crd:artifacts:config="+tmp)
	want, _ := filepath.Glob(filepath.Join(tmp, "*.yaml"))
	have, _ := filepath.Glob(filepath.Join(root, crds.Dir, "*.yaml"))
	if len(want) != len(have) {
		t.Fatalf("crds/yaml has %d files, controller-gen makes %d: run `make generate`", len(have), len(want))
	}
	for _, w := range want {
		fresh, _ := os.ReadFile(w)
		checked, err := os.ReadFile(filepath.Join(root, crds.Dir, filepath.Base(w)))
		if err != nil {
			t.Fatalf("%s missing from crds/yaml: run `make generate`", filepath.Base(w))
		}
		if !bytes.Equal(fresh, checked) {
			t.Errorf("crds/yaml/%s is stale: run `make generate`", filepath.Base(w))
		}
	}
	deep := run("object:headerFile=hack/boilerplate.go.txt", "paths=./crds/api/...", "output:object:stdout")
	for _, file := range []string{"crds/api/v2beta1/zz_generated.deepcopy.go", "crds/api/ipam/v1alpha1/zz_generated.deepcopy.go"} {
		checked, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(deep, checked) {
			t.Errorf("%s is stale: run `make generate`", file)
		}
	}
}

func TestAPIServer(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	ctx := context.Background()
	c := env.Client

	t.Run("pool round trip keeps spiderpool field names", func(t *testing.T) {
		pool := &v2beta1.SpiderIPPool{
			ObjectMeta: metav1.ObjectMeta{Name: "roundtrip-v4"},
			Spec: v2beta1.IPPoolSpec{
				IPVersion:         ptr.To(int64(4)),
				Subnet:            "10.6.0.0/16",
				IPs:               []string{"10.6.0.10-10.6.0.20", "10.6.1.1"},
				ExcludeIPs:        []string{"10.6.0.15"},
				Gateway:           ptr.To("10.6.0.1"),
				Vlan:              ptr.To(int64(100)),
				Routes:            []v2beta1.Route{{Dst: "10.7.0.0/16", Gw: "10.6.0.1"}},
				PodAffinity:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
				NamespaceAffinity: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
				NamespaceName:     []string{"default"},
				NodeAffinity:      &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "z1"}},
				NodeName:          []string{"node-1"},
				MultusName:        []string{"kube-system/macvlan"},
				Default:           ptr.To(true),
				Disable:           ptr.To(false),
			},
		}
		if err := c.Create(ctx, pool); err != nil {
			t.Fatalf("create pool: %v", err)
		}
		pool.Status = v2beta1.IPPoolStatus{
			AllocatedIPs:     ptr.To(`{"10.6.0.10":{"pod":"default/web-0","podUid":"uid-1"}}`),
			AllocatedIPsFrom: v2beta1.AllocatedIPsFromBlocks,
			AllocatedIPCount: ptr.To(int64(1)),
			TotalIPCount:     ptr.To(int64(11)),
		}
		if err := c.Status().Update(ctx, pool); err != nil {
			t.Fatalf("update pool status: %v", err)
		}
		got := &v2beta1.SpiderIPPool{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(pool.Spec, got.Spec); d != "" {
			t.Errorf("spec changed on the way through the API server (-sent +stored):\n%s", d)
		}
		if d := cmp.Diff(pool.Status, got.Status); d != "" {
			t.Errorf("status changed on the way through the API server (-sent +stored):\n%s", d)
		}
		list := &v2beta1.SpiderIPPoolList{}
		if err := c.List(ctx, list); err != nil || len(list.Items) == 0 {
			t.Fatalf("list pools: %v (%d items)", err, len(list.Items))
		}
	})

	t.Run("a spiderpool manifest applies unchanged", func(t *testing.T) {
		// Field names as spiderpool's own documentation writes them.
		objs, err := local.Decode([]byte(`
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata:
  name: spiderpool-manifest
spec:
  ipVersion: 6
  subnet: fd00:6::/64
  ips: ["fd00:6::100-fd00:6::1ff"]
  excludeIPs: ["fd00:6::150"]
  gateway: fd00:6::1
  multusName: ["kube-system/macvlan-vlan0"]
  namespaceName: ["default"]
  nodeName: ["node-1"]
  default: false
  disable: false
  routes:
  - dst: fd00:7::/64
    gw: fd00:6::1
`))
		if err != nil || len(objs) != 1 {
			t.Fatalf("decode: %v", err)
		}
		if err := c.Create(ctx, objs[0]); err != nil {
			t.Fatalf("create from spiderpool YAML: %v", err)
		}
		got := &v2beta1.SpiderIPPool{}
		if err := c.Get(ctx, client.ObjectKey{Name: "spiderpool-manifest"}, got); err != nil {
			t.Fatal(err)
		}
		if *got.Spec.IPVersion != 6 || got.Spec.ExcludeIPs[0] != "fd00:6::150" || got.Spec.MultusName[0] != "kube-system/macvlan-vlan0" || got.Spec.Routes[0].Gw != "fd00:6::1" || *got.Spec.Gateway != "fd00:6::1" {
			t.Errorf("spiderpool fields not carried into the typed pool: %+v", got.Spec)
		}
	})

	t.Run("endpoint and reserved IP round trip", func(t *testing.T) {
		ep := &v2beta1.SpiderEndpoint{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
			Status: v2beta1.WorkloadEndpointStatus{
				Current: v2beta1.PodIPAllocation{UID: "uid-1", Node: "node-1", IPs: []v2beta1.IPAllocationDetail{
					{Interface: "eth0", IPv4: ptr.To("10.6.0.10/16"), IPv4Pool: ptr.To("roundtrip-v4"), IPv4Gateway: ptr.To("10.6.0.1"), Vlan: ptr.To(int64(0)), CleanGateway: ptr.To(false), Routes: []v2beta1.Route{{Dst: "10.7.0.0/16", Gw: "10.6.0.1"}}},
					{Interface: "net1", IPv6: ptr.To("fd00::10/64"), IPv6Pool: ptr.To("v6"), IPv6Gateway: ptr.To("fd00::1")},
				}, Summary: "eth0 10.6.0.10/16, net1 fd00::10/64"},
				OwnerControllerType: "StatefulSet",
				OwnerControllerName: "web",
			},
		}
		if err := c.Create(ctx, ep); err != nil {
			t.Fatalf("create endpoint with status in one request: %v", err)
		}
		got := &v2beta1.SpiderEndpoint{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ep), got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(ep.Status, got.Status); d != "" {
			t.Errorf("endpoint status not stored by create (-sent +stored):\n%s", d)
		}
		r := &v2beta1.SpiderReservedIP{ObjectMeta: metav1.ObjectMeta{Name: "keep-out"}, Spec: v2beta1.ReservedIPSpec{IPVersion: ptr.To(int64(4)), IPs: []string{"10.6.0.11"}}}
		if err := c.Create(ctx, r); err != nil {
			t.Fatalf("create reserved IP: %v", err)
		}
		if err := c.List(ctx, &v2beta1.SpiderEndpointList{}, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		if err := c.List(ctx, &v2beta1.SpiderReservedIPList{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("schema rejects bad objects with the API server's message", func(t *testing.T) {
		cases := []struct {
			name string
			obj  client.Object
			want string
		}{
			{"ipVersion 5", &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "bad-version"}, Spec: v2beta1.IPPoolSpec{IPVersion: ptr.To(int64(5)), Subnet: "10.9.0.0/16"}}, `spec.ipVersion: Unsupported value: 5`},
			{"malformed subnet", &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "bad-subnet"}, Spec: v2beta1.IPPoolSpec{Subnet: "10.9.0.0/33"}}, `spec.subnet`},
			{"subnet with host bits", &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "bad-hostbits"}, Spec: v2beta1.IPPoolSpec{Subnet: "10.9.0.1/16"}}, `subnet must be in canonical form`},
			// Spelt as netip writes it, as the webhook's defaulter rewrites it: what a
			// pool written without the webhook must already be.
			{"subnet not in canonical spelling", &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "bad-spelling"}, Spec: v2beta1.IPPoolSpec{Subnet: "FD00:9::/64"}}, `subnet must be in canonical form`},
			{"ipVersion not the subnet's family", &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "bad-family"}, Spec: v2beta1.IPPoolSpec{IPVersion: ptr.To(int64(6)), Subnet: "10.9.0.0/16"}}, `ipVersion must match the family of subnet`},
			{"vlan out of range", &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "bad-vlan"}, Spec: v2beta1.IPPoolSpec{Subnet: "10.9.0.0/16", Vlan: ptr.To(int64(4095))}}, `spec.vlan`},
			{"endpoint entry without interface", &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "no-nic", Namespace: "default"}, Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: "u", IPs: []v2beta1.IPAllocationDetail{{IPv4: ptr.To("10.6.0.9/16")}}}}}, `status.current.ips[0].interface`},
			{"reserved ipVersion 5", &v2beta1.SpiderReservedIP{ObjectMeta: metav1.ObjectMeta{Name: "bad-reserved"}, Spec: v2beta1.ReservedIPSpec{IPVersion: ptr.To(int64(5))}}, `spec.ipVersion: Unsupported value: 5`},
		}
		for _, tc := range cases {
			err := c.Create(ctx, tc.obj)
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: want Invalid error, got %v", tc.name, err)
				continue
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, tc.want)
			}
		}
	})

	t.Run("status.allocatedIPs is spiderpool's string, not an object", func(t *testing.T) {
		pool := &v2beta1.SpiderIPPool{}
		if err := c.Get(ctx, client.ObjectKey{Name: "roundtrip-v4"}, pool); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"status":{"allocatedIPs":{"10.6.0.11":{"pod":"default/x","podUid":"u2","interface":"eth0"}}}}`)
		err := c.Status().Patch(ctx, pool, client.RawPatch(types.MergePatchType, patch))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.allocatedIPs") || !strings.Contains(err.Error(), "string") {
			t.Errorf("an object status.allocatedIPs must be refused as not a string, got %v", err)
		}
	})

	t.Run("subnet is immutable", func(t *testing.T) {
		pool := &v2beta1.SpiderIPPool{}
		if err := c.Get(ctx, client.ObjectKey{Name: "roundtrip-v4"}, pool); err != nil {
			t.Fatal(err)
		}
		pool.Spec.Subnet = "10.8.0.0/16"
		err := c.Update(ctx, pool)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "subnet is immutable") {
			t.Errorf("changing subnet: want 'subnet is immutable', got %v", err)
		}
	})

	t.Run("kubectl get sp shows the printer columns", func(t *testing.T) {
		tbl, err := local.GetTable(ctx, env.Config, testenv.PoolsResource, "")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := local.PrintTable(&out, tbl); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if got, want := strings.Fields(lines[0]), []string{"NAME", "VERSION", "SUBNET", "ALLOCATED-IP-COUNT", "TOTAL-IP-COUNT", "DEFAULT", "DISABLE", "AGE"}; !cmp.Equal(got, want) {
			t.Errorf("columns %v, want %v", got, want)
		}
		row := strings.Fields(lines[1])
		if want := []string{"roundtrip-v4", "4", "10.6.0.0/16", "1", "11", "true", "false"}; !cmp.Equal(row[:7], want) {
			t.Errorf("row %v, want %v", row, want)
		}
		tbl, err = local.GetTable(ctx, env.Config, testenv.EndpointsResource, "default")
		if err != nil {
			t.Fatal(err)
		}
		out.Reset()
		_ = local.PrintTable(&out, tbl)
		lines = strings.Split(strings.TrimSpace(out.String()), "\n")
		if got, want := strings.Fields(lines[0]), []string{"NAME", "ADDRESSES", "NODE", "AGE"}; !cmp.Equal(got, want) {
			t.Errorf("kubectl get se columns %v, want %v", got, want)
		}
		if !strings.Contains(lines[1], " eth0 10.6.0.10/16, net1 fd00::10/64 ") || !strings.Contains(lines[1], " node-1 ") {
			t.Errorf("kubectl get se lacks an interface's addresses or the node:\n%s", out.String())
		}
	})

	t.Run("an ipamd selects its own blocks and endpoints by field", func(t *testing.T) {
		for _, b := range []*ipamv1alpha1.IPBlock{
			{ObjectMeta: metav1.ObjectMeta{Name: "roundtrip-v4.10.6.0.0"}, Spec: ipamv1alpha1.IPBlockSpec{Pool: "roundtrip-v4", CIDR: "10.6.0.0/28", Node: "node-1"},
				Status: ipamv1alpha1.IPBlockStatus{Allocations: v2beta1.PoolIPAllocations{"10.6.0.10": {Pod: "default/web-0", PodUID: "uid-1", Interface: "eth0"}}, Allocated: 1, Free: 0}},
			{ObjectMeta: metav1.ObjectMeta{Name: "roundtrip-v4.10.6.0.16"}, Spec: ipamv1alpha1.IPBlockSpec{Pool: "roundtrip-v4", CIDR: "10.6.0.16/28", Node: "node-2"}, Status: ipamv1alpha1.IPBlockStatus{Free: 3}},
		} {
			if err := c.Create(ctx, b); err != nil {
				t.Fatalf("create block with its records in one request: %v", err)
			}
		}
		var blocks ipamv1alpha1.IPBlockList
		if err := c.List(ctx, &blocks, client.MatchingFields{ipamv1alpha1.FieldNode: "node-1"}); err != nil {
			t.Fatal(err)
		}
		if len(blocks.Items) != 1 || blocks.Items[0].Status.Allocations["10.6.0.10"].Pod != "default/web-0" {
			t.Errorf("blocks of node-1: %+v", blocks.Items)
		}
		sel := client.MatchingFieldsSelector{Selector: fields.AndSelectors(fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, "roundtrip-v4"), fields.OneTermNotEqualSelector(ipamv1alpha1.FieldFree, "0"))}
		if err := c.List(ctx, &blocks, sel); err != nil || len(blocks.Items) != 1 || blocks.Items[0].Spec.Node != "node-2" {
			t.Errorf("blocks of the pool with room: %v %+v", err, blocks.Items)
		}
		var eps v2beta1.SpiderEndpointList
		if err := c.List(ctx, &eps, client.MatchingFields{"status.current.node": "node-1"}); err != nil || len(eps.Items) != 1 || eps.Items[0].Name != "web-0" {
			t.Errorf("endpoints of node-1: %v %+v", err, eps.Items)
		}
		if err := c.List(ctx, &eps, client.MatchingFields{"status.current.node": "node-9"}); err != nil || len(eps.Items) != 0 {
			t.Errorf("endpoints of node-9: %v %+v", err, eps.Items)
		}

		b := &ipamv1alpha1.IPBlock{}
		if err := c.Get(ctx, client.ObjectKey{Name: "roundtrip-v4.10.6.0.16"}, b); err != nil {
			t.Fatal(err)
		}
		moved := b.DeepCopy()
		moved.Spec.CIDR = "10.6.0.32/28"
		if err := c.Update(ctx, moved); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cidr is immutable") {
			t.Errorf("changing a block's cidr: want 'cidr is immutable', got %v", err)
		}
		moved = b.DeepCopy()
		moved.Spec.Pool = "other"
		if err := c.Update(ctx, moved); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pool is immutable") {
			t.Errorf("changing a block's pool: want 'pool is immutable', got %v", err)
		}
		bad := &ipamv1alpha1.IPBlock{ObjectMeta: metav1.ObjectMeta{Name: "bad-block"}, Spec: ipamv1alpha1.IPBlockSpec{Pool: "p", CIDR: "10.6.0.1/28"}}
		if err := c.Create(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "canonical CIDR") {
			t.Errorf("a block cidr with host bits: want 'canonical CIDR', got %v", err)
		}

		tbl, err := local.GetTable(ctx, env.Config, testenv.BlocksResource, "")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		_ = local.PrintTable(&out, tbl)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if got, want := strings.Fields(lines[0]), []string{"NAME", "POOL", "CIDR", "NODE", "ALLOCATED", "FREE", "AGE"}; !cmp.Equal(got, want) {
			t.Errorf("kubectl get ipblocks columns %v, want %v", got, want)
		}
		if want := []string{"roundtrip-v4.10.6.0.0", "roundtrip-v4", "10.6.0.0/28", "node-1", "1", "0"}; !cmp.Equal(strings.Fields(lines[1])[:6], want) {
			t.Errorf("kubectl get ipblocks row %v, want %v", lines[1], want)
		}
	})
}
