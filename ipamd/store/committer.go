package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
	"github.com/nicpool/nicpool/ipamd/metrics"
)

// ErrPoolTerminating refuses allocations from a pool that is being deleted.
var ErrPoolTerminating = errors.New("pool is being deleted")

// ErrPoolDisabled refuses allocations from a pool with spec.disable: true.
var ErrPoolDisabled = errors.New("pool is disabled")

// maxAttempts bounds the writes of one batch; each conflict means another writer made
// progress, so a batch that loses this often is starved rather than wrong.
const maxAttempts = 64

// Linger is how long an idle pool queue waits before its first write.
var Linger = 5 * time.Millisecond

// Committer serialises the writes of each pool: at most one status write per pool is in
// flight from this process, and requests arriving meanwhile form the next batch.
type Committer struct {
	// Cache serves pools and reserved IPs (an informer cache).
	Cache client.Reader
	// Writer updates pool status.
	Writer client.Client
	// Fresh reads a pool from the API server after a conflict (no cache).
	Fresh client.Reader
	Log   logr.Logger
	// Order is which free address an allocation takes: allocator.NextAfterLast (the
	// zero value) continues after the address this process handed out last in the
	// pool, starting after the highest recorded address when it has handed out none.
	Order allocator.Order

	mu    sync.Mutex
	pools map[string]*poolQueue
}

type poolQueue struct {
	mu      sync.Mutex
	pending []*request
	running bool
	// latest is the newest copy of the pool this process has seen: the object it last
	// wrote or re-read. The cache lags behind our own writes; this does not.
	latest *v2beta1.SpiderIPPool
	// fastest is the quickest write of this pool seen: what one write costs the API
	// server when it is not competing with others, the unit of the conflict backoff.
	fastest time.Duration
	// last is the address this process handed out last in the pool: where the next
	// allocation continues (allocator.NextAfterLast).
	last netip.Addr
}

type request struct {
	ctx  context.Context
	ops  []allocator.Op
	done chan outcome
}

type outcome struct {
	results []allocator.Result
	err     error
}

// NewCommitter returns a committer reading from cache and writing with c. fresh is
// used for the single re-read after a conflict.
func NewCommitter(cache client.Reader, c client.Client, fresh client.Reader, log logr.Logger) *Committer {
	return &Committer{Cache: cache, Writer: c, Fresh: fresh, Log: log, pools: map[string]*poolQueue{}}
}

// Do applies ops to the pool in one of its next writes and returns one result per op.
// The error is for the whole request (pool missing, API unreachable, ctx done); per-op
// failures such as exhaustion are in the results. When ctx ends while a write is in
// flight, the write may still land: callers repair that on the next ADD or DEL, which
// are idempotent by owner.
func (c *Committer) Do(ctx context.Context, pool string, ops ...allocator.Op) ([]allocator.Result, error) {
	req := &request{ctx: ctx, ops: ops, done: make(chan outcome, 1)}
	q := c.queue(pool)
	q.mu.Lock()
	q.pending = append(q.pending, req)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go c.flush(pool, q)
	}
	select {
	case out := <-req.done:
		return out.results, out.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Latest returns the newest copy of a pool known to this process: the cached one, or
// the one this committer last wrote or read when that is newer. Do not modify it.
func (c *Committer) Latest(ctx context.Context, pool string) (*v2beta1.SpiderIPPool, error) {
	q := c.queue(pool)
	q.mu.Lock()
	latest := q.latest
	q.mu.Unlock()
	cached := &v2beta1.SpiderIPPool{}
	// Read-only: a pool of thousands of records is not copied per request; writers
	// DeepCopy before changing it.
	err := c.Cache.Get(ctx, client.ObjectKey{Name: pool}, cached, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		if latest == nil {
			return nil, err
		}
		return latest, nil
	case err != nil:
		return nil, err
	}
	if latest != nil && newer(latest, cached) {
		return latest, nil
	}
	return cached, nil
}

func (c *Committer) queue(pool string) *poolQueue {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.pools[pool]
	if q == nil {
		q = &poolQueue{}
		c.pools[pool] = q
	}
	return q
}

// flush writes batches until the queue is empty.
func (c *Committer) flush(pool string, q *poolQueue) {
	// Requests rarely come alone (a node starting many pods, a Deployment scaling):
	// a short wait before the first write lets those that are on their way join it.
	time.Sleep(Linger)
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		c.commit(pool, q, batch)
	}
}

