package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/metrics"
)

// WorkTimeout bounds the work of one ADD or DEL once it has started. Started work
// runs to its end whatever its caller does: cut half-way, a ledger write could land
// unseen after the pod's next request had decided without it (a second address for
// the interface), or a DEL could release the records and leave the endpoint naming
// them (the addresses handed out again while the endpoint still lists them).
const WorkTimeout = 2 * time.Minute

// DefaultInFlight is how many ADDs and DELs one ipamd works on at once when
// Service.InFlight is not set. The others wait for their turn while their caller
// waits; work beyond what the API server answers only lengthens every request.
const DefaultInFlight = 64

// errGone says a request's caller left (or its announced patience ran out) before
// the request's turn came: nothing was done for it.
var errGone = errors.New("the caller gave up before its turn came")

// turn is a request's right to work on its pod: the pod's lock and one of the
// service's work slots.
type turn struct {
	// ctx is the work's context: detached from the caller, bounded by WorkTimeout.
	ctx  context.Context
	done func()
}

// begin waits, while the caller waits (ctx), for the pod's lock and then for a work
// slot, and returns the context to work in. A request whose caller has gone before
// its turn does nothing: an ADD leaves nothing behind, and a DEL is the runtime's to
// call again until it succeeds (the CNI contract). This keeps the waiting line as
// long as the live callers, however often they retry. The answer to a request that
// waited longer than its caller waits (the call's request_timeout) is "try again later",
// with the length of the line.
func (s *Service) begin(ctx context.Context, pod string) (*turn, error) {
	s.waiting.Add(1)
	metrics.Waiting.Inc()
	defer func() {
		s.waiting.Add(-1)
		metrics.Waiting.Dec()
	}()
	unlock, err := s.locks.LockContext(ctx, pod)
	if err != nil {
		return nil, s.busy(ctx, err)
	}
	select {
	case s.slots() <- struct{}{}:
	case <-ctx.Done():
		unlock()
		return nil, s.busy(ctx, ctx.Err())
	}
	if ctx.Err() != nil { // both were ready: the caller's leaving wins
		<-s.slots()
		unlock()
		return nil, s.busy(ctx, ctx.Err())
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), WorkTimeout)
	return &turn{ctx: wctx, done: func() {
		cancel()
		<-s.slots()
		unlock()
	}}, nil
}

// busy is the answer to a request that did not get its turn.
func (s *Service) busy(ctx context.Context, err error) error {
	return cniError(api.CodeTryAgainLater, fmt.Sprintf("ipamd is busy: %d requests were waiting for their turn (%d at work at most); try again", s.waiting.Load(), s.inFlight()),
		fmt.Errorf("%w: %w", errGone, context.Cause(ctx)))
}

func (s *Service) inFlight() int {
	if s.InFlight > 0 {
		return s.InFlight
	}
	return DefaultInFlight
}

func (s *Service) slots() chan struct{} {
	s.slotsOnce.Do(func() { s.work = make(chan struct{}, s.inFlight()) })
	return s.work
}

// keyedMutex serialises the requests of one pod within this process: two CNI calls
// for the same pod (a retry while the first is still running, two interfaces)
// decide on the same endpoint one after the other.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	ch   chan struct{} // holds one token while locked
	refs int
}

// LockContext locks key, or gives up when ctx ends first.
func (k *keyedMutex) LockContext(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{ch: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
	return func() {
		<-l.ch
		release()
	}, nil
}
