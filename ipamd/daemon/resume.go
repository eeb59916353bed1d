package daemon

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// ResumingListerWatcher wraps the list and watch of one informer so that a watch the
// API server closes before its timeout is resumed from the last resourceVersion the
// informer received, instead of ending.
//
// Why: the API server's watch cache filters a SpiderEndpoint or IPBlock watch by its
// node field (a CRD selectable field) in each watcher: every node's watcher is handed
// every change of the kind and drops the other nodes'. When a watcher falls behind
// (many nodes, a busy API server), the server closes it. The informer's reflector
// re-watches, and when that new watch is closed too within a second before anything
// reached it ("very short watch"), it relists: every endpoint of the node is sent
// again, and the server builds the list from its whole store. Resuming here keeps the
// informer's one watch open across such closes, so a node receives each change of its
// own objects once.
//
// A watch that reaches its requested timeout, ends with an error event (such as
// "resourceVersion too old", which needs the relist), is stopped, or cannot be
// reopened, ends as before; so does the initial list's stream until its last initial
// event has arrived. Resumptions that deliver nothing back off, up to maxEmptyResumes
// in a row.
func ResumingListerWatcher(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	return resumingListerWatcher{inner: toolscache.ToListerWatcherWithContext(lw)}
}

// Resumption pacing: the first pause before reopening a closed watch, its doubling
// bound, and how many reopened watches in a row may close with nothing delivered
// before the close is passed on to the reflector.
const (
	firstResumePause = 50 * time.Millisecond
	maxResumePause   = 2 * time.Second
	maxEmptyResumes  = 8
)

type resumingListerWatcher struct {
	inner toolscache.ListerWatcherWithContext
}

func (lw resumingListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return lw.inner.ListWithContext(context.Background(), options)
}

func (lw resumingListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	return lw.inner.ListWithContext(ctx, options)
}

func (lw resumingListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), options)
}

func (lw resumingListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	initial := options.SendInitialEvents != nil && *options.SendInitialEvents
	if !initial && (options.ResourceVersion == "" || options.ResourceVersion == "0") {
		// Synthetic ADDED events of the current state in no resourceVersion order: no
		// point to resume from.
		return lw.inner.WatchWithContext(ctx, options)
	}
	w, err := lw.inner.WatchWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	r := &resumingWatch{result: make(chan watch.Event), stop: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		r.run(ctx, lw.inner, w, options, initial)
	}()
	return r, nil
}

type resumingWatch struct {
	result   chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (r *resumingWatch) ResultChan() <-chan watch.Event { return r.result }

func (r *resumingWatch) Stop() { r.stopOnce.Do(func() { close(r.stop) }) }

// run forwards w's events, and reopens the watch from the last resourceVersion
// forwarded when the server closes it early. It closes r.result when it gives up.
func (r *resumingWatch) run(ctx context.Context, inner toolscache.ListerWatcherWithContext, w watch.Interface, options metav1.ListOptions, initial bool) {
	defer close(r.result)
	var deadline time.Time
	if options.TimeoutSeconds != nil {
		deadline = time.Now().Add(time.Duration(*options.TimeoutSeconds) * time.Second)
	}
	// resumable: past the initial events of a watch that sent them.
	resumable := !initial
	last := options.ResourceVersion
	pause, empty := firstResumePause, 0
	for {
		delivered, ok := r.forward(ctx, w, &last, &resumable)
		w.Stop()
		if !ok || !resumable {
			return
		}
		// The server closed the watch. At its timeout the reflector starts the next one.
		if !deadline.IsZero() && time.Until(deadline) < time.Second {
			return
		}
		if delivered {
			pause, empty = firstResumePause, 0
		} else if empty++; empty > maxEmptyResumes {
			return
		}
		select {
		case <-time.After(pause):
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		}
		pause = min(2*pause, maxResumePause)
		next := options
		next.ResourceVersion, next.ResourceVersionMatch, next.SendInitialEvents = last, "", nil
		if !deadline.IsZero() {
			left := int64(time.Until(deadline) / time.Second)
			next.TimeoutSeconds = &left
		}
		var err error
		if w, err = inner.WatchWithContext(ctx, next); err != nil {
			return
		}
	}
}

// forward passes w's events on until w closes (ok true: the server closed it) or the
// consumer stops, the context ends or an error event passes (ok false). last tracks the
// resourceVersion of the last event passed; resumable turns true at the bookmark that
// ends a watch's initial events.
func (r *resumingWatch) forward(ctx context.Context, w watch.Interface, last *string, resumable *bool) (delivered, ok bool) {
	for {
		select {
		case <-r.stop:
			return delivered, false
		case <-ctx.Done():
			return delivered, false
		case ev, open := <-w.ResultChan():
			if !open {
				return delivered, true
			}
			if m, err := meta.Accessor(ev.Object); err == nil && ev.Type != watch.Error {
				if rv := m.GetResourceVersion(); rv != "" {
					*last = rv
				}
				if ev.Type == watch.Bookmark && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					*resumable = true
				}
			}
			select {
			case r.result <- ev:
				delivered = true
			case <-r.stop:
				return delivered, false
			case <-ctx.Done():
				return delivered, false
			}
			if ev.Type == watch.Error {
				return delivered, false
			}
		}
	}
}
