// Package poolcount is the one owner of every SpiderIPPool's status as `kubectl get sp`
// and spiderpool's tools read it (status.allocatedIPCount, totalIPCount, and
// spiderpool's string of records, allocatedIPs): a leader-elected controller of the
// webhook's manager.
package poolcount

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
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
// status.totalIPCount, which `kubectl get sp` shows, and of status.allocatedIPs, the
// string of records spiderpool's tools read: it recounts a pool from its blocks
// (ledger.Recount), at most once per CountEvery, when its blocks, its spec or any
// SpiderReservedIP change. A pool whose status does not decode, or still holds
// spiderpool's records, is left as it is, with a log line and an Event naming it.
// It also moves the records of pools written by an older nicpool
// (status.allocatedIPs) into blocks (ledger.Migrate), so an upgrade completes even on
// pools no node allocates from.
type Counter struct {
	Ledger *ledger.Ledger
	// Reader reads pools (the manager's cache), for the Events.
	Reader client.Reader
	// Events records the counter's Events on pools; nil records none.
	Events events.EventRecorder

	mu      sync.Mutex
	last    map[string]time.Time
	omitted map[string]bool
}

// NewCounter returns a counter writing through l, whose cache must hold every IPBlock.
func NewCounter(l *ledger.Ledger) *Counter {
	return &Counter{Ledger: l, last: map[string]time.Time{}, omitted: map[string]bool{}}
}

// SetupWithManager runs the counter in the elected leader on pool spec changes, on
// pools that still hold records of the older layout or lack a count, on every change
// of reserved addresses and on block changes.
func (c *Counter) SetupWithManager(mgr ctrl.Manager) error {
	if c.Reader == nil {
		c.Reader = mgr.GetClient()
	}
	if c.Events == nil {
		c.Events = mgr.GetEventRecorder("nicpool-pool-counts")
	}
	if err := ledger.ClusterIndexes(context.Background(), mgr.GetCache()); err != nil {
		return fmt.Errorf("cache indexes: %w", err)
	}
	needsCount := func(p *v2beta1.SpiderIPPool) bool {
		// An older layout to migrate, no counts or string of nicpool's yet, or a status
		// to report (spiderpool's records, or one that does not decode).
		return len(p.Status.OlderLayout) > 0 || p.Status.TotalIPCount == nil || p.Status.AllocatedIPCount == nil ||
			p.Status.AllocatedIPsFrom == "" || p.Status.Unreadable != ""
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
	err := c.Ledger.Recount(ctx, req.Name)
	if errors.Is(err, ledger.ErrUnreadableStatus) || errors.Is(err, ledger.ErrSpiderpoolRecords) {
		// This pool alone: nothing of it is written, and it serves nothing, until it is
		// repaired; a change of it brings it back.
		reason := EventPoolStatusUnreadable
		if errors.Is(err, ledger.ErrSpiderpoolRecords) {
			reason = EventSpiderpoolRecords
		}
		log.FromContext(ctx).Error(err, "pool left as it is", "pool", req.Name)
		c.event(ctx, req.Name, corev1.EventTypeWarning, reason, err.Error())
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	c.noteOmitted(ctx, req.Name)
	return reconcile.Result{}, nil
}

// Reasons of the Events the counter records on pools.
const (
	// EventPoolStatusUnreadable: the pool's stored status does not decode.
	EventPoolStatusUnreadable = "PoolStatusUnreadable"
	// EventSpiderpoolRecords: status.allocatedIPs holds spiderpool's records, not migrated.
	EventSpiderpoolRecords = "SpiderpoolRecordsNotMigrated"
	// EventAllocatedIPsOmitted: status.allocatedIPs is left empty (too many records).
	EventAllocatedIPsOmitted = "AllocatedIPsOmitted"
)

// noteOmitted records an Event when the pool's allocatedIPs became empty for its size,
// once per change into that state.
func (c *Counter) noteOmitted(ctx context.Context, name string) {
	var p v2beta1.SpiderIPPool
	if c.Reader == nil || c.Reader.Get(ctx, client.ObjectKey{Name: name}, &p) != nil {
		return
	}
	omitted := strings.HasPrefix(p.Status.AllocatedIPsFrom, v2beta1.AllocatedIPsOmitted)
	c.mu.Lock()
	was := c.omitted[name]
	c.omitted[name] = omitted
	c.mu.Unlock()
	if omitted && !was {
		c.event(ctx, name, corev1.EventTypeNormal, EventAllocatedIPsOmitted, "status.allocatedIPs is empty: "+strings.TrimPrefix(p.Status.AllocatedIPsFrom, v2beta1.AllocatedIPsOmitted))
	}
}

func (c *Counter) event(ctx context.Context, name, kind, reason, note string) {
	if c.Events == nil {
		return
	}
	var p v2beta1.SpiderIPPool
	if c.Reader == nil || c.Reader.Get(ctx, client.ObjectKey{Name: name}, &p) != nil {
		return
	}
	c.Events.Eventf(&p, nil, kind, reason, "Count", "%s", note)
}
