// Package metrics holds ipamd's Prometheus collectors (prefix nicpool_ipamd_),
// registered with controller-runtime's registry so that the daemon's metrics endpoint
// serves them beside client-go's and the cache's.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Outcomes of an allocation or a release.
const (
	OutcomeAllocated = "allocated" // new addresses taken
	OutcomeExisting  = "existing"  // a retry answered with the addresses already held
	OutcomeTakenOver = "taken_over"
	OutcomeExhausted = "exhausted"
	OutcomeNoPool    = "no_pool"
	OutcomeError     = "error"
	OutcomeReleased  = "released"
	OutcomeKept      = "kept" // a StatefulSet pod that will come back keeps its addresses
	OutcomeNothing   = "nothing"
)

var (
	Allocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_allocations_total",
		Help: "CNI ADD requests served, by outcome.",
	}, []string{"outcome"})
	AllocationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nicpool_ipamd_allocation_duration_seconds",
		Help:    "Time to serve one CNI ADD, by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"outcome"})
	Releases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_releases_total",
		Help: "CNI DEL and GC releases served, by outcome.",
	}, []string{"outcome"})
	ReleaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nicpool_ipamd_release_duration_seconds",
		Help:    "Time to serve one CNI DEL, by outcome.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"outcome"})
	AllocationPhase = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nicpool_ipamd_allocation_phase_seconds",
		Help:    "Time one CNI ADD spends in each phase: pools (choice and pool writes), endpoint (SpiderEndpoint write).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"phase"})
	PoolWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_pool_writes_total",
		Help: "Pool status writes (compare-and-swap), by result: ok, conflict, error.",
	}, []string{"pool", "result"})
	WriteConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_pool_write_conflicts_total",
		Help: "Pool status writes rejected with 409 Conflict (another writer was first).",
	}, []string{"pool"})
	OpsPerWrite = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "nicpool_ipamd_pool_ops_per_write",
		Help:    "Allocations, releases and transfers carried by one pool status write (group commit).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	})
	Exhausted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_pool_exhausted_total",
		Help: "Allocations refused because a pool had no free address.",
	}, []string{"pool"})
	EndpointWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_endpoint_writes_total",
		Help: "SpiderEndpoint creates, updates and deletes, by result.",
	}, []string{"verb", "result"})
)

func init() {
	crmetrics.Registry.MustRegister(Allocations, AllocationDuration, AllocationPhase, Releases, ReleaseDuration,
		PoolWrites, WriteConflicts, OpsPerWrite, Exhausted, EndpointWrites)
}
