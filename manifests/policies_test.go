package manifests_test

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/daemon"
	endpointpkg "github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// accessOnly keeps what says who may do what: RBAC and the admission policies.
func accessOnly(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := rbacOnly(objs)
	for _, o := range objs {
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			out = append(out, o)
		}
	}
	return out
}

// applyAccess applies the rendered RBAC and admission policies of an overlay and
// waits until the API server enforces each policy (the API server loads each one on
// its own: a probe that only it refuses).
func applyAccess(t *testing.T, e *testenv.Env, overlay string) {
	t.Helper()
	ctx := context.Background()
	objs := accessOnly(render(t, overlay))
	apply(t, e.Client, objs)
	t.Cleanup(func() { remove(t, e.Client, objs) })
	pool := &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"}, Spec: v2beta1.IPPoolSpec{Subnet: "10.254.0.0/24"}}
	if err := e.Client.Create(ctx, pool); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	ipamd := clientFor(t, e, ipamdOn(e, ""))
	probes := map[string]func(ctx context.Context) error{
		configs.EndpointsPolicy: func(ctx context.Context) error {
			return e.Client.Create(ctx, &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "policy-probe"}, Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: "u"}}}, client.DryRunAll)
		},
		configs.PoolStatusPolicy: func(ctx context.Context) error {
			p := &v2beta1.SpiderIPPool{}
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pool), p); err != nil {
				return err
			}
			return e.Client.Status().Update(ctx, p, client.DryRunAll)
		},
		configs.PodsPolicy: func(ctx context.Context) error {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "policy-probe", Annotations: map[string]string{configs.SpiderSubnetAnnotations[0]: "{}"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
			}
			return e.Client.Create(ctx, p, client.DryRunAll)
		},
		configs.LeasesPolicy: func(ctx context.Context) error {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: configs.DefaultNamespace, Name: "policy-probe"}}
			return ipamd.Create(ctx, l, client.DryRunAll)
		},
		configs.BlocksPolicy: func(ctx context.Context) error {
			b := &ipamv1alpha1.IPBlock{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe.10.254.0.0"}, Spec: ipamv1alpha1.IPBlockSpec{Pool: pool.Name, CIDR: "10.254.0.0/28"}}
			return ipamd.Create(ctx, b, client.DryRunAll)
		},
	}
	for name, probe := range probes {
		fixtures.Eventually(t, "the rendered admission policy "+name+" enforced", func(ctx context.Context) bool {
			err := probe(ctx)
			return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+name+"'")
		})
	}
}

// An ipamd keeps its own node's heartbeat Lease, and no other: not another node's,
// not the webhook's leader election Lease.
func TestIpamdWritesOnlyItsOwnHeartbeat(t *testing.T) {
	e := controlPlane(t)
	ctx := context.Background()
	applyAccess(t, e, "overlays/self-managed")
	nodeA := clientFor(t, e, ipamdOn(e, "node-a"))
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: configs.DefaultNamespace, Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-a")}}
	}
	own := lease(daemon.LeaseName("node-a"))
	if err := nodeA.Create(ctx, own); err != nil {
		t.Fatalf("ipamd of node-a creates its heartbeat: %v", err)
	}
	own.Spec.LeaseDurationSeconds = ptr.To(int32(40))
	if err := nodeA.Update(ctx, own); err != nil {
		t.Fatalf("ipamd of node-a renews its heartbeat: %v", err)
	}
	for _, name := range []string{daemon.LeaseName("node-b"), "nicpool-webhook"} {
		if err := nodeA.Create(ctx, lease(name)); !refusedByPolicy(err, configs.LeasesPolicy) {
			t.Errorf("ipamd of node-a creates Lease %s: %v, want a refusal by %s", name, err, configs.LeasesPolicy)
		}
	}
	leader := lease("nicpool-webhook")
	if err := e.Client.Create(ctx, leader); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := nodeA.Get(ctx, client.ObjectKeyFromObject(leader), leader); err != nil {
		t.Fatal(err)
	}
	leader.Spec.HolderIdentity = ptr.To("node-a")
	if err := nodeA.Update(ctx, leader); !refusedByPolicy(err, configs.LeasesPolicy) {
		t.Errorf("ipamd of node-a takes the webhook's leader Lease: %v, want a refusal by %s", err, configs.LeasesPolicy)
	}
	if err := clientFor(t, e, ipamdOn(e, "")).Create(ctx, lease(daemon.LeaseName("node-c"))); !refusedByPolicy(err, configs.LeasesPolicy) {
		t.Errorf("an ipamd whose token names no node creates a heartbeat: %v, want a refusal", err)
	}
}

func refusedByPolicy(err error, policy string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}

// ipamdOn acts as ipamd's service account with the node name its pod-bound token
// carries (none when node is empty).
func ipamdOn(e *testenv.Env, node string) *rest.Config {
	cfg := serviceAccount(e, "nicpool-ipamd")
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{configs.NodeNameExtra: {node}}
	}
	return cfg
}

