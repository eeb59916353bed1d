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
	// Address is what the successful ADD returned ("" when none did).
	Address string
	// Attempts counts the ADDs run; FirstFailed says the first of them failed.
	Attempts    int
	FirstFailed bool
	// Latency runs from the first attempt's start to the successful ADD's end.
	Latency time.Duration
	// Errors are the failed attempts' errors, oldest first.
	Errors []error
}

// kubelets plays the kubelet of every node: each pod's sandbox is set up at once
// (at most InFlight at a time per node), and a sandbox whose ADD failed is torn down
// (CNI DEL of its container) and retried with a new container after the kubelet's
// backoff, until an ADD succeeds, the deadline passes or no pod has got an address
// for s.Stall. allocated counts the pods holding an address, as they come. stalled
// says the run ended for want of progress.
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
				}
				container := containerID(i, attempt)
				addr, err := rt.add(context.Background(), p, container)
				o.Attempts++
				if err == nil {
					o.Address, o.Latency = addr, time.Since(began)
					allocated.Add(1)
					progress.Store(time.Now().UnixNano())
				} else {
					o.FirstFailed = o.FirstFailed || attempt == 0
					o.Errors = append(o.Errors, err)
					// The runtime tears the failed sandbox down, then the pod
					// worker backs off.
					if derr := rt.del(context.Background(), p, container); derr != nil {
						o.Errors = append(o.Errors, fmt.Errorf("DEL of the failed sandbox: %w", derr))
					}
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
