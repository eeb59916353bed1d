package daemon_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/daemon"
)

// droppingServer stands for an API server that closes every watch of its informer
// shortly after it is established (after the initial events, for a stream that sends
// them), before anything reaches it, as a busy API server closes watchers that fall
// behind. It counts the lists the informer makes: LIST requests and the watch streams
// the server accepts that send the initial state. A request for such a stream that
// the server refuses is no list: it sends nothing, and the informer lists instead (an
// API server without the WatchList feature, as 1.31's by default, refuses
// sendInitialEvents, and client-go's reflector then falls back to a LIST).
type droppingServer struct {
	toolscache.ListerWatcherWithContext
	after          time.Duration
	lists, watches atomic.Int64
}

func (s *droppingServer) List(o metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), o)
}

func (s *droppingServer) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), o)
}

func (s *droppingServer) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	s.lists.Add(1)
	return s.ListerWatcherWithContext.ListWithContext(ctx, o)
}

func (s *droppingServer) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	initial := o.SendInitialEvents != nil && *o.SendInitialEvents
	w, err := s.ListerWatcherWithContext.WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	if initial {
		s.lists.Add(1)
	}
	s.watches.Add(1)
	out := make(chan watch.Event)
	proxy := watch.NewProxyWatcher(out)
	go func() {
		defer close(out)
		defer w.Stop()
		var drop <-chan time.Time
		if !initial {
			drop = time.After(s.after)
		}
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				select {
				case out <- ev:
				case <-proxy.StopChan():
					return
				}
				if m, err := meta.Accessor(ev.Object); initial && err == nil && ev.Type == watch.Bookmark && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					drop = time.After(s.after)
				}
			case <-drop:
				return
			case <-proxy.StopChan():
				return
			}
		}
	}()
	return proxy, nil
}

// informerOver runs an informer of the ConfigMaps of namespace through lw and counts
// the ADDs it delivers per name.
func informerOver(t *testing.T, ctx context.Context, lw toolscache.ListerWatcher) (adds func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		seen[obj.(*corev1.ConfigMap).Name]++
	}}); err != nil {
		t.Fatal(err)
	}
	go inf.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(seen))
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

// When the API server keeps closing an informer's watch before anything reaches it,
// ipamd's informer resumes the watch where it was: it lists once, at its start, and
// receives each new object once. A plain informer over the same server relists (and
// would be sent every object of its selection again).
func TestDroppedWatchesAreResumedWithoutRelisting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "resume-watch"
	createNamespace(t, ns)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	source := func() *droppingServer {
		return &droppingServer{after: 300 * time.Millisecond, ListerWatcherWithContext: &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.CoreV1().ConfigMaps(ns).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.CoreV1().ConfigMaps(ns).Watch(ctx, o)
			},
		}}
	}
	plainServer, resumedServer := source(), source()
	plain := informerOver(t, ctx, plainServer)
	resumed := informerOver(t, ctx, daemon.ResumingListerWatcher(resumedServer))

	// Nothing happens while the servers drop their informers' watches empty: the plain
	// informer relists, ipamd's resumes a few times over.
	fixtures.Eventually(t, "both informers' watches dropped empty", func() bool {
		return plainServer.lists.Load() >= 2 && resumedServer.watches.Load() > 3
	})
	const objects = 6
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i)}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Each object reaches a watch of its own: the next create waits for a drop.
		after := resumedServer.watches.Load()
		fixtures.Eventually(t, "ipamd's informer's watch dropped after a create", func() bool { return resumedServer.watches.Load() > after })
	}
	for name, adds := range map[string]func() map[string]int{"plain": plain, "resumed": resumed} {
		fixtures.Eventually(t, fmt.Sprintf("the %s informer holding the %d ConfigMaps", name, objects), func() (bool, string) {
			got := adds()
			return len(got) == objects, fmt.Sprintf("it holds %v", got)
		})
	}

	if n := resumedServer.lists.Load(); n != 1 {
		t.Errorf("ipamd's informer listed %d times, want once (at its start): a dropped watch was relisted", n)
	}
	if n := resumedServer.watches.Load(); n < 3 {
		t.Errorf("ipamd's informer opened %d watches: the server's drops were not exercised", n)
	}
	for name, n := range resumed() {
		if n != 1 {
			t.Errorf("ipamd's informer received ConfigMap %s %d times, want once", name, n)
		}
	}
	if n := plainServer.lists.Load(); n < 2 {
		t.Errorf("a plain informer over the same dropping server listed %d times: the test does not reproduce the relist it guards against", n)
	}
}
