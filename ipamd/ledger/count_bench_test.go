package ledger

import (
	"fmt"
	"net/netip"
	"testing"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/block"
)

// fullBlocks returns the blocks of a /16 pool holding n records, as the webhook's
// cache has them.
func fullBlocks(b *testing.B, n int) (*allocator.Range, []ipamv1alpha1.IPBlock) {
	b.Helper()
	pool := &v2beta1.SpiderIPPool{Spec: v2beta1.IPPoolSpec{Subnet: "10.60.0.0/16", IPs: []string{"10.60.0.1-10.60.255.254"}}}
	pool.Name = "bench"
	rng, err := allocator.NewRange(pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	byBlock := map[netip.Prefix]*ipamv1alpha1.IPBlock{}
	var out []ipamv1alpha1.IPBlock
	a := netip.MustParseAddr("10.60.0.1")
	subnet := netip.MustParsePrefix("10.60.0.0/16")
	for i := range n {
		blk := block.Of(subnet, a)
		bl := byBlock[blk]
		if bl == nil {
			bl = &ipamv1alpha1.IPBlock{Spec: ipamv1alpha1.IPBlockSpec{Pool: "bench", CIDR: blk.String()}, Status: ipamv1alpha1.IPBlockStatus{Allocations: v2beta1.PoolIPAllocations{}}}
			byBlock[blk] = bl
		}
		bl.Status.Allocations[a.String()] = v2beta1.PoolIPAllocation{Pod: fmt.Sprintf("team-%d/app-%d", i%50, i), PodUID: fmt.Sprintf("0b5e7c9e-2f6d-4c1b-9e1a-%012d", i), Interface: "eth0"}
		a = a.Next()
	}
	for _, bl := range byBlock {
		out = append(out, *bl)
	}
	return rng, out
}

// BenchmarkRecountScan is what a recount of a pool costs the pool counter besides its
// one write: the free count of every block and spiderpool's string of records (empty
// above the bound), for a full /16 (65,534 records in its blocks) and for pools at and
// under the bound. It reports the string's bytes: what each write of the pool carries.
func BenchmarkRecountScan(b *testing.B) {
	for _, n := range []int{100, 4000, AllocatedIPsMaxRecords, 65534} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			rng, blocks := fullBlocks(b, n)
			b.ReportAllocs()
			var size int
			for b.Loop() {
				for i := range blocks {
					bl := &blocks[i]
					_ = block.Free(block.Addresses(rng, cidrOf(bl)), bl.Status.Allocations)
				}
				s, _ := allocatedIPs(int64(n), nil, blocks)
				size = len(*s)
			}
			b.ReportMetric(float64(size), "string-bytes")
			b.ReportMetric(float64(len(blocks)), "blocks")
		})
	}
}
