package gc

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// poolFinalizer keeps v2beta1.PoolFinalizer on every SpiderIPPool while it may hold
// addresses, and removes it from a pool being deleted once it holds none, so that no
// pod is left with an address of a pool that no longer exists.
type poolFinalizer struct {
	client client.Client
}

func setupPoolFinalizer(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nicpool-pool-finalizer").
		For(&v2beta1.SpiderIPPool{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			pool, ok := o.(*v2beta1.SpiderIPPool)
			return ok && needsWork(pool)
		}))).
		Complete(&poolFinalizer{client: mgr.GetClient()})
}

// needsWork filters out the many status writes of ipamd that change nothing here.
func needsWork(pool *v2beta1.SpiderIPPool) bool {
	has := controllerutil.ContainsFinalizer(pool, v2beta1.PoolFinalizer)
	if pool.DeletionTimestamp == nil {
		return !has
	}
	return has && len(pool.Status.AllocatedIPs) == 0
}

// Reconcile adds or removes the finalizer. The patch carries the resourceVersion the
// decision was made on, so a pool that received an address meanwhile is not released:
// the write fails with a conflict and the pool is looked at again.
func (f *poolFinalizer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pool v2beta1.SpiderIPPool
	if err := f.client.Get(ctx, req.NamespacedName, &pool); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !needsWork(&pool) {
		return reconcile.Result{}, nil
	}
	before := pool.DeepCopy()
	if pool.DeletionTimestamp == nil {
		controllerutil.AddFinalizer(&pool, v2beta1.PoolFinalizer)
	} else {
		controllerutil.RemoveFinalizer(&pool, v2beta1.PoolFinalizer)
	}
	err := f.client.Patch(ctx, &pool, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("update finalizer %s of SpiderIPPool %s: %w", v2beta1.PoolFinalizer, pool.Name, err)
	}
	if pool.DeletionTimestamp != nil {
		log.FromContext(ctx).Info("removed finalizer of empty pool being deleted", "pool", pool.Name)
	}
	return reconcile.Result{}, nil
}
