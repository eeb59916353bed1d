package binaries

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// Webhook is a running nicpool-webhook replica: admission, and (once elected) the
// cluster controllers: the garbage collector, the pool counter that writes every
// pool's status, and the capacity metrics.
type Webhook struct {
	*Process
	// Port is the admission port on 127.0.0.1; Health serves /readyz and /healthz,
	// Metrics serves /metrics (host:port).
	Port, Health, Metrics string
}

// WebhookOptions are what a test asks of a webhook replica.
type WebhookOptions struct {
	// Name names the process in logs and failures (default nicpool-webhook).
	Name string
	// Port is the admission port; empty: a free one.
	Port string
	// Args are more flags, after the ones StartWebhook gives.
	Args []string
}

// StartWebhook runs nicpool-webhook with the Deployment's Go runtime settings against
// the API server of kubeconfig, in nicpool's namespace, elected leader when it is
// the only replica, with self-managed certificates for localhost kept in dir (with
// its log). The namespace must exist. Its admission is served on 127.0.0.1:Port and
// reached only through webhook configurations a test registers itself (with a URL
// on that port): without them, the replica runs its controllers alone (the
// certificate rotator logs that it finds no configuration to inject).
func StartWebhook(bin, kubeconfig, dir string, opts WebhookOptions) (*Webhook, error) {
	env, err := DeployedEnv("webhook")
	if err != nil {
		return nil, err
	}
	w := &Webhook{Port: opts.Port}
	if w.Port == "" {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		_, w.Port, _ = strings.Cut(addr, ":")
	}
	if w.Health, err = FreeAddr(); err != nil {
		return nil, err
	}
	if w.Metrics, err = FreeAddr(); err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = "nicpool-webhook"
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + configs.DefaultNamespace,
		"--self-managed-certs", "--cert-extra-dns-names=localhost", "--cert-dir=" + certs,
		"--webhook-host=127.0.0.1", "--webhook-port=" + w.Port,
		"--health-probe-bind-address=" + w.Health,
		"--metrics-bind-address=" + w.Metrics,
		"--leader-elect",
	}, opts.Args...)
	w.Process, err = Start(name, bin, env, filepath.Join(dir, "webhook.log"), args...)
	return w, err
}

// WaitReady waits until /readyz answers: the caches have synced and a serving
// certificate is in place.
func (w *Webhook) WaitReady(timeout time.Duration) error {
	return w.WaitFor("to be ready (/readyz)", timeout, func(ctx context.Context) error {
		return HTTPOK(ctx, "http://"+w.Health+"/readyz")
	})
}
