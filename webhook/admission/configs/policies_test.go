package configs_test

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// byPolicy reports whether err is a refusal by the named ValidatingAdmissionPolicy.
func byPolicy(err error, name string) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+name+"'")
}

func ensurePool(t *testing.T, name, subnet string) {
	t.Helper()
	if err := env.Client.Create(context.Background(), fixtures.Pool(name, subnet, nil)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "pool "+name+" in the webhook's view", func(ctx context.Context) bool {
		got, err := env.Views.Pools.Get(ctx, name, views.NewLiveReads(0))
		return err == nil && got != nil
	})
}

func endpointWith(name string, uid string, ips ...v2beta1.IPAllocationDetail) *v2beta1.SpiderEndpoint {
	return &v2beta1.SpiderEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Status:     v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: uid, Node: "node-1", IPs: ips}},
	}
}

func rec(ifname string, v4, v6 *string) v2beta1.IPAllocationDetail {
	return v2beta1.IPAllocationDetail{Interface: ifname, IPv4: v4, IPv6: v6}
}

// The API server checks every SpiderEndpoint nicpool writes: one record per named
// interface, each with an address of its family. Each bad record of the catalogue is
// refused with the field and what is allowed; nothing of it reaches the webhook.
func TestEndpointRecordsPolicy(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		uid  string
		ips  []v2beta1.IPAllocationDetail
		want []string // substrings of the refusal; none means admitted
	}{
		{name: "valid dual stack", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To("10.0.0.5/24"), ptr.To("fd00::5/64")), rec("net1", ptr.To("10.1.0.5/24"), nil)}},
		{name: "no records yet", uid: "u"},
		{name: "no uid", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To("10.0.0.5/24"), nil)}, want: []string{"status.current.uid: Required value"}},
		{name: "interface with a slash", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("net/1", ptr.To("10.0.0.5/24"), nil)}, want: []string{"status.current.ips[*].interface: Invalid value"}},
		{name: "interface with white space", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("net 1", ptr.To("10.0.0.5/24"), nil)}, want: []string{"status.current.ips[*].interface: Invalid value"}},
		{name: "duplicate interface", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To("10.0.0.5/24"), nil), rec("eth0", ptr.To("10.0.0.6/24"), nil)}, want: []string{"Duplicate value: keep one record per interface"}},
		{name: "address without prefix", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To("10.0.0.5"), nil)}, want: []string{"ipv4, ipv6: Invalid value"}},
		{name: "address with white space", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To(" 10.0.0.5/24"), nil)}, want: []string{"ipv4, ipv6: Invalid value"}},
		{name: "IPv4 in ipv6", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", nil, ptr.To("10.0.0.5/24"))}, want: []string{"ipv4, ipv6: Invalid value"}},
		{name: "IPv6 with a zone", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", nil, ptr.To("fe80::1%eth0/64"))}, want: []string{"ipv4, ipv6: Invalid value"}},
		{name: "no address", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", nil, nil)}, want: []string{"Required value: an ipv4 or ipv6 address for every interface"}},
	} {
		err := env.Nicpool.Create(ctx, endpointWith("records", tc.uid, tc.ips...), client.DryRunAll)
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: admitted", tc.name)
			continue
		}
		if !byPolicy(err, configs.EndpointsPolicy) {
			t.Errorf("%s: not refused by the policy: %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
}

// The policy's interface rule is annotations.ValidateInterfaceName's: the API server
// and the webhook accept the same names.
func TestInterfaceNameRuleIsTheAnnotationsRule(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"eth0", "net1", "a", "data-0.1_x", "123456789012345", "1234567890123456", ".", "..", "...", "a/b", "a:b", "a b", "a\tb", "é", `a"b`, `a\b`, "~!#$%&'()*+,-.", "a;b<c=d>e"} {
		want := annotations.ValidateInterfaceName(name, nil) == nil
		err := env.Nicpool.Create(ctx, endpointWith("names", "u", rec(name, ptr.To("10.0.0.5/24"), nil)), client.DryRunAll)
		if got := err == nil; got != want {
			t.Errorf("interface %q: API server admits %v (%v); the annotations rule says %v", name, got, err, want)
		}
	}
}

// Pool status (the allocation records) is written only by nicpool: an admin's
// update of it is refused by the API server, nicpool's own is not.
func TestPoolStatusPolicy(t *testing.T) {
	ctx := context.Background()
	pool := fixtures.Pool("status-v4", "10.121.0.0/24", []string{"10.121.0.10-10.121.0.20"})
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	// nicpool's controllers write the new pool's status meanwhile: each write is
	// made on a fresh copy, again on a conflict.
	write := func(c client.Client) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := &v2beta1.SpiderIPPool{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), p); err != nil {
				return err
			}
			p.Status.AllocatedIPs = ptr.To(`{"10.121.0.10":{"pod":"default/x","podUid":"u"}}`)
			return c.Status().Update(ctx, p)
		})
	}
	if err := write(env.Client); !apierrors.IsForbidden(err) || !byPolicy(err, configs.PoolStatusPolicy) || !strings.Contains(err.Error(), "SpiderIPPool status is written only by nicpool's service accounts") {
		t.Errorf("an admin's status update: %v; want Forbidden by %s", err, configs.PoolStatusPolicy)
	}
	if err := write(env.Nicpool); err != nil {
		t.Errorf("nicpool's status update refused: %v", err)
	}
}

