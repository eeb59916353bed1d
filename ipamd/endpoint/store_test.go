package endpoint

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// reader is a cache that holds at most one endpoint and lags as a test says.
type reader struct{ ep *v2beta1.SpiderEndpoint }

func (r *reader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if r.ep == nil || r.ep.Namespace != key.Namespace || r.ep.Name != key.Name {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "spiderendpoints"}, key.Name)
	}
	r.ep.DeepCopyInto(obj.(*v2beta1.SpiderEndpoint))
	return nil
}

func (r *reader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func ep(uid, rv string) *v2beta1.SpiderEndpoint {
	e := &v2beta1.SpiderEndpoint{}
	e.Namespace, e.Name, e.UID, e.ResourceVersion = "ns", "pod", types.UID(uid), rv
	return e
}

var key = types.NamespacedName{Namespace: "ns", Name: "pod"}

// What this process wrote is read back until the cache holds something newer.
func TestGetReadsItsWrites(t *testing.T) {
	cache := &reader{ep: ep("a", "5")}
	s := NewStore(cache, cache, nil)
	s.remember(key, ep("a", "7"))
	if got, _ := s.Get(context.Background(), key); got.ResourceVersion != "7" {
		t.Fatalf("Get with the cache behind = resourceVersion %s, want the written 7", got.ResourceVersion)
	}
	cache.ep = ep("a", "9")
	if got, _ := s.Get(context.Background(), key); got.ResourceVersion != "9" {
		t.Fatalf("Get with the cache ahead = resourceVersion %s, want the cached 9", got.ResourceVersion)
	}
	if _, ok := s.written[key]; ok {
		t.Error("the written copy should be dropped once the cache has caught up")
	}
}

// An endpoint this process deleted stays deleted while the cache still shows it, and
// a re-created one (another object UID) is seen at once.
func TestGetForgetsWhatItDeleted(t *testing.T) {
	cache := &reader{ep: ep("a", "5")}
	s := NewStore(cache, cache, nil)
	s.removed(key, "a")
	if got, _ := s.Get(context.Background(), key); got != nil {
		t.Fatalf("Get after delete = %s, want none", got.UID)
	}
	cache.ep = ep("b", "8")
	if got, _ := s.Get(context.Background(), key); got == nil || got.UID != "b" {
		t.Fatalf("Get after a re-create = %v, want the new endpoint b", got)
	}
}
