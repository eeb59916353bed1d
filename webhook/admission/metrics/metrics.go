// Package metrics counts and times nicpool's admission requests in the
// controller-runtime metrics registry (served on the manager's metrics endpoint), so
// an operator sees which webhook is called, how often it denies and how long it takes.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Results of a request, the "result" label.
const (
	Allowed = "allowed"
	Patched = "patched"
	Denied  = "denied"
	Errored = "error"
)

var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_webhook_requests_total",
		Help: "Admission requests handled by nicpool's webhooks, by webhook, operation, dry run and result (allowed, patched, denied, error).",
	}, []string{"webhook", "operation", "dry_run", "result"})
	duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nicpool_webhook_request_duration_seconds",
		Help:    "Time nicpool's webhooks spend deciding an admission request (decode, decision, patch), by webhook.",
		Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1},
	}, []string{"webhook"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(requests, duration)
}

// Instrument wraps a handler so each request it serves is counted and timed under
// the webhook's name.
func Instrument(webhook string, h admission.Handler) admission.Handler {
	obs := duration.WithLabelValues(webhook)
	// Served from the start at 0, so that Prometheus counts the first denials of a
	// webhook (it sees no increase in a series whose first sample is already 1).
	for _, r := range []string{Allowed, Patched, Denied, Errored} {
		requests.WithLabelValues(webhook, string(admissionv1.Create), "false", r)
	}
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		start := time.Now()
		resp := h.Handle(ctx, req)
		obs.Observe(time.Since(start).Seconds())
		dry := "false"
		if req.DryRun != nil && *req.DryRun {
			dry = "true"
		}
		requests.WithLabelValues(webhook, string(req.Operation), dry, result(resp)).Inc()
		return resp
	})
}

func result(r admission.Response) string {
	switch {
	case r.Allowed && (len(r.Patches) > 0 || len(r.Patch) > 0):
		return Patched
	case r.Allowed:
		return Allowed
	case r.Result != nil && r.Result.Code >= 500:
		return Errored
	default:
		return Denied
	}
}

// Requests returns how many requests a webhook has served, over every operation and
// result: what tests read to prove a request did or did not reach the webhook.
func Requests(webhook string) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		requests.Collect(ch)
		close(ch)
	}()
	var total float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			continue
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == "webhook" && l.GetValue() == webhook {
				total += pb.GetCounter().GetValue()
			}
		}
	}
	return total
}
