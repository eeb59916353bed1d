// Package poolcount is the one owner of every SpiderIPPool's counts
// (status.allocatedIPCount, status.totalIPCount): a leader-elected controller of the
// webhook's manager.
package poolcount

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// CountEvery is the shortest time between two recounts of one pool: a pool whose
// blocks change many times a second has its counts written once a second.
var CountEvery = time.Second

// Counter is the one owner of every pool's counts, status.allocatedIPCount and
// status.totalIPCount, which `kubectl get sp` shows: it recounts a pool from its
// blocks (ledger.Recount) when its blocks, its spec or any SpiderReservedIP change.
// It also moves the records of pools written by an older nicpool
// (status.allocatedIPs) into blocks (ledger.Migrate), so an upgrade completes even on
// pools no node allocates from.
type Counter struct {
	Ledger *ledger.Ledger

	mu   sync.Mutex
	last map[string]time.Time
}

// NewCounter returns a counter writing through l, whose cache must hold every IPBlock.
func NewCounter(l *ledger.Ledger) *Counter {
	return &Counter{Ledger: l, last: map[string]time.Time{}}
}

// SetupWithManager runs the counter in the elected leader on pool spec changes, on
// pools that still hold records of the older layout or lack a count, on every change
// of reserved addresses and on block changes.
func (c *Counter) SetupWithManager(mgr ctrl.Manager) error {
	if err := ledger.ClusterIndexes(context.Background(), mgr.GetCache()); err != nil {
		return fmt.Errorf("cache indexes: %w", err)
	}
	needsCount := func(p *v2beta1.SpiderIPPool) bool {
		return len(p.Status.AllocatedIPs) > 0 || p.Status.TotalIPCount == nil || p.Status.AllocatedIPCount == nil
	}
	pools := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*v2beta1.SpiderIPPool)
			n, ok2 := e.ObjectNew.(*v2beta1.SpiderIPPool)
			if !ok1 || !ok2 {
				return true
			}
			return o.Generation != n.Generation || needsCount(n) ||
				!equalCount(o.Status.TotalIPCount, n.Status.TotalIPCount) || !equalCount(o.Status.AllocatedIPCount, n.Status.AllocatedIPCount)
		},
	}
	allPools := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list v2beta1.SpiderIPPoolList
		if err := mgr.GetClient().List(ctx, &list); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
		return reqs
	})
	blockPool := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*ipamv1alpha1.IPBlock).Spec.Pool}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nicpool-pool-counts").
		For(&v2beta1.SpiderIPPool{}, builder.WithPredicates(pools)).
		Watches(&v2beta1.SpiderReservedIP{}, allPools).
		Watches(&ipamv1alpha1.IPBlock{}, blockPool).
		Complete(c)
}

func equalCount(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// Reconcile implements reconcile.Reconciler.
func (c *Counter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c.mu.Lock()
	if wait := CountEvery - time.Since(c.last[req.Name]); wait > 0 {
		c.mu.Unlock()
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	c.last[req.Name] = time.Now()
	c.mu.Unlock()
	if err := c.Ledger.Migrate(ctx, req.Name); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, c.Ledger.Recount(ctx, req.Name)
}
