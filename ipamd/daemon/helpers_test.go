package daemon_test

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) (err error) {
		env, err = s.Start(testenv.Options{})
		return err
	})
}

// startDaemon starts an in-process ipamd for node; it stops when the test ends or
// when the returned cancel is called (a crash, for the caches and the committer).
func startDaemon(t testing.TB, node string) (*daemon.Daemon, context.CancelFunc) {
	t.Helper()
	return startDaemonWith(t, node, nil)
}

// startDaemonWith is startDaemon with options changed by with (nil: as deployed).
func startDaemonWith(t testing.TB, node string, with func(*daemon.Options)) (*daemon.Daemon, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // in-process nodes share one process: no client-side throttling
	// A dialer of its own gives each node its own connections, as separate processes
	// have (client-go shares one transport between identical configs otherwise).
	var dialer net.Dialer
	cfg.Dial = dialer.DialContext
	cfg.UserAgent = "nicpool-ipamd/" + node
	log := logr.Discard()
	if tt, ok := t.(*testing.T); ok && os.Getenv("IPAMD_TEST_LOG") != "" {
		log = testr.New(tt)
	}
	opts := daemon.Options{NodeName: node, Scheme: env.Scheme, Log: log}
	if with != nil {
		with(&opts)
	}
	d, err := daemon.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return d, cancel
}

func ptr[T any](v T) *T { return &v }

func createNamespace(t testing.TB, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// records is what a pool's addresses are allocated to, read through the ledger's
// listing (its blocks) from the API server.
func records(t testing.TB, pool string) v2beta1.PoolIPAllocations {
	t.Helper()
	recs, err := ledger.PoolRecords(context.Background(), env.Client, pool)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// recount runs what the webhook's count owner runs for a pool, and returns the pool
// with its counts.
func recount(t testing.TB, pool string) *v2beta1.SpiderIPPool {
	t.Helper()
	l := ledger.New(ledger.Options{Cache: env.Client, Client: env.Client, Fresh: env.Client, Log: logr.Discard()})
	if err := l.Recount(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return fixtures.GetPool(t, env.Client, pool)
}

func getEndpoint(t testing.TB, ns, name string) *v2beta1.SpiderEndpoint {
	t.Helper()
	ep := &v2beta1.SpiderEndpoint{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ep)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

type podOpt func(*corev1.Pod)

func withAnnotations(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func ownedBy(sts *appsv1.StatefulSet) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr(true)}}
	}
}

func createPod(t testing.TB, ns, name, node string, opts ...podOpt) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	for _, o := range opts {
		o(p)
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func deletePod(t testing.TB, p *corev1.Pod) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func createStatefulSet(t testing.TB, ns, name string, replicas int32) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}},
		},
	}
	if err := env.Client.Create(context.Background(), sts); err != nil {
		t.Fatal(err)
	}
	return sts
}

func addReq(p *corev1.Pod, iface, container string) *api.AllocateRequest {
	return &api.AllocateRequest{
		Attachment: api.Attachment{ContainerID: container, Interface: iface},
		Pod:        api.Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)},
		Network:    api.NetworkConfig{Name: "net-" + iface},
	}
}

func delReq(p *corev1.Pod, iface, container string) *api.ReleaseRequest {
	return &api.ReleaseRequest{
		Attachment: api.Attachment{ContainerID: container, Interface: iface},
		Pod:        api.Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)},
		Network:    api.NetworkConfig{Name: "net-" + iface},
	}
}

// checkInvariants ends every test: I1–I3 always, I4 when converged.
func checkInvariants(t testing.TB, converged bool) {
	t.Helper()
	if err := invariants.Check(context.Background(), env.Client, invariants.Options{Converged: converged}); err != nil {
		t.Errorf("invariants violated:\n%v", err)
	}
}

// addresses returns the addresses of an ADD answer.
func addresses(r *api.AllocateResponse) []string {
	var out []string
	for _, ip := range r.IPs {
		out = append(out, ip.Address)
	}
	return out
}

// parallel runs f(i) for i in [0, n) at once and waits.
// parallel runs f(0) … f(n-1) at once. A call that ends the test (t.Fatal ends only
// its own goroutine) ends it here, once all have returned, so that no later step reads
// what that call did not make.
func parallel(t testing.TB, n int, f func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	var fatal atomic.Bool
	for i := range n {
		wg.Go(func() {
			returned := false
			defer func() {
				if !returned {
					fatal.Store(true)
				}
			}()
			f(i)
			returned = true
		})
	}
	wg.Wait()
	if fatal.Load() {
		t.FailNow()
	}
}

type v2beta1SpiderIPPool = v2beta1.SpiderIPPool

func cachedEndpoints(t testing.TB, d *daemon.Daemon, ns string) int {
	var list v2beta1.SpiderEndpointList
	if err := d.Cache.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}
