package views

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// All bundles the views a pod decision reads.
type All struct {
	Pools      *Pools
	Namespaces *Namespaces
	Endpoints  *Endpoints
	// StatefulSets are read for the StatefulSet stamp.
	StatefulSets *StatefulSets
	// Networks stays empty in a cluster without the NetworkAttachmentDefinition CRD.
	Networks *Networks
}

// New returns empty views; live is read on a miss of a pool, a namespace or a
// StatefulSet.
func New(live client.Reader) *All {
	return &All{Pools: NewPools(live), Namespaces: NewNamespaces(live), Endpoints: NewEndpoints(), StatefulSets: NewStatefulSets(live), Networks: NewNetworks()}
}

// Register feeds every view from the cache's informers; the networks view only when
// withNetworks (the cluster serves NetworkAttachmentDefinitions).
func (v *All) Register(ctx context.Context, informers cache.Informers, withNetworks bool) error {
	if err := v.Pools.Register(ctx, informers); err != nil {
		return err
	}
	if err := v.Namespaces.Register(ctx, informers); err != nil {
		return err
	}
	if withNetworks {
		if err := v.Networks.Register(ctx, informers); err != nil {
			return err
		}
	}
	if err := v.StatefulSets.Register(ctx, informers); err != nil {
		return err
	}
	return v.Endpoints.Register(ctx, informers)
}

// Synced reports whether every view has its informer's initial list.
func (v *All) Synced() bool {
	return v.Pools.Synced() && v.Namespaces.Synced() && v.Endpoints.Synced() && v.StatefulSets.Synced() && v.Networks.Synced()
}
