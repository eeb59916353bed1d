package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/webhook/controller/capacity"
)

// gauges returns the pool gauges the metrics endpoint serves now, "name{pool}" → value.
func gauges(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" && m.GetGauge() != nil {
					out[fmt.Sprintf("%s{%s}", f.GetName(), l.GetValue())] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

func waitGauges(t *testing.T, what string, ok func(map[string]float64) bool) {
	t.Helper()
	fixtures.Eventually(t, what, func() (bool, string) {
		g := gauges(t)
		return ok(g), fmt.Sprintf("gauges %v", g)
	})
}

// The elected manager reports each pool's capacity from the pool as the API server
// holds it, follows its changes, forgets a deleted pool, and stops reporting when it
// stops leading.
func TestLeaderReportsPoolCapacity(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	env := testenv.StartT(t, testenv.Options{})
	ctx := context.Background()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                        env.Scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "nicpool-capacity-test",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := capacity.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	stopped := false
	stopManager := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
	}
	defer stopManager()

	p := &v2beta1.SpiderIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: "capacity-a"},
		Spec:       v2beta1.IPPoolSpec{Subnet: "10.30.0.0/24", IPs: []string{"10.30.0.1-10.30.0.20"}, Gateway: ptr.To("10.30.0.1")},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	uncounted := fixtures.Pool(
		"capacity-uncounted",
		"10.31.0.0/24", []string{"10.31.0.1-10.31.0.20"})
	if err := env.Client.Create(ctx, uncounted); err != nil {
		t.Fatal(err)
	}
	p.Status = v2beta1.IPPoolStatus{AllocatedIPCount: ptr.To[int64](4), TotalIPCount: ptr.To[int64](19)}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitGauges(t, "the counted pool's gauges", func(g map[string]float64) bool {
		return g["nicpool_pool_allocated_ips{capacity-a}"] == 4 && g["nicpool_pool_total_ips{capacity-a}"] == 19 &&
			g["nicpool_pool_free_ips{capacity-a}"] == 15 && g["nicpool_pool_reserved_ips{capacity-a}"] == 1 &&
			g["nicpool_pool_enabled{capacity-a}"] == 1
	})
	if g := gauges(t); len(g) != 5 {
		t.Errorf("gauges %v: want the 5 of capacity-a only (capacity-uncounted has no totalIPCount yet)", g)
	}
	if v := publisher(t); v != 1 {
		t.Errorf("nicpool_capacity_publisher = %v while the manager leads, want 1", v)
	}

	p.Status.AllocatedIPCount = ptr.To[int64](19)
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitGauges(t, "the pool to read exhausted", func(g map[string]float64) bool {
		return g["nicpool_pool_free_ips{capacity-a}"] == 0 && g["nicpool_pool_allocated_ips{capacity-a}"] == 19
	})
	p.Spec.Disable = ptr.To(true)
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitGauges(t, "the disabled pool to read disabled", func(g map[string]float64) bool {
		return g["nicpool_pool_enabled{capacity-a}"] == 0
	})

	if err := env.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitGauges(t, "the deleted pool's series to go", func(g map[string]float64) bool {
		_, ok := g["nicpool_pool_total_ips{capacity-a}"]
		return !ok
	})

	uncounted.Status.TotalIPCount = ptr.To[int64](20)
	if err := env.Client.Status().Update(ctx, uncounted); err != nil {
		t.Fatal(err)
	}
	waitGauges(t, "the second pool, once counted", func(g map[string]float64) bool {
		return g["nicpool_pool_free_ips{capacity-uncounted}"] == 20
	})
	stopManager()
	if g := gauges(t); len(g) != 0 {
		t.Errorf("a manager that no longer leads still reports %v", g)
	}
	if v := publisher(t); v != 0 {
		t.Errorf("nicpool_capacity_publisher = %v once the manager no longer leads, want 0", v)
	}
}

// publisher reads nicpool_capacity_publisher from the metrics endpoint's registry.
func publisher(t *testing.T) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() == "nicpool_capacity_publisher" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("nicpool_capacity_publisher is not registered")
	return 0
}
