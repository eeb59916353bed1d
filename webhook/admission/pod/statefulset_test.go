package pod_test

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// webUID is the UID of StatefulSet sts/web, which createStatefulSet creates.
var webUID types.UID

func statefulSetPod(name string, ann map[string]string) *corev1.Pod {
	p := newPod("sts", name, ann)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: webUID, Controller: controller}}
	return p
}

// createStatefulSet creates a StatefulSet (no controller runs here: it makes no pod).
func createStatefulSet(t *testing.T, ns, name string) types.UID {
	t.Helper()
	labels := map[string]string{"app": name}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: newPod(ns, name, nil).Spec},
		},
	}
	if err := env.Client.Create(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	return set.UID
}

func endpoint(name string, ips ...v2beta1.IPAllocationDetail) *v2beta1.SpiderEndpoint {
	return &v2beta1.SpiderEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sts", Name: name},
		Status: v2beta1.WorkloadEndpointStatus{
			Current:             v2beta1.PodIPAllocation{UID: "old-pod-uid", Node: "node-1", IPs: ips},
			OwnerControllerType: "StatefulSet", OwnerControllerName: "web",
		},
	}
}

func record(ifname, ipv4 string) v2beta1.IPAllocationDetail {
	return v2beta1.IPAllocationDetail{Interface: ifname, IPv4: ptr.To(ipv4), IPv4Pool: ptr.To("s-v4")}
}

