// Package metrics holds ipamd's Prometheus collectors (prefix nicpool_ipamd_),
// registered with controller-runtime's registry so that the daemon's metrics endpoint
// serves them beside client-go's and the cache's.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nicpool/nicpool/ipamd/api"
)

// Outcomes of an allocation or a release.
const (
	OutcomeAllocated = "allocated" // new addresses taken
	OutcomeExisting  = "existing"  // a retry answered with the addresses already held
	OutcomeTakenOver = "taken_over"
	OutcomeExhausted = "exhausted"
	OutcomeNoPool    = "no_pool"
	OutcomeError     = "error" // an unexpected failure (CNI code 999 or none)
	// OutcomeInvalidRequest: the runtime's request or the pod's annotations cannot be
	// served as they are (CNI codes 6 and 7); retrying does not help.
	OutcomeInvalidRequest = "invalid_request"
	// OutcomeTryAgain: a transient failure (CNI code 11): the pod is not yet known to
	// the API server, the API server is unreachable, or the pod's SpiderEndpoint kept
	// changing.
	OutcomeTryAgain = "try_again"
	OutcomeReleased = "released"
	OutcomeKept     = "kept" // a StatefulSet pod that will come back keeps its addresses
	OutcomeNothing  = "nothing"
	// OutcomeBusy: the caller left, or its announced patience ran out, before the
	// request's turn came (CNI code 11); nothing was done.
	OutcomeBusy = "busy"
)

var (
	Allocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_allocations_total",
		Help: "CNI ADD requests served, by outcome: allocated, existing, taken_over; or why it failed: exhausted, no_pool, invalid_request, try_again, busy, error.",
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
	Waiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nicpool_ipamd_requests_waiting",
		Help: "ADDs and DELs waiting for their turn: their pod's earlier request, or a work slot.",
	})
	CNICalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_cni_calls_total",
		Help: "CNI calls brought to ipamd in frames (by the plugin's front, or by nicpool-cni for a call handed to it), by verb (ADD, DEL, CHECK, GC, STATUS, other) and result: served, or handed back to nicpool-cni because the network names log_file_path (log_file) or another socket (socket), because the call is over ipamd's bounds (size), or for another reason (version, undecodable, other).",
	}, []string{"verb", "result"})
	UnrecordedAddresses = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nicpool_ipamd_unrecorded_addresses",
		Help: "Addresses the SpiderEndpoints of this node's live pods list that no record holds, found on two checks in a row: the pool may give them to another pod.",
	})
	EndpointWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ipamd_endpoint_writes_total",
		Help: "SpiderEndpoint creates, updates and deletes, by result.",
	}, []string{"verb", "result"})
)

// The results of CNICalls besides the hand-off kinds of cniplugin.HandOff.
const (
	CNIServed      = "served"
	CNIUndecodable = "undecodable"
)

// CNIVerb is the verb label of CNICalls: a CNI verb, or "other" (the label's values
// stay bounded whatever CNI_COMMAND held).
func CNIVerb(command string) string {
	switch command {
	case "ADD", "DEL", "CHECK", "GC", "STATUS":
		return command
	}
	return "other"
}

// FailureOutcome names why an allocation failed, from the CNI error code it returns.
func FailureOutcome(err error) string {
	var e *api.Error
	if !errors.As(err, &e) {
		return OutcomeError
	}
	switch e.Code {
	case api.CodePoolExhausted:
		return OutcomeExhausted
	case api.CodeNoPool:
		return OutcomeNoPool
	case api.CodeInvalidConfig, api.CodeDecodingFailure:
		return OutcomeInvalidRequest
	case api.CodeTryAgainLater:
		return OutcomeTryAgain
	default:
		return OutcomeError
	}
}

func init() {
	// Every outcome is served from the start at 0: Prometheus sees no increase in a
	// series whose first sample is already 1, so the first failures would not count.
	for _, o := range []string{OutcomeAllocated, OutcomeExisting, OutcomeTakenOver,
		OutcomeExhausted, OutcomeNoPool, OutcomeInvalidRequest, OutcomeTryAgain, OutcomeBusy, OutcomeError} {
		Allocations.WithLabelValues(o)
	}
	for _, o := range []string{OutcomeReleased, OutcomeKept, OutcomeNothing, OutcomeBusy, OutcomeError} {
		Releases.WithLabelValues(o)
	}
	for _, v := range []string{"ADD", "DEL"} {
		for _, r := range []string{CNIServed, "log_file", "socket"} {
			CNICalls.WithLabelValues(v, r)
		}
	}
	crmetrics.Registry.MustRegister(Allocations, AllocationDuration, AllocationPhase, Releases, ReleaseDuration,
		EndpointWrites, Waiting, CNICalls, UnrecordedAddresses)
}
