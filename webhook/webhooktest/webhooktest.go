// Package webhooktest starts a real control plane with nicpool's webhook
// configurations (exactly as configs builds them) registered in it, and serves them
// from a controller-runtime manager in the test process, as cmd/nicpool-webhook does.
package webhooktest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/nicpool/nicpool/e2e/testenv"
	nicwebhook "github.com/nicpool/nicpool/webhook"
	"github.com/nicpool/nicpool/webhook/configs"
	"github.com/nicpool/nicpool/webhook/lookup"
)

// Env is a control plane with nicpool's webhooks served in process.
type Env struct {
	*testenv.Env
	Views      *lookup.Views
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
	cancel     context.CancelFunc
	done       chan error
}

// Start brings up the control plane, registers configs.Configurations(opts) with it
// and serves every nicpool webhook until Stop.
func Start(opts configs.Options) (*Env, error) {
	m, v := configs.Configurations(opts)
	env, err := testenv.Start(testenv.Options{WebhookInstallOptions: envtest.WebhookInstallOptions{
		MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{m.DeepCopy()},
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{v.DeepCopy()},
	}})
	if err != nil {
		return nil, err
	}
	wio := &env.Env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(env.Config, manager.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}),
	})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	views, err := nicwebhook.Setup(ctx, mgr)
	if err != nil {
		cancel()
		_ = env.Stop()
		return nil, err
	}
	e := &Env{Env: env, Views: views, Mutating: m, Validating: v, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- mgr.Start(ctx) }()
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-e.done:
			return false, fmt.Errorf("manager stopped: %w", err)
		default:
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe of a local test server
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return views.Synced(), nil
	})
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("webhook server at %s did not come up: %w", addr, err)
	}
	return e, nil
}

// Stop stops the manager and the control plane.
func (e *Env) Stop() error {
	e.cancel()
	var errs []error
	select {
	case err := <-e.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	case <-time.After(30 * time.Second):
		errs = append(errs, errors.New("manager did not stop"))
	}
	errs = append(errs, e.Env.Stop())
	return errors.Join(errs...)
}

// Namespace creates a namespace with labels.
func (e *Env) Namespace(ctx context.Context, name string, labels map[string]string) error {
	return e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}
