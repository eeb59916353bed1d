// Package metric exports a binary's build information as the Prometheus gauge
// nicpool_build_info, which both daemons serve (docs/metrics.md). It is apart from
// package version so that the CNI plugin, which prints its version, links no
// Prometheus client.
package metric

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nicpool/nicpool/version"
)

// BuildInfo returns the gauge nicpool_build_info{version,revision,goversion}, always
// 1: a query joins on it to label any other series with the version that produced it,
// and counts the versions running side by side.
func BuildInfo() prometheus.Collector {
	i := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "nicpool_build_info",
		Help:        "The version, git revision and Go version of this nicpool binary; always 1.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
