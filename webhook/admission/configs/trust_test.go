package configs_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/webhooktest"
	"github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// userWith binds a ClusterRole with verbs on resource (of group) to a new user and
// returns a client acting as that user.
func userWith(t *testing.T, name, group, resource string, verbs ...string) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "trust-" + name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "trust-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	c, err := env.As(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ipamdOf(t *testing.T, node string) client.Client {
	t.Helper()
	c, err := env.As(webhooktest.ServiceAccount(configs.Options{}, configs.IpamdServiceAccount), map[string][]string{configs.NodeNameExtra: {node}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The catalogue of what a user whom RBAC allows get, list, patch and delete on
// IPBlocks, but not the override verb, tries against a block that holds a live
// record: every request that would erase or move the record, or have the garbage
// collector erase it (a forged or removed ownerReference, a finalizer), is refused by
// the API server; labels and annotations, which nothing of nicpool reads, are the
// user's, and so is a block without records.
func TestIPBlockWritesWithoutOverride(t *testing.T) {
	ctx := context.Background()
	mallory := userWith(t, "mallory", ipamv1alpha1.GroupVersion.Group, "ipblocks", "get", "list", "patch", "delete", "deletecollection")
	pool := fixtures.Pool("trust-blocks", "10.131.0.0/24", nil)
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pool) })
	block := func(first string, recs v2beta1.PoolIPAllocations, finalizers ...string) *ipamv1alpha1.IPBlock {
		b := &ipamv1alpha1.IPBlock{
			ObjectMeta: metav1.ObjectMeta{Name: pool.Name + "." + first, Finalizers: finalizers, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v2beta1.GroupVersion.String(), Kind: v2beta1.KindSpiderIPPool, Name: pool.Name, UID: pool.UID, BlockOwnerDeletion: ptr.To(false),
			}}},
			Spec: ipamv1alpha1.IPBlockSpec{Pool: pool.Name, CIDR: first + "/28", Node: "node-1"},
		}
		b.Status.Allocations = recs
		b.Status.Allocated = int64(len(recs))
		b.Status.Free = 14 - int64(len(recs))
		if err := env.Nicpool.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Client.Patch(context.Background(), b, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			_ = env.Client.Delete(context.Background(), b)
		})
		return b
	}
	live := v2beta1.PoolIPAllocations{"10.131.0.1": {Pod: "tenant/web-0", PodUID: "pod-1", Interface: "eth0"}}
	held := block("10.131.0.0", live)
	empty := block("10.131.0.16", nil)
	patch := func(c client.Client, b *ipamv1alpha1.IPBlock, pt types.PatchType, body string) error {
		return c.Patch(ctx, &ipamv1alpha1.IPBlock{ObjectMeta: metav1.ObjectMeta{Name: b.Name}}, client.RawPatch(pt, []byte(body)))
	}
	merge := func(b *ipamv1alpha1.IPBlock, body string) func() error {
		return func() error { return patch(mallory, b, types.MergePatchType, body) }
	}
	jsonPatch := func(b *ipamv1alpha1.IPBlock, body string) func() error {
		return func() error { return patch(mallory, b, types.JSONPatchType, body) }
	}

	for _, tc := range []struct {
		name string
		do   func() error
		want string // a substring of the refusal; "" means admitted
	}{
		{"delete a block that holds a record", func() error { return mallory.Delete(ctx, held.DeepCopy()) }, "IPBlock trust-blocks.10.131.0.0 still records 1 addresses of pods"},
		{"delete it orphaning its dependents", func() error {
			return mallory.Delete(ctx, held.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationOrphan))
		}, "still records 1 addresses of pods"},
		{"delete it in the foreground", func() error {
			return mallory.Delete(ctx, held.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationForeground))
		}, "still records 1 addresses of pods"},
		{"delete every block of the pool (deletecollection)", func() error {
			return mallory.DeleteAllOf(ctx, &ipamv1alpha1.IPBlock{}, client.MatchingFields{ipamv1alpha1.FieldPool: pool.Name})
		}, "still records 1 addresses of pods"},
		{"point the ownerReference at a made-up pool UID", merge(held, `{"metadata":{"ownerReferences":[{"apiVersion":"spiderpool.spidernet.io/v2beta1","kind":"SpiderIPPool","name":"trust-blocks","uid":"00000000-0000-4000-8000-00000000dead"}]}}`),
			"metadata.ownerReferences of an IPBlock is changed only by"},
		{"add a second owner", jsonPatch(held, `[{"op":"add","path":"/metadata/ownerReferences/-","value":{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-4000-8000-00000000beef"}}]`),
			"metadata.ownerReferences"},
		{"remove the ownerReference", jsonPatch(held, `[{"op":"remove","path":"/metadata/ownerReferences"}]`), "metadata.ownerReferences"},
		{"add a finalizer", merge(held, `{"metadata":{"finalizers":["example.com/hold"]}}`), "metadata.finalizers of an IPBlock that holds records"},
		{"release the record", merge(held, `{"status":{"allocations":{"10.131.0.1":null}}}`), "IPBlocks are written only by"},
		{"give the record to another pod", merge(held, `{"status":{"allocations":{"10.131.0.1":{"pod":"tenant/x","podUid":"pod-x","interface":"eth0"}}}}`), "IPBlocks are written only by"},
		{"move the block to another node", merge(held, `{"spec":{"node":"node-2"}}`), "IPBlocks are written only by"},
		{"create a block", func() error {
			b := &ipamv1alpha1.IPBlock{ObjectMeta: metav1.ObjectMeta{Name: pool.Name + ".10.131.0.32"}, Spec: ipamv1alpha1.IPBlockSpec{Pool: pool.Name, CIDR: "10.131.0.32/28"}}
			return userWith(t, "mallory-creates", ipamv1alpha1.GroupVersion.Group, "ipblocks", "create").Create(ctx, b)
		}, "IPBlocks are written only by"},
		{"label the block", merge(held, `{"metadata":{"labels":{"team":"net"}}}`), ""},
		{"annotate the block", merge(held, `{"metadata":{"annotations":{"example.com/note":"checked"}}}`), ""},
		{"forge the owner of an empty block", merge(empty, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"00000000-0000-4000-8000-00000000beef"}]}}`), "metadata.ownerReferences"},
		{"delete an empty block", func() error { return mallory.Delete(ctx, empty.DeepCopy()) }, ""},
	} {
		err := tc.do()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: admitted", tc.name)
		case tc.want != "" && (!apierrors.IsForbidden(err) || !byPolicy(err, configs.BlocksPolicy) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want Forbidden by %s saying %q", tc.name, err, configs.BlocksPolicy, tc.want)
		}
	}
	got := &ipamv1alpha1.IPBlock{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(held), got); err != nil {
		t.Fatalf("the block with the live record: %v", err)
	}
	if got.Status.Allocations["10.131.0.1"] != live["10.131.0.1"] || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != pool.UID || len(got.Finalizers) != 0 || got.DeletionTimestamp != nil {
		t.Errorf("block %s after the catalogue: records %v, owners %v, finalizers %v, deletion %v; want the live record under its pool", got.Name, got.Status.Allocations, got.OwnerReferences, got.Finalizers, got.DeletionTimestamp)
	}

	// A block being deleted, held by a finalizer: no address is allocated in it (the
	// finalizer's removal would take the record along), and while it holds a record
	// the user cannot remove the finalizer; without records the user may.
	ipamd := ipamdOf(t, "node-1")
	going := block("10.131.0.48", nil, "example.com/hold")
	if err := mallory.Delete(ctx, going.DeepCopy()); err != nil {
		t.Fatalf("delete an empty block held by a finalizer: %v", err)
	}
	if err := patch(ipamd, going, types.MergePatchType, `{"status":{"allocations":{"10.131.0.49":{"pod":"tenant/late","podUid":"pod-late","interface":"eth0"}}}}`); !byPolicy(err, configs.BlocksPolicy) ||
		!strings.Contains(err.Error(), "IPBlock trust-blocks.10.131.0.48 is being deleted: no address is allocated in it") {
		t.Errorf("ipamd allocates in a block being deleted: %v; want refused by %s", err, configs.BlocksPolicy)
	}
	heldGoing := block("10.131.0.64", v2beta1.PoolIPAllocations{"10.131.0.65": {Pod: "tenant/web-1", PodUID: "pod-2", Interface: "eth0"}}, "example.com/hold")
	if err := env.Nicpool.Delete(ctx, heldGoing.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := merge(heldGoing, `{"metadata":{"finalizers":null}}`)(); !byPolicy(err, configs.BlocksPolicy) || !strings.Contains(err.Error(), "metadata.finalizers of an IPBlock that holds records") {
		t.Errorf("remove the finalizer of a block being deleted that holds a record: %v; want refused by %s", err, configs.BlocksPolicy)
	}
	if err := merge(going, `{"metadata":{"finalizers":null}}`)(); err != nil {
		t.Errorf("remove the finalizer of an empty block being deleted: %v", err)
	}
}

// The pod annotations admission resolves from are fixed once the pod exists:
// admission resolved them at CREATE, and an edit (a wildcard, another pool, a forged
// stamp, another network behind an interface) would reach ipamd without admission. Every such edit is refused by the API server, webhook or not,
// saying to recreate the pod; other annotations stay the pod author's.
func TestPodAnnotationsFixedAfterCreate(t *testing.T) {
	ctx := context.Background()
	ensurePool(t, "fixed-v4", "10.132.0.0/24")
	resolvedPod := pod("default", "fixed", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["fixed-*"]}]`})
	resolvedPod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	if err := env.Client.Create(ctx, resolvedPod); err != nil {
		t.Fatal(err)
	}
	plain := pod("default", "plain-fixed", nil)
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	networked := pod("default", "networked-fixed", map[string]string{annotations.MultusNetworks: "default/prodnet@net1"})
	if err := env.Client.Create(ctx, networked); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), resolvedPod)
		_ = env.Client.Delete(context.Background(), plain)
		_ = env.Client.Delete(context.Background(), networked)
	})
	if got := resolvedPod.Annotations[annotations.IPPools]; got != `[{"interface":"eth0","ipv4":["fixed-v4"]}]` {
		t.Fatalf("admission resolved %s to %s", annotations.IPPools, got)
	}
	edit := func(p client.Object, body string) error {
		return env.Client.Patch(ctx, p.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":`+body+`}}`)))
	}
	recreate := "delete the pod and create it again with the new annotations"
	for _, tc := range []struct {
		name string
		pod  client.Object
		body string
		want string // the annotation the refusal names; "" means admitted
	}{
		{"widen ippools to a wildcard on a gated pod", resolvedPod, `{"` + annotations.IPPools + `":"[{\"interface\":\"eth0\",\"ipv4\":[\"*\"]}]"}`, annotations.IPPools},
		{"name another pool", resolvedPod, `{"` + annotations.IPPools + `":"[{\"interface\":\"eth0\",\"ipv4\":[\"other\"]}]"}`, annotations.IPPools},
		{"remove ippools", resolvedPod, `{"` + annotations.IPPools + `":null}`, annotations.IPPools},
		{"add ippool", resolvedPod, `{"` + annotations.IPPool + `":"{\"ipv4\":[\"*\"]}"}`, annotations.IPPool},
		{"add routes", resolvedPod, `{"` + annotations.Routes + `":"[{\"dst\":\"10.0.0.0/8\",\"gw\":\"10.132.0.1\"}]"}`, annotations.Routes},
		{"add ippools to a pod that had none", plain, `{"` + annotations.IPPools + `":"[{\"interface\":\"eth0\",\"ipv4\":[\"fixed-v4\"]}]"}`, annotations.IPPools},
		{"stamp a pod with an endpoint UID", plain, `{"` + annotations.EndpointUID + `":"00000000-0000-4000-8000-000000000001"}`, annotations.EndpointUID},
		{"attach another network on a gated pod", resolvedPod, `{"` + annotations.MultusNetworks + `":"tenant-b/prodnet@net1"}`, annotations.MultusNetworks},
		{"change the networks", networked, `{"` + annotations.MultusNetworks + `":"default/other@net1"}`, annotations.MultusNetworks},
		{"remove the networks", networked, `{"` + annotations.MultusNetworks + `":null}`, annotations.MultusNetworks},
		{"add a default network", plain, `{"` + annotations.MultusDefaultNetwork + `":"default/prodnet"}`, annotations.MultusDefaultNetwork},
		{"another annotation", resolvedPod, `{"example.com/owner":"team-a"}`, ""},
		{"another annotation on a pod with networks", networked, `{"example.com/owner":"team-a"}`, ""},
		{"another annotation on a plain pod", plain, `{"example.com/owner":"team-a"}`, ""},
	} {
		err := edit(tc.pod, tc.body)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: admitted", tc.name)
		case tc.want != "":
			for _, w := range []string{"metadata.annotations[" + tc.want + "]: Forbidden", recreate} {
				if !byPolicy(err, configs.PodsPolicy) || !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v; want refused by %s saying %q", tc.name, err, configs.PodsPolicy, w)
				}
			}
		}
	}
}

