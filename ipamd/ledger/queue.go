package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/block"
	"github.com/nicpool/nicpool/ipamd/guard"
)

// errBlockGone says a block was deleted: allocations look for another one, releases
// have nothing to release there.
var errBlockGone = errors.New("block no longer exists")

// Linger is how long an idle block queue waits before its first write, so that
// requests on their way join it.
var Linger = 2 * time.Millisecond

// queue serialises the writes of one block: at most one write per block is in flight
// from this process, and requests arriving meanwhile form the next batch.
type queue struct {
	name string
	pool string
	cidr netip.Prefix

	mu      sync.Mutex
	pending []*request
	// writing is the batch flush is writing: what a panic in it leaves unanswered.
	writing []*request
	running bool
	// latest is the newest copy of the block this process has: the one it last wrote
	// or read. The cache lags behind our own writes; this does not. Set it with
	// setLatestLocked, which keeps ahead current.
	latest *ipamv1alpha1.IPBlock
	// ahead is the ledger's set of queues whose latest is set.
	ahead *aheadSet
	// fastest is the quickest write of this block seen: the unit of the conflict pause.
	fastest time.Duration
	// reserved counts allocations routed to this block and not answered yet.
	reserved int64
}

type request struct {
	ctx   context.Context
	ops   []allocator.Op
	adopt bool // claim the block for this node if no node has it
	done  chan outcome
	// sent: a write carrying the request's ops went out (under q.mu). From then on
	// the request is answered only with what the block holds: a write may land
	// after its caller's context ended, and a caller told "cancelled" would decide
	// its next step without what landed.
	sent bool
}

type outcome struct {
	results []allocator.Result
	err     error
}

func (l *Ledger) queue(pool, name string, cidr netip.Prefix) *queue {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[name]
	if q == nil {
		q = &queue{name: name, pool: pool, cidr: cidr, ahead: &l.ahead}
		l.queues[name] = q
	}
	return q
}

// queueIfAny returns the block's queue if this process has one.
func (l *Ledger) queueIfAny(name string) *queue {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queues[name]
}

// offer records a copy of the block read or written elsewhere, if it is newer.
func (q *queue) offer(b *ipamv1alpha1.IPBlock) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.latest == nil || newer(b.ResourceVersion, q.latest.ResourceVersion) {
		q.setLatestLocked(b)
	}
}

// setLatestLocked records b (nil: none) as the newest copy of the block this process
// has, and keeps the ledger's set of such blocks current. Call with q.mu locked.
func (q *queue) setLatestLocked(b *ipamv1alpha1.IPBlock) {
	q.latest = b
	q.ahead.mark(q, b != nil)
}

// aheadSet holds the queues of which this process has a copy newer than its cache may
// hold (queue.latest set), less other nodes' blocks once seen as such: the only
// blocks of this node whose records a lookup in the cache's index by pod UID may
// miss. It stays as small as the writes of the last moments, where the blocks this
// process knows grow with the pool's fill (every lookup of what a pod holds used to
// walk all of them).
type aheadSet struct {
	mu sync.Mutex
	qs map[*queue]struct{}
}

func (a *aheadSet) mark(q *queue, ahead bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ahead {
		delete(a.qs, q)
		return
	}
	if a.qs == nil {
		a.qs = map[*queue]struct{}{}
	}
	a.qs[q] = struct{}{}
}

// of returns the queues of pool in the set ("" for every pool).
func (a *aheadSet) of(pool string) []*queue {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*queue, 0, len(a.qs))
	for q := range a.qs {
		if pool == "" || q.pool == pool {
			out = append(out, q)
		}
	}
	return out
}

// current returns the newest copy of the block known to this process: the cached one,
// or the one this process last wrote or read when that is newer; when neither exists,
// the API server's. Do not modify it.
func (l *Ledger) current(ctx context.Context, q *queue) (*ipamv1alpha1.IPBlock, error) {
	q.mu.Lock()
	latest := q.latest
	q.mu.Unlock()
	cached, err := l.cached(ctx, q)
	switch {
	case err == nil:
		return q.best(cached), nil
	case !apierrors.IsNotFound(err):
		return nil, err
	case latest != nil:
		return latest, nil
	}
	return l.read(ctx, q)
}

