package capacity

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
)

// The gauges, one series per pool (label pool).
var (
	allocatedDesc = prometheus.NewDesc("nicpool_pool_allocated_ips",
		"Addresses of the pool allocated to pods (status.allocatedIPCount).", []string{"pool"}, nil)
	totalDesc = prometheus.NewDesc("nicpool_pool_total_ips",
		"Addresses the pool can hand out: spec.ips minus excludeIPs, gateway, reserved addresses and the subnet's network and broadcast addresses (status.totalIPCount).", []string{"pool"}, nil)
	freeDesc = prometheus.NewDesc("nicpool_pool_free_ips",
		"Addresses of the pool still free to allocate: total minus allocated.", []string{"pool"}, nil)
	reservedDesc = prometheus.NewDesc("nicpool_pool_reserved_ips",
		"Addresses of spec.ips that are never allocated: excludeIPs, the gateway, SpiderReservedIPs, the subnet's network and broadcast addresses.", []string{"pool"}, nil)
	enabledDesc = prometheus.NewDesc("nicpool_pool_enabled",
		"1 when the pool serves new addresses, 0 when spec.disable is true.", []string{"pool"}, nil)
)

// publisher says whether this replica reports the pool gauges (1 while it leads):
// with no replica at 1 the pool gauges are gone and their alerts cannot fire.
var publisher = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "nicpool_capacity_publisher",
	Help: "1 while this replica is the elected one that reports the pool capacity gauges, else 0.",
})

func init() {
	crmetrics.Registry.MustRegister(publisher)
}

// listTimeout bounds one scrape's read of the cache (it only waits while the pool
// informer syncs).
const listTimeout = 10 * time.Second

// Collector is a prometheus.Collector that reads every pool at scrape time, so a
// deleted pool leaves no stale series behind.
type Collector struct {
	// Reader lists pools; the manager's cache.
	Reader client.Reader
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- allocatedDesc
	ch <- totalDesc
	ch <- freeDesc
	ch <- reservedDesc
	ch <- enabledDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	var pools v2beta1.SpiderIPPoolList
	if err := c.Reader.List(ctx, &pools); err != nil {
		ch <- prometheus.NewInvalidMetric(totalDesc, fmt.Errorf("list SpiderIPPools: %w", err))
		return
	}
	for i := range pools.Items {
		p := Of(&pools.Items[i])
		if !p.Known {
			continue
		}
		ch <- prometheus.MustNewConstMetric(allocatedDesc, prometheus.GaugeValue, float64(p.Allocated), p.Pool)
		ch <- prometheus.MustNewConstMetric(totalDesc, prometheus.GaugeValue, float64(p.Total), p.Pool)
		ch <- prometheus.MustNewConstMetric(freeDesc, prometheus.GaugeValue, float64(p.Free), p.Pool)
		ch <- prometheus.MustNewConstMetric(enabledDesc, prometheus.GaugeValue, boolValue(p.Enabled), p.Pool)
		if p.Reserved >= 0 {
			ch <- prometheus.MustNewConstMetric(reservedDesc, prometheus.GaugeValue, float64(p.Reserved), p.Pool)
		}
	}
}

// Capacity is what the gauges report of one pool.
type Capacity struct {
	Pool string
	// Known is false until the pool's total has been counted (status.totalIPCount):
	// reporting a total of 0 before that would read as an exhausted pool.
	Known            bool
	Allocated, Total int64
	Free             int64
	// Enabled is false for a pool with spec.disable true: it serves no new address,
	// so being full is no alarm.
	Enabled bool
	// Reserved is -1 when spec.ips does not parse (admission refuses such a pool; one
	// written before the webhook ran may exist).
	Reserved int64
}

// Of reads a pool's capacity from its status counts and spec. The counts are written
// by nicpool's one count owner whatever the allocation storage, so this does not
// depend on how allocations are stored.
func Of(p *v2beta1.SpiderIPPool) Capacity {
	c := Capacity{Pool: p.Name, Reserved: -1, Enabled: p.Spec.Disable == nil || !*p.Spec.Disable}
	if p.Status.TotalIPCount == nil {
		return c
	}
	c.Known = true
	c.Total = *p.Status.TotalIPCount
	if p.Status.AllocatedIPCount != nil {
		c.Allocated = *p.Status.AllocatedIPCount
	}
	c.Free = max(c.Total-c.Allocated, 0)
	if listed, ok := listedAddresses(&p.Spec); ok {
		c.Reserved = max(listed-c.Total, 0)
	}
	return c
}

// listedAddresses counts the addresses of spec.ips.
func listedAddresses(spec *v2beta1.IPPoolSpec) (int64, bool) {
	subnet, err := ipranges.ParseSubnet(spec.Subnet, nil)
	if err != nil {
		return 0, false
	}
	ranges, errs := ipranges.ParseRanges(spec.IPs, ipranges.Family(subnet.Addr()), subnet, nil)
	if len(errs) > 0 {
		return 0, false
	}
	return ipranges.Count(ipranges.Set(ranges)), true
}

// reporter registers the collector while its manager is the elected leader, so one
// replica reports for the cluster and a replica that loses the election stops.
type reporter struct {
	collector *Collector
	registry  prometheus.Registerer
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (r *reporter) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (r *reporter) Start(ctx context.Context) error {
	if err := r.registry.Register(r.collector); err != nil {
		return fmt.Errorf("register pool capacity gauges: %w", err)
	}
	publisher.Set(1)
	<-ctx.Done()
	publisher.Set(0)
	r.registry.Unregister(r.collector)
	return nil
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SetupWithManager reports the gauges on the manager's metrics endpoint while the
// manager leads.
func SetupWithManager(mgr manager.Manager) error {
	return mgr.Add(&reporter{collector: &Collector{Reader: mgr.GetCache()}, registry: crmetrics.Registry})
}
