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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
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

// CountEvery and CountBurst bound the writes of one pool's status. A change is
// written as soon as its watch event reaches the counter, up to CountBurst writes in
// a row; a pool that changes more often is written once per CountEvery, each write
// carrying every change since the last (a token bucket of CountBurst writes that
// refills one write per CountEvery). A lone allocation shows in status.allocatedIPs
// without waiting, and so do the few changes a workload's rollout makes in a second;
// a pool whose blocks change many times a second is written about once a second.
// A write also costs a window per CountBytes of the status.allocatedIPs it carries
// (at least one), so a pool of thousands of records, whose every write every watcher
// of pools receives (each ipamd, the webhook), is sent at most about CountBytes a
// second: at the 512 KiB bound (ledger.AllocatedIPsMaxBytes) a write every 4 s.
var (
	CountEvery = time.Second
	CountBurst = 5
	CountBytes = 128 << 10
)

// Counter is the one owner of every pool's counts, status.allocatedIPCount and
// status.totalIPCount, which `kubectl get sp` shows, and of status.allocatedIPs, the
// string of records spiderpool's tools read: it recounts a pool from its blocks
// (ledger.RecountWrote) when its blocks, its spec or any SpiderReservedIP change, and
// writes it at once unless it was written CountBurst times lately (see CountEvery).
// A pool whose status does not decode, or still holds spiderpool's records, is left
// as it is, with a log line and an Event naming it.
// It also moves the records of pools written by an older nicpool
// (status.allocatedIPs) into blocks (ledger.Migrate), so an upgrade completes even on
// pools no node allocates from.
type Counter struct {
	Ledger *ledger.Ledger
	// Reader reads pools (the manager's cache), for the Events.
	Reader client.Reader
	// Events records the counter's Events on pools; nil records none.
	Events events.EventRecorder
	// Clock is the time the writes of a pool are spaced by (CountEvery, CountBurst);
	// nil is the real clock.
	Clock clock.PassiveClock

	mu sync.Mutex
	// due is, for each pool, when its writes so far would have ended had each taken
	// its windows (CountEvery each) back to back (the token bucket as one time, GCRA): a write may start
	// once due is at most CountBurst-1 windows ahead of now. A recount that changed
	// nothing moves it not, so it never holds back the next change.
	due     map[string]time.Time
	omitted map[string]bool
}

// NewCounter returns a counter writing through l, whose cache must hold every IPBlock.
func NewCounter(l *ledger.Ledger) *Counter {
	return &Counter{Ledger: l, due: map[string]time.Time{}, omitted: map[string]bool{}}
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
	if wait := c.wait(req.Name); wait > 0 {
		// Written CountBurst times lately: this change is written with every other one
		// that comes before then, in one write when the pool may be written again.
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := c.Ledger.Migrate(ctx, req.Name); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	// A write counts from when the recount that makes it begins, so a reader that
	// saw it never sees the pool's next window start later than that.
	began := c.now()
	wrote, listed, err := c.Ledger.RecountWrote(ctx, req.Name)
	if wrote {
		c.mu.Lock()
		c.due[req.Name] = later(c.due[req.Name], began).Add(time.Duration(windows(listed)) * CountEvery)
		c.mu.Unlock()
	}
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

// wait is how long the pool's next write must wait: nothing while it was written
// fewer than CountBurst times in the last windows, else until one more write is due.
func (c *Counter) wait(name string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	due, ok := c.due[name]
	if !ok {
		return 0
	}
	return due.Add(-time.Duration(CountBurst-1) * CountEvery).Sub(c.now())
}

// windows is what a write of a status.allocatedIPs of n bytes costs: one window, and
// one more for each further CountBytes.
func windows(n int) int {
	return max(1, (n+CountBytes-1)/CountBytes)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (c *Counter) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
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
	if c.Reader == nil {
		return
	}
	if err := c.Reader.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			// The pool is gone: nothing of it is kept.
			c.mu.Lock()
			delete(c.due, name)
			delete(c.omitted, name)
			c.mu.Unlock()
		}
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
