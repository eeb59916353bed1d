package manifests_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/nicpool/nicpool/certs"
	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/ipamd/ledger"
	nicwebhook "github.com/nicpool/nicpool/webhook"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

// rbacOnly keeps the objects that grant permissions (and where they live), so the
// components can run under them without the webhook configurations intercepting
// the test's own writes.
func localURL(port int, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
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

var skipNameValidation = true

// refusals records every request of a component that the API server refused with
// 403 Forbidden: a component that works under its RBAC has none.
type refusals struct {
	mu   sync.Mutex
	seen []string
}

func (r *refusals) watch(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				r.mu.Lock()
				r.seen = append(r.seen, req.Method+" "+req.URL.Path)
				r.mu.Unlock()
			}
			return resp, err
		})
	})
	return cfg
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// nodeToken returns a config that authenticates with a token of nicpool's service
// account name bound to a Node (created here), as the token projected into a pod
// on that node: the API server adds the node's name to the user.
func nodeToken(t *testing.T, e *testenv.Env, name, node string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(e.Config)
	n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: e.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: e.Config.CAData}, BearerToken: tr.Status.Token}
}

func rbacOnly(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	keep := []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if slices.Contains(keep, o.GetKind()) {
			out = append(out, o)
		}
	}
	return out
}

// ipamd and the webhook, started with exactly the permissions the rendered RBAC of
// the self-managed overlay grants their ServiceAccounts, do their whole job: the
// webhook wins leader election in its namespace, generates its certificates into its
// Secret, injects the CA into nicpool's webhook configurations and admits pools, pods
// and endpoints over TLS (the configurations are the rendered ones, pointed at this
// process); it puts its finalizer on the pool and, once the pod is gone, releases the
// address and deletes the endpoint. ipamd, with a token bound to its node (as its
// DaemonSet pod's), syncs its caches and allocates (pool status, SpiderEndpoint,
// events) under the admission policies.
func TestComponentsWorkUnderTheirServiceAccounts(t *testing.T) {
	e := controlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	objs := render(t, "overlays/self-managed")
	applyAccess(t, e, "overlays/self-managed")

	const node, ns, podName, poolName = "rbac-node", "rbac-tenant", "app-0", "rbac-v4"

	// The webhook, wired as cmd/nicpool-webhook wires it with --self-managed-certs
	// and --leader-elect.
	port := freePort(t)
	keeper := certs.NewKeeper()
	webhookRefused, ipamdRefused := &refusals{}, &refusals{}
	t.Cleanup(func() {
		// After everything stopped (cleanups run last first: this one runs last).
		if r := webhookRefused.list(); len(r) > 0 {
			t.Errorf("the API server refused the webhook: %v", r)
		}
		if r := ipamdRefused.list(); len(r) > 0 {
			t.Errorf("the API server refused ipamd: %v", r)
		}
	})
	mgr, err := ctrl.NewManager(webhookRefused.watch(serviceAccount(e, "nicpool-webhook")), ctrl.Options{
		Scheme:                        nicwebhook.NewScheme(),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "nicpool-webhook",
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		// Two tests of this package each run a webhook in this one process.
		Controller: ctrlconfig.Controller{SkipNameValidation: &skipNameValidation},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: "127.0.0.1", Port: port, CertDir: t.TempDir(), TLSOpts: []func(*tls.Config){keeper.TLSOption},
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Setup(ctx, mgr, keeper, certs.Options{
		Namespace: namespace, SecretName: "nicpool-webhook-cert",
		DNSName: "nicpool-webhook.nicpool-system.svc", ExtraDNSNames: []string{"localhost"},
		MutatingWebhooks: []string{configs.MutatingName}, ValidatingWebhooks: []string{configs.ValidatingName},
		LeaderElection: true,
		// Forced short validity, so that rotation (a Secret update under the
		// webhook's RBAC) happens within the test.
		CertValidity: 30 * time.Second, Lookahead: 24 * time.Second, CheckInterval: time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := nicwebhook.Setup(ctx, mgr, nicwebhook.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := gc.SetupWithManager(mgr, gc.Options{MinAge: ptr.To(time.Duration(0)), TerminatingGrace: ptr.To(time.Duration(0)), Debounce: 50 * time.Millisecond, Interval: time.Second}); err != nil {
		t.Fatal(err)
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-mgrDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("webhook manager: %v", err)
		}
	})

	// The rendered webhook configurations, calling this process instead of the
	// Service; removed before the webhook stops (cleanups run last first).
	m := object[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", configs.MutatingName)
	v := object[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", configs.ValidatingName)
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig = localURL(port, m.Webhooks[i].ClientConfig)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig = localURL(port, v.Webhooks[i].ClientConfig)
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

	// ipamd, as its DaemonSet runs it: Start returns once its caches synced.
	sock := filepath.Join(t.TempDir(), "ipamd.sock")
	d, err := daemon.New(ipamdRefused.watch(nodeToken(t, e, "nicpool-ipamd", node)), daemon.Options{NodeName: node, SocketPath: sock, Scheme: e.Scheme, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(ctx); err != nil {
		t.Fatalf("ipamd under its ServiceAccount: %v", err)
	}

	select {
	case <-mgr.Elected():
	case <-time.After(time.Minute):
		t.Fatal("the webhook did not win leader election with its Role")
	}
	fixtures.Eventually(t, "the CA in the Secret and in both webhook configurations", func(ctx context.Context) (bool, error) {
		secret := &corev1.Secret{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "nicpool-webhook-cert"}, secret); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		ca := secret.Data["ca.crt"]
		gotM := &admissionregistrationv1.MutatingWebhookConfiguration{}
		gotV := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: configs.MutatingName}, gotM); err != nil {
			return false, err
		}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: configs.ValidatingName}, gotV); err != nil {
			return false, err
		}
		injected := len(ca) > 0
		for _, w := range gotM.Webhooks {
			injected = injected && bytes.Equal(w.ClientConfig.CABundle, ca)
		}
		for _, w := range gotV.Webhooks {
			injected = injected && bytes.Equal(w.ClientConfig.CABundle, ca)
		}
		return injected && keeper.Current() != nil, nil
	})

	// A second replica, which does not lead while the first holds the lease: it
	// serves the same certificate, read from the Secret the leader filled.
	replica := certs.NewKeeper()
	replicaMgr, err := ctrl.NewManager(webhookRefused.watch(serviceAccount(e, "nicpool-webhook")), ctrl.Options{
		Scheme:                        nicwebhook.NewScheme(),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "nicpool-webhook",
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    ctrlconfig.Controller{SkipNameValidation: &skipNameValidation},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Setup(ctx, replicaMgr, replica, certs.Options{
		Namespace: namespace, SecretName: "nicpool-webhook-cert",
		DNSName: "nicpool-webhook.nicpool-system.svc", ExtraDNSNames: []string{"localhost"},
		MutatingWebhooks: []string{configs.MutatingName}, ValidatingWebhooks: []string{configs.ValidatingName},
		LeaderElection: true, RotatorName: "nicpool-cert-rotator-replica",
	}); err != nil {
		t.Fatal(err)
	}
	replicaCtx, stopReplica := context.WithCancel(ctx)
	replicaDone := make(chan error, 1)
	go func() { replicaDone <- replicaMgr.Start(replicaCtx) }()
	fixtures.Eventually(t, "the second replica serves the leader's certificate", func(context.Context) (bool, error) {
		return replica.Current() != nil && replica.Current().Equal(keeper.Current()), nil
	})
	stopReplica()
	if err := <-replicaDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("second replica's manager: %v", err)
	}

	// The admin creates a pool (defaulted and validated by the webhook: retried
	// until the webhook server has loaded its certificate), a namespace and a pod on
	// ipamd's node that selects the pool in the single-NIC form.
	fixtures.Eventually(t, "a pool admitted through the webhook", func(ctx context.Context) (bool, error) {
		pool := fixtures.Pool(poolName, "10.77.0.0/24", []string{"10.77.0.10-10.77.0.20"})
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
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName, Annotations: map[string]string{
			annotations.IPPool: `{"ipv4":["` + poolName + `"]}`,
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "pause"}}},
	}
	if err := e.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The mutating webhook resolved the selection to a named interface.
	resolved, errs := annotations.ParsePoolSelections(pod.Annotations[annotations.IPPools])
	if len(errs) > 0 || len(resolved) != 1 || resolved[0].Interface != "eth0" {
		t.Fatalf("the webhook did not resolve the pod's pools: %q (%v)", pod.Annotations[annotations.IPPools], errs.ToAggregate())
	}

	// CNI ADD through ipamd's socket, until its cache has seen the pod.
	ipamd := api.NewClient(sock, 10*time.Second)
	req := &api.AllocateRequest{
		Attachment: api.Attachment{ContainerID: "c-1", Interface: "eth0"},
		Pod:        api.Pod{Namespace: ns, Name: podName, UID: string(pod.UID)},
		Network:    api.NetworkConfig{Name: "macvlan"},
	}
	var resp *api.AllocateResponse
	fixtures.Eventually(t, "allocation through ipamd", func(ctx context.Context) (bool, error) {
		r, err := ipamd.Allocate(ctx, req)
		if err != nil {
			t.Logf("allocate (retrying): %v", err)
			return false, nil
		}
		resp = r
		return true, nil
	})
	if len(resp.IPs) != 1 {
		t.Fatalf("want one address, got %+v", resp.IPs)
	}
	addr := netip.MustParsePrefix(resp.IPs[0].Address).Addr().String()
	p := &v2beta1.SpiderIPPool{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: poolName}, p); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.PoolRecords(ctx, e.Client, poolName)
	if err != nil {
		t.Fatal(err)
	}
	if got := recs[addr]; got.Pod != ns+"/"+podName || got.PodUID != string(pod.UID) || got.Interface != "eth0" {
		t.Errorf("the pool's blocks record %s as %+v", addr, got)
	}
	ep := &v2beta1.SpiderEndpoint{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, ep); err != nil {
		t.Fatalf("ipamd wrote no SpiderEndpoint: %v", err)
	}

	// Pods keep being admitted while the serving certificate rotates: none is denied.
	first := keeper.Current()
	admitted := 0
	fixtures.Eventually(t, "a rotated serving certificate", func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rotation-", Annotations: map[string]string{
				annotations.IPPool: `{"ipv4":["` + poolName + `"]}`,
			}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "pause"}}},
		}
		if err := e.Client.Create(ctx, p); err != nil {
			return false, fmt.Errorf("pod denied during rotation: %w", err)
		}
		admitted++
		if err := e.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			return false, err
		}
		return !keeper.Current().Equal(first), nil
	})
	t.Logf("%d pods admitted while the certificate rotated", admitted)

	// The pod goes away without a CNI DEL: the webhook's garbage collector releases
	// its address and deletes its endpoint.
	if err := e.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "the garbage collector releases the address and deletes the endpoint", func(ctx context.Context) (bool, error) {
		recs, err := ledger.PoolRecords(ctx, e.Client, poolName)
		if err != nil {
			return false, err
		}
		_, held := recs[addr]
		err = e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, &v2beta1.SpiderEndpoint{})
		return !held && apierrors.IsNotFound(err), nil
	})

	// Deleting the empty pool: the webhook's finalizer controller lets it go.
	if err := e.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "the pool finalizer releases the deleted pool", func(ctx context.Context) (bool, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Name: poolName}, &v2beta1.SpiderIPPool{})
		return apierrors.IsNotFound(err), nil
	})
}