// cached returns the cache's copy of q's block, shared with the cache: do not modify
// it. The error is the cache's (NotFound when it holds none).
func (l *Ledger) cached(ctx context.Context, q *queue) (*ipamv1alpha1.IPBlock, error) {
	b := &ipamv1alpha1.IPBlock{}
	if err := l.opts.Cache.Get(ctx, client.ObjectKey{Name: q.name}, b, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return b, nil
}

// read gets the block from the API server and remembers it.
func (l *Ledger) read(ctx context.Context, q *queue) (*ipamv1alpha1.IPBlock, error) {
	fresh := &ipamv1alpha1.IPBlock{}
	if err := l.opts.Fresh.Get(ctx, client.ObjectKey{Name: q.name}, fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("block %s: %w", q.name, errBlockGone)
		}
		return nil, err
	}
	fresh.ManagedFields = nil
	q.mu.Lock()
	q.setLatestLocked(fresh)
	q.mu.Unlock()
	return fresh, nil
}

// do applies ops to the block in one of its next writes and returns one result per op.
// The error is for the whole request (block gone, API unreachable, ctx done); per-op
// failures such as a full block are in the results. A request whose ctx ends before
// any write carried it is dropped (nothing written, ctx's error); once a write has
// carried it, do answers what the block's writes made of it, however long ctx has
// been over, so that its caller never decides on a write it does not know about.
func (l *Ledger) do(ctx context.Context, q *queue, adopt bool, ops ...allocator.Op) ([]allocator.Result, error) {
	req := &request{ctx: ctx, ops: ops, adopt: adopt, done: make(chan outcome, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, req)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go l.flush(q)
	}
	select {
	case out := <-req.done:
		return out.results, out.err
	case <-ctx.Done():
	}
	q.mu.Lock()
	for i, r := range q.pending {
		if r == req {
			q.pending = append(q.pending[:i:i], q.pending[i+1:]...)
			q.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	q.mu.Unlock()
	// In the batch being written (or answered already): its outcome decides.
	out := <-req.done
	return out.results, out.err
}

// flush writes the block's batches until none is pending. It runs on a goroutine of
// its own, under the verbs' recovery: a panic answers the batch being written and
// every pending request with the bug's error, and the next request starts a new
// flush.
func (l *Ledger) flush(q *queue) {
	defer guard.Recover(l.opts.Log, "the write queue of block "+q.name, func(p *guard.Panic) {
		q.mu.Lock()
		abandoned := append(q.writing, q.pending...)
		q.writing, q.pending = nil, nil
		q.running = false
		q.mu.Unlock()
		for _, r := range abandoned {
			// Some of the batch may have had their answer: done holds one.
			select {
			case r.done <- outcome{err: p}:
			default:
			}
		}
	})
	time.Sleep(Linger)
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending, q.writing = nil, batch
		if len(batch) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		l.commit(q, batch)
	}
}

// commit writes one batch with a compare-and-swap merge patch, following the retry
// policy. Requests that arrive while a retry is pending join it.
func (l *Ledger) commit(q *queue, batch []*request) {
	ctx := context.Background()
	fail := func(reqs []*request, err error) {
		for _, r := range reqs {
			r.done <- outcome{err: err}
		}
	}
	serverFailures := 0
	for attempt := 1; ; attempt++ {
		batch = q.live(batch)
		if len(batch) == 0 {
			return
		}
		cur, err := l.current(ctx, q)
		if err == nil && (cur.Spec.Pool != q.pool || cur.Spec.CIDR != q.cidr.String()) {
			err = fmt.Errorf("IPBlock %s holds %s of pool %s, not %s of pool %s: delete it if its pool is gone", q.name, cur.Spec.CIDR, cur.Spec.Pool, q.cidr, q.pool)
		}
		if err != nil {
			fail(batch, err)
			return
		}
		rng, err := l.poolRange(ctx, q.pool, q.cidr)
		if err != nil {
			fail(batch, err)
			return
		}
		obj := cur.DeepCopy()
		results, changed := l.apply(rng, obj, batch)
		if !changed {
			deliver(batch, results)
			return
		}
		q.mu.Lock()
		for _, r := range batch {
			r.sent = true
		}
		q.mu.Unlock()
		began := time.Now()
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		err = l.opts.Client.Patch(wctx, obj, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}))
		cancel()
		took := time.Since(began)
		q.mu.Lock()
		if q.fastest == 0 || took < q.fastest {
			q.fastest = took
		}
		unit := q.fastest
		q.mu.Unlock()
		switch {
		case err == nil:
			blockWrites.WithLabelValues(q.pool, "ok").Inc()
			nops := 0
			for _, r := range batch {
				nops += len(r.ops)
			}
			opsPerWrite.Observe(float64(nops))
			obj.ManagedFields = nil
			q.offer(obj)
			deliver(batch, results)
			return
		case apierrors.IsConflict(err) && attempt < maxAttempts:
			blockWrites.WithLabelValues(q.pool, "conflict").Inc()
			time.Sleep(conflictPause(attempt, unit))
			if _, rerr := l.read(ctx, q); rerr != nil {
				fail(batch, fmt.Errorf("re-read block %s after a write conflict: %w", q.name, rerr))
				return
			}
			q.mu.Lock()
			batch = append(batch, q.pending...)
			q.pending, q.writing = nil, batch
			q.mu.Unlock()
		case apierrors.IsNotFound(err):
			q.mu.Lock()
			q.setLatestLocked(nil)
			q.mu.Unlock()
			fail(batch, fmt.Errorf("block %s: %w", q.name, errBlockGone))
			return
		default:
			blockWrites.WithLabelValues(q.pool, "error").Inc()
			serverFailures++
			if pause, ok := serverRetry(err, serverFailures); ok {
				time.Sleep(pause)
				continue
			}
			fail(batch, fmt.Errorf("write block %s of pool %s: %w", q.name, q.pool, err))
			return
		}
	}
}