// A pod with a SpiderSubnet annotation is refused whatever else it carries, with a
// message that says how to write the same with ippools.
func TestSpiderSubnetAnnotationsRefused(t *testing.T) {
	ctx := context.Background()
	ensurePool(t, "subnet-v4", "10.122.0.0/24")
	for _, key := range configs.SpiderSubnetAnnotations {
		for _, other := range []map[string]string{nil, {annotations.IPPool: `{"ipv4":["subnet-v4"]}`}} {
			ann := map[string]string{key: `{"interface":"eth0","ipv4":["10.6.0.0/16"]}`}
			for k, v := range other {
				ann[k] = v
			}
			err := env.Client.Create(ctx, pod("default", "subnet", ann), client.DryRunAll)
			if !byPolicy(err, configs.PodsPolicy) {
				t.Errorf("%s (with %v): not refused by the policy: %v", key, other, err)
				continue
			}
			for _, w := range []string{"metadata.annotations[" + key + "]", "nicpool has no SpiderSubnet", "create a SpiderIPPool", annotations.IPPools} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %q lacks %q", key, err, w)
				}
			}
		}
	}
}

// What the API server checks on a pod that went through admission: every ippools
// entry resolved, no ippool left, the stamp on every StatefulSet pod and no other.
// Shown with the mutating webhook taken out of the configuration (a configuration
// missing or rewritten by another webhook): such pods are refused, resolved ones
// admitted.
func TestPodPolicyWithoutTheMutatingWebhook(t *testing.T) {
	ctx := context.Background()
	withoutPodWebhook(t)
	sts := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "00000000-0000-4000-8000-000000000002", Controller: ptr.To(true)}}
	resolved := `[{"interface":"eth0","ipv4":["m-v4"]},{"interface":"net1","ipv4":["a.b-1","c"],"ipv6":["d"],"cleangateway":true}]`
	for _, tc := range []struct {
		name   string
		ann    map[string]string
		owners []metav1.OwnerReference
		want   string // a substring of the refusal; "" means admitted
	}{
		{"resolved", map[string]string{annotations.IPPools: resolved}, nil, ""},
		{"resolved StatefulSet pod, stamped", map[string]string{annotations.IPPools: resolved, annotations.EndpointUID: "none"}, sts, ""},
		{"StatefulSet pod on default pools, stamped", map[string]string{annotations.EndpointUID: "none"}, sts, ""},
		{"unnamed entries", map[string]string{annotations.IPPools: `[{"ipv4":["m-v4"]}]`}, nil, "metadata.annotations[" + annotations.IPPools + "]: is not as nicpool's mutating webhook leaves it"},
		{"one entry unnamed", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["m-v4"]},{"ipv4":["m-v4"]}]`}, nil, annotations.IPPools},
		{"wildcard", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["m-*"]}]`}, nil, annotations.IPPools},
		{"white space", map[string]string{annotations.IPPools: `[{"interface": "eth0", "ipv4": ["m-v4"]}]`}, nil, annotations.IPPools},
		{"ippool", map[string]string{annotations.IPPool: `{"ipv4":["m-v4"]}`}, nil, "metadata.annotations[" + annotations.IPPool + "]"},
		{"ippool beside its resolved eth0 entry (the marker)", map[string]string{annotations.IPPool: `{"ipv4":["m-*"]}`, annotations.IPPools: `[{"interface":"eth0","ipv4":["m-v4"]}]`}, nil, ""},
		{"ippool beside an entry for another interface", map[string]string{annotations.IPPool: `{"ipv4":["m-v4"]}`, annotations.IPPools: `[{"interface":"net1","ipv4":["m-v4"]}]`}, nil, "metadata.annotations[" + annotations.IPPool + "]"},
		{"ippool beside several entries", map[string]string{annotations.IPPool: `{"ipv4":["m-v4"]}`, annotations.IPPools: resolved}, nil, "metadata.annotations[" + annotations.IPPool + "]"},
		{"ippool beside an unresolved eth0 entry", map[string]string{annotations.IPPool: `{"ipv4":["m-v4"]}`, annotations.IPPools: `[{"interface":"eth0","ipv4":["m-*"]}]`}, nil, annotations.IPPools},
		{"StatefulSet pod without stamp", map[string]string{annotations.IPPools: resolved}, sts, "metadata.annotations[" + annotations.EndpointUID + "]"},
		{"stamp on another pod", map[string]string{annotations.EndpointUID: "none"}, nil, "metadata.annotations[" + annotations.EndpointUID + "]"},
		{"too long", map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":[` + strings.Repeat(`"m-v4",`, 3000) + `"m-v4"]}]`}, nil, annotations.IPPools},
	} {
		p := pod("default", "unmutated", tc.ann)
		p.OwnerReferences = tc.owners
		err := env.Client.Create(ctx, p, client.DryRunAll)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: admitted", tc.name)
		case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !byPolicy(err, configs.PodsPolicy)):
			t.Errorf("%s: %q lacks %q or the policy's name", tc.name, err, tc.want)
		}
	}
}

