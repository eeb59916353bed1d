package configs_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

var podSeq atomic.Int64

// BenchmarkPodCreate creates pods through the API server with nicpool's webhooks and
// policies registered: pods that select no pool (the match conditions keep them away
// from the webhook and the policy) against pods that go through the pod webhook and
// the pod policy. The difference is what nicpool adds to a pod create.
func BenchmarkPodCreate(b *testing.B) {
	ctx := context.Background()
	if err := env.Namespace(ctx, "bench", nil); err != nil {
		b.Fatal(err)
	}
	if err := env.Client.Create(ctx, fixtures.Pool("bench-v4", "10.140.0.0/16", []string{"10.140.0.10-10.140.255.200"})); err != nil {
		b.Fatal(err)
	}
	probe := pod("bench", "probe", map[string]string{annotations.IPPool: `{"ipv4":["bench-v4"]}`})
	fixtures.Eventually(b, "the pool in the webhook's view", func(ctx context.Context) bool {
		return env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll) == nil
	})
	for _, tc := range []struct {
		name string
		ann  map[string]string
	}{
		{"without webhook", nil},
		{"with webhook", map[string]string{annotations.MultusNetworks: "macvlan-a", annotations.IPPools: `[{"ipv4":["bench-v4"]},{"ipv4":["bench-v4"]}]`}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			defer reportHandlerTime(b)
			defer reportAPIServerTime(b)()
			for b.Loop() {
				p := pod("bench", fmt.Sprintf("p-%d", podSeq.Add(1)), tc.ann)
				if err := env.Client.Create(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reportAPIServerTime reports, from the API server's own metrics, what it spent per
// pod create in total, in nicpool's pod webhook call (round trip included) and in the
// validating step (nicpool's pod policy): where the difference between the two runs
// comes from; and how many requests it served per create. Call it before the loop and the returned function after.
func reportAPIServerTime(b *testing.B) func() {
	read := func() map[string][2]float64 {
		raw, err := kubernetes.NewForConfigOrDie(env.Config).RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		out := map[string][2]float64{}
		for _, line := range strings.Split(string(raw), "\n") {
			var key string
			switch {
			case strings.Contains(line, `resource="pods"`) && strings.Contains(line, `verb="POST"`) && strings.Contains(line, `dry_run=""`) && strings.HasPrefix(line, "apiserver_request_duration_seconds_"):
				key = "create"
			case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_") && strings.Contains(line, `name="pods.nicpool.io"`):
				key = "webhook"
			case strings.HasPrefix(line, "apiserver_admission_step_admission_duration_seconds_") && strings.Contains(line, `operation="CREATE"`) && strings.Contains(line, `type="validate"`) && strings.Contains(line, `rejected="false"`):
				key = "validate"
			case strings.HasPrefix(line, "apiserver_request_total{"):
				key = "requests"
			default:
				continue
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				continue
			}
			cur := out[key]
			if key == "requests" {
				cur[1] += v
			} else if strings.Contains(line, "_sum{") {
				cur[0] += v
			} else if strings.Contains(line, "_count{") {
				cur[1] += v
			}
			out[key] = cur
		}
		return out
	}
	before := read()
	return func() {
		after := read()
		creates := after["create"][1] - before["create"][1]
		if creates == 0 {
			return
		}
		for _, k := range []string{"create", "webhook", "validate"} {
			b.ReportMetric(1e3*(after[k][0]-before[k][0])/creates, "apiserver-"+k+"-ms/op")
		}
		// Every request the API server served during the loop (the creates, the
		// webhook's live reads, the metrics read itself), per create.
		b.ReportMetric((after["requests"][1]-before["requests"][1])/creates, "apiserver-requests/op")
	}
}

// reportHandlerTime logs the pod webhooks' own share of the latency, from their
// duration histogram: the rest is the API server's webhook call.
func reportHandlerTime(b *testing.B) {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "nicpool_webhook_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && strings.HasSuffix(l.GetValue(), "-pod") && h.GetSampleCount() > 0 {
					b.Logf("%s: %d requests so far, mean handler time %.1fµs", l.GetValue(), h.GetSampleCount(), 1e6*h.GetSampleSum()/float64(h.GetSampleCount()))
				}
			}
		}
	}
}
