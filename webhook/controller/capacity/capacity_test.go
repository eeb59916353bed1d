package capacity_test

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/webhook/controller/capacity"
)

// What a pool's gauges read, from its status counts and spec.
func TestOf(t *testing.T) {
	v4 := func(allocated, total *int64) *v2beta1.SpiderIPPool {
		return fixtures.Pool("p", "10.0.0.0/24", []string{"10.0.0.1-10.0.0.10"}, fixtures.Counted(allocated, total))
	}
	for _, tc := range []struct {
		name string
		pool *v2beta1.SpiderIPPool
		want capacity.Capacity
	}{
		{"not counted yet: no series, not an exhausted pool",
			v4(nil, nil), capacity.Capacity{Pool: "p", Reserved: -1, Enabled: true}},
		{"counted, nothing allocated",
			v4(nil, ptr.To[int64](10)), capacity.Capacity{Pool: "p", Known: true, Enabled: true, Total: 10, Free: 10, Reserved: 0}},
		{"gateway and an excluded range reserved",
			fixtures.Pool("p", "10.0.0.0/24", []string{"10.0.0.1-10.0.0.10"}, fixtures.Excluding("10.0.0.5-10.0.0.6"), fixtures.Gateway("10.0.0.1"), fixtures.Counted(ptr.To[int64](3), ptr.To[int64](7))),
			capacity.Capacity{Pool: "p", Known: true, Enabled: true, Allocated: 3, Total: 7, Free: 4, Reserved: 3}},
		{"exhausted",
			v4(ptr.To[int64](10), ptr.To[int64](10)), capacity.Capacity{Pool: "p", Known: true, Enabled: true, Allocated: 10, Total: 10, Free: 0, Reserved: 0}},
		{"more allocated than total (addresses reserved after allocation): free is 0, not negative",
			v4(ptr.To[int64](10), ptr.To[int64](8)), capacity.Capacity{Pool: "p", Known: true, Enabled: true, Allocated: 10, Total: 8, Free: 0, Reserved: 2}},
		{"disabled (spec.disable): full on purpose",
			fixtures.Pool("p", "10.0.0.0/24", []string{"10.0.0.1-10.0.0.10"}, fixtures.Counted(ptr.To[int64](10), ptr.To[int64](10)), func(p *v2beta1.SpiderIPPool) { p.Spec.Disable = ptr.To(true) }),
			capacity.Capacity{Pool: "p", Known: true, Allocated: 10, Total: 10, Free: 0, Reserved: 0}},
		{"IPv6",
			fixtures.Pool("p", "fd00::/64", []string{"fd00::10-fd00::1f"}, fixtures.Counted(ptr.To[int64](1), ptr.To[int64](16))),
			capacity.Capacity{Pool: "p", Known: true, Enabled: true, Allocated: 1, Total: 16, Free: 15, Reserved: 0}},
		{"spec.ips unparsable (written before the webhook ran): no reserved gauge",
			fixtures.Pool("p", "10.0.0.0/24", []string{"10.0.1.1"}, fixtures.Counted(nil, ptr.To[int64](0))),
			capacity.Capacity{Pool: "p", Known: true, Enabled: true, Reserved: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := capacity.Of(tc.pool); got != tc.want {
				t.Errorf("Of = %+v, want %+v", got, tc.want)
			}
		})
	}
}
