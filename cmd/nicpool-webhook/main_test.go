package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nicpool/nicpool/certs"
	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// TestMain discards controller-runtime's log (see testenv.Main).
func TestMain(m *testing.M) { testenv.Main(m, nil) }

// Self-managed certificates on a real API server: the webhook generates its CA and
// serving certificate, injects the CA into nicpool's webhook configurations, serves,
// and rotates a short-lived serving certificate while pods keep being admitted.
func TestSelfManagedCertificates(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configs.DefaultNamespace}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	// The configurations as the manifests carry them, pointed at this process and
	// without a CA: until the webhook injects one, every call fails (failurePolicy Fail).
	m, v := configs.Configurations(configs.Options{})
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = local(port, m.Webhooks[i].ClientConfig)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = local(port, v.Webhooks[i].ClientConfig)
	}
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, v); err != nil {
		t.Fatal(err)
	}

	o := options{
		namespace: configs.DefaultNamespace, serviceName: configs.DefaultServiceName,
		host: "127.0.0.1", port: port, certDir: t.TempDir(),
		selfManaged: true, secretName: "nicpool-webhook-cert", extraDNSNames: "localhost",
		caValidity: 24 * time.Hour,
		// Forced short validity: a new serving certificate lives 30s and is replaced
		// when less than 24s remain, so it rotates every few seconds.
		certValidity: 30 * time.Second, certLookahead: 24 * time.Second, certCheckInterval: time.Second,
		metricsAddr: "0", probeAddr: "0",
	}
	ready := make(chan *certs.Keeper, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, env.Config, o, func(_ manager.Manager, k *certs.Keeper) { ready <- k })
	}()
	var keeper *certs.Keeper
	select {
	case keeper = <-ready:
	case err := <-done:
		t.Fatalf("webhook stopped: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("webhook: %v", err)
		}
	}()

	secret := &corev1.Secret{}
	fixtures.Eventually(t, "the CA to be injected into both webhook configurations", func() bool {
		if err := c.Get(ctx, client.ObjectKey{Namespace: configs.DefaultNamespace, Name: o.secretName}, secret); err != nil || len(secret.Data["ca.crt"]) == 0 {
			return false
		}
		ca := secret.Data["ca.crt"]
		gotM := &admissionregistrationv1.MutatingWebhookConfiguration{}
		gotV := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if c.Get(ctx, client.ObjectKey{Name: configs.MutatingName}, gotM) != nil || c.Get(ctx, client.ObjectKey{Name: configs.ValidatingName}, gotV) != nil {
			return false
		}
		for _, w := range gotM.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) {
				return false
			}
		}
		for _, w := range gotV.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, ca) {
				return false
			}
		}
		return true
	})
	if block, _ := pem.Decode(secret.Data["ca.crt"]); block == nil {
		t.Fatal("ca.crt in the Secret is not PEM")
	} else if ca, err := x509.ParseCertificate(block.Bytes); err != nil || !ca.IsCA {
		t.Fatalf("ca.crt is not a CA certificate: %v", err)
	}

	// The webhook serves: a pool is defaulted and a pod resolved through TLS.
	fixtures.Eventually(t, "a pool to be admitted through the webhook", func() bool {
		p := fixtures.Pool("tls-v4", "10.130.0.0/24", []string{"10.130.0.10"})
		return c.Create(ctx, p) == nil
	})
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Annotations: map[string]string{annotations.IPPool: `{"ipv4":["tls-v4"]}`}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
		}
	}
	fixtures.Eventually(t, "the pool in the webhook's view", func() bool { return c.Create(ctx, pod("probe"), client.DryRunAll) == nil })

	// Rotation: keep admitting pods until the served certificate has changed twice;
	// not one request may fail.
	first := keeper.Current()
	seen := map[string]bool{string(first.Raw): true}
	pace := time.NewTicker(25 * time.Millisecond) // a bounded request rate, not synchronisation
	defer pace.Stop()
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; len(seen) < 3; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the serving certificate rotated %d times in %d requests; want 2", len(seen)-1, i)
		}
		<-pace.C
		p := pod(fmt.Sprintf("p-%d", i))
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			t.Fatalf("request %d failed during rotation: %v", i, err)
		}
		if p.Annotations[annotations.IPPools] != `[{"interface":"eth0","ipv4":["tls-v4"]}]` {
			t.Fatalf("request %d not mutated: %v", i, p.Annotations)
		}
		if cur := keeper.Current(); cur != nil {
			seen[string(cur.Raw)] = true
		}
	}
	t.Logf("%d certificates served", len(seen))
	if cur := keeper.Current(); !cur.NotAfter.After(first.NotAfter) {
		t.Errorf("certificate after rotation expires %v, not after the first's %v", cur.NotAfter, first.NotAfter)
	}
}

func local(port int, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	url := "https://localhost:" + strconv.Itoa(port) + *cc.Service.Path
	return admissionregistrationv1.WebhookClientConfig{URL: &url}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
