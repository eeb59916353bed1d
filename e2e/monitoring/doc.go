// Package monitoring proves nicpool's alerting rules and Grafana dashboard
// (manifests/overlays/monitoring) against metrics scraped from the real binaries:
// nicpool-webhook and nicpool-ipamd run against a real API server while a scenario
// is played in phases — a healthy cluster; a troubled one (an exhausted pool beside a
// full disabled pool and a pool of no address, failing ADDs, a pod stuck terminating,
// denied pods); the elected webhook replica gone with the one left not elected; that
// replica failing its scrapes; no webhook target at all; a webhook elected again with
// a certificate valid for 10 days; the node's ipamd stopped while its pods run. The
// simulated Prometheus writes each target's up series and staleness markers as
// Prometheus does, and kube-state-metrics-shaped pod series made from the API
// server's pods and ipamd's readiness (no kube-state-metrics runs). The Prometheus
// rule engine, used as a library, evaluates every rule on the samples: each phase
// fires exactly the alerts it names. Every dashboard query is parsed and run against
// the troubled cluster's samples.
//
// It is a module of its own because the Prometheus engine brings many dependencies
// the rest of nicpool does not need; `make test` runs it.
package monitoring
