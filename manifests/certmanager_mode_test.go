package manifests_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	nicwebhook "github.com/nicpool/nicpool/webhook"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

// servingCertificate writes what cert-manager's Certificate puts in the mounted
// Secret (tls.crt, tls.key, ca.crt: a CA and a serving certificate it signed for the
// Service's name and localhost) and returns the CA in PEM.
func servingCertificate(t *testing.T, dir string) []byte {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nicpool-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nicpool-webhook.nicpool-system.svc"},
		DNSNames:  []string{"nicpool-webhook.nicpool-system.svc", "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, data := range map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"ca.crt":  caPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caPEM
}

// In cert-manager mode the webhook reads its certificate from the mounted Secret
// and has no access to Secrets at all; with exactly that RBAC it still wins leader
// election, admits pools and pods over TLS, and manages pool finalizers, and the API
// server refuses none of its requests.
func TestWebhookWorksUnderCertManagerRBAC(t *testing.T) {
	e := controlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	objs := render(t, "overlays/cert-manager")
	rbac := rbacOnly(objs)
	apply(t, e.Client, rbac)
	t.Cleanup(func() { remove(t, e.Client, rbac) })
	const ns, poolName = "cm-tenant", "cm-v4"

	certDir := t.TempDir()
	ca := servingCertificate(t, certDir)
	refused := &refusals{}
	t.Cleanup(func() {
		if r := refused.list(); len(r) > 0 {
			t.Errorf("the API server refused the webhook: %v", r)
		}
	})
	port := freePort(t)
	mgr, err := ctrl.NewManager(refused.watch(serviceAccount(e, "nicpool-webhook")), ctrl.Options{
		Scheme:                        nicwebhook.NewScheme(),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "nicpool-webhook",
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		// Two tests of this package each run a webhook in this one process.
		Controller:    ctrlconfig.Controller{SkipNameValidation: &skipNameValidation},
		WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nicwebhook.Setup(ctx, mgr, nicwebhook.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := gc.SetupWithManager(mgr, gc.Options{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("webhook manager: %v", err)
		}
	})

	// The rendered configurations with the CA cainjector would inject, calling
	// this process.
	m := object[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", configs.MutatingName)
	v := object[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", configs.ValidatingName)
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = localURL(port, m.Webhooks[i].ClientConfig)
		m.Webhooks[i].ClientConfig.CABundle = ca
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = localURL(port, v.Webhooks[i].ClientConfig)
		v.Webhooks[i].ClientConfig.CABundle = ca
	}
	for _, o := range []client.Object{m, v} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := e.Client.Delete(context.Background(), o); err != nil {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		})
	}

	select {
	case <-mgr.Elected():
	case <-time.After(time.Minute):
		t.Fatal("the webhook did not win leader election with its Role")
	}
	fixtures.Eventually(t, "a pool admitted through the webhook", func(ctx context.Context) (bool, error) {
		pool := fixtures.Pool(poolName, "10.78.0.0/24", []string{"10.78.0.10-10.78.0.20"})
		err := e.Client.Create(ctx, pool)
		if err != nil {
			t.Logf("create pool (retrying): %v", err)
		}
		return err == nil, nil
	})
	fixtures.Eventually(t, "the webhook's pool finalizer", func(ctx context.Context) (bool, error) {
		p := &v2beta1.SpiderIPPool{}
		err := e.Client.Get(ctx, client.ObjectKey{Name: poolName}, p)
		return err == nil && slices.Contains(p.Finalizers, v2beta1.PoolFinalizer), err
	})
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-0", Annotations: map[string]string{annotations.IPPool: `{"ipv4":["` + poolName + `"]}`}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "pause"}}},
	}
	if err := e.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if resolved, errs := annotations.ParsePoolSelections(pod.Annotations[annotations.IPPools]); len(errs) > 0 || len(resolved) != 1 || resolved[0].Interface != "eth0" {
		t.Fatalf("the webhook did not resolve the pod's pools: %q", pod.Annotations[annotations.IPPools])
	}
	if err := e.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: poolName}}); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "the pool finalizer releases the deleted pool", func(ctx context.Context) (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Name: poolName}, &v2beta1.SpiderIPPool{})
		return apierrors.IsNotFound(err), nil
	})
}
