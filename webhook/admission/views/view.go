package views

import (
	"context"
	"fmt"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// view is a map of compact values kept up to date by an informer's events.
type view[V any] struct {
	mu     sync.RWMutex
	m      map[string]V
	synced func() bool
}

func newView[V any]() view[V] {
	return view[V]{m: map[string]V{}}
}

func (v *view[V]) get(key string) (V, bool) {
	v.mu.RLock()
	val, ok := v.m[key]
	v.mu.RUnlock()
	return val, ok
}

func (v *view[V]) put(key string, val V) {
	v.mu.Lock()
	v.m[key] = val
	v.mu.Unlock()
}

func (v *view[V]) remove(key string) {
	v.mu.Lock()
	delete(v.m, key)
	v.mu.Unlock()
}

// Synced reports whether the informer feeding the view has delivered its initial list.
// A view that was never registered (tests, benchmarks) counts as synced.
func (v *view[V]) Synced() bool {
	return v.synced == nil || v.synced()
}

// watch registers upsert and remove as handlers of obj's informer. upsert receives
// every added or updated object; remove the key of every deleted one.
func watch[T client.Object](ctx context.Context, informers cache.Informers, obj T, upsert func(T), remove func(key string)) (func() bool, error) {
	inf, err := informers.GetInformer(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("informer for %T: %w", obj, err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if t, ok := o.(T); ok {
				upsert(t)
			}
		},
		UpdateFunc: func(_, o any) {
			if t, ok := o.(T); ok {
				upsert(t)
			}
		},
		DeleteFunc: func(o any) {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				remove(tomb.Key)
				return
			}
			if t, ok := o.(T); ok {
				remove(key(t.GetNamespace(), t.GetName()))
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch %T: %w", obj, err)
	}
	return reg.HasSynced, nil
}

// key is the informer key of an object: "namespace/name", or "name" when
// cluster-scoped.
func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
