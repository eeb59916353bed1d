package pool_test

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

// kubectl get sp keeps showing allocated/total per pool: the count owner
// (webhook/controller/poolcount, run by this package's webhook manager) follows the
// pool's blocks as ipamd and the garbage collector write them.
func TestCountsFollowTheBlocks(t *testing.T) {
	ctx := context.Background()
	if err := env.Client.Create(ctx, fixtures.Pool("counted", "10.46.0.0/24", []string{"10.46.0.1-10.46.0.40"})); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "totalIPCount 40", func() bool { return totalIPCount("counted") == 40 })
	alloc := v2beta1.PoolIPAllocations{}
	for i := 1; i <= 20; i++ {
		alloc[fmt.Sprintf("10.46.0.%d", i)] = v2beta1.PoolIPAllocation{Pod: fmt.Sprintf("team/p%d", i), PodUID: fmt.Sprintf("u%d", i), Interface: "eth0"}
	}
	setAllocated(t, "counted", alloc)
	fixtures.Eventually(t, "allocatedIPCount 20", func() bool {
		return ptr.Deref(fixtures.GetPool(t, env.Client, "counted").Status.AllocatedIPCount, -1) == 20
	})
	delete(alloc, "10.46.0.20")
	setAllocated(t, "counted", alloc)
	fixtures.Eventually(t, "allocatedIPCount 19 after a release", func() bool {
		return ptr.Deref(fixtures.GetPool(t, env.Client, "counted").Status.AllocatedIPCount, -1) == 19
	})
}
