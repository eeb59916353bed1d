// Package webhook wires nicpool's webhook binary: admission (webhook/admission: the
// pod mutating webhook, the SpiderIPPool and SpiderReservedIP webhooks, the views
// their decisions read, and the webhook configurations and ValidatingAdmissionPolicies
// the API server applies by itself) and the leader-elected cluster controllers
// (webhook/controller: garbage collection and the pool finalizer, each pool's counts,
// capacity gauges), on one controller-runtime manager.
package webhook