// commit writes one batch, re-reading and retrying on conflict. Requests that arrive
// while a retry is pending join it: they are just as pending.
func (c *Committer) commit(pool string, q *poolQueue, batch []*request) {
	ctx := context.Background()
	fail := func(reqs []*request, err error) {
		for _, r := range reqs {
			r.done <- outcome{err: err}
		}
	}
	for attempt := 1; ; attempt++ {
		batch = live(batch)
		if len(batch) == 0 {
			return
		}
		cur, err := c.Latest(ctx, pool)
		if err != nil {
			fail(batch, fmt.Errorf("read pool %s: %w", pool, err))
			return
		}
		obj := cur.DeepCopy()
		results, changed, last, err := c.apply(ctx, q, obj, batch)
		if err != nil {
			fail(batch, err)
			return
		}
		if !changed {
			deliver(batch, results)
			return
		}
		nops := 0
		for _, r := range batch {
			nops += len(r.ops)
		}
		obj.ManagedFields = nil // omitted: the API server keeps them; no need to send them back
		began := time.Now()
		err = c.Writer.Status().Update(ctx, obj)
		took := time.Since(began)
		q.mu.Lock()
		if q.fastest == 0 || took < q.fastest {
			q.fastest = took
		}
		unit := q.fastest
		q.mu.Unlock()
		switch {
		case err == nil:
			metrics.PoolWrites.WithLabelValues(pool, "ok").Inc()
			metrics.OpsPerWrite.Observe(float64(nops))
			q.mu.Lock()
			q.latest, q.last = obj, last
			q.mu.Unlock()
			deliver(batch, results)
			return
		case apierrors.IsConflict(err) && attempt < maxAttempts:
			metrics.PoolWrites.WithLabelValues(pool, "conflict").Inc()
			metrics.WriteConflicts.WithLabelValues(pool).Inc()
			// Every writer that lost this round would collide again if it retried at
			// once, and each losing write costs the API server as much as a winning
			// one. A random pause of a few uncontended writes' time, doubling with each
			// conflict in a row (up to 2 s), spreads the writers out without leaving
			// the pool idle long; what queues meanwhile joins the retry.
			window := min(unit<<min(attempt, 5), 2*time.Second)
			time.Sleep(time.Duration(rand.Int64N(int64(window) + 1)))
			fresh := &v2beta1.SpiderIPPool{}
			if gerr := c.Fresh.Get(ctx, client.ObjectKey{Name: pool}, fresh); gerr != nil {
				fail(batch, fmt.Errorf("re-read pool %s after a write conflict: %w", pool, gerr))
				return
			}
			q.mu.Lock()
			q.latest = fresh
			// Requests that queued meanwhile go out in this retry.
			batch = append(batch, q.pending...)
			q.pending = nil
			q.mu.Unlock()
		case apierrors.IsNotFound(err):
			fail(batch, fmt.Errorf("pool %s: %w", pool, err))
			return
		default:
			metrics.PoolWrites.WithLabelValues(pool, "error").Inc()
			if attempt < 5 && (apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err)) {
				time.Sleep(time.Duration(attempt) * 100 * time.Millisecond) // back off before retrying an overloaded server
				continue
			}
			fail(batch, fmt.Errorf("write status of pool %s: %w", pool, err))
			return
		}
	}
}

