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
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/binaries"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/webhook/admission/configs"
)

const (
	appNamespace = "apps"
	// healthyPool keeps plenty of free addresses throughout.
	healthyPool = "healthy"
	// tinyPool has three addresses; the troubled cluster exhausts it.
	tinyPool = "tiny"
	// retiredPool is full and disabled (spec.disable): no alarm.
	retiredPool = "retired"
	// emptyPool has no address to hand out (its one address is the gateway).
	emptyPool = "empty"
	// deniedPods is how many pods with a wrong pool annotation the troubled cluster
	// tries to create.
	deniedPods = 20
	// stuckFinalizer keeps a deleted pod terminating, as a node that never finishes
	// the deletion would.
	stuckFinalizer = "monitoring.nicpool.io/stuck"
)

// recording is what a Prometheus scraping both binaries (and kube-state-metrics)
// would have stored after each phase of the scenario: one scrape per phase, by name.
type recording map[string]model.Vector

// play runs the scenario on the stack and scrapes after each phase.
func play(t *testing.T, s *stack) recording {
	t.Helper()
	ctx := context.Background()
	r := recording{}
	r["start"] = s.scrape(t)

	// A healthy cluster: pods on a roomy pool start, one is deleted as the kubelet
	// would delete it.
	s.createPool(t, healthyPool, "10.60.0.0/24", "10.60.0.10-10.60.0.209")
	s.createPool(t, tinyPool, "10.61.0.0/24", "10.61.0.10-10.61.0.12")
	s.waitGauges(t, "both pools counted", map[string]float64{
		`nicpool_pool_total_ips{pool="healthy"}`: 200, `nicpool_pool_total_ips{pool="tiny"}`: 3,
	})
	s.ipamdHas(t, healthyPool)
	s.ipamdHas(t, tinyPool)
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
	r["healthy"] = s.scrape(t)

	// A troubled cluster. The tiny pool runs out: the fourth pod's ADD fails, and the
	// runtime keeps retrying it.
	var tiny []*corev1.Pod
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
		tiny = append(tiny, p)
	}
	// Full pools that are no alarm: one disabled on purpose once its one address is
	// taken, one whose only address is its gateway (no address to hand out).
	s.createPool(t, retiredPool, "10.62.0.0/24", "10.62.0.10")
	s.ipamdHas(t, retiredPool)
	retired := s.createPod(t, "retired-0", retiredPool, false)
	if _, err := s.add(ctx, retired); err != nil {
		t.Fatalf("ADD for %s: %v", retired.Name, err)
	}
	pool := &v2beta1.SpiderIPPool{ObjectMeta: metav1.ObjectMeta{Name: retiredPool}}
	if err := fixtures.Change(ctx, s.env.Client, pool, func() { pool.Spec.Disable = ptr.To(true) }); err != nil {
		t.Fatalf("disable pool %s: %v", retiredPool, err)
	}
	empty := &v2beta1.SpiderIPPool{
		ObjectMeta: metav1.ObjectMeta{Name: emptyPool},
		Spec:       v2beta1.IPPoolSpec{Subnet: "10.63.0.0/24", IPs: []string{"10.63.0.1"}, Gateway: ptr.To("10.63.0.1")},
	}
	if err := s.env.Client.Create(ctx, empty); err != nil {
		t.Fatalf("create pool %s: %v", emptyPool, err)
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
		`nicpool_pool_free_ips{pool="tiny"}`:                  0,
		`nicpool_pool_allocated_ips{pool="healthy"}`:          3,
		`nicpool_pool_free_ips{pool="retired"}`:               0,
		`nicpool_pool_enabled{pool="retired"}`:                0,
		`nicpool_pool_total_ips{pool="empty"}`:                0,
		`nicpool_pool_enabled{pool="empty"}`:                  1,
		`nicpool_gc_releases_total{reason="pod-terminating"}`: 1,
		`nicpool_webhook_requests_total{dry_run="false", operation="CREATE", result="denied", webhook="mutate-pod"}`: deniedPods,
	})
	r["troubled"] = s.scrape(t)

	// The elected replica goes; the one replica left is not elected (the Lease is
	// held by a replica that is gone and does not release it): its metrics are
	// scraped, but the pool capacity gauges have vanished with the leader.
	s.webhook.proc.Stop(30 * time.Second)
	s.holdLease(t)
	s.webhook = s.startWebhook(t, "nicpool-webhook-6d9c7b5f4-w8j2m", false)
	s.waitGauges(t, "the standby replica to say it does not publish", map[string]float64{"nicpool_capacity_publisher": 0})
	r["leaderless"] = s.scrape(t)
	for _, smp := range r["leaderless"] {
		if strings.HasPrefix(string(smp.Metric[model.MetricNameLabel]), "nicpool_pool_") {
			t.Fatalf("a replica that is not elected reports %s", smp.Metric)
		}
	}

	// That replica stops too: Prometheus still has its target, and fails to scrape it.
	s.webhook.proc.Stop(30 * time.Second)
	r["webhook-down"] = s.scrape(t)
	// No webhook target at all (its ServiceMonitor not selected, no endpoints).
	s.webhook = nil
	r["webhook-unscraped"] = s.scrape(t)

	// A replica is elected again, with a new certificate valid for 10 days only
	// (the Secret is emptied, as if replaced by hand); the tiny pool gets an address
	// back, so its alerts resolve.
	s.releaseLease(t)
	if err := s.env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: configs.DefaultNamespace, Name: "nicpool-webhook-cert"}}); err != nil {
		t.Fatalf("delete the certificate Secret: %v", err)
	}
	s.webhook = s.startWebhook(t, "nicpool-webhook-6d9c7b5f4-q5r7t", true, "--cert-validity=240h", "--cert-lookahead=24h")
	s.remove(t, tiny[0])
	s.waitGauges(t, "the new leader to publish, the tiny pool with one address free", map[string]float64{
		"nicpool_capacity_publisher": 1, `nicpool_pool_free_ips{pool="tiny"}`: 1,
	})
	r["certificate-expiring"] = s.scrape(t)
	var expiry []float64
	for _, smp := range r["certificate-expiring"] {
		if smp.Metric[model.MetricNameLabel] == "nicpool_webhook_certificate_expiry_timestamp_seconds" {
			expiry = append(expiry, float64(smp.Value))
		}
	}
	if now := float64(time.Now().Unix()); len(expiry) != 1 || expiry[0] < now+9*86400 || expiry[0] > now+10*86400 {
		t.Fatalf("nicpool_webhook_certificate_expiry_timestamp_seconds = %v, want one series 10 days from now (%v)", expiry, now+10*86400)
	}

	// ipamd runs and is ready, but Prometheus has no target for it (its PodMonitor
	// is not selected): the allocation alerts have nothing to read.
	s.ipamdUnscraped = true
	r["ipamd-unscraped"] = s.scrape(t)
	s.ipamdUnscraped = false

	// The node's ipamd stops while its pods run.
	s.ipamd.proc.Stop(30 * time.Second)
	r["ipamd-missing"] = s.scrape(t)
	return r
}

