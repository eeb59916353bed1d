// Package endpoint holds ipamd's writes of SpiderEndpoints: a read-your-writes view of
// the pods' endpoints (Store) and the codec of the annotation ipamd records on them
// (AttachmentsAnnotation). What an endpoint should say is decided by ipamd/service.
package endpoint

import (
	"context"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/metrics"
)

// Store reads and writes the pods' SpiderEndpoints of one process. A read returns the
// newest copy this process knows, the cache's or the one it wrote last, so that a
// request sees what the request before it wrote even when the cache has not heard of
// it yet.
type Store struct {
	cache  client.Reader // an informer cache
	fresh  client.Reader // the API server, bypassing the cache
	client client.Client // writes

	mu sync.Mutex
	// written holds the endpoints this process wrote (or read fresh) last, ahead of
	// the cache.
	written map[types.NamespacedName]*v2beta1.SpiderEndpoint
	// gone holds the object UIDs of endpoints this process saw deleted, until the
	// cache has heard of it.
	gone map[types.NamespacedName]types.UID
}

// NewStore returns a store reading from cache, from fresh when it must read past the
// cache, and writing with c.
func NewStore(cache, fresh client.Reader, c client.Client) *Store {
	return &Store{cache: cache, fresh: fresh, client: c,
		written: map[types.NamespacedName]*v2beta1.SpiderEndpoint{}, gone: map[types.NamespacedName]types.UID{}}
}

// Get returns the newest copy of the pod's endpoint this process knows: the cached one
// or the one it last wrote, whichever is newer (resource versions of one resource are
// ordered, across a delete and a re-create too). A copy of an endpoint this process
// saw deleted is none. nil when there is none.
func (s *Store) Get(ctx context.Context, key types.NamespacedName) (*v2beta1.SpiderEndpoint, error) {
	ep := &v2beta1.SpiderEndpoint{}
	err := s.cache.Get(ctx, key, ep)
	if apierrors.IsNotFound(err) {
		ep = nil
	} else if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if uid, ok := s.gone[key]; ok {
		if ep != nil && ep.UID == uid {
			ep = nil // the cache has not heard of its deletion yet
		} else {
			delete(s.gone, key)
		}
	}
	w := s.written[key]
	if w != nil && ep != nil {
		if c, err := resourceversion.CompareResourceVersion(w.ResourceVersion, ep.ResourceVersion); err != nil || c <= 0 {
			delete(s.written, key) // the cache has caught up (or moved on): it is the newest now
			return ep, nil
		}
	}
	if w != nil {
		return w, nil // what this process wrote last, which the cache has not seen yet
	}
	return ep, nil
}

// Fresh reads the endpoint from the API server, and remembers what it read for Get.
func (s *Store) Fresh(ctx context.Context, key types.NamespacedName) (*v2beta1.SpiderEndpoint, error) {
	ep := &v2beta1.SpiderEndpoint{}
	if err := s.fresh.Get(ctx, key, ep); err != nil {
		if apierrors.IsNotFound(err) {
			// Whatever the cache still holds under this name is gone.
			cached := &v2beta1.SpiderEndpoint{}
			if s.cache.Get(ctx, key, cached) == nil {
				s.removed(key, cached.UID)
			} else {
				s.remember(key, nil)
			}
			return nil, nil
		}
		return nil, err
	}
	s.remember(key, ep)
	return ep, nil
}

// Create creates ep (the CRD has no status subresource: the status goes with it).
func (s *Store) Create(ctx context.Context, ep *v2beta1.SpiderEndpoint) error {
	ep.Status.Current.Summary = Summary(ep.Status.Current.IPs)
	err := s.client.Create(ctx, ep)
	metrics.EndpointWrites.WithLabelValues("create", result(err)).Inc()
	if err == nil {
		s.remember(client.ObjectKeyFromObject(ep), ep)
	}
	return err
}

// Update writes ep, compare-and-swapped on the resourceVersion it carries.
func (s *Store) Update(ctx context.Context, ep *v2beta1.SpiderEndpoint) error {
	ep.Status.Current.Summary = Summary(ep.Status.Current.IPs)
	err := s.client.Update(ctx, ep)
	metrics.EndpointWrites.WithLabelValues("update", result(err)).Inc()
	if err == nil {
		s.remember(client.ObjectKeyFromObject(ep), ep)
	}
	return err
}

// Summary is status.current.summary of an endpoint whose records are ips: each
// interface and its addresses, in the records' order.
func Summary(ips []v2beta1.IPAllocationDetail) string {
	var b strings.Builder
	for i, d := range ips {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.Interface)
		for _, a := range []*string{d.IPv4, d.IPv6} {
			if a != nil && *a != "" {
				b.WriteString(" " + *a)
			}
		}
	}
	return b.String()
}

// Delete deletes ep with its UID and resourceVersion as preconditions. An endpoint
// already gone counts as deleted (and the error says so).
func (s *Store) Delete(ctx context.Context, ep *v2beta1.SpiderEndpoint) error {
	uid, rv := ep.UID, ep.ResourceVersion
	err := s.client.Delete(ctx, ep, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	metrics.EndpointWrites.WithLabelValues("delete", result(err)).Inc()
	if err == nil || apierrors.IsNotFound(err) {
		s.removed(client.ObjectKeyFromObject(ep), uid)
	}
	return err
}

// remember keeps the copy of an endpoint this process wrote or read last (nil: none).
func (s *Store) remember(key types.NamespacedName, ep *v2beta1.SpiderEndpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep == nil {
		delete(s.written, key)
		return
	}
	s.written[key] = ep
}

// removed notes that the endpoint of object UID uid under key no longer exists, so
// that a cache that has not heard of it yet does not bring it back.
func (s *Store) removed(key types.NamespacedName, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.written, key)
	s.gone[key] = uid
}

func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return "conflict"
	default:
		return "error"
	}
}
