package manifests_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nicpool/nicpool/e2e/testenv"
)

// request is one API request a component makes (or must not be able to make).
type request struct {
	verb, group, resource, subresource, namespace, name string
}

func (r request) String() string {
	res := r.resource
	if r.group != "" {
		res += "." + r.group
	}
	if r.subresource != "" {
		res += "/" + r.subresource
	}
	where := "cluster-wide"
	if r.namespace != "" {
		where = "in " + r.namespace
	}
	if r.name != "" {
		res += " " + r.name
	}
	return fmt.Sprintf("%s %s %s", r.verb, res, where)
}

func each(verbs []string, group, resource, subresource, namespace, name string) []request {
	var out []request
	for _, v := range verbs {
		out = append(out, request{v, group, resource, subresource, namespace, name})
	}
	return out
}

func join(lists ...[]request) []request {
	var out []request
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

const (
	pools       = "spiderippools"
	endpoints   = "spiderendpoints"
	reserved    = "spiderreservedips"
	spider      = "spiderpool.spidernet.io"
	blocks      = "ipblocks"
	nicpoolIPAM = "ipam.nicpool.io"
	// A namespace of the cluster's workloads, where pods, endpoints and events live.
	tenant = "tenant-a"
)

var read = []string{"get", "list", "watch"}

// What the webhook Deployment does, whatever its certificate source: admission views
// and the garbage collector's caches, pool finalizers and counts, releases in IPBlocks
// and deletion of a deleted pool's empty blocks, endpoint deletion, leader election in
// its namespace, events.
var webhookNeeds = join(
	each(read, "", "pods", "", "", ""),
	each(read, "", "namespaces", "", "", ""),
	each(read, "", "nodes", "", "", ""),
	each(read, "apps", "statefulsets", "", "", ""),
	each([]string{"get", "list", "watch", "update", "patch"}, spider, pools, "", "", ""),
	each([]string{"get", "update", "patch"}, spider, pools, "status", "", ""),
	each([]string{"get", "list", "watch", "delete"}, spider, endpoints, "", tenant, ""),
	each(read, spider, reserved, "", "", ""),
	each([]string{"get", "list", "watch", "create", "patch", "delete"}, nicpoolIPAM, blocks, "", "", ""),
	each(read, "k8s.cni.cncf.io", "network-attachment-definitions", "", "", ""),
	each([]string{"get", "list", "watch", "create", "update"}, "coordination.k8s.io", "leases", "", namespace, ""),
	each([]string{"create", "patch"}, "", "events", "", tenant, ""),
	each([]string{"create", "patch"}, "events.k8s.io", "events", "", tenant, ""),
)

// What self-managed certificates add: the webhook's own Secret and nicpool's own
// webhook configurations.
var selfManagedNeeds = join(
	each([]string{"get", "update", "patch"}, "", "secrets", "", namespace, "nicpool-webhook-cert"),
	each([]string{"list", "watch", "create"}, "", "secrets", "", namespace, ""),
	each([]string{"get", "update", "patch"}, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "nicpool-mutating"),
	each([]string{"get", "update", "patch"}, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", "nicpool-validating"),
	each([]string{"list", "watch"}, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", ""),
	each([]string{"list", "watch"}, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", ""),
)

// What ipamd does on every node: caches of its node, its node's pods, endpoints and
// IPBlocks, namespaces, pools, reserved IPs and StatefulSets; allocations in IPBlocks
// (claims with create, records with patch); the move of a pool's older records into
// blocks (pool status); SpiderEndpoints of its pods; events.
var ipamdNeeds = join(
	each(read, "", "pods", "", "", ""),
	each(read, "", "nodes", "", "", ""),
	each(read, "", "namespaces", "", "", ""),
	each(read, "apps", "statefulsets", "", "", ""),
	each(read, spider, pools, "", "", ""),
	each([]string{"get", "update", "patch"}, spider, pools, "status", "", ""),
	each(read, spider, reserved, "", "", ""),
	each([]string{"get", "list", "watch", "create", "update", "patch", "delete"}, spider, endpoints, "", tenant, ""),
	each([]string{"get", "list", "watch", "create", "patch"}, nicpoolIPAM, blocks, "", "", ""),
	each([]string{"create", "patch"}, "", "events", "", tenant, ""),
	each([]string{"create", "patch"}, "events.k8s.io", "events", "", tenant, ""),
	// Its node's heartbeat; the admission policy leases.nicpool.io confines it to
	// that one Lease.
	each([]string{"get", "create", "update"}, "coordination.k8s.io", "leases", "", namespace, ""),
)

// Refused to every nicpool component.
var nobodyMay = join(
	each([]string{"get", "list", "watch"}, "", "secrets", "", "kube-system", ""),
	each([]string{"get", "list", "create"}, "", "secrets", "", tenant, ""),
	each([]string{"create", "get"}, "", "pods", "exec", tenant, "app-0"),
	each([]string{"create"}, "", "pods", "attach", tenant, "app-0"),
	each([]string{"create"}, "", "pods", "portforward", tenant, "app-0"),
	each([]string{"create", "update", "delete"}, "", "pods", "", tenant, ""),
	each([]string{"delete", "update", "patch", "create"}, "", "nodes", "", "", "node-1"),
	each([]string{"delete", "create", "update"}, "", "namespaces", "", "", tenant),
	each([]string{"create", "delete"}, spider, pools, "", "", ""),
	each([]string{"update", "delete"}, "apps", "statefulsets", "", tenant, ""),
	each([]string{"update", "patch", "delete"}, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "someone-elses"),
	each([]string{"update", "delete"}, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", "someone-elses"),
	each([]string{"create", "delete"}, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", ""),
	each([]string{"create", "escalate", "bind"}, "rbac.authorization.k8s.io", "clusterroles", "", "", ""),
	each([]string{"create"}, "rbac.authorization.k8s.io", "clusterrolebindings", "", "", ""),
	each([]string{"create"}, "", "serviceaccounts", "token", namespace, "nicpool-webhook"),
	each([]string{"impersonate"}, "", "serviceaccounts", "", namespace, ""),
	each([]string{"update", "delete"}, "apiextensions.k8s.io", "customresourcedefinitions", "", "", ""),
)

// The webhook never touches a Secret other than its own, and in cert-manager mode
// none at all (the certificate is a mounted volume).
var webhookMayNot = join(
	each([]string{"get", "update", "delete"}, "", "secrets", "", namespace, "nicpool-ca"),
	each([]string{"delete"}, "", "secrets", "", namespace, "nicpool-webhook-cert"),
	each([]string{"update"}, spider, endpoints, "", tenant, ""),
	each([]string{"create"}, spider, endpoints, "", tenant, ""),
)

var certManagerWebhookMayNot = join(
	each([]string{"get", "list", "watch", "update", "create"}, "", "secrets", "", namespace, ""),
	each([]string{"get", "update", "patch"}, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "nicpool-mutating"),
)

// ipamd is a node daemon: it writes only allocations and endpoints, never pool
// specs, deletes no block, and reads no Secret at all.
var ipamdMayNot = join(
	each([]string{"get", "list", "watch"}, "", "secrets", "", namespace, ""),
	each([]string{"update", "patch"}, spider, pools, "", "", ""),
	each([]string{"delete", "update"}, nicpoolIPAM, blocks, "", "", ""),
	each([]string{"list", "watch", "delete", "patch"}, "coordination.k8s.io", "leases", "", namespace, ""),
	each([]string{"update"}, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "nicpool-mutating"),
)

// serviceAccount returns a config that acts as the ServiceAccount, with the groups
// the API server gives every ServiceAccount token.
func serviceAccount(e *testenv.Env, name string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

func allowed(t *testing.T, cs kubernetes.Interface, r request) bool {
	t.Helper()
	review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: r.verb, Group: r.group, Resource: r.resource, Subresource: r.subresource, Namespace: r.namespace, Name: r.name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("access review for %s: %v", r, err)
	}
	return review.Status.Allowed
}

func expectAllowed(t *testing.T, cs kubernetes.Interface, who string, rs []request) {
	t.Helper()
	for _, r := range rs {
		if !allowed(t, cs, r) {
			t.Errorf("%s needs to %s, but the rendered RBAC refuses it", who, r)
		}
	}
}

func expectRefused(t *testing.T, cs kubernetes.Interface, who string, rs []request) {
	t.Helper()
	for _, r := range rs {
		if allowed(t, cs, r) {
			t.Errorf("%s may %s: outside what it needs", who, r)
		}
	}
}

// With exactly the RBAC each overlay renders, the webhook and ipamd
// ServiceAccounts may make every request their code makes, and nothing outside it:
// no secrets outside nicpool's own Secret, no pod exec, no node deletion.
func TestServiceAccountsHaveLeastPrivilege(t *testing.T) {
	e := controlPlane(t)
	for _, tc := range []struct {
		dir            string
		webhookNeeds   []request
		webhookMayNot  []request
		webhookMarkers []string
	}{
		{"overlays/cert-manager", webhookNeeds, join(webhookMayNot, certManagerWebhookMayNot), []string{"webhook", "cmd/nicpool-webhook"}},
		{"overlays/self-managed", join(webhookNeeds, selfManagedNeeds), webhookMayNot, []string{"webhook", "cmd/nicpool-webhook", "certs"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			objs := render(t, tc.dir)
			apply(t, e.Client, objs)
			t.Cleanup(func() { remove(t, e.Client, objs) })

			webhook := kubernetes.NewForConfigOrDie(serviceAccount(e, "nicpool-webhook"))
			ipamd := kubernetes.NewForConfigOrDie(serviceAccount(e, "nicpool-ipamd"))
			expectAllowed(t, webhook, "nicpool-webhook", tc.webhookNeeds)
			expectAllowed(t, webhook, "nicpool-webhook (+kubebuilder:rbac markers)", markers(t, tc.webhookMarkers...))
			expectRefused(t, webhook, "nicpool-webhook", join(nobodyMay, tc.webhookMayNot))
			expectAllowed(t, ipamd, "nicpool-ipamd", ipamdNeeds)
			expectAllowed(t, ipamd, "nicpool-ipamd (+kubebuilder:rbac markers)", markers(t, "ipamd", "cmd/nicpool-ipamd"))
			expectRefused(t, ipamd, "nicpool-ipamd", join(nobodyMay, ipamdMayNot))

			realCalls(t, webhook, ipamd)
		})
	}
}

// realCalls makes some of those requests for real, as the components would: what
// the API server does, not only what the authorizer says.
func realCalls(t *testing.T, webhook, ipamd kubernetes.Interface) {
	ctx := context.Background()
	for who, cs := range map[string]kubernetes.Interface{"nicpool-webhook": webhook, "nicpool-ipamd": ipamd} {
		if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Errorf("%s cannot list pods: %v", who, err)
		}
		if _, err := cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s listing secrets in kube-system: want Forbidden, got %v", who, err)
		}
		if err := cs.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s deleting a node: want Forbidden, got %v", who, err)
		}
		// Authorization comes before the pod lookup: Forbidden, not NotFound.
		err := cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("app-0").SubResource("exec").
			Param("command", "true").Param("stdout", "true").Do(ctx).Error()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s exec into a pod: want Forbidden, got %v", who, err)
		}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "rbac-test-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"), Namespace: namespace}}
	if _, err := webhook.CoordinationV1().Leases(namespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Errorf("nicpool-webhook cannot create its leader-election Lease: %v", err)
	}
	if _, err := ipamd.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("nicpool-ipamd cannot list nodes: %v", err)
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "nicpool-rbac-", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "app-0"},
		Reason:         "Allocated", Message: "rbac test", Type: corev1.EventTypeNormal,
	}
	if _, err := ipamd.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Errorf("nicpool-ipamd cannot record an event: %v", err)
	}
}