// Another node's ipamd cannot change a live pod's SpiderEndpoint back under that pod,
// in any number of steps: a change of the pod UID (a takeover) only keeps some of the
// records unchanged and appends the replaced UID to the endpoint's previous UIDs, and
// no write returns the endpoint to a UID on that list or shortens it; an ipamd deletes
// only its own node's endpoints that were never taken over. The catalogue of
// sequences is refused at the step that would make the change.
func TestEndpointCannotBeRestoredByAnotherNode(t *testing.T) {
	ctx := context.Background()
	nodes := map[string]client.Client{"node-1": ipamdOf(t, "node-1"), "node-2": ipamdOf(t, "node-2"), "node-3": ipamdOf(t, "node-3")}
	kept := rec("eth0", ptr.To("10.0.0.5/24"), nil)
	kept.IPv4Pool = ptr.To("p")
	other := rec("net1", ptr.To("10.1.0.5/24"), nil)
	other.IPv4Pool = ptr.To("q")
	live := func(name string) *v2beta1.SpiderEndpoint {
		ep := endpointWith(name, "live-pod", kept, other)
		ep.Status.OwnerControllerType, ep.Status.OwnerControllerName = "StatefulSet", "db"
		if err := nodes["node-1"].Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ep) })
		return ep
	}
	// write is one step: node's ipamd writes the endpoint with uid and records on top
	// of what is stored, the previous UIDs as a takeover by ipamd writes them unless
	// previous is given.
	type step struct {
		node     string
		uid      string
		ips      []v2beta1.IPAllocationDetail
		previous *string
		del      bool
		want     string // a substring of the refusal; "" means admitted
	}
	run := func(name string, steps ...step) {
		t.Helper()
		ep := live(name)
		for i, s := range steps {
			cur := &v2beta1.SpiderEndpoint{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ep), cur); err != nil {
				t.Fatalf("%s step %d: %v", name, i, err)
			}
			var err error
			if s.del {
				err = nodes[s.node].Delete(ctx, cur)
			} else {
				upd := cur.DeepCopy()
				if s.uid != upd.Status.Current.UID {
					endpoint.AppendPreviousUID(upd, upd.Status.Current.UID)
				}
				if s.previous != nil {
					upd.Annotations = map[string]string{endpoint.PreviousUIDsAnnotation: *s.previous}
				}
				upd.Status.Current = v2beta1.PodIPAllocation{UID: s.uid, Node: s.node, IPs: s.ips}
				err = nodes[s.node].Update(ctx, upd)
			}
			switch {
			case s.want == "" && err != nil:
				t.Errorf("%s step %d: refused: %v", name, i, err)
			case s.want != "" && err == nil:
				t.Errorf("%s step %d: admitted", name, i)
			case s.want != "" && (!byPolicy(err, configs.EndpointsPolicy) || !strings.Contains(err.Error(), s.want)):
				t.Errorf("%s step %d: %v; want refused by %s saying %q", name, i, err, configs.EndpointsPolicy, s.want)
			}
		}
	}
	restore := "an endpoint never goes back to a previous pod UID"
	moved := kept
	moved.IPv4 = ptr.To("10.0.0.99/24")
	run("swap-restore", step{node: "node-2", uid: "fake", ips: []v2beta1.IPAllocationDetail{kept}}, step{node: "node-2", uid: "live-pod", ips: []v2beta1.IPAllocationDetail{kept}, want: restore})
	run("swap-twice", step{node: "node-2", uid: "fake-1"}, step{node: "node-2", uid: "fake-2"}, step{node: "node-2", uid: "live-pod", want: restore})
	run("swap-third-node", step{node: "node-2", uid: "fake-1", ips: []v2beta1.IPAllocationDetail{kept}}, step{node: "node-3", uid: "fake-2", ips: []v2beta1.IPAllocationDetail{kept}},
		step{node: "node-3", uid: "live-pod", want: restore}, step{node: "node-1", uid: "live-pod", want: restore})
	run("swap-forget", step{node: "node-2", uid: "fake"}, step{node: "node-2", uid: "live-pod", previous: ptr.To(""), want: restore},
		step{node: "node-2", uid: "fake", previous: ptr.To(""), want: "only grows"})
	run("swap-delete-create", step{node: "node-2", uid: "fake"}, step{node: "node-2", del: true, want: "never taken over"})
	run("takeover-adds-a-record", step{node: "node-2", uid: "fake", ips: []v2beta1.IPAllocationDetail{kept, other, rec("net2", ptr.To("10.2.0.5/24"), nil)}, want: "only keeping some of its records"})
	run("takeover-changes-a-record", step{node: "node-2", uid: "fake", ips: []v2beta1.IPAllocationDetail{moved}, want: "only keeping some of its records"})
	run("same-uid-other-node", step{node: "node-2", uid: "live-pod", ips: []v2beta1.IPAllocationDetail{kept}, want: "may not change the SpiderEndpoint of pod UID live-pod on node node-1"})
	run("delete-other-node", step{node: "node-2", del: true, want: "deletes only SpiderEndpoints of that node"})
	// What ipamd does: a StatefulSet pod recreated on another node takes the endpoint
	// over keeping some records, records its own, and is taken over again later; the
	// node of a pod that never moved deletes its endpoint.
	run("takeovers", step{node: "node-2", uid: "pod-2", ips: []v2beta1.IPAllocationDetail{kept}}, step{node: "node-2", uid: "pod-2", ips: []v2beta1.IPAllocationDetail{kept, other}},
		step{node: "node-3", uid: "pod-3", ips: []v2beta1.IPAllocationDetail{other}}, step{node: "node-3", uid: "pod-3"})
	run("own-delete", step{node: "node-1", del: true})
}