// holdLease makes the webhook's leader-election Lease held by a replica that is
// gone but whose lease has not run out.
func (s *stack) holdLease(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: configs.DefaultNamespace, Name: leaseName}}
	_, err := controllerutil.CreateOrUpdate(ctx, s.env.Client, l, func() error {
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity = ptr.To("nicpool-webhook-departed")
		l.Spec.LeaseDurationSeconds = ptr.To[int32](24 * 3600)
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		return nil
	})
	if err != nil {
		t.Fatalf("hold Lease %s: %v", leaseName, err)
	}
}

// releaseLease deletes the Lease, so the next replica is elected at once.
func (s *stack) releaseLease(t *testing.T) {
	t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: configs.DefaultNamespace, Name: leaseName}}
	if err := s.env.Client.Delete(context.Background(), l); err != nil {
		t.Fatalf("delete Lease %s: %v", leaseName, err)
	}
}

// leaseName is the webhook's leader-election Lease (--leader-election-id's default).
const leaseName = "nicpool-webhook"

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

// ipamdHas waits until the node's ipamd has pool in its cache, with room: CNI STATUS
// of a network whose one pool it is answers ready. ipamd reads pools from its cache
// alone, so an ADD served before its cache has a pool just created fails (no such
// pool), which a kubelet retries but would count here as an allocation failure.
func (s *stack) ipamdHas(t *testing.T, pool string) {
	t.Helper()
	fixtures.Eventually(t, "ipamd to have pool "+pool, func() (bool, string) {
		st, err := s.socket.Status(context.Background(), &api.StatusRequest{Network: api.NetworkConfig{Name: "cluster", DefaultIPv4Pools: []string{pool}}})
		switch {
		case err != nil:
			return false, err.Error()
		case !st.Ready:
			return false, "STATUS: " + st.Message
		}
		return true, ""
	})
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
// A pod whose ADD succeeded runs.
func (s *stack) add(ctx context.Context, p *corev1.Pod) (*api.AllocateResponse, error) {
	resp, err := s.socket.Allocate(ctx, &api.AllocateRequest{
		Attachment: api.Attachment{ContainerID: "sandbox-" + string(p.UID), Interface: "eth0"},
		Pod:        api.Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)},
		Network:    api.NetworkConfig{Name: "cluster"},
	})
	if err == nil {
		s.running[p.Name] = true
	}
	return resp, err
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
	delete(s.running, p.Name)
}

