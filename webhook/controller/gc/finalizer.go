package gc

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// poolFinalizer keeps v2beta1.PoolFinalizer on every SpiderIPPool while it may hold
// addresses, and removes it from a pool being deleted once none of its blocks holds
// one (and the blocks are deleted), so that no pod is left with an address of a pool
// that no longer exists.
type poolFinalizer struct {
	client client.Client
	live   client.Reader
}

func setupPoolFinalizer(mgr ctrl.Manager) error {
	// A block's change may be the last release a pool being deleted waits for.
	blocks := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*ipamv1alpha1.IPBlock).Spec.Pool}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nicpool-pool-finalizer").
		For(&v2beta1.SpiderIPPool{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			pool, ok := o.(*v2beta1.SpiderIPPool)
			return ok && needsWork(pool)
		}))).
		Watches(&ipamv1alpha1.IPBlock{}, blocks).
		Complete(&poolFinalizer{client: mgr.GetClient(), live: mgr.GetAPIReader()})
}

// needsWork: a pool without the finalizer, or a pool being deleted that still has it.
func needsWork(pool *v2beta1.SpiderIPPool) bool {
	return controllerutil.ContainsFinalizer(pool, v2beta1.PoolFinalizer) == (pool.DeletionTimestamp != nil)
}

// Reconcile adds or removes the finalizer. Before removing it, the pool's records are
// read from the API server and its empty blocks deleted with their resourceVersion as
// precondition, so a block that received an address meanwhile stays and the pool is
// looked at again.
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
		if recs, err := ledger.PoolRecords(ctx, f.client, pool.Name); err != nil || len(recs) > 0 {
			return reconcile.Result{}, err // a block event brings the pool back
		}
		empty, err := f.deleteBlocks(ctx, pool.Name)
		if err != nil || !empty {
			return reconcile.Result{RequeueAfter: time.Second}, err
		}
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

// deleteBlocks deletes the pool's blocks as the API server has them, each only while
// it holds no address. It reports whether none is left.
func (f *poolFinalizer) deleteBlocks(ctx context.Context, pool string) (bool, error) {
	var blocks ipamv1alpha1.IPBlockList
	if err := f.live.List(ctx, &blocks, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, pool)}); err != nil {
		return false, fmt.Errorf("list the blocks of pool %s: %w", pool, err)
	}
	for i := range blocks.Items {
		b := &blocks.Items[i]
		if len(b.Status.Allocations) > 0 {
			return false, nil
		}
		uid, rv := b.UID, b.ResourceVersion
		err := f.client.Delete(ctx, b, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case apierrors.IsConflict(err):
			return false, nil // it changed: look again
		case err != nil && !apierrors.IsNotFound(err):
			return false, fmt.Errorf("delete block %s of pool %s: %w", b.Name, pool, err)
		}
	}
	return true, nil
}