// apply runs every request's ops on obj's status and splits the results by request.
// last is where the pool's next allocation continues once obj is written.
func (c *Committer) apply(ctx context.Context, q *poolQueue, obj *v2beta1.SpiderIPPool, batch []*request) ([][]allocator.Result, bool, netip.Addr, error) {
	reserved, err := ledger.ReservedSet(ctx, c.Cache)
	if err != nil {
		return nil, false, netip.Addr{}, fmt.Errorf("read SpiderReservedIPs: %w", err)
	}
	rng, err := allocator.NewRange(obj, reserved)
	if err != nil {
		return nil, false, netip.Addr{}, err
	}
	q.mu.Lock()
	rng.Order, rng.Last = c.Order, q.last
	q.mu.Unlock()
	if !rng.Last.IsValid() {
		rng.Last = highest(obj.Status.AllocatedIPs)
	}
	var ops []allocator.Op
	for _, r := range batch {
		ops = append(ops, r.ops...)
	}
	// A terminating or disabled pool hands out nothing new, but releases still go through.
	var refuse error
	switch {
	case obj.DeletionTimestamp != nil:
		refuse = fmt.Errorf("allocate from pool %s: %w", obj.Name, ErrPoolTerminating)
	case obj.Spec.Disable != nil && *obj.Spec.Disable:
		refuse = fmt.Errorf("allocate from pool %s: %w", obj.Name, ErrPoolDisabled)
	}
	var refused []int
	if refuse != nil {
		for i := range ops {
			if ops[i].Kind == allocator.Allocate {
				if _, ok := allocator.Held(&obj.Status, ops[i].Owner); !ok {
					refused = append(refused, i)
					ops[i].Kind = allocator.Release // a no-op stand-in: owner holds nothing here
				}
			}
		}
	}
	flat, changed := allocator.Apply(rng, &obj.Status, ops)
	for _, i := range refused {
		flat[i] = allocator.Result{Err: refuse}
	}
	for _, res := range flat {
		if errors.Is(res.Err, allocator.ErrExhausted) {
			metrics.Exhausted.WithLabelValues(obj.Name).Inc()
		}
	}
	out := make([][]allocator.Result, len(batch))
	for i, r := range batch {
		out[i], flat = flat[:len(r.ops)], flat[len(r.ops):]
	}
	return out, changed, rng.Last, nil
}

// highest is the highest address a pool records: where a process that has handed out
// nothing in the pool yet (it just started) continues. Addresses released above it
// meanwhile are the exception this cannot see.
func highest(recs v2beta1.PoolIPAllocations) netip.Addr {
	var top netip.Addr
	for key := range recs {
		if a, err := netip.ParseAddr(key); err == nil && (!top.IsValid() || top.Less(a)) {
			top = a
		}
	}
	return top
}

func deliver(batch []*request, results [][]allocator.Result) {
	for i, r := range batch {
		r.done <- outcome{results: results[i]}
	}
}

// live drops requests whose caller has gone: nothing is written for them.
func live(batch []*request) []*request {
	out := batch[:0]
	for _, r := range batch {
		if r.ctx.Err() != nil {
			r.done <- outcome{err: r.ctx.Err()}
			continue
		}
		out = append(out, r)
	}
	return out
}

// newer reports whether a has a later resourceVersion than b. resourceVersions are
// opaque to clients, but etcd's are integers; when either is not, a is not newer and
// the cache wins (a conflict then corrects any mistake).
func newer(a, b *v2beta1.SpiderIPPool) bool {
	ra, ea := strconv.ParseUint(a.ResourceVersion, 10, 64)
	rb, eb := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return ea == nil && eb == nil && ra > rb
}

// Release removes addrs (all of owner's records when addrs is empty) from a pool
// through the group committer, and returns what was removed. Records of any other
// owner are left alone, so a release racing with a reallocation never frees an
// address someone else now holds.
func (c *Committer) Release(ctx context.Context, pool string, owner allocator.Owner, addrs ...netip.Addr) ([]netip.Addr, error) {
	res, err := c.Do(ctx, pool, allocator.Op{Kind: allocator.Release, Owner: owner, Addrs: addrs})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil // a deleted pool holds nothing
		}
		return nil, err
	}
	return res[0].Changed, res[0].Err
}
