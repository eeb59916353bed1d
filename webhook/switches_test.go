package webhook_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/webhooktest"
	"github.com/nicpool/nicpool/version"
	nicwebhook "github.com/nicpool/nicpool/webhook"
	"github.com/nicpool/nicpool/webhook/admission/configs"
	"github.com/nicpool/nicpool/webhook/admission/pool"
	"github.com/nicpool/nicpool/webhook/admission/views"
)

// env is a control plane whose webhook runs with spiderpool-conf's enableIPv6: false
// and enableStatefulSet: false (--enable-ipv6=false --enable-stateful-set=false).
var env *webhooktest.Env

func TestMain(m *testing.M) {
	sw := ipamconf.Switches{NoIPv6: true, NoStatefulSet: true}
	webhooktest.MainWith(m, &env, configs.Options{}, nicwebhook.Options{Switches: sw})
}

// What the webhook decides from the switches, through the API server: a pool or a
// reservation of the disabled family is refused naming the flag (as spiderpool's
// webhook refuses it), a pod's IPv6 pools are left out of its resolved selection (the
// pod is admitted though its IPv6 pool does not exist, as spiderpool admits it), and a
// StatefulSet's pod is stamped to take no endpoint over, though one of its name exists.
func TestSwitches(t *testing.T) {
	ctx := context.Background()
	t.Run("IPv6 pool refused", func(t *testing.T) {
		err := env.Client.Create(ctx, fixtures.Pool("sw-v6", "fd00:41::/64", []string{"fd00:41::1-fd00:41::9"}))
		mustContain(t, err, "spec.ipVersion", "IPv6 is disabled (--enable-ipv6=false")
		// The enabled family is served as ever.
		fixtures.CreatePool(t, env.Client, fixtures.Pool("sw-v4", "10.41.0.0/24", []string{"10.41.0.1-10.41.0.9"}))
	})
	t.Run("a version probe of an IPv6 pool answered though refused", func(t *testing.T) {
		cfg := rest.CopyConfig(env.Config)
		warnings := &warningList{}
		cfg.WarningHandler = warnings
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		probe := fixtures.Pool("sw-probe", "fd00:42::/64", []string{"fd00:42::1"})
		probe.Annotations = map[string]string{pool.VersionProbeAnnotation: ""}
		mustContain(t, c.Create(ctx, probe, client.DryRunAll), "IPv6 is disabled")
		answered := false
		for _, w := range warnings.list() {
			if i, ok := pool.ParseVersionAnswer(w); ok && i == version.Get() {
				answered = true
			}
		}
		if !answered {
			t.Errorf("warnings %q answer no version probe; want this build %v", warnings.list(), version.Get())
		}
	})
	t.Run("IPv6 reservation refused", func(t *testing.T) {
		err := env.Client.Create(ctx, &v2beta1.SpiderReservedIP{ObjectMeta: metav1.ObjectMeta{Name: "sw-v6"}, Spec: v2beta1.ReservedIPSpec{IPs: []string{"fd00:41::5"}}})
		mustContain(t, err, "spec.ipVersion", "IPv6 is disabled (--enable-ipv6=false")
	})
	t.Run("a pod's IPv6 pools left out", func(t *testing.T) {
		if err := env.Namespace(ctx, "sw", nil); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, "pool sw-v4 in the webhook's view", func() bool {
			found := false
			env.Views.Pools.Range(func(p *views.Pool) bool { found = found || p.Name == "sw-v4"; return !found })
			return found
		})
		p := pod("dual", map[string]string{annotations.IPPool: `{"ipv4":["sw-v4"],"ipv6":["sw-v6"]}`})
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatalf("a pod naming an IPv6 pool with IPv6 disabled is refused: %v", err)
		}
		if got, want := p.Annotations[annotations.IPPools], `[{"interface":"eth0","ipv4":["sw-v4"]}]`; got != want {
			t.Errorf("resolved %s = %s, want %s", annotations.IPPools, got, want)
		}
	})
	t.Run("StatefulSet pod not stamped", func(t *testing.T) {
		labels := map[string]string{"app": "db"}
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "sw", Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod("x", nil).Spec},
			},
		}
		if err := env.Client.Create(ctx, set); err != nil {
			t.Fatal(err)
		}
		p := pod("db-0", map[string]string{annotations.IPPool: `{"ipv4":["sw-v4"]}`})
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: set.UID, Controller: ptr.To(true)}}
		// An endpoint of its name, which the pod would take over with the switch on,
		// and a stamp its author wrote.
		ep := &v2beta1.SpiderEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: "sw", Name: "db-0"},
			Status: v2beta1.WorkloadEndpointStatus{
				Current: v2beta1.PodIPAllocation{UID: "old-pod-uid", Node: "node-1", IPs: []v2beta1.IPAllocationDetail{
					{Interface: "eth0", IPv4: ptr.To("10.41.0.3/24"), IPv4Pool: ptr.To("sw-v4")}}},
				OwnerControllerType: "StatefulSet", OwnerControllerName: "db",
			},
		}
		if err := env.Nicpool.Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
		fixtures.Eventually(t, "endpoint sw/db-0 in the webhook's view", func() bool { return env.Views.Endpoints.Get("sw", "db-0") != nil })
		p.Annotations[annotations.EndpointUID] = string(ep.UID)
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if v := p.Annotations[annotations.EndpointUID]; v != annotations.NoEndpoint {
			t.Errorf("StatefulSet pod stamped %s=%q with StatefulSet addresses off; want %q (no endpoint to take over)", annotations.EndpointUID, v, annotations.NoEndpoint)
		}
	})
}

// warningList keeps the warnings the API server relays.
type warningList struct {
	mu sync.Mutex
	w  []string
}

func (l *warningList) HandleWarningHeader(_ int, _ string, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w = append(l.w, text)
}

func (l *warningList) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.w)
}

func pod(name string, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "sw", Name: name, Annotations: ann},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}
}

func mustContain(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want a denial with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q:\n%v", w, err)
		}
	}
}
