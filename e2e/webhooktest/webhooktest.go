// Package webhooktest starts a real control plane with nicpool's webhook
// configurations and ValidatingAdmissionPolicies (exactly as configs builds them)
// registered in it, and serves the webhooks from a controller-runtime manager in the
// test process, as cmd/nicpool-webhook does.
package webhooktest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/testenv"
	nicwebhook "github.com/nicpool/nicpool/webhook"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// Env is a control plane with nicpool's webhooks served in process.
type Env struct {
	*testenv.Env
	// Nicpool writes as nicpool's webhook service account: the one identity besides
	// ipamd that the policies let write SpiderEndpoints and pool status.
	Nicpool    client.Client
	Views      *views.All
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
	cancel     context.CancelFunc
	done       chan error
}

// Start brings up the control plane, registers configs.Configurations(opts) with it
// and serves every nicpool webhook until Stop.
func Start(opts configs.Options) (*Env, error) {
	return StartWith(opts, nicwebhook.Options{})
}

// StartWith is Start with the webhook's own options (its flags) set to adm.
func StartWith(opts configs.Options, adm nicwebhook.Options) (*Env, error) {
	m, v := configs.Configurations(opts)
	env, err := testenv.Start(testenv.Options{
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{m.DeepCopy()},
			ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{v.DeepCopy()},
		},
		// Multus' CRD, whose networks admission reads.
		ExtraCRDs: []*apiextensionsv1.CustomResourceDefinition{cluster.NetworkAttachmentDefinitionCRD()},
	})
	if err != nil {
		return nil, err
	}
	if err := nadv1.AddToScheme(env.Scheme); err != nil {
		_ = env.Stop()
		return nil, err
	}
	wio := &env.Env.WebhookInstallOptions
	if err := bindServiceAccounts(env, opts); err != nil {
		_ = env.Stop()
		return nil, err
	}
	// The webhook's manager acts as its service account, as in its Deployment: the
	// policies let it write pool status.
	mgr, err := ctrl.NewManager(impersonating(env.Config, ServiceAccount(opts, configs.WebhookServiceAccount), nil), manager.Options{
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
	all, err := nicwebhook.Setup(ctx, mgr, adm)
	if err != nil {
		cancel()
		_ = env.Stop()
		return nil, err
	}
	e := &Env{Env: env, Views: all, Mutating: m, Validating: v, cancel: cancel, done: make(chan error, 1)}
	if e.Nicpool, err = e.As(ServiceAccount(opts, configs.WebhookServiceAccount), nil); err != nil {
		_ = env.Stop()
		cancel()
		return nil, err
	}
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
			return false, nil //nolint:nilerr // not listening yet: polled again
		}
		_ = conn.Close()
		return all.Synced(), nil
	})
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("webhook server at %s did not come up: %w", addr, err)
	}
	if err := e.installPolicies(ctx, opts); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// bindServiceAccounts lets nicpool's service accounts do anything RBAC allows: the
// manifests' RBAC is tested in manifests/, here only the policies decide.
func bindServiceAccounts(env *testenv.Env, opts configs.Options) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nicpool-test-service-accounts"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
	}
	for _, name := range []string{configs.WebhookServiceAccount, configs.IpamdServiceAccount} {
		ns, sa, _ := strings.Cut(strings.TrimPrefix(ServiceAccount(opts, name), "system:serviceaccount:"), ":")
		crb.Subjects = append(crb.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa})
	}
	if err := env.Client.Create(context.Background(), crb); err != nil {
		return fmt.Errorf("bind nicpool's service accounts: %w", err)
	}
	return nil
}

// installPolicies creates configs.Policies and waits until the API server enforces
// them: an admin's SpiderEndpoint is refused, and so is a pod with a SpiderSubnet
// annotation (the pod policy is created last).
func (e *Env) installPolicies(ctx context.Context, opts configs.Options) error {
	policies, bindings := configs.Policies(opts)
	for i := range policies {
		for _, obj := range []client.Object{policies[i], bindings[i]} {
			if err := e.Client.Create(ctx, obj); err != nil {
				return fmt.Errorf("create %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
			}
		}
	}
	ep := &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "policy-probe"}, Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: "probe"}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "policy-probe", Annotations: map[string]string{configs.SpiderSubnetAnnotations[0]: "probe"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return e.Client.Create(ctx, ep.DeepCopy(), client.DryRunAll) != nil && e.Client.Create(ctx, pod.DeepCopy(), client.DryRunAll) != nil, nil
	})
	if err != nil {
		return fmt.Errorf("nicpool's admission policies not enforced: %w", err)
	}
	return nil
}

// ServiceAccount returns the user name of a service account of nicpool's namespace.
func ServiceAccount(opts configs.Options, name string) string {
	ns := opts.Namespace
	if ns == "" {
		ns = configs.DefaultNamespace
	}
	return "system:serviceaccount:" + ns + ":" + name
}

// As returns a client that acts as user (impersonation by the admin), a service
// account's groups included, with the given user extra (for ipamd:
// configs.NodeNameExtra, which a token bound to its pod carries).
func (e *Env) As(user string, extra map[string][]string) (client.Client, error) {
	return client.New(impersonating(e.Config, user, extra), client.Options{Scheme: e.Scheme})
}

func impersonating(admin *rest.Config, user string, extra map[string][]string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: extra}
	if sa, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		ns, _, _ := strings.Cut(sa, ":")
		cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	return cfg
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

// Main is the TestMain of a package whose tests share one webhook environment: it
// starts it with opts into *env, runs the tests and stops it (see testenv.Main).
func Main(m *testing.M, env **Env, opts configs.Options) {
	MainWith(m, env, opts, nicwebhook.Options{})
}

// MainWith is Main with the webhook's own options (its flags) set to adm.
func MainWith(m *testing.M, env **Env, opts configs.Options, adm nicwebhook.Options) {
	testenv.Main(m, func(s *testenv.Setup) (err error) {
		if *env, err = StartWith(opts, adm); err != nil {
			return err
		}
		s.Defer((*env).Stop)
		return nil
	})
}