var markerRE = regexp.MustCompile(`\+kubebuilder:rbac:(\S+)`)

// ownObjects are the only objects of these resources nicpool reads or writes one by
// one; a marker cannot name them, so its get/update/patch/delete are checked on
// these names (the RBAC grants exactly them).
var ownObjects = map[string][]string{
	"secrets":                         {"nicpool-webhook-cert"},
	"mutatingwebhookconfigurations":   {"nicpool-mutating"},
	"validatingwebhookconfigurations": {"nicpool-validating"},
}

// markers reads the +kubebuilder:rbac markers in the Go source under dirs (relative
// to the repository root): every permission a package declares must be granted.
// A marker without a namespace is checked cluster-wide, except for the resources
// that live only in nicpool's namespace (leases, secrets).
func markers(t *testing.T, dirs ...string) []request {
	t.Helper()
	var out []request
	for _, dir := range dirs {
		root := filepath.Join(testenv.RepoRoot(), dir)
		if _, err := os.Stat(root); err != nil {
			continue // not written yet
		}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range markerRE.FindAllStringSubmatch(string(src), -1) {
				out = append(out, parseMarker(m[1])...)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func parseMarker(s string) []request {
	args := map[string][]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		for _, x := range strings.Split(v, ";") {
			args[k] = append(args[k], strings.Trim(x, `"`))
		}
	}
	ns := ""
	if len(args["namespace"]) > 0 {
		ns = args["namespace"][0]
	}
	names := args["resourceNames"]
	if len(names) == 0 {
		names = []string{""}
	}
	var out []request
	for _, g := range args["groups"] {
		if g == "core" {
			g = ""
		}
		for _, res := range args["resources"] {
			res, sub, _ := strings.Cut(res, "/")
			where := ns
			if where == "" && (res == "leases" || res == "secrets") {
				where = namespace
			}
			for _, verb := range args["verbs"] {
				byName := names
				if own, ok := ownObjects[res]; ok && names[0] == "" && slices.Contains([]string{"get", "update", "patch", "delete"}, verb) {
					byName = own
				}
				for _, n := range byName {
					out = append(out, request{verb, g, res, sub, where, n})
				}
			}
		}
	}
	return out
}
