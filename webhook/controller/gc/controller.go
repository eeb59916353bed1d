package gc

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// Permissions the garbage collector and the pool finalizer need (leader election's
// Lease permissions belong to the manager's own role).
//
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=spiderpool.spidernet.io,resources=spiderippools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=spiderpool.spidernet.io,resources=spiderippools/status,verbs=get;update
// +kubebuilder:rbac:groups=spiderpool.spidernet.io,resources=spiderendpoints,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=ipam.nicpool.io,resources=ipblocks,verbs=get;list;watch;create;patch;delete

// SetupWithManager registers the garbage collector and the pool finalizer with mgr.
// Both run only in the elected leader. The collector reads its snapshot from the
// manager's cache and confirms absences with the manager's API reader.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	opts = opts.withDefaults()
	if err := ledger.ClusterIndexes(context.Background(), mgr.GetCache()); err != nil {
		return fmt.Errorf("set up nicpool garbage collector: cache indexes: %w", err)
	}
	collector := NewCollector(mgr.GetClient(), mgr.GetAPIReader(), opts)
	collector.informers = mgr.GetCache()
	// Finished pods in full, in a cache of their own: the manager's cache holds every
	// pod as metadata (PodMetadata), and one cache holds one kind one way.
	finished, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: FinishedPods, Transform: TransformPod},
		},
	})
	if err != nil {
		return fmt.Errorf("set up nicpool garbage collector: cache of finished pods: %w", err)
	}
	if err := mgr.Add(finished); err != nil {
		return fmt.Errorf("set up nicpool garbage collector: %w", err)
	}
	collector.finished = finished
	if err := setupCollector(mgr, collector, finished, opts); err != nil {
		return fmt.Errorf("set up nicpool garbage collector: %w", err)
	}
	if err := setupPoolFinalizer(mgr); err != nil {
		return fmt.Errorf("set up nicpool pool finalizer: %w", err)
	}
	return nil
}

// passRequest is the only key of the collector's queue: every trigger asks for the same
// full pass, so a burst of events collapses into one.
var passRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "full-pass"}}

type passReconciler struct {
	collector *Collector
	interval  time.Duration
}

// Reconcile runs one full pass and schedules the next: at the periodic interval, or
// earlier when a terminating pod's grace or a record's minimum age runs out.
func (r *passReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	res, err := r.collector.Pass(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	after := r.interval
	if !res.Recheck.IsZero() {
		// A little past the instant, so that the pass sees it as reached.
		after = min(after, time.Until(res.Recheck)+100*time.Millisecond)
	}
	return reconcile.Result{RequeueAfter: max(after, 100*time.Millisecond)}, nil
}

func setupCollector(mgr ctrl.Manager, collector *Collector, finished cache.Cache, opts Options) error {
	soon := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(passRequest, opts.Debounce)
	}
	pods := handler.TypedFuncs[*metav1.PartialObjectMetadata, reconcile.Request]{
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectNew.DeletionTimestamp != nil && e.ObjectOld.DeletionTimestamp == nil {
				soon(q)
			}
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			soon(q)
		},
	}
	// A pod enters the cache of finished pods when it finishes.
	ended := handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			soon(q)
		},
	}
	sets := handler.TypedFuncs[*appsv1.StatefulSet, reconcile.Request]{
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*appsv1.StatefulSet], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if ordinalsShrank(e.ObjectOld, e.ObjectNew) {
				soon(q)
			}
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*appsv1.StatefulSet], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			soon(q)
		},
	}
	// A node that is deleted no longer holds back its terminating pods' addresses.
	nodes := handler.TypedFuncs[*corev1.Node, reconcile.Request]{
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[*corev1.Node], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			soon(q)
		},
	}
	// The first pass runs as soon as the controller starts (after leader election);
	// later ones follow from RequeueAfter and events.
	start := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(passRequest)
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nicpool-gc").
		WatchesRawSource(source.Kind(mgr.GetCache(), PodMetadata(), pods)).
		WatchesRawSource(source.Kind(finished, &corev1.Pod{}, ended)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &appsv1.StatefulSet{}, sets)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Node{}, nodes)).
		WatchesRawSource(start).
		// A failed pass is retried with backoff, but never later than the next periodic
		// pass would have run.
		WithOptions(controller.Options{
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, opts.Interval),
		}).
		Complete(&passReconciler{collector: collector, interval: opts.Interval})
}

// ordinalsShrank: the StatefulSet gave up some ordinals or started being deleted.
func ordinalsShrank(old, cur *appsv1.StatefulSet) bool {
	return workload.Replicas(cur) < workload.Replicas(old) || workload.Start(cur) != workload.Start(old) ||
		(cur.DeletionTimestamp != nil && old.DeletionTimestamp == nil)
}
