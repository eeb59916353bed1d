package configs_test

import (
	"context"
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/webhooktest"
	nicwebhook "github.com/nicpool/nicpool/webhook"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/admission/metrics"
)

var env *webhooktest.Env

// TestMain serves exactly the configurations the manifests are generated from.
func TestMain(m *testing.M) { webhooktest.Main(m, &env, configs.Options{}) }

func TestConfigurationsFailClosedAndAreScoped(t *testing.T) {
	m, v := configs.Configurations(configs.Options{CABundle: []byte("ca")})
	check := func(name string, fp *admissionregistrationv1.FailurePolicyType, se *admissionregistrationv1.SideEffectClass, timeout *int32, ns *metav1.LabelSelector, cc admissionregistrationv1.WebhookClientConfig) {
		if fp == nil || *fp != admissionregistrationv1.Fail {
			t.Errorf("%s: failurePolicy %v; want Fail", name, fp)
		}
		if se == nil || *se != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects %v; want None", name, se)
		}
		if timeout == nil || *timeout > 5 {
			t.Errorf("%s: timeoutSeconds %v; want at most 5", name, timeout)
		}
		if ns == nil || len(ns.MatchExpressions) != 1 || ns.MatchExpressions[0].Operator != metav1.LabelSelectorOpNotIn ||
			fmt.Sprint(ns.MatchExpressions[0].Values) != "[kube-system nicpool-system]" {
			t.Errorf("%s: namespaceSelector %v; want kubernetes.io/metadata.name NotIn [kube-system nicpool-system]", name, ns)
		}
		if cc.Service == nil || cc.Service.Namespace != "nicpool-system" || cc.Service.Name != "nicpool-webhook" || string(cc.CABundle) != "ca" {
			t.Errorf("%s: clientConfig %+v", name, cc)
		}
	}
	for _, w := range m.Webhooks {
		check(w.Name, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.NamespaceSelector, w.ClientConfig)
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("%s: reinvocationPolicy %v; want IfNeeded", w.Name, w.ReinvocationPolicy)
		}
	}
	for _, w := range v.Webhooks {
		check(w.Name, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.NamespaceSelector, w.ClientConfig)
	}
	if len(m.Webhooks[0].MatchConditions) != 1 {
		t.Errorf("the pod webhook carries no match condition")
	}
	for _, w := range v.Webhooks {
		if w.Name == "pods.nicpool.io" || w.Name == "spiderendpoints.nicpool.io" {
			t.Errorf("validating webhook %s: its checks are ValidatingAdmissionPolicies now", w.Name)
		}
	}
	if ns := (configs.Options{Namespace: "ipam"}).ExcludedNamespaces(); fmt.Sprint(ns) != "[kube-system ipam]" {
		t.Errorf("excluded namespaces %v for namespace ipam", ns)
	}
}

// Pods that neither select a nicpool pool, nor carry nicpool's stamp, nor are
// controlled by a StatefulSet, and pods in kube-system or nicpool's namespace, never
// reach the pod webhook: the API server's match condition and namespace selector keep
// them away, as the webhook's request counter shows. The others reach it, and a
// StatefulSet pod is stamped whatever picks its pools.
func TestWhichPodsReachThePodWebhooks(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"apps", configs.DefaultNamespace} {
		if err := env.Namespace(ctx, ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, fixtures.Pool("m-v4", "10.120.0.0/24", []string{"10.120.0.10-10.120.0.20"})); err != nil {
		t.Fatal(err)
	}
	selects := map[string]string{annotations.IPPool: `{"ipv4":["m-v4"]}`}
	calls := func() float64 { return metrics.Requests(nicwebhook.MutatePod) }
	yes := true
	// The StatefulSet exists: admission stamps only the pods of a real one.
	web := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: pod("apps", "web", nil).Spec},
		},
	}
	if err := env.Client.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	owner := func(apiVersion, kind string, controller bool) []metav1.OwnerReference {
		r := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "web", UID: web.UID}
		if controller {
			r.Controller = &yes
		}
		return []metav1.OwnerReference{r}
	}

	for i, tc := range []struct {
		name, namespace string
		ann             map[string]string
		owners          []metav1.OwnerReference
	}{
		{"no annotations", "apps", nil, nil},
		{"other annotations only", "apps", map[string]string{annotations.MultusNetworks: "macvlan-a", "example.com/x": "y"}, nil},
		{"ReplicaSet pod", "apps", nil, owner("apps/v1", "ReplicaSet", true)},
		{"StatefulSet owner that is not the controller", "apps", nil, owner("apps/v1", "StatefulSet", false)},
		{"StatefulSet of another API group", "apps", nil, owner("example.com/v1", "StatefulSet", true)},
		{"annotated, in kube-system", "kube-system", selects, nil},
		{"annotated, in nicpool's namespace", configs.DefaultNamespace, selects, nil},
		{"StatefulSet pod in nicpool's namespace", configs.DefaultNamespace, nil, owner("apps/v1", "StatefulSet", true)},
	} {
		before := calls()
		p := pod(tc.namespace, fmt.Sprintf("away-%d", i), tc.ann)
		p.OwnerReferences = tc.owners
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if after := calls(); after != before {
			t.Errorf("%s: the pod webhook served %v requests for it; want none", tc.name, after-before)
		}
		for _, k := range []string{annotations.IPPools, annotations.EndpointUID} {
			if _, ok := p.Annotations[k]; ok {
				t.Errorf("%s: the pod was mutated (%s)", tc.name, k)
			}
		}
	}

	for i, tc := range []struct {
		name   string
		ann    map[string]string
		owners []metav1.OwnerReference
		want   map[string]string // annotations nicpool leaves; "" means absent
	}{
		{"selects pools", selects, nil, map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["m-v4"]}]`, annotations.EndpointUID: ""}},
		{"StatefulSet pod on default pools", nil, owner("apps/v1", "StatefulSet", true), map[string]string{annotations.IPPools: "", annotations.EndpointUID: annotations.NoEndpoint}},
		{"StatefulSet pod selecting pools", selects, owner("apps/v1", "StatefulSet", true), map[string]string{annotations.IPPools: `[{"interface":"eth0","ipv4":["m-v4"]}]`, annotations.EndpointUID: annotations.NoEndpoint}},
		{"forged stamp on another pod", map[string]string{annotations.EndpointUID: "00000000-0000-4000-8000-00000000beef"}, nil, map[string]string{annotations.EndpointUID: ""}},
	} {
		before := calls()
		p := pod("apps", fmt.Sprintf("reaches-%d", i), tc.ann)
		p.OwnerReferences = tc.owners
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if calls() <= before {
			t.Errorf("%s: did not reach the pod webhook", tc.name)
		}
		for k, want := range tc.want {
			if got := p.Annotations[k]; got != want {
				t.Errorf("%s: annotation %s = %q; want %q", tc.name, k, got, want)
			}
		}
	}
}

func pod(ns, name string, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}
}
