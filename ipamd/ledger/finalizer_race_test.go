package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/cluster"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/invariants"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/webhook/admission/views"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

// TestClaimAfterThePoolFinalizerLookedIsRefused is the race between a pool's
// finalizer and an ipamd whose cache has not yet seen the pool being deleted, on a
// real API server with the real garbage collector (kube-controller-manager) and
// nicpool's pool finalizer. The ipamd decides to claim a block of the pool from its
// cache; before its create reaches the API server the pool is deleted, and the
// finalizer lists the pool's blocks, finds none and lets the pool go. The block the
// ipamd then creates names a pool that is gone: had it recorded an address there, the
// garbage collector would delete the block with the live pod's record. The ipamd reads
// the pool from the API server once its block exists and refuses the allocation: no
// pod is told of an address that no record keeps.
func TestClaimAfterThePoolFinalizerLookedIsRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	k8s := c.Client
	startFinalizer(t, ctx, c)

	pool := fixtures.Pool("racing", "10.77.0.0/24", []string{"10.77.0.1-10.77.0.200"})
	if err := k8s.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "the pool finalizer on "+pool.Name, func() bool {
		p := &v2beta1.SpiderIPPool{}
		return k8s.Get(ctx, client.ObjectKeyFromObject(pool), p) == nil && controllerutil.ContainsFinalizer(p, v2beta1.PoolFinalizer)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "racer"},
		Spec:       corev1.PodSpec{NodeName: "node-r", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	// The ipamd's cache, which from the hook on lags behind the API server as an
	// informer that has not yet received the deletion does: it keeps the pool as it was.
	cch := &laggingCache{Reader: nodeCache(t, ctx, c, "node-r")}
	fixtures.Eventually(t, "pool "+pool.Name+" in the ipamd's cache", func() bool {
		return cch.Get(ctx, client.ObjectKeyFromObject(pool), &v2beta1.SpiderIPPool{}) == nil
	})
	l := ledger.New(ledger.Options{Node: "node-r", Cache: cch, Client: k8s, Fresh: k8s, Log: logr.Discard()})
	hooked := false
	ledger.SetBeforeClaim(l, func(name string) {
		if hooked || name != pool.Name {
			return
		}
		hooked = true
		cch.freeze(ctx, t, pool.Name)
		if err := k8s.Delete(ctx, pool.DeepCopy()); err != nil {
			t.Errorf("delete pool %s: %v", pool.Name, err)
			return
		}
		fixtures.Eventually(t, "the finalizer to let pool "+pool.Name+" go", func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(pool), &v2beta1.SpiderIPPool{}))
		})
	})

	got, err := l.Allocate(ctx, pool.Name, allocator.Owner{Pod: "default/racer", PodUID: string(pod.UID), Interface: "eth0"})
	if !hooked {
		t.Fatalf("the allocation claimed no block (%v, %v)", got, err)
	}
	if err == nil {
		// What a user would have seen: the pod holds got.Addr, then its record is gone.
		fixtures.Eventually(t, "the garbage collector to delete the block of the gone pool", func() bool {
			var list ipamv1alpha1.IPBlockList
			err := k8s.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, pool.Name)})
			return err == nil && len(list.Items) == 0
		})
		t.Fatalf("pod %s was given %s of pool %s after the pool's finalizer let it go; the garbage collector has deleted its record", pod.Name, got.Addr, pool.Name)
	}
	if !errors.Is(err, ledger.ErrPoolTerminating) {
		t.Errorf("allocation from a pool deleted during the claim: %v; want %v", err, ledger.ErrPoolTerminating)
	}
	var list ipamv1alpha1.IPBlockList
	if err := k8s.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, pool.Name)}); err != nil {
		t.Fatal(err)
	}
	for _, b := range list.Items {
		if len(b.Status.Allocations) > 0 {
			t.Errorf("block %s of the gone pool records %v", b.Name, b.Status.Allocations)
		}
	}
	// The empty block the claim left goes with its gone owner.
	fixtures.Eventually(t, "the garbage collector to delete the claimed block of the gone pool", func() bool {
		var list ipamv1alpha1.IPBlockList
		err := k8s.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, pool.Name)})
		return err == nil && len(list.Items) == 0
	})
	if err := invariants.Check(ctx, k8s, invariants.Options{Converged: true}); err != nil {
		t.Errorf("invariants: %v", err)
	}
}

// laggingCache serves one pool as it was when freeze was called, and everything else
// from the informer cache.
type laggingCache struct {
	client.Reader
	frozen atomic.Pointer[v2beta1.SpiderIPPool]
}

func (c *laggingCache) freeze(ctx context.Context, t *testing.T, name string) {
	p := &v2beta1.SpiderIPPool{}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	c.frozen.Store(p)
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*v2beta1.SpiderIPPool); ok && c.frozen.Load() != nil && key.Name == c.frozen.Load().Name {
		c.frozen.Load().DeepCopyInto(p)
		return nil
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// nodeCache is an ipamd's informer cache on c: pools, reserved IPs and the node's blocks.
func nodeCache(t *testing.T, ctx context.Context, c *cluster.Cluster, node string) cache.Cache {
	t.Helper()
	cch, err := cache.New(c.Config, cache.Options{Scheme: c.Scheme, ByObject: map[client.Object]cache.ByObject{
		&ipamv1alpha1.IPBlock{}: {Field: fields.OneTermEqualSelector(ipamv1alpha1.FieldNode, node)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Indexes(ctx, cch); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&v2beta1.SpiderIPPool{}, &v2beta1.SpiderReservedIP{}, &ipamv1alpha1.IPBlock{}} {
		if _, err := cch.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = cch.Start(ctx) }()
	if !cch.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return cch
}

// startFinalizer runs nicpool's cluster controllers (the garbage collector of records
// and the pool finalizer) on c, as the webhook Deployment does.
func startFinalizer(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{
		Scheme:                 c.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				gc.PodMetadata():          {Transform: gc.TransformPodMetadata},
				&corev1.Node{}:            {Transform: gc.TransformNode},
				&v2beta1.SpiderEndpoint{}: {Transform: views.TransformEndpoint},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.SetupWithManager(mgr, gc.Options{Interval: time.Minute, MinAge: ptr.To(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