// withoutPodWebhook removes the pod webhook from the MutatingWebhookConfiguration for
// the rest of the test, and waits until the API server no longer calls it.
func withoutPodWebhook(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: configs.MutatingName}, cfg); err != nil {
		t.Fatal(err)
	}
	all := cfg.DeepCopy().Webhooks // as registered, with the test server's URL and CA
	set := func(hooks []admissionregistrationv1.MutatingWebhook) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKey{Name: configs.MutatingName}, cfg); err != nil {
			t.Fatal(err)
		}
		cfg.Webhooks = hooks
		if err := env.Client.Update(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	var without []admissionregistrationv1.MutatingWebhook
	for _, h := range all {
		if h.Name != "pods.nicpool.io" {
			without = append(without, h)
		}
	}
	probe := pod("default", "probe", map[string]string{annotations.IPPool: `{"ipv4":["m-v4"]}`})
	set(without)
	fixtures.Eventually(t, "the pod webhook out of the way", func(ctx context.Context) bool {
		return byPolicy(env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll), configs.PodsPolicy)
	})
	t.Cleanup(func() {
		set(all)
		fixtures.Eventually(t, "the pod webhook back", func(ctx context.Context) bool {
			return !byPolicy(env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll), configs.PodsPolicy)
		})
	})
}

// Whoever may update a SpiderEndpoint being deleted may remove its finalizers (the
// policy never keeps it from going away), and nothing else.
func TestEndpointBeingDeletedLosesItsFinalizers(t *testing.T) {
	ctx := context.Background()
	ep := endpointWith("held", "u", rec("eth0", ptr.To("10.0.0.5/24"), nil))
	ep.Finalizers = []string{"example.com/hold"}
	if err := env.Nicpool.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ep), ep); err != nil {
		t.Fatal(err)
	}
	changed := ep.DeepCopy()
	changed.Status.Current.UID = "another-pod"
	if err := env.Client.Update(ctx, changed); !byPolicy(err, configs.EndpointsPolicy) {
		t.Errorf("an admin's status change of an endpoint being deleted: %v; want refused by the policy", err)
	}
	ep.Finalizers = nil
	if err := env.Client.Update(ctx, ep); err != nil {
		t.Errorf("an admin's removal of the finalizers: %v", err)
	}
}
