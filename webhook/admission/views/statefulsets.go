package views

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatefulSets tells the UID of each StatefulSet, by namespace/name: a pod is stamped
// as a StatefulSet's ordinal only when its controller reference names a StatefulSet
// that exists with that UID, not one its author wrote by hand.
//
// Registered on a cache, it reads the informer's store (the garbage collector watches
// StatefulSets in the same cache: no second copy). Unregistered (tests), it holds what
// Set gives it.
type StatefulSets struct {
	view[types.UID]
	store toolscache.Store
	live  client.Reader
}

// NewStatefulSets returns an empty view; live, when not nil, is read on a miss (a
// StatefulSet created a moment ago, whose first pod comes right after it).
func NewStatefulSets(live client.Reader) *StatefulSets {
	return &StatefulSets{view: newView[types.UID](), live: live}
}

// Register makes the view read the cache's StatefulSet informer.
func (v *StatefulSets) Register(ctx context.Context, informers cache.Informers) error {
	inf, err := informers.GetInformer(ctx, &appsv1.StatefulSet{})
	if err != nil {
		return fmt.Errorf("informer for %T: %w", &appsv1.StatefulSet{}, err)
	}
	if s, ok := inf.(toolscache.SharedIndexInformer); ok {
		v.store, v.synced = s.GetStore(), s.HasSynced
		return nil
	}
	v.synced, err = watch(ctx, informers, &appsv1.StatefulSet{}, func(s *appsv1.StatefulSet) { v.put(key(s.Namespace, s.Name), s.UID) }, v.remove)
	return err
}

// Set records a StatefulSet of an unregistered view.
func (v *StatefulSets) Set(namespace, name string, uid types.UID) {
	v.put(key(namespace, name), uid)
}

// ErrNotRead says a StatefulSet is not in the view and the request may read the API
// server no more: whether it exists is unknown.
var ErrNotRead = errors.New("not in the webhook's cache yet, and this request already read the API server")

// UID returns the UID of StatefulSet namespace/name; found is false when there is
// none. On a miss of the view it reads the API server if live allows, else fails
// with ErrNotRead.
func (v *StatefulSets) UID(ctx context.Context, namespace, name string, live *LiveReads) (uid types.UID, found bool, err error) {
	if v.store != nil {
		obj, ok, err := v.store.GetByKey(key(namespace, name))
		if s, isSet := obj.(*appsv1.StatefulSet); ok && err == nil && isSet {
			return s.UID, true, nil
		}
	} else if uid, ok := v.get(key(namespace, name)); ok {
		return uid, true, nil
	}
	if v.live == nil {
		return "", false, nil
	}
	if !live.take() {
		return "", false, ErrNotRead
	}
	s := &appsv1.StatefulSet{}
	if err := v.live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	return s.UID, true, nil
}
