// Package webhook is nicpool's admission: it registers the pod mutating webhook and
// the SpiderIPPool and SpiderReservedIP webhooks with a controller-runtime manager.
// Each decision lives in its own package (pod, pool) as plain Go; configs holds the
// webhook configurations and the ValidatingAdmissionPolicies the API server applies by
// itself (who writes SpiderEndpoints and allocations, what a resolved pod looks like).
package webhook
