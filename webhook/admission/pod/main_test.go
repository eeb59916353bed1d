package pod_test

import (
	"context"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/webhooktest"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// env is one control plane for the package, with nicpool's webhooks registered.
var env *webhooktest.Env

func TestMain(m *testing.M) {
	// Decisions log as in production (zap, info level); the lines are not needed here.
	logf.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	webhooktest.Main(m, &env, configs.Options{})
}

// createPools creates the pools and waits until the webhook's view holds them.
func createPools(t *testing.T, pools ...*v2beta1.SpiderIPPool) {
	t.Helper()
	for _, p := range pools {
		fixtures.CreatePool(t, env.Client, p)
	}
	// Wildcards expand over the webhook's view: let it see the new pools first.
	for _, p := range pools {
		fixtures.Eventually(t, "pool "+p.Name+" in the webhook's view", func() bool {
			_, ok := inView(p.Name)
			return ok
		})
	}
}

func inView(name string) (*views.Pool, bool) {
	var found *views.Pool
	env.Views.Pools.Range(func(p *views.Pool) bool {
		if p.Name == name {
			found = p
			return false
		}
		return true
	})
	return found, found != nil
}

func createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	if err := env.Namespace(context.Background(), name, labels); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// newPod is a pod with the given annotations.
func newPod(ns, name string, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}
}

// createPod creates the pod through the API server and returns what it stored.
func createPod(ctx context.Context, p *corev1.Pod, opts ...client.CreateOption) (*corev1.Pod, error) {
	err := env.Client.Create(ctx, p, opts...)
	return p, err
}

var dryRun = client.DryRunAll

var controller = ptr.To(true)