func clientFor(t *testing.T, e *testenv.Env, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// With the RBAC and admission policies the manifests render, impersonating each
// writer: ipamd of node A cannot write the SpiderEndpoint of a pod on node B; a user
// with every right on SpiderEndpoints (and pool status) still cannot write one, nor
// allocation records; nicpool's own writers can, and ipamd takes over the endpoint of
// a StatefulSet pod recreated on its node.
func TestOnlyNicpoolWritesEndpointsAndAllocations(t *testing.T) {
	e := controlPlane(t)
	ctx := context.Background()
	applyAccess(t, e, "overlays/self-managed")
	const ns = "tenant-w"
	if err := e.Client.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "endpoint-admin"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{spider}, Resources: []string{endpoints}, Verbs: []string{"*"}},
			{APIGroups: []string{spider}, Resources: []string{pools, pools + "/status"}, Verbs: []string{"*"}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-endpoint-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "endpoint-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	aliceCfg := rest.CopyConfig(e.Config)
	aliceCfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:authenticated"}}
	alice := clientFor(t, e, aliceCfg)
	ipamdA, ipamdB := clientFor(t, e, ipamdOn(e, "node-a")), clientFor(t, e, ipamdOn(e, "node-b"))
	ipamdNowhere := clientFor(t, e, ipamdOn(e, ""))
	webhook := clientFor(t, e, serviceAccount(e, "nicpool-webhook"))

	// RBAC lets alice do anything with endpoints: what refuses her is the policy.
	for _, verb := range []string{"create", "update", "delete"} {
		if !allowed(t, kubernetes.NewForConfigOrDie(aliceCfg), request{verb, spider, endpoints, "", ns, ""}) {
			t.Fatalf("RBAC refuses alice %s on endpoints: the test would prove nothing", verb)
		}
	}

	endpoint := func(name, uid, node string) *v2beta1.SpiderEndpoint {
		return &v2beta1.SpiderEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: v2beta1.WorkloadEndpointStatus{
				Current:             v2beta1.PodIPAllocation{UID: uid, Node: node, IPs: []v2beta1.IPAllocationDetail{{Interface: "eth0", IPv4: ptr.To("10.9.0.5/24"), IPv4Pool: ptr.To("p")}}},
				OwnerControllerType: "StatefulSet", OwnerControllerName: "db",
			},
		}
	}
	refused := func(what string, err error, msg string) {
		t.Helper()
		if !refusedByPolicy(err, configs.EndpointsPolicy) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v; want Forbidden by %s saying %q", what, err, configs.EndpointsPolicy, msg)
		}
	}
	works := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	refused("alice creates an endpoint", alice.Create(ctx, endpoint("db-0", "pod-a", "node-a")), "SpiderEndpoints are written only by nicpool's service accounts")
	refused("ipamd without a node name creates one", ipamdNowhere.Create(ctx, endpoint("db-0", "pod-a", "node-a")), "credentials name no node")
	refused("ipamd of node A creates one of node B", ipamdA.Create(ctx, endpoint("db-1", "pod-b", "node-b")), "nicpool-ipamd of node node-a may write only SpiderEndpoints whose status.current.node is that node, not node-b")

	a0 := endpoint("db-0", "pod-a", "node-a")
	works("ipamd of node A creates the endpoint of its pod", ipamdA.Create(ctx, a0))
	b1 := endpoint("db-1", "pod-b", "node-b")
	works("ipamd of node B creates the endpoint of its pod", ipamdB.Create(ctx, b1))

	changed := a0.DeepCopy()
	changed.Status.Current.UID = "pod-evil"
	refused("alice rewrites the endpoint of a pod", alice.Update(ctx, changed), "SpiderEndpoints are written only by nicpool's service accounts")

	moved := b1.DeepCopy()
	moved.Status.Current.IPs = nil
	refused("ipamd of node A rewrites node B's endpoint", ipamdA.Update(ctx, moved), "not node-b")
	moved.Status.Current.Node = "node-a"
	refused("ipamd of node A claims node B's endpoint for the same pod", ipamdA.Update(ctx, moved), "may not change the SpiderEndpoint of pod UID pod-b on node node-b")

	// db-1 is deleted and recreated by its StatefulSet on node A: a new pod UID.
	taken := b1.DeepCopy()
	taken.Status.Current.UID, taken.Status.Current.Node = "pod-b-again", "node-a"
	taken.Annotations = map[string]string{endpointpkg.PreviousUIDsAnnotation: "pod-b"}
	works("ipamd of node A takes over the endpoint of the StatefulSet pod recreated on it", ipamdA.Update(ctx, taken))

	// Deleting is RBAC's business: the garbage collector and a tenant's cleanup.
	works("the webhook's garbage collector deletes an endpoint", webhook.Delete(ctx, a0))
	works("alice deletes an endpoint of her namespace", alice.Delete(ctx, taken))

	// Allocation records: pool status.
	pool := fixtures.Pool("writers-v4", "10.9.0.0/24", []string{"10.9.0.5-10.9.0.9"})
	works("the admin creates a pool", e.Client.Create(ctx, pool))
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), pool) })
	pool.Status.AllocatedIPs = ptr.To(`{"10.9.0.5":{"pod":"` + ns + `/db-0","podUid":"pod-a"}}`)
	if err := alice.Status().Update(ctx, pool.DeepCopy()); !refusedByPolicy(err, configs.PoolStatusPolicy) {
		t.Errorf("alice writes allocation records: %v; want Forbidden by %s", err, configs.PoolStatusPolicy)
	}
	works("ipamd writes allocation records", ipamdA.Status().Update(ctx, pool.DeepCopy()))
}
