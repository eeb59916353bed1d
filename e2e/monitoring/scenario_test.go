package monitoring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/api"
)

const (
	appNamespace = "apps"
	// healthyPool keeps plenty of free addresses throughout.
	healthyPool = "healthy"
	// tinyPool has three addresses; the troubled cluster exhausts it.
	tinyPool = "tiny"
	// deniedPods is how many pods with a wrong pool annotation the troubled cluster
	// tries to create.
	deniedPods = 20
	// stuckFinalizer keeps a deleted pod terminating, as a node that never finishes
	// the deletion would.
	stuckFinalizer = "monitoring.nicpool.io/stuck"
)

// recording is what a Prometheus scraping both binaries would have stored: one
// scrape before anything happened, one of a healthy cluster, one of a troubled one.
type recording struct {
	start, healthy, troubled model.Vector
}

// play runs the scenario on the stack and scrapes both binaries after each phase.
func play(t *testing.T, s *stack) recording {
	t.Helper()
	ctx := context.Background()
	var r recording
	r.start = s.scrape(t)

	// A healthy cluster: pods on a roomy pool start, one is deleted as the kubelet
	// would delete it.
	s.createPool(t, healthyPool, "10.60.0.0/24", "10.60.0.10-10.60.0.209")
	s.createPool(t, tinyPool, "10.61.0.0/24", "10.61.0.10-10.61.0.12")
	s.waitGauges(t, "both pools counted", map[string]float64{
		`nicpool_pool_total_ips{pool="healthy"}`: 200, `nicpool_pool_total_ips{pool="tiny"}`: 3,
	})
	var healthy []*corev1.Pod
	for i := range 4 {
		p := s.createPod(t, fmt.Sprintf("web-%d", i), healthyPool, false)
		if _, err := s.add(ctx, p); err != nil {
			t.Fatalf("ADD for %s: %v", p.Name, err)
		}
		healthy = append(healthy, p)
	}
	s.remove(t, healthy[0])
	s.waitGauges(t, "the healthy pool's allocations", map[string]float64{
		`nicpool_pool_allocated_ips{pool="healthy"}`: 3, `nicpool_pool_free_ips{pool="tiny"}`: 3,
	})
	r.healthy = s.scrape(t)

	// A troubled cluster. The tiny pool runs out: the fourth pod's ADD fails, and the
	// runtime keeps retrying it.
	for i := range 4 {
		p := s.createPod(t, fmt.Sprintf("tiny-%d", i), tinyPool, false)
		attempts := 1
		if i == 3 {
			attempts = 5
		}
		for range attempts {
			_, err := s.add(ctx, p)
			var cniErr *api.Error
			switch {
			case i < 3 && err != nil:
				t.Fatalf("ADD for %s: %v", p.Name, err)
			case i == 3 && (!errors.As(err, &cniErr) || cniErr.Code != api.CodePoolExhausted):
				t.Fatalf("ADD for %s on the exhausted pool: got %v, want CNI error %d", p.Name, err, api.CodePoolExhausted)
			}
		}
	}
	// A pod whose deletion never finishes (its node does not run CNI DEL): the garbage
	// collector releases its address once its grace period has passed.
	stuck := s.createPod(t, "stuck", healthyPool, true)
	if _, err := s.add(ctx, stuck); err != nil {
		t.Fatalf("ADD for %s: %v", stuck.Name, err)
	}
	if err := s.env.Client.Delete(ctx, stuck, client.GracePeriodSeconds(1)); err != nil {
		t.Fatal(err)
	}
	// Pods whose annotation names a pool that does not exist are denied.
	for i := range deniedPods {
		p := pod(fmt.Sprintf("typo-%d", i), "no-such-pool", false)
		err := s.env.Client.Create(ctx, p)
		if err == nil || !strings.Contains(err.Error(), "no-such-pool") {
			t.Fatalf("pod naming an unknown pool: got %v, want a denial naming the pool", err)
		}
	}
	s.waitGauges(t, "the tiny pool exhausted and the stuck pod's address released", map[string]float64{
		`nicpool_pool_free_ips{pool="tiny"}`:                                                                         0,
		`nicpool_pool_allocated_ips{pool="healthy"}`:                                                                 3,
		`nicpool_gc_releases_total{reason="pod-terminating"}`:                                                        1,
		`nicpool_webhook_requests_total{dry_run="false", operation="CREATE", result="denied", webhook="mutate-pod"}`: deniedPods,
	})
	r.troubled = s.scrape(t)
	return r
}

