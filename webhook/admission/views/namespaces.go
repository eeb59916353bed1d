package views

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespaces is the labels of every namespace, for pools' namespaceAffinity. It is
// fed by a metadata-only informer.
type Namespaces struct {
	view[labels.Set]
	live client.Reader
}

// NewNamespaces returns an empty view; live, when not nil, is read on a miss (a
// namespace created a moment ago).
func NewNamespaces(live client.Reader) *Namespaces {
	return &Namespaces{view: newView[labels.Set](), live: live}
}

// Register feeds the view from the cache's metadata-only Namespace informer.
func (v *Namespaces) Register(ctx context.Context, informers cache.Informers) error {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	synced, err := watch(ctx, informers, obj, func(o *metav1.PartialObjectMetadata) {
		v.Set(o.Name, o.Labels)
	}, v.remove)
	v.synced = synced
	return err
}

// Set records a namespace's labels.
func (v *Namespaces) Set(name string, l map[string]string) {
	v.put(name, labels.Set(l))
}

// Labels returns the namespace's labels; found is false when there is no such
// namespace. On a miss of the view it reads the API server if live allows.
func (v *Namespaces) Labels(ctx context.Context, name string, live *LiveReads) (labels.Set, bool, error) {
	if l, ok := v.get(name); ok {
		return l, true, nil
	}
	if v.live == nil || !live.take() {
		return nil, false, nil
	}
	ns := &corev1.Namespace{}
	if err := v.live.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return labels.Set(ns.Labels), true, nil
}
