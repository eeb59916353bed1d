// Package webhook is nicpool's admission: it registers the pod defaulter and
// validator and the SpiderIPPool, SpiderEndpoint and SpiderReservedIP webhooks with a
// controller-runtime manager. Each decision lives in its own package (pod, pool,
// endpoint) as plain Go; configs holds the webhook configurations the API server uses.
package webhook
