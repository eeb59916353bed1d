package ledger

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Collectors of the ledger (prefix nicpool_ledger_), registered with
// controller-runtime's registry: ipamd's and the webhook's metrics endpoints serve them.
var (
	blockWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ledger_block_writes_total",
		Help: "IPBlock writes (compare-and-swap merge patches), by result: ok, conflict, error.",
	}, []string{"pool", "result"})
	opsPerWrite = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "nicpool_ledger_ops_per_write",
		Help:    "Allocations, releases and transfers carried by one IPBlock write (group commit).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 8),
	})
	claims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ledger_block_claims_total",
		Help: "Blocks this node tried to claim with a create, by result: claimed, lost (another node had it), refused (the pool was being deleted once the block existed).",
	}, []string{"pool", "result"})
	lists = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ledger_block_lists_total",
		Help: "Lists of a pool's blocks read from the API server, by purpose: claimed (which exist), room (which have free addresses).",
	}, []string{"pool", "purpose"})
	borrowed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ledger_borrowed_total",
		Help: "Addresses allocated in another node's block, once every block of the pool was claimed.",
	}, []string{"pool"})
	exhausted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nicpool_ledger_pool_exhausted_total",
		Help: "Allocations refused because no block of the pool had a free address and none was left to claim.",
	}, []string{"pool"})
)

func init() {
	crmetrics.Registry.MustRegister(blockWrites, opsPerWrite, claims, lists, borrowed, exhausted)
}
