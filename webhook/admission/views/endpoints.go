package views

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/webhook/cachestrings"
)

// Endpoint is what admission needs to know of a SpiderEndpoint.
type Endpoint struct {
	Namespace, Name string
	UID             types.UID
	Terminating     bool
	// Problem says why the endpoint's records are inconsistent (an empty or duplicate
	// interface); empty when they are not.
	Problem string
}

// NewEndpoint extracts the admission view of an endpoint.
func NewEndpoint(e *v2beta1.SpiderEndpoint) *Endpoint {
	return &Endpoint{
		Namespace:   e.Namespace,
		Name:        e.Name,
		UID:         e.UID,
		Terminating: e.DeletionTimestamp != nil,
		Problem:     RecordProblem(e.Status.Current.IPs),
	}
}

// RecordProblem says what is wrong with an endpoint's per-interface records: an entry
// without an interface, or two entries for one interface. It returns "" when nothing is.
func RecordProblem(ips []v2beta1.IPAllocationDetail) string {
	seen := make(map[string]int, len(ips))
	for i, d := range ips {
		if d.Interface == "" {
			return fmt.Sprintf("status.current.ips[%d] has an empty interface", i)
		}
		if prev, dup := seen[d.Interface]; dup {
			return fmt.Sprintf("status.current.ips[%d] and [%d] both record interface %q", prev, i, d.Interface)
		}
		seen[d.Interface] = i
	}
	return ""
}

// Endpoints is the admission view of every SpiderEndpoint, by namespace/name. The
// StatefulSet check reads it instead of the API server: an endpoint exists long
// before the pod that takes it over is recreated, so the informer has it.
//
// Registered on a cache, it reads the informer's store, which holds every endpoint
// already (as TransformEndpoint keeps it): no second copy of each. Unregistered
// (tests, the migration's offline check), it holds what Set gives it.
type Endpoints struct {
	view[*Endpoint]
	store toolscache.Store
}

// NewEndpoints returns an empty view.
func NewEndpoints() *Endpoints {
	return &Endpoints{view: newView[*Endpoint]()}
}

// Register makes the view read the cache's SpiderEndpoint informer.
func (v *Endpoints) Register(ctx context.Context, informers cache.Informers) error {
	inf, err := informers.GetInformer(ctx, &v2beta1.SpiderEndpoint{})
	if err != nil {
		return fmt.Errorf("informer for %T: %w", &v2beta1.SpiderEndpoint{}, err)
	}
	if s, ok := inf.(toolscache.SharedIndexInformer); ok {
		v.store, v.synced = s.GetStore(), s.HasSynced
		return nil
	}
	v.synced, err = watch(ctx, informers, &v2beta1.SpiderEndpoint{}, v.Set, v.remove)
	return err
}

// Set adds or replaces an endpoint of an unregistered view.
func (v *Endpoints) Set(e *v2beta1.SpiderEndpoint) {
	v.put(key(e.Namespace, e.Name), NewEndpoint(e))
}

// Delete removes an endpoint of an unregistered view.
func (v *Endpoints) Delete(namespace, name string) {
	v.remove(key(namespace, name))
}

// Get returns the endpoint of the pod namespace/name, or nil.
func (v *Endpoints) Get(namespace, name string) *Endpoint {
	if v.store != nil {
		obj, ok, err := v.store.GetByKey(key(namespace, name))
		if e, isEndpoint := obj.(*v2beta1.SpiderEndpoint); ok && err == nil && isEndpoint {
			return NewEndpoint(e)
		}
		return nil
	}
	e, _ := v.get(key(namespace, name))
	return e
}

// TransformEndpoint is the cache transform for SpiderEndpoints in the webhook's
// manager, which caches every endpoint of the cluster. Its readers there are this
// view (name, UID, deletion, whether the records are consistent) and the garbage
// collector (name, UID and resourceVersion as deletion preconditions, the pod UID,
// the owner controller); the addresses, pools, gateways and routes of each record,
// labels, annotations (ipamd's container attachments) and managedFields are dropped.
// The records themselves are kept, with their interface only, when RecordProblem
// finds them inconsistent, so that the view states the same problem; consistent ones
// are dropped (no reader needs them). Strings are laid out for a long stay in the
// cache (webhook/cachestrings). The webhook never writes an endpoint from its cache.
//
// Whoever starts reading another endpoint field from the webhook's cache must keep it
// here.
func TransformEndpoint(obj any) (any, error) {
	e, ok := obj.(*v2beta1.SpiderEndpoint)
	if !ok {
		// Tombstones and anything else pass unchanged.
		return obj, nil
	}
	var ips []v2beta1.IPAllocationDetail
	if RecordProblem(e.Status.Current.IPs) != "" {
		ips = make([]v2beta1.IPAllocationDetail, len(e.Status.Current.IPs))
		for i, d := range e.Status.Current.IPs {
			ips[i] = v2beta1.IPAllocationDetail{Interface: cachestrings.Shared(d.Interface)}
		}
	}
	out := &v2beta1.SpiderEndpoint{
		TypeMeta: cachestrings.TypeMeta(e.TypeMeta),
		ObjectMeta: metav1.ObjectMeta{
			Namespace:                  cachestrings.Shared(e.Namespace),
			Name:                       e.Name,
			ResourceVersion:            e.ResourceVersion,
			CreationTimestamp:          e.CreationTimestamp,
			DeletionTimestamp:          e.DeletionTimestamp,
			DeletionGracePeriodSeconds: e.DeletionGracePeriodSeconds,
			Finalizers:                 e.Finalizers,
		},
		Status: v2beta1.WorkloadEndpointStatus{
			Current:             v2beta1.PodIPAllocation{UID: e.Status.Current.UID, Node: cachestrings.Shared(e.Status.Current.Node), IPs: ips},
			OwnerControllerType: cachestrings.Shared(e.Status.OwnerControllerType),
			OwnerControllerName: e.Status.OwnerControllerName,
		},
	}
	out.UID = e.UID
	cachestrings.OwnWithUID(&out.UID, &out.Name, &out.ResourceVersion, &out.Status.Current.UID, &out.Status.OwnerControllerName)
	return out, nil
}
