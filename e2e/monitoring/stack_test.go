package monitoring

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/webhook/configs"
)

// startTimeout bounds a binary's start, cache sync included, on a loaded machine.
const startTimeout = 3 * time.Minute

// node is the one node the scenario's pods run on.
const node = "node-1"

// stack is a control plane with nicpool-webhook (registered with the API server, as
// the manifests register it) and one node's nicpool-ipamd, each serving metrics.
type stack struct {
	env     *testenv.Env
	webhook target
	ipamd   target
	socket  *api.Client
}

// target is a running binary whose metrics a Prometheus would scrape, with the
// target labels the Prometheus Operator gives it.
type target struct {
	proc    *cluster.Process
	metrics string // URL of /metrics
	labels  map[string]string
}

func startStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	bin := buildBinaries(t, dir)
	env := testenv.StartT(t, testenv.Options{})
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configs.DefaultNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNamespace}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	s := &stack{env: env}
	s.webhook = startWebhook(t, env, filepath.Join(bin, "nicpool-webhook"), dir)
	s.ipamd, s.socket = startIpamd(t, env, filepath.Join(bin, "nicpool-ipamd"), dir)
	return s
}

// buildBinaries builds nicpool-webhook and nicpool-ipamd from this checkout.
func buildBinaries(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	cmd := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/nicpool-webhook", "./cmd/nicpool-ipamd")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func start(t *testing.T, name, bin string, args []string, log string) *cluster.Process {
	t.Helper()
	p, err := cluster.StartProcess(name, bin, args, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(30 * time.Second); err != nil {
			t.Errorf("stop %s: %v", name, err)
		}
	})
	return p
}

// startWebhook runs nicpool-webhook with self-managed certificates, its garbage
// collector tuned to act within seconds, and nicpool's webhook configurations pointed
// at it on loopback (no Service here).
func startWebhook(t *testing.T, env *testenv.Env, bin, dir string) target {
	t.Helper()
	port, probe, metrics := freePort(t), freePort(t), freePort(t)
	m, v := configs.Configurations(configs.Options{})
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = loopback(port, m.Webhooks[i].ClientConfig)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = loopback(port, v.Webhooks[i].ClientConfig)
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, v); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(dir, "webhook-certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	p := start(t, "nicpool-webhook", bin, []string{
		"--kubeconfig=" + env.Kubeconfig,
		"--namespace=" + configs.DefaultNamespace,
		"--self-managed-certs", "--cert-extra-dns-names=localhost", "--cert-dir=" + certs,
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(port),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
		"--leader-elect",
		"--gc-interval=2s", "--gc-min-age=1s", "--gc-terminating-grace=1s",
	}, filepath.Join(dir, "webhook.log"))
	waitFor(t, p, "nicpool-webhook to be ready and its CA injected", func(ctx context.Context) error {
		if err := httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", probe)); err != nil {
			return err
		}
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: configs.ValidatingName}, got); err != nil {
			return err
		}
		for _, w := range got.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return errors.New("no caBundle yet")
			}
		}
		return nil
	})
	addr := "127.0.0.1:" + strconv.Itoa(metrics)
	return target{proc: p, metrics: "http://" + addr + "/metrics", labels: map[string]string{
		"job": "nicpool-webhook", "service": "nicpool-webhook", "namespace": configs.DefaultNamespace,
		"pod": "nicpool-webhook-6d9c7b5f4-x2x7q", "container": "webhook", "endpoint": "metrics", "instance": addr,
	}}
}

func loopback(port int, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	url := fmt.Sprintf("https://localhost:%d%s", port, *cc.Service.Path)
	return admissionregistrationv1.WebhookClientConfig{URL: &url}
}

// startIpamd runs the node's nicpool-ipamd and waits until its caches are synced.
func startIpamd(t *testing.T, env *testenv.Env, bin, dir string) (target, *api.Client) {
	t.Helper()
	probe, metrics := freePort(t), freePort(t)
	// A unix socket path must stay short; t.TempDir() under a long test name may not.
	run, err := os.MkdirTemp("", "nicpool-ipamd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(run) })
	socket := filepath.Join(run, "ipamd.sock")
	p := start(t, "nicpool-ipamd", bin, []string{
		"--kubeconfig=" + env.Kubeconfig,
		"--node-name=" + node,
		"--socket=" + socket,
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
	}, filepath.Join(dir, "ipamd.log"))
	waitFor(t, p, "nicpool-ipamd to be ready", func(ctx context.Context) error {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", probe))
	})
	addr := "127.0.0.1:" + strconv.Itoa(metrics)
	return target{proc: p, metrics: "http://" + addr + "/metrics", labels: map[string]string{
		"job": configs.DefaultNamespace + "/nicpool-ipamd", "namespace": configs.DefaultNamespace,
		"pod": "nicpool-ipamd-k4x9p", "container": "ipamd", "endpoint": "metrics", "node": node, "instance": addr,
	}}, api.NewClient(socket, 30*time.Second)
}

// waitFor polls cond until it holds; it fails the test when the process exits first
// or the time is up, with the end of the process's log.
func waitFor(t *testing.T, p *cluster.Process, what string, cond func(context.Context) error) {
	t.Helper()
	last := errors.New("not checked yet")
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, fmt.Errorf("%s exited", p.Name)
		default:
		}
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)\n--- end of %s ---\n%s", what, err, last, p.Log, tail(p.Log))
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", url, resp.Status, body.String())
	}
	return nil
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
