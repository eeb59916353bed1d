package gc

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Collectors, registered with controller-runtime's registry so that the webhook
// manager's metrics endpoint serves them.
var (
	releasesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_gc_releases_total",
		Help: "Pool addresses released by the garbage collector, by reason.",
	}, []string{"reason"})
	endpointDeletionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_gc_endpoint_deletions_total",
		Help: "SpiderEndpoints deleted by the garbage collector, by reason.",
	}, []string{"reason"})
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_gc_runs_total",
		Help: "Full garbage collection passes, by result: success or error.",
	}, []string{"result"})
	passDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "nicpool_gc_pass_duration_seconds",
		Help:    "Duration of one full garbage collection pass, releases included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	pendingReleases = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nicpool_gc_pending_releases",
		Help: "Addresses and endpoints whose pod is missing but not yet for the minimum age.",
	})
)

func init() {
	// Every reason is served from the start at 0: Prometheus sees no increase in a
	// series whose first sample is already 1, so the first release would not count.
	for _, r := range []Reason{ReasonPodDeleted, ReasonPodFinished, ReasonPodTerminating,
		ReasonStatefulSetGone, ReasonStatefulSetScaledDown, ReasonSuperseded} {
		releasesTotal.WithLabelValues(string(r))
		endpointDeletionsTotal.WithLabelValues(string(r))
	}
	runsTotal.WithLabelValues("success")
	runsTotal.WithLabelValues("error")
	crmetrics.Registry.MustRegister(releasesTotal, endpointDeletionsTotal, runsTotal,
		passDuration, pendingReleases)
}
