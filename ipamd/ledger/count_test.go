package ledger_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
)

// The count owner keeps the pool's counts and each block's free count right when the
// pool's addresses change under the blocks (here: a SpiderReservedIP).
func TestRecountFollowsReservedAddresses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("counted", "10.26.0.0/16", []string{"10.26.0.1-10.26.0.15"}))
	n := nodeLedger(t, ctx, "n1")
	cl, _ := clusterLedger(t, ctx)
	for i := range 3 {
		if _, err := n.Allocate(ctx, "counted", owner(i)); err != nil {
			t.Fatal(err)
		}
	}
	fixtures.Eventually(t, "counts 3 of 15", func() bool {
		if err := cl.Recount(ctx, "counted"); err != nil {
			t.Fatal(err)
		}
		p := fixtures.GetPool(t, env.Client, "counted")
		return p.Status.AllocatedIPCount != nil && *p.Status.AllocatedIPCount == 3 && *p.Status.TotalIPCount == 15
	})
	r := &v2beta1.SpiderReservedIP{ObjectMeta: metav1.ObjectMeta{Name: "counted-keep-out"}, Spec: v2beta1.ReservedIPSpec{IPs: []string{"10.26.0.10-10.26.0.15"}}}
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Client.Delete(context.Background(), r) }()
	fixtures.Eventually(t, "counts 3 of 9 once six addresses are reserved", func() bool {
		if err := cl.Recount(ctx, "counted"); err != nil {
			t.Fatal(err)
		}
		blocks := blocksOf(t, "counted")
		p := fixtures.GetPool(t, env.Client, "counted")
		return len(blocks) == 1 && blocks[0].Status.Free == 6 && *p.Status.TotalIPCount == 9 && *p.Status.AllocatedIPCount == 3
	})
}