// The StatefulSet check: a pod owned by a StatefulSet is stamped with the UID of the
// SpiderEndpoint of its name (or "none"); a terminating endpoint defers the pod; an
// inconsistent one refuses it with the reason; other pods are never stamped.
func TestStatefulSetEndpoint(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "sts", nil)
	createPools(t, fixtures.Pool("s-v4", "10.81.0.0/24", []string{"10.81.0.10-10.81.0.50"}))
	// Its first pod comes right after it, maybe before the webhook's cache has it: the
	// webhook reads the API server then.
	webUID = createStatefulSet(t, "sts", "web")
	ann := func() map[string]string {
		return map[string]string{annotations.MultusNetworks: "macvlan-a", annotations.IPPools: `[{"ipv4":["s-v4"]},{"ipv4":["s-v4"]}]`}
	}

	t.Run("no endpoint: stamped none", func(t *testing.T) {
		got, err := createPod(ctx, statefulSetPod("web-0", ann()))
		if err != nil {
			t.Fatal(err)
		}
		if v := got.Annotations[annotations.EndpointUID]; v != annotations.NoEndpoint {
			t.Errorf("stamp = %q; want %q", v, annotations.NoEndpoint)
		}
	})

	t.Run("valid endpoint: its UID stamped", func(t *testing.T) {
		ep := endpoint("web-1", record("eth0", "10.81.0.11/24"), record("net1", "10.81.0.12/24"))
		if err := env.Nicpool.Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Pod
		fixtures.Eventually(t, "the pod to be stamped with the endpoint's UID", func() bool {
			p, err := createPod(ctx, statefulSetPod("web-1", ann()), dryRun)
			got = p
			return err == nil && p.Annotations[annotations.EndpointUID] == string(ep.UID)
		})
		p, err := createPod(ctx, statefulSetPod("web-1", ann()))
		if err != nil {
			t.Fatal(err)
		}
		if p.Annotations[annotations.EndpointUID] != string(ep.UID) {
			t.Errorf("stamp = %q; want endpoint UID %s", got.Annotations[annotations.EndpointUID], ep.UID)
		}
	})

	t.Run("terminating endpoint: retryable denial, admitted once it is gone", func(t *testing.T) {
		ep := endpoint("web-2", record("eth0", "10.81.0.21/24"))
		ep.Finalizers = []string{"test.nicpool.io/hold"}
		if err := env.Nicpool.Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, ep); err != nil {
			t.Fatal(err)
		}
		var denial error
		fixtures.Eventually(t, "the pod to be deferred", func() bool {
			_, denial = createPod(ctx, statefulSetPod("web-2", ann()), dryRun)
			return denial != nil
		})
		if !apierrors.IsConflict(denial) {
			t.Errorf("denial %v has reason %s; want Conflict (a transient state)", denial, apierrors.ReasonForError(denial))
		}
		for _, w := range []string{"SpiderEndpoint sts/web-2 of this StatefulSet pod is being deleted", "the StatefulSet controller retries by itself"} {
			if !strings.Contains(denial.Error(), w) {
				t.Errorf("message lacks %q: %v", w, denial)
			}
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ep), ep); err != nil {
			t.Fatal(err)
		}
		ep.Finalizers = nil
		if err := env.Client.Update(ctx, ep); err != nil {
			t.Fatal(err)
		}
		var got *corev1.Pod
		fixtures.Eventually(t, "the retried pod to be admitted", func() bool {
			p, err := createPod(ctx, statefulSetPod("web-2", ann()))
			got = p
			return err == nil
		})
		if v := got.Annotations[annotations.EndpointUID]; v != annotations.NoEndpoint {
			t.Errorf("stamp = %q; want %q", v, annotations.NoEndpoint)
		}
	})

	t.Run("inconsistent endpoint: denied with the reason", func(t *testing.T) {
		// The API server refuses such records, so this endpoint is written the way
		// legacy data would be: with nicpool's endpoint policy out of the way.
		createUnvalidated(t, endpoint("web-3", record("net1", "10.81.0.31/24"), record("net1", "10.81.0.32/24")))
		var denial error
		fixtures.Eventually(t, "the pod to be denied", func() bool {
			_, denial = createPod(ctx, statefulSetPod("web-3", ann()), dryRun)
			return denial != nil
		})
		for _, w := range []string{"metadata.name", "SpiderEndpoint sts/web-3, whose addresses this StatefulSet pod would take over, is inconsistent", `status.current.ips[0] and [1] both record interface "net1"`, "delete it (kubectl delete spiderendpoint -n sts web-3)"} {
			if !strings.Contains(denial.Error(), w) {
				t.Errorf("message lacks %q: %v", w, denial)
			}
		}
	})

	// A pod author can write any ownerReference on a bare pod: one that names a
	// StatefulSet that does not exist, or another UID than the StatefulSet of that
	// name, is refused, never stamped as that StatefulSet's ordinal.
	t.Run("forged StatefulSet ownerReference: refused", func(t *testing.T) {
		ep := endpoint("web-5", record("eth0", "10.81.0.51/24"))
		if err := env.Nicpool.Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
		for name, ref := range map[string]metav1.OwnerReference{
			"the StatefulSet's name, another UID": {APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "00000000-0000-4000-8000-00000000f00d", Controller: controller},
			"no such StatefulSet":                 {APIVersion: "apps/v1", Kind: "StatefulSet", Name: "ghost", UID: webUID, Controller: controller},
		} {
			p := newPod("sts", "web-5", ann())
			p.OwnerReferences = []metav1.OwnerReference{ref}
			_, err := createPod(ctx, p, dryRun)
			want := []string{"metadata.ownerReferences: Forbidden", "the pod names StatefulSet " + ref.Name + " (UID " + string(ref.UID) + ") as its controller", "remove the ownerReference, or let the StatefulSet create the pod"}
			for _, w := range want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v; want a refusal saying %q", name, err, w)
				}
			}
		}
	})

	t.Run("pods not owned by a StatefulSet are never stamped", func(t *testing.T) {
		ep := endpoint("web-4", record("eth0", "10.81.0.41/24"))
		if err := env.Nicpool.Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, "the endpoint in the webhook's view", func() bool { return env.Views.Endpoints.Get("sts", "web-4") != nil })
		owners := map[string][]metav1.OwnerReference{
			"no owner":                    nil,
			"ReplicaSet controller":       {{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "u1", Controller: controller}},
			"StatefulSet, not controller": {{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "u2"}},
		}
		i := 0
		for name, refs := range owners {
			i++
			a := ann()
			a[annotations.EndpointUID] = string(ep.UID) // a forged stamp is removed
			p := newPod("sts", "web-4", a)
			p.OwnerReferences = refs
			got, err := createPod(ctx, p, dryRun)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if v, ok := got.Annotations[annotations.EndpointUID]; ok {
				t.Errorf("%s: stamped %q", name, v)
			}
		}
	})
}

// createUnvalidated creates an endpoint with nicpool's endpoint policy unbound, and
// binds it again.
func createUnvalidated(t *testing.T, ep *v2beta1.SpiderEndpoint) {
	t.Helper()
	ctx := context.Background()
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: configs.EndpointsPolicy}, binding); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "the unvalidated endpoint to be created", func() bool {
		e := ep.DeepCopy()
		if err := env.Client.Create(ctx, e); err != nil {
			return false
		}
		*ep = *e
		return true
	})
	binding.ResourceVersion, binding.UID = "", ""
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	bad := endpoint("probe", record("net1", "10.81.0.99/24"), record("net1", "10.81.0.98/24"))
	fixtures.Eventually(t, "the endpoint policy to be back", func() bool {
		return env.Nicpool.Create(ctx, bad.DeepCopy(), client.DryRunAll) != nil
	})
}
