package pool

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
)

// TotalCounter keeps status.totalIPCount of every pool equal to the number of
// addresses it can hand out (ips minus excludeIPs, gateway, network/broadcast and
// reserved addresses). A status field cannot be set at admission (the API server
// drops status on create), so a controller maintains it.
type TotalCounter struct {
	Client client.Client
}

// SetupWithManager runs the counter on pool spec changes and on any change of
// reserved addresses. Status-only pool updates (allocations) do not wake it.
func (c *TotalCounter) SetupWithManager(mgr ctrl.Manager) error {
	specOrCount := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*v2beta1.SpiderIPPool)
			n, ok2 := e.ObjectNew.(*v2beta1.SpiderIPPool)
			if !ok1 || !ok2 {
				return true
			}
			return o.Generation != n.Generation || !equalCount(o.Status.TotalIPCount, n.Status.TotalIPCount)
		},
	}
	allPools := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var pools v2beta1.SpiderIPPoolList
		if err := c.Client.List(ctx, &pools); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(pools.Items))
		for _, p := range pools.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nicpool-pool-total-count").
		For(&v2beta1.SpiderIPPool{}, builder.WithPredicates(specOrCount)).
		Watches(&v2beta1.SpiderReservedIP{}, allPools).
		Complete(c)
}

func equalCount(a, b *int64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// Reconcile implements reconcile.Reconciler.
func (c *TotalCounter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var p v2beta1.SpiderIPPool
	if err := c.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	reserved, err := ReservedSet(ctx, c.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	set, errs := ipranges.Allocatable(&p.Spec, reserved)
	if len(errs) > 0 {
		// Admission refuses such a spec; a pool that predates the webhook keeps its count.
		logf.FromContext(ctx).Info("pool spec does not parse; totalIPCount left as is", "pool", p.Name, "errors", errs.ToAggregate().Error())
		return reconcile.Result{}, nil
	}
	total := ipranges.Count(set)
	if p.Status.TotalIPCount != nil && *p.Status.TotalIPCount == total {
		return reconcile.Result{}, nil
	}
	base := p.DeepCopy()
	p.Status.TotalIPCount = &total
	if err := c.Client.Status().Patch(ctx, &p, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("set totalIPCount of pool %s: %w", p.Name, err)
	}
	logf.FromContext(ctx).V(1).Info("pool totalIPCount set", "pool", p.Name, "total", total)
	return reconcile.Result{}, nil
}
