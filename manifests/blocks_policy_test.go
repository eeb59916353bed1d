package manifests_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// With the RBAC and admission policies the manifests render, impersonating each writer
// of IPBlocks (the allocation records): a user whom RBAC lets write IPBlocks still
// cannot write a record, unless RBAC also allows the override verb (cluster-admin has
// it, through its wildcard); only a block's labels and annotations, and deleting a
// block without records, are RBAC's alone. An ipamd claims
// only empty blocks of its own node, creates blocks of no node when it moves an older
// layout's records, takes only a block of no node, and never gives a block to another
// node; it still writes records in another node's block (it borrows once every block
// of the pool is claimed, and a StatefulSet pod that moved to its node takes over its
// records there). The webhook's garbage collector releases records in any block.
func TestIPBlockWriters(t *testing.T) {
	e := controlPlane(t)
	ctx := context.Background()
	applyAccess(t, e, "overlays/self-managed")

	user := func(name string, verbs ...string) (client.Client, *rest.Config) {
		t.Helper()
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "blocks-" + name},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{nicpoolIPAM}, Resources: []string{blocks}, Verbs: verbs}},
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "blocks-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}},
		}
		for _, o := range []client.Object{role, binding} {
			if err := e.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Client.Delete(context.Background(), o) })
		}
		cfg := rest.CopyConfig(e.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
		return clientFor(t, e, cfg), cfg
	}
	// bob may do everything with IPBlocks that RBAC names; carol may also override;
	// dave has every verb, as cluster-admin has.
	bob, bobCfg := user("bob", "get", "list", "watch", "create", "update", "patch", "delete")
	carol, _ := user("carol", "get", "update", "patch", configs.OverrideVerb)
	dave, _ := user("dave", "*")
	ipamdA, ipamdB := clientFor(t, e, ipamdOn(e, "node-a")), clientFor(t, e, ipamdOn(e, "node-b"))
	ipamdNowhere := clientFor(t, e, ipamdOn(e, ""))
	webhook := clientFor(t, e, serviceAccount(e, "nicpool-webhook"))

	// RBAC lets bob write IPBlocks: what refuses him is the policy.
	for _, verb := range []string{"create", "update", "patch"} {
		if !allowed(t, kubernetes.NewForConfigOrDie(bobCfg), request{verb, nicpoolIPAM, blocks, "", "", ""}) {
			t.Fatalf("RBAC refuses bob %s on IPBlocks: the test would prove nothing", verb)
		}
	}

	const pool = "writers-blocks"
	block := func(first, node string, recs v2beta1.PoolIPAllocations) *ipamv1alpha1.IPBlock {
		b := &ipamv1alpha1.IPBlock{
			ObjectMeta: metav1.ObjectMeta{Name: pool + "." + first},
			Spec:       ipamv1alpha1.IPBlockSpec{Pool: pool, CIDR: first + "/28", Node: node},
		}
		b.Status.Allocations = recs
		b.Status.Allocated = int64(len(recs))
		b.Status.Free = 14 - int64(len(recs))
		return b
	}
	held := func(addr, pod, uid string) v2beta1.PoolIPAllocations {
		return v2beta1.PoolIPAllocations{addr: {Pod: pod, PodUID: uid, Interface: "eth0"}}
	}
	// patch is a JSON merge patch of the block, as ipamd/ledger writes.
	patch := func(c client.Client, name, body string) error {
		b := &ipamv1alpha1.IPBlock{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return c.Patch(ctx, b, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	record := func(addr, pod, uid string) string {
		if pod == "" {
			return `{"status":{"allocations":{"` + addr + `":null}}}`
		}
		return `{"status":{"allocations":{"` + addr + `":{"pod":"` + pod + `","podUid":"` + uid + `","interface":"eth0"}}}}`
	}
	refused := func(what string, err error, msg string) {
		t.Helper()
		if !refusedByPolicy(err, configs.BlocksPolicy) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v; want Forbidden by %s saying %q", what, err, configs.BlocksPolicy, msg)
		}
	}
	works := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	// The policy is enforced once the API server has loaded it.
	fixtures.Eventually(t, "the IPBlock policy enforced", func(ctx context.Context) bool {
		return refusedByPolicy(bob.Create(ctx, block("10.77.0.0", "node-a", nil), client.DryRunAll), configs.BlocksPolicy)
	})

	onlyNicpool := "IPBlocks are written only by nicpool's service accounts"
	refused("bob claims a block", bob.Create(ctx, block("10.77.0.0", "node-a", nil)), onlyNicpool)
	refused("ipamd without a node name claims a block", ipamdNowhere.Create(ctx, block("10.77.0.0", "node-a", nil)), "credentials name no node")
	refused("ipamd of node A claims a block for node B", ipamdA.Create(ctx, block("10.77.0.0", "node-b", nil)),
		"nicpool-ipamd of node node-a creates only empty IPBlocks of that node (spec.node), or blocks of no node when it moves a pool's records into blocks; not a block of node node-b")
	refused("ipamd of node A creates a block of its node holding a record", ipamdA.Create(ctx, block("10.77.0.0", "node-a", held("10.77.0.1", "tenant/x", "u"))),
		"not a block already holding records")

	a, b := block("10.77.0.0", "node-a", nil), block("10.77.0.16", "node-b", nil)
	works("ipamd of node A claims a block", ipamdA.Create(ctx, a))
	works("ipamd of node B claims a block", ipamdB.Create(ctx, b))
	t.Cleanup(func() {
		_ = e.Client.DeleteAllOf(context.Background(), &ipamv1alpha1.IPBlock{}, client.MatchingFields{ipamv1alpha1.FieldPool: pool})
	})

	works("ipamd of node A allocates in its block", patch(ipamdA, a.Name, record("10.77.0.1", "tenant/web-0", "pod-1")))
	works("ipamd of node A allocates in node B's block (every block claimed)", patch(ipamdA, b.Name, record("10.77.0.17", "tenant/web-1", "pod-2")))
	works("ipamd of node B takes over the record of a StatefulSet pod that moved from node A", patch(ipamdB, a.Name, record("10.77.0.1", "tenant/web-0", "pod-1-again")))

	refused("ipamd of node A takes node B's block", patch(ipamdA, b.Name, `{"spec":{"node":"node-a"}}`), "nicpool-ipamd of node node-a may not change spec.node of IPBlock writers-blocks.10.77.0.16 from node-b to node-a")
	refused("ipamd of node A gives its block to node B", patch(ipamdA, a.Name, `{"spec":{"node":"node-b"}}`), "from node-a to node-b: a node takes only a block of no node")
	refused("ipamd of node A leaves its block to no node", patch(ipamdA, a.Name, `{"spec":{"node":null}}`), "from node-a to none")

	// An older layout's records move into blocks of no node; the first node to
	// allocate in one takes it.
	m := block("10.77.0.32", "", held("10.77.0.33", "tenant/old", "pod-3"))
	works("ipamd moves an older layout's records into a block of no node", ipamdA.Create(ctx, m))
	works("ipamd of node B takes a block of no node", patch(ipamdB, m.Name, `{"spec":{"node":"node-b"},`+record("10.77.0.34", "tenant/new", "pod-4")[1:]))
	works("the webhook moves an older layout's records into a block of no node", webhook.Create(ctx, block("10.77.0.48", "", held("10.77.0.49", "tenant/old-2", "pod-5"))))

	refused("bob rewrites a record", patch(bob, a.Name, record("10.77.0.1", "tenant/bob", "pod-bob")), onlyNicpool)
	refused("bob releases a record", patch(bob, b.Name, record("10.77.0.17", "", "")), onlyNicpool)
	works("bob labels a block (records untouched)", patch(bob, a.Name, `{"metadata":{"labels":{"team":"net"}}}`))
	refused("bob deletes a block that holds a record", bob.Delete(ctx, block("10.77.0.48", "", nil)), "still records 1 addresses of pods")
	refused("bob re-points a block's owner", patch(bob, a.Name, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-4000-8000-00000000dead"}]}}`), "metadata.ownerReferences of an IPBlock is changed only by")
	works("the webhook empties the block", patch(webhook, pool+".10.77.0.48", record("10.77.0.49", "", "")))
	works("bob deletes a block without records (RBAC's alone)", bob.Delete(ctx, block("10.77.0.48", "", nil)))

	works("the webhook's garbage collector releases a record in node B's block", patch(webhook, b.Name, record("10.77.0.17", "", "")))
	works("carol, allowed to override, releases a stuck record", patch(carol, a.Name, record("10.77.0.1", "", "")))
	works("dave, with every verb as cluster-admin, writes a record", patch(dave, a.Name, record("10.77.0.2", "tenant/x", "pod-6")))
	works("the cluster admin (system:masters) releases it", patch(e.Client, a.Name, record("10.77.0.2", "", "")))

	got := &ipamv1alpha1.IPBlock{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Node != "node-a" || len(got.Status.Allocations) != 0 || got.Labels["team"] != "net" {
		t.Errorf("block %s: node %q, records %v, labels %v; want node-a, no record, team=net", got.Name, got.Spec.Node, got.Status.Allocations, got.Labels)
	}
}
