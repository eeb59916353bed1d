package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// outcome is what happened to one pod's sandbox.
type outcome struct {
	// Address is what the successful ADD returned ("" when none did), Container
	// the sandbox it was for.
	Address, Container string
	// Attempts counts the ADDs run; FirstFailed says the first of them failed.
	Attempts    int
	FirstFailed bool
	// Latency runs from the first attempt's start to the successful ADD's end.
	Latency time.Duration
	// Began is when the first attempt started (zero when none did).
	Began time.Time
	// Errors are the failed attempts' errors, oldest first.
	Errors []error
	// Undeleted are the failed sandboxes whose DEL never succeeded.
	Undeleted []string
}

// kubelets plays the kubelet of every node: each pod's sandbox is set up at once
// (at most InFlight at a time per node), and a sandbox whose ADD failed is torn down
// (CNI DEL of its container, called again after the backoff until it succeeds, as
// the kubelet stops a sandbox before it creates the next) and retried with a new
// container after the kubelet's backoff, until an ADD succeeds, the deadline passes
// or no pod has got an address for s.Stall. allocated counts the pods holding an
// address, as they come. stalled says the run ended for want of progress.
func kubelets(s Scenario, w *world, rt runtime, allocated *atomic.Int64) (out []outcome, stalled bool) {
	deadline := time.Now().Add(s.Deadline)
	var progress atomic.Int64 // unix nanoseconds of the last pod to get an address
	progress.Store(time.Now().UnixNano())
	var gaveUp atomic.Bool
	goOn := func() bool {
		if s.Stall > 0 && time.Since(time.Unix(0, progress.Load())) > s.Stall {
			gaveUp.Store(true)
			return false
		}
		return time.Now().Before(deadline)
	}
	out = make([]outcome, len(w.pods))
	slots := make([]chan struct{}, s.Nodes)
	for n := range slots {
		if s.InFlight > 0 {
			slots[n] = make(chan struct{}, s.InFlight)
		}
	}
	var wg sync.WaitGroup
	for i, p := range w.pods {
		wg.Go(func() {
			o := &out[i]
			var began time.Time
			for attempt := 0; goOn(); attempt++ {
				if slots[p.Node] != nil {
					slots[p.Node] <- struct{}{}
					if !goOn() { // the wait for a slot may have been long
						<-slots[p.Node]
						return
					}
				}
				if attempt == 0 {
					began = time.Now()
					o.Began = began
				}
				container := containerID(i, attempt)
				ctx, cancel := context.WithTimeout(context.Background(), s.timeout(attempt))
				addr, err := rt.add(ctx, p, container)
				cancel()
				o.Attempts++
				if err == nil {
					o.Address, o.Container, o.Latency = addr, container, time.Since(began)
					allocated.Add(1)
					progress.Store(time.Now().UnixNano())
				} else {
					o.FirstFailed = o.FirstFailed || attempt == 0
					o.Errors = append(o.Errors, err)
					// The runtime tears the failed sandbox down, then the pod
					// worker backs off.
					del(s, rt, p, container, attempt, o, deadline.Add(teardownBound))
				}
				if slots[p.Node] != nil {
					<-slots[p.Node]
				}
				if err == nil {
					return
				}
				backoff := s.Backoff + time.Duration(rand.Int64N(int64(s.Backoff/2)+1))
				if time.Until(deadline) < backoff {
					return
				}
				time.Sleep(backoff) // the kubelet's own pause, not a synchronisation
			}
		})
	}
	wg.Wait()
	return out, gaveUp.Load()
}

// teardownBound is how long after the deadline the DEL of a failed sandbox is still
// retried. A kubelet calls it again until it succeeds, whatever else happens: a
// sandbox given up on early would keep the records of an ADD that ended after its
// caller left. The bound only ends a run whose ipamd never answers.
const teardownBound = 10 * time.Minute

// del tears a failed sandbox down: CNI DEL until it succeeds or until, noting each
// failure in o.
func del(s Scenario, rt runtime, p Pod, container string, attempt int, o *outcome, until time.Time) {
	for try := attempt; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout(try))
		err := rt.del(ctx, p, container)
		cancel()
		if err == nil {
			return
		}
		o.Errors = append(o.Errors, fmt.Errorf("DEL of the failed sandbox: %w", err))
		pause := s.Backoff + time.Duration(rand.Int64N(int64(s.Backoff/2)+1))
		if time.Now().Add(pause).After(until) {
			o.Undeleted = append(o.Undeleted, container)
			return
		}
		time.Sleep(pause) // the kubelet's own pause, not a synchronisation
	}
}

// containerID is the sandbox of pod i's attempt, 64 hex digits like a runtime's.
func containerID(i, attempt int) string { return fmt.Sprintf("%056x%08x", i, attempt) }

var digits = regexp.MustCompile(`[0-9a-f]{8,}|[0-9]+`)

// errorShape is an error's message with its numbers and identifiers blanked, to
// count errors by kind.
func errorShape(err error) string {
	s := digits.ReplaceAllString(err.Error(), "#")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