func (s *stack) createPool(t *testing.T, name, subnet, ips string) {
	t.Helper()
	p := &v2beta1.SpiderIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v2beta1.IPPoolSpec{Subnet: subnet, IPs: []string{ips}},
	}
	if err := s.env.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("create pool %s: %v", name, err)
	}
}

// pod is a pod of appNamespace on the node whose one interface takes an address
// of pool (the webhook names the interface).
func pod(name, pool string, stuck bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: appNamespace, Name: name,
			Annotations: map[string]string{annotations.IPPools: fmt.Sprintf(`[{"ipv4":[%q]}]`, pool)},
		},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}},
		},
	}
	if stuck {
		p.Finalizers = []string{stuckFinalizer}
	}
	return p
}

// createPod creates the pod through the API server, so nicpool's webhook admits it.
func (s *stack) createPod(t *testing.T, name, pool string, stuck bool) *corev1.Pod {
	t.Helper()
	p := pod(name, pool, stuck)
	if err := s.env.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	if stuck {
		t.Cleanup(func() {
			// Let the API server finish the deletion.
			_ = s.env.Client.Patch(context.Background(), p, client.RawPatch("application/json-patch+json", []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
		})
	}
	return p
}

// add is the CNI ADD of the pod's eth0, as nicpool's plugin sends it to ipamd.
func (s *stack) add(ctx context.Context, p *corev1.Pod) (*api.AllocateResponse, error) {
	return s.socket.Allocate(ctx, &api.AllocateRequest{
		Attachment: api.Attachment{ContainerID: "sandbox-" + string(p.UID), Interface: "eth0"},
		Pod:        api.Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)},
		Network:    api.NetworkConfig{Name: "cluster"},
	})
}

// remove deletes a pod as the kubelet does: CNI DEL, then the pod object.
func (s *stack) remove(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.socket.Release(ctx, &api.ReleaseRequest{
		Attachment: api.Attachment{ContainerID: "sandbox-" + string(p.UID), Interface: "eth0"},
		Pod:        api.Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)},
		Network:    api.NetworkConfig{Name: "cluster"},
	}); err != nil {
		t.Fatalf("DEL for %s: %v", p.Name, err)
	}
	if err := s.env.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// scrape reads both binaries' metrics, each sample with its target's labels.
func (s *stack) scrape(t *testing.T) model.Vector {
	t.Helper()
	var out model.Vector
	for _, tg := range []target{s.webhook, s.ipamd} {
		v, err := scrapeTarget(context.Background(), tg)
		if err != nil {
			t.Fatalf("scrape %s: %v", tg.metrics, err)
		}
		out = append(out, v...)
	}
	return out
}

func scrapeTarget(ctx context.Context, tg target) (model.Vector, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.metrics, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var v model.Vector
	for {
		var mf = new(dto.MetricFamily)
		if err := dec.Decode(mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		samples, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{}, mf)
		if err != nil {
			return nil, err
		}
		for _, smp := range samples {
			for k, val := range tg.labels {
				smp.Metric[model.LabelName(k)] = model.LabelValue(val)
			}
		}
		v = append(v, samples...)
	}
	return v, nil
}

// waitGauges scrapes until every series named (in Prometheus' text notation, labels
// sorted) has the value given, summed over targets.
func (s *stack) waitGauges(t *testing.T, what string, want map[string]float64) {
	t.Helper()
	var last map[string]float64
	var scrapeErr error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		last = map[string]float64{}
		for _, tg := range []target{s.webhook, s.ipamd} {
			v, err := scrapeTarget(ctx, tg)
			if err != nil {
				scrapeErr = err
				return false, nil //nolint:nilerr // a target not up yet is scraped again; the last error is reported on timeout
			}
			scrapeErr = nil
			for _, smp := range v {
				for k := range tg.labels {
					delete(smp.Metric, model.LabelName(k))
				}
				last[smp.Metric.String()] += float64(smp.Value)
			}
		}
		for k, v := range want {
			if got, ok := last[k]; !ok || got != v {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		got := map[string]float64{}
		for k := range want {
			got[k] = last[k]
		}
		t.Fatalf("waiting for %s: %v; want %v, scraped %v (last scrape error: %v)", what, err, want, got, scrapeErr)
	}
}