// Another node's ipamd cannot move a live StatefulSet pod's SpiderEndpoint to any
// other pod UID, made up or real, and the pod's own node cannot either: a takeover
// names the pod of the endpoint's name as the API server knows it, bound to the
// writing node. Once the pod is gone and its successor is bound to node-2, node-2
// takes the endpoint over for that successor, and no other node or UID does. A
// Deployment pod's endpoint is never taken over. Refusals are tried first as dry
// runs, polled until the API server's pod informer has seen the pods.
func TestEndpointOfALivePodIsNotDetached(t *testing.T) {
	ctx := context.Background()
	nodes := map[string]client.Client{"node-1": ipamdOf(t, "node-1"), "node-2": ipamdOf(t, "node-2"), "node-3": ipamdOf(t, "node-3")}
	statefulSetPod := func(name, node string) *corev1.Pod {
		p := pod("default", name, nil)
		p.Labels = map[string]string{appsv1.StatefulSetPodNameLabel: name}
		p.Spec.NodeName = node
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := func(p *corev1.Pod) {
		if err := env.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	live := statefulSetPod("db-0", "node-1")
	t.Cleanup(func() { gone(live) })
	ep := endpointWith("db-0", string(live.UID))
	ep.Status.OwnerControllerType, ep.Status.OwnerControllerName = "StatefulSet", "db"
	if err := nodes["node-1"].Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ep) })
	// takeOver writes what ipamd's takeover writes, as node, for pod UID uid.
	takeOver := func(node, uid string, opts ...client.UpdateOption) error {
		cur := &v2beta1.SpiderEndpoint{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ep), cur); err != nil {
			t.Fatal(err)
		}
		endpoint.AppendPreviousUID(cur, cur.Status.Current.UID)
		cur.Status.Current = v2beta1.PodIPAllocation{UID: uid, Node: node}
		return nodes[node].Update(ctx, cur, opts...)
	}
	refused := func(what, node, uid, want string) {
		t.Helper()
		fixtures.Eventually(t, what+" refused", func(context.Context) bool {
			return takeOver(node, uid, client.DryRunAll) != nil
		})
		err := takeOver(node, uid)
		if !byPolicy(err, configs.TakeoversPolicy) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want refused by %s saying %q", what, err, configs.TakeoversPolicy, want)
		}
	}
	onNode1 := "pod default/db-0 is UID " + string(live.UID) + " on node node-1"
	refused("another node detaching the live pod's endpoint to a made-up UID", "node-2", "made-up", onNode1)
	refused("a third node doing so", "node-3", "made-up-3", onNode1)
	refused("the pod's own node doing so", "node-1", "made-up", onNode1)

	gone(live)
	successor := statefulSetPod("db-0", "node-2")
	t.Cleanup(func() { gone(successor) })
	onNode2 := "pod default/db-0 is UID " + string(successor.UID) + " on node node-2"
	refused("another node taking over for the successor", "node-3", string(successor.UID), onNode2)
	refused("the successor's node taking over for a made-up UID", "node-2", "made-up", onNode2)
	refused("the old pod's node taking over for the old pod", "node-1", "made-up-1", onNode2)
	if err := takeOver("node-2", string(successor.UID)); err != nil {
		t.Errorf("the successor's node taking the endpoint over for it: %v", err)
	}

	// A Deployment pod's endpoint: no StatefulSet pod stands for it, and still no
	// node takes it over.
	plain := endpointWith("web-1", "web-1-uid")
	plain.Status.OwnerControllerType, plain.Status.OwnerControllerName = "ReplicaSet", "web"
	if err := nodes["node-1"].Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), plain) })
	upd := plain.DeepCopy()
	endpoint.AppendPreviousUID(upd, upd.Status.Current.UID)
	upd.Status.Current = v2beta1.PodIPAllocation{UID: "made-up", Node: "node-2"}
	if err := nodes["node-2"].Update(ctx, upd); !byPolicy(err, configs.EndpointsPolicy) || !strings.Contains(err.Error(), "takes over only the SpiderEndpoint of a StatefulSet pod") {
		t.Errorf("another node taking over a Deployment pod's endpoint: %v; want refused by %s", err, configs.EndpointsPolicy)
	}

	for _, o := range []client.Object{ep, plain} {
		if err := env.Client.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	gone(successor)
	fixtures.Eventually(t, "invariants hold", func(ctx context.Context) bool {
		err := invariants.Check(ctx, env.Client, invariants.Options{})
		if err != nil {
			t.Log(err)
		}
		return err == nil
	})
}
