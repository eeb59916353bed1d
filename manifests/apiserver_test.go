package manifests_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/manifests"
	"github.com/nicpool/nicpool/manifests/externalcrds"
)

var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

// TestMain stops the control plane if a test started it (see controlPlane).
func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) error {
		s.Defer(func() error {
			if env == nil {
				return nil
			}
			return env.Stop()
		})
		return nil
	})
}

// controlPlane starts one kube-apiserver for the package, with cert-manager's and the
// Prometheus Operator's CRDs installed beside nicpool's (only their CRDs: the API
// server validates Issuers, Certificates and monitors against their schemas; no
// controller runs).
func controlPlane(t *testing.T) *testenv.Env {
	t.Helper()
	envOnce.Do(func() {
		var certManager, monitoring []*apiextensionsv1.CustomResourceDefinition
		if certManager, envErr = externalcrds.CertManager(); envErr != nil {
			return
		}
		if monitoring, envErr = externalcrds.PrometheusOperator(filepath.Join(testenv.BinDir(), "controller-gen")); envErr != nil {
			return
		}
		extra := append(certManager, monitoring...)
		env, envErr = testenv.Start(testenv.Options{ExtraCRDs: extra})
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

const fieldOwner = client.FieldOwner("nicpool-manifests-test")

// apply creates (or updates) every object with server-side apply, as
// `kubectl apply --server-side -k` would, and reads each back.
func apply(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner, client.ForceOwnership); err != nil {
			t.Errorf("API server refused %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			continue
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Errorf("%s %s/%s not readable after apply: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// remove deletes what an overlay added on top of what every overlay shares (the
// CRDs and the namespace), so the next overlay starts from a cluster without it.
func remove(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		switch o.GetKind() {
		case "CustomResourceDefinition", "Namespace":
			continue
		}
		if err := c.Delete(context.Background(), o.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// Every rendered object of every kustomization is accepted by a real API server
// with cert-manager's CRDs installed: the YAML is valid against the real schemas
// (pod templates, RBAC, webhook configurations, Issuers, Certificates).
func TestEveryKustomizationIsAcceptedByTheAPIServer(t *testing.T) {
	e := controlPlane(t)
	for _, dir := range manifests.Kustomizations {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			apply(t, e.Client, objs)
			remove(t, e.Client, objs)
		})
	}
}

// The API server's PodSecurity admission agrees with the manifests: the webhook's
// pods meet the restricted profile but for the host network they run on, ipamd's need
// the privileged level that nicpool's namespace grants (and the baseline level
// refuses both).
func TestPodSecurityLevels(t *testing.T) {
	e := controlPlane(t)
	ctx := context.Background()
	objs := render(t, ".")
	for _, level := range []string{"restricted", "baseline"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "psa-" + level, Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}}}
		if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	apply(t, e.Client, kinds(objs, "Namespace"))
	webhook := object[appsv1.Deployment](t, objs, "Deployment", "nicpool-webhook").Spec.Template
	ipamd := object[appsv1.DaemonSet](t, objs, "DaemonSet", "nicpool-ipamd").Spec.Template
	// The webhook's pod as it would be on the pod network: no host network, no host
	// ports (which the API server derives from the container ports on the host network).
	podNetworkWebhook := *webhook.DeepCopy()
	podNetworkWebhook.Spec.HostNetwork = false
	podNetworkWebhook.Spec.DNSPolicy = corev1.DNSClusterFirst
	for i := range podNetworkWebhook.Spec.Containers {
		for j := range podNetworkWebhook.Spec.Containers[i].Ports {
			podNetworkWebhook.Spec.Containers[i].Ports[j].HostPort = 0
		}
	}
	for _, tc := range []struct {
		pod       corev1.PodTemplateSpec
		namespace string
		accepted  bool
	}{
		{podNetworkWebhook, "psa-restricted", true},
		{webhook, "psa-baseline", false},
		{webhook, namespace, true},
		{ipamd, "psa-baseline", false},
		{ipamd, namespace, true},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-", Namespace: tc.namespace, Labels: tc.pod.Labels}, Spec: *tc.pod.Spec.DeepCopy()}
		// The ServiceAccounts do not exist in the test namespaces; PodSecurity does
		// not look at them.
		pod.Spec.ServiceAccountName = ""
		err := e.Client.Create(ctx, pod, client.DryRunAll)
		if tc.accepted && err != nil {
			t.Errorf("pod of %s refused in %s: %v", tc.pod.Labels["app.kubernetes.io/name"], tc.namespace, err)
		}
		if !tc.accepted && !apierrors.IsForbidden(err) {
			t.Errorf("pod of %s in %s: want Forbidden by PodSecurity, got %v", tc.pod.Labels["app.kubernetes.io/name"], tc.namespace, err)
		}
	}
}
