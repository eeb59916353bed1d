// Package capacity reports how full each SpiderIPPool is as Prometheus gauges
// (allocated, total, free and reserved addresses per pool), so that an operator is
// warned before pods stop starting. Only the elected webhook replica reports, once
// for the cluster, from the pools' status counts and spec as the manager's cache holds
// them.
package capacity
