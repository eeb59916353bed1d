// Package monitoring proves nicpool's alerting rules and Grafana dashboard
// (manifests/overlays/monitoring) against metrics scraped from the real binaries:
// nicpool-webhook and nicpool-ipamd run against a real API server while a healthy
// cluster and then a troubled one (an exhausted pool, failing ADDs, a pod stuck
// terminating, denied pods) are played; the Prometheus rule engine, used as a library,
// evaluates every rule on the scraped samples, and every dashboard query is parsed and
// run against them.
//
// It is a module of its own because the Prometheus engine brings many dependencies
// the rest of nicpool does not need; `make test` runs it.
package monitoring