// targets are what the simulated Prometheus scrapes now.
func (s *stack) targets() []*target {
	var out []*target
	if s.webhook != nil {
		out = append(out, s.webhook)
	}
	if !s.ipamdUnscraped {
		out = append(out, s.ipamd)
	}
	return out
}

// scrape reads the binaries' metrics, each sample with its target's labels, and
// writes Prometheus's up series of each target: 1, or 0 when the scrape fails
// (only a stopped binary may fail). The kube-state-metrics series follow.
func (s *stack) scrape(t *testing.T) model.Vector {
	t.Helper()
	var out model.Vector
	for _, tg := range s.targets() {
		up := 1.0
		v, err := scrapeTarget(context.Background(), tg)
		if err != nil {
			if !tg.stopped() {
				t.Fatalf("scrape %s: %v", tg.metrics, err)
			}
			up, v = 0, nil
		}
		out = append(out, v...)
		m := model.Metric{model.MetricNameLabel: "up"}
		for k, val := range tg.labels {
			m[model.LabelName(k)] = model.LabelValue(val)
		}
		out = append(out, &model.Sample{Metric: m, Value: model.SampleValue(up)})
	}
	return append(out, s.kubeStateMetrics(t)...)
}

// kubeStateMetrics is what kube-state-metrics would report of the node's pods:
// kube_pod_info, kube_pod_status_phase and kube_pod_status_ready, shaped as its
// series are (honor_labels: the pod's own namespace and pod labels). There is no
// kube-state-metrics here: the series are made from the API server's pods and the
// ipamd process — the scenario's pods run when their ADD succeeded, and the ipamd
// pod is ready while its /readyz answers, as the kubelet's readiness probe sees it.
func (s *stack) kubeStateMetrics(t *testing.T) model.Vector {
	t.Helper()
	var pods corev1.PodList
	if err := s.env.Client.List(context.Background(), &pods, client.InNamespace(appNamespace)); err != nil {
		t.Fatal(err)
	}
	var out model.Vector
	add := func(name string, v float64, labels ...string) {
		m := model.Metric{model.MetricNameLabel: model.LabelValue(name), "job": "kube-state-metrics", "instance": "10.0.0.5:8080"}
		for i := 0; i < len(labels); i += 2 {
			m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
		}
		out = append(out, &model.Sample{Metric: m, Value: model.SampleValue(v)})
	}
	pod := func(ns, name, uid, hostNetwork, kind, owner, phase string) {
		add("kube_pod_info", 1, "namespace", ns, "pod", name, "uid", uid, "node", node,
			"host_network", hostNetwork, "created_by_kind", kind, "created_by_name", owner)
		for _, p := range []string{"Pending", "Running", "Succeeded", "Failed", "Unknown"} {
			v := 0.0
			if p == phase {
				v = 1
			}
			add("kube_pod_status_phase", v, "namespace", ns, "pod", name, "uid", uid, "phase", p)
		}
	}
	for _, p := range pods.Items {
		phase := "Pending"
		if s.running[p.Name] {
			phase = "Running"
		}
		pod(p.Namespace, p.Name, string(p.UID), "false", "<none>", "<none>", phase)
	}
	pod(configs.DefaultNamespace, ipamdPod, "0b6c3f0e-ipamd", "true", "DaemonSet", "nicpool-ipamd", "Running")
	ready := 0.0
	if binaries.HTTPOK(context.Background(), s.ipamd.health) == nil {
		ready = 1
	}
	add("kube_pod_status_ready", ready, "namespace", configs.DefaultNamespace, "pod", ipamdPod, "uid", "0b6c3f0e-ipamd", "condition", "true")
	add("kube_pod_status_ready", 1-ready, "namespace", configs.DefaultNamespace, "pod", ipamdPod, "uid", "0b6c3f0e-ipamd", "condition", "false")
	return out
}

func scrapeTarget(ctx context.Context, tg *target) (model.Vector, error) {
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
		for _, tg := range s.targets() {
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
