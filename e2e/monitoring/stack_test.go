package monitoring

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

// startTimeout bounds a binary's start, cache sync included, on a loaded machine.
const startTimeout = 3 * time.Minute

// node is the one node the scenario's pods run on.
const node = "node-1"

// stack is a control plane with nicpool-webhook (registered with the API server, as
// the manifests register it) and one node's nicpool-ipamd, each serving metrics. The
// scenario stops and replaces them: webhook is nil while no webhook is scraped at all.
type stack struct {
	env *testenv.Env
	bin binaries.Set
	// webhookPort is where every webhook replica the scenario starts serves
	// admission: the webhook configurations point at it.
	webhookPort string
	webhook     *target
	ipamd       *target
	// ipamdUnscraped: Prometheus has no ipamd target (its PodMonitor not selected)
	// while ipamd runs.
	ipamdUnscraped bool
	socket         *api.Client
	// running are the pods of appNamespace that run: their ADD succeeded and they
	// were not removed (what kube-state-metrics would report as phase Running).
	running map[string]bool
}

// target is a running binary whose metrics a Prometheus would scrape, with the
// target labels the Prometheus Operator would give it (namespace, pod, ...).
type target struct {
	metrics string // URL of /metrics
	health  string // URL of /readyz
	labels  map[string]string
	proc    *binaries.Process
}

// stopped reports whether the target's process was stopped: scraping it fails, as
// it would for a Prometheus.
func (tg *target) stopped() bool { return tg.proc.Alive() != nil }

func startStack(t *testing.T) *stack {
	t.Helper()
	bin, err := binaries.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
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
	// The node reports Ready, as a kubelet does: the garbage collector keeps the
	// addresses of a terminating pod on a node that is not Ready.
	n := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	if err := env.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	port, err := binaries.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ = strings.Cut(port, ":")
	m, v := configs.Configurations(configs.Options{})
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = loopback(port, m.Webhooks[i].ClientConfig)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = loopback(port, v.Webhooks[i].ClientConfig)
	}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, v); err != nil {
		t.Fatal(err)
	}
	s := &stack{env: env, bin: bin, webhookPort: port, running: map[string]bool{}}
	s.webhook = s.startWebhook(t, "nicpool-webhook-6d9c7b5f4-x2x7q", true)
	s.ipamd, s.socket = startIpamd(t, env, bin.Ipamd)
	return s
}

func stopAtCleanup(t *testing.T, p *binaries.Process) {
	t.Cleanup(func() { p.Stop(30 * time.Second) })
}

// startWebhook runs a nicpool-webhook replica (pod names it) as deployed, with
// self-managed certificates, its garbage collector tuned to act within seconds, on
// the webhook port the configurations point at (on loopback: no Service here), with
// more flags when given. leads says whether it is to be elected: it then waits for
// the caBundle to be injected too.
func (s *stack) startWebhook(t *testing.T, pod string, leads bool, more ...string) *target {
	t.Helper()
	w, err := binaries.StartWebhook(s.bin.Webhook, s.env.Kubeconfig, t.TempDir(), binaries.WebhookOptions{
		Name: "nicpool-webhook " + pod, Port: s.webhookPort,
		Args: append([]string{"--gc-interval=2s", "--gc-min-age=1s", "--gc-terminating-grace=1s"}, more...),
	})
	if err != nil {
		t.Fatal(err)
	}
	p, health, metrics := w.Process, w.Health, w.Metrics
	stopAtCleanup(t, p)
	err = p.WaitFor("to be ready and its CA injected", startTimeout, func(ctx context.Context) error {
		if err := binaries.HTTPOK(ctx, "http://"+health+"/readyz"); err != nil {
			return err
		}
		if !leads {
			return nil
		}
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := s.env.Client.Get(ctx, client.ObjectKey{Name: configs.ValidatingName}, got); err != nil {
			return err
		}
		for _, w := range got.Webhooks {
			if len(w.ClientConfig.CABundle) == 0 {
				return errors.New("no caBundle yet")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &target{metrics: "http://" + metrics + "/metrics", health: "http://" + health + "/readyz", proc: p, labels: map[string]string{
		"job": "nicpool-webhook", "service": "nicpool-webhook", "namespace": configs.DefaultNamespace,
		"pod": pod, "container": "webhook", "endpoint": "metrics", "instance": metrics,
	}}
}

func loopback(port string, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	url := "https://localhost:" + port + *cc.Service.Path
	return admissionregistrationv1.WebhookClientConfig{URL: &url}
}

// startIpamd runs the node's nicpool-ipamd as deployed and waits until its caches
// are synced.
func startIpamd(t *testing.T, env *testenv.Env, bin string) (*target, *api.Client) {
	t.Helper()
	// A unix socket's path must stay short; t.TempDir() under a long test name may not.
	run, err := os.MkdirTemp("", "nicpool-ipamd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(run) })
	d, err := binaries.StartIpamd(bin, env.Kubeconfig, node, run)
	if err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, d.Process)
	if err := d.WaitReady(startTimeout); err != nil {
		t.Fatal(err)
	}
	// WaitReady may have started it again on other ports.
	return &target{metrics: "http://" + d.Metrics + "/metrics", health: "http://" + d.Health + "/readyz", proc: d.Process, labels: map[string]string{
		"job": configs.DefaultNamespace + "/nicpool-ipamd", "namespace": configs.DefaultNamespace,
		"pod": ipamdPod, "container": "ipamd", "endpoint": "metrics", "node": node, "instance": d.Metrics,
	}}, api.NewClient(d.Socket, 30*time.Second)
}

// ipamdPod is the name the ipamd target and kube-state-metrics give the node's
// ipamd pod.
const ipamdPod = "nicpool-ipamd-k4x9p"