// apply runs every request's ops on obj and splits the results by request.
func (l *Ledger) apply(rng *allocator.Range, obj *ipamv1alpha1.IPBlock, batch []*request) ([][]allocator.Result, bool) {
	var ops []allocator.Op
	adopt := false
	for _, r := range batch {
		ops = append(ops, r.ops...)
		adopt = adopt || r.adopt
	}
	flat, changed := block.Apply(rng, cidrOf(obj), &obj.Status, ops)
	if adopt && obj.Spec.Node == "" && l.opts.Node != "" {
		obj.Spec.Node, changed = l.opts.Node, true
	}
	out := make([][]allocator.Result, len(batch))
	for i, r := range batch {
		out[i], flat = flat[:len(r.ops)], flat[len(r.ops):]
	}
	return out, changed
}

// cidrOf returns the block's CIDR as written in its spec.
func cidrOf(b *ipamv1alpha1.IPBlock) netip.Prefix {
	p, _ := netip.ParsePrefix(b.Spec.CIDR)
	return p
}

func deliver(batch []*request, results [][]allocator.Result) {
	for i, r := range batch {
		r.done <- outcome{results: results[i]}
	}
}

// live drops requests whose caller has gone and that no write carried yet: nothing is
// written for them. A request a write carried stays to the end: that write may have
// landed (a timeout, a conflict after it landed), and only the next attempt, on the
// block as it is now, tells what it did.
func (q *queue) live(batch []*request) []*request {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := batch[:0]
	for _, r := range batch {
		if r.ctx.Err() != nil && !r.sent {
			r.done <- outcome{err: r.ctx.Err()}
			continue
		}
		out = append(out, r)
	}
	return out
}
