package memory

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// readyTimeout bounds startup, cache sync included, on a shared 2-core machine.
const readyTimeout = 3 * time.Minute

// ipamd is a running nicpool-ipamd.
type ipamd struct{ *binaries.Ipamd }

// startIpamd runs nicpool-ipamd for node as a DaemonSet pod would, against kubeconfig.
func startIpamd(tb testing.TB, bin, kubeconfig, node string) *ipamd {
	tb.Helper()
	d, err := binaries.StartIpamd(bin, kubeconfig, node, shortTempDir(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Stop(30 * time.Second) })
	return &ipamd{d}
}

// waitReady waits for /readyz (caches synced), then for CNI STATUS on the socket to
// report each pool of the fixture ready (STATUS of a network whose only default pool
// is that one): every pool as the API server holds it is in ipamd's cache.
func (d *ipamd) waitReady(tb testing.TB, f fixture) *api.StatusResponse {
	tb.Helper()
	if err := d.WaitReady(readyTimeout); err != nil {
		tb.Fatal(err)
	}
	c := api.NewClient(d.Socket, 30*time.Second)
	var status *api.StatusResponse
	err := d.WaitFor("to answer STATUS ready for every pool", readyTimeout, func(ctx context.Context) error {
		for _, p := range f.poolNames() {
			s, err := c.Status(ctx, &api.StatusRequest{Network: api.NetworkConfig{Name: "macvlan", DefaultIPv4Pools: []string{p}}})
			if err != nil {
				return err
			}
			if !s.Ready {
				return fmt.Errorf("STATUS of pool %s: %s", p, s.Message)
			}
			status = s
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return status
}

// webhook is a running nicpool-webhook.
type webhook struct {
	*binaries.Process
	addr, health, metricsAddr string
	roots                     *x509.CertPool
}

// startWebhook runs nicpool-webhook serving on loopback with a self-signed
// certificate; no API server calls it here (none is registered), only the test does.
func startWebhook(tb testing.TB, bin, kubeconfig string) *webhook {
	tb.Helper()
	certDir := tb.TempDir()
	roots := selfSignedCert(tb, certDir)
	w := &webhook{addr: freeAddr(tb), health: freeAddr(tb), metricsAddr: freeAddr(tb), roots: roots}
	host, port, _ := net.SplitHostPort(w.addr)
	env, err := binaries.DeployedEnv("webhook")
	if err != nil {
		tb.Fatal(err)
	}
	w.Process, err = binaries.Start("nicpool-webhook", bin, env, filepath.Join(tb.TempDir(), "nicpool-webhook.log"),
		"--kubeconfig", kubeconfig, "--namespace", configs.DefaultNamespace,
		"--webhook-host", host, "--webhook-port", port, "--cert-dir", certDir,
		"--metrics-bind-address", w.metricsAddr, "--health-probe-bind-address", w.health)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Stop(30 * time.Second) })
	return w
}

// waitReady waits for /readyz (admission views synced, server serving), then for the
// garbage collector's first full pass, which runs once the cache of every pod in the
// cluster has synced. It returns the addresses that pass released: none, when the
// fixture is consistent.
func (w *webhook) waitReady(tb testing.TB) float64 {
	tb.Helper()
	if err := w.WaitFor("to be ready (/readyz)", readyTimeout, func(ctx context.Context) error {
		return binaries.HTTPOK(ctx, "http://"+w.health+"/readyz")
	}); err != nil {
		tb.Fatal(err)
	}
	metrics := "http://" + w.metricsAddr + "/metrics"
	if err := w.WaitFor("to finish a garbage collection pass", readyTimeout, func(ctx context.Context) error {
		n, err := metric(ctx, metrics, `nicpool_gc_runs_total{result="success"}`)
		if err == nil && n < 1 {
			err = fmt.Errorf("no successful pass yet")
		}
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	released, err := metric(context.Background(), metrics, "nicpool_gc_releases_total")
	if err != nil {
		return 0 // the counter has no sample until something is released
	}
	return released
}

// admitPod sends the pod to /mutate-pod as the API server would and returns the
// answer.
func (w *webhook) admitPod(tb testing.TB, pod *corev1.Pod) *admissionv1.AdmissionResponse {
	tb.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		tb.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("memory-harness-1"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: pod.Namespace, Name: pod.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		tb.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.roots, ServerName: "localhost"}}}
	resp, err := hc.Post("https://"+w.addr+configs.MutatePodPath, "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("admission request to nicpool-webhook: %v", err)
	}
	defer resp.Body.Close()
	var answer admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Response == nil {
		tb.Fatalf("admission answer (%s) undecodable: %v", resp.Status, err)
	}
	if answer.Response.UID != review.Request.UID {
		tb.Fatalf("admission answer for UID %q, asked %q", answer.Response.UID, review.Request.UID)
	}
	return answer.Response
}

// selfSignedCert writes tls.crt and tls.key for localhost and 127.0.0.1 into dir and
// returns a pool trusting it.
func selfSignedCert(tb testing.TB, dir string) *x509.CertPool {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nicpool-webhook memory harness"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		tb.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return roots
}

// shortTempDir is a temporary directory with a short path: a unix socket path must
// fit in 108 bytes, and t.TempDir embeds the test's name.
func shortTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "nicmem")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
