package views

import (
	"context"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/eligibility"
)

// Pool is what admission needs to know of a SpiderIPPool: its eligibility view.
type Pool = eligibility.Pool

// NewPool extracts the admission view of a pool.
func NewPool(p *v2beta1.SpiderIPPool) *Pool { return eligibility.NewPool(p) }

// Pools is the admission view of every SpiderIPPool, by name.
type Pools struct {
	view[*Pool]
	names []string // sorted; guarded by view.mu
	live  client.Reader
}

// NewPools returns an empty view. live, when not nil, is read on a miss: a pool
// created a moment ago may not have reached the informer yet, and a miss is the rare
// (deny) path, so the extra read does not touch the hot path.
func NewPools(live client.Reader) *Pools {
	return &Pools{view: newView[*Pool](), live: live}
}

// Register feeds the view from the cache's SpiderIPPool informer.
func (v *Pools) Register(ctx context.Context, informers cache.Informers) error {
	synced, err := watch(ctx, informers, &v2beta1.SpiderIPPool{}, v.Set, v.Delete)
	v.synced = synced
	return err
}

// Set adds or replaces a pool. Status-only updates (the frequent kind: every
// allocation writes the status) leave the view untouched.
func (v *Pools) Set(p *v2beta1.SpiderIPPool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old, ok := v.m[p.Name]
	if ok && old.Generation == p.Generation && old.Generation != 0 && old.Terminating == (p.DeletionTimestamp != nil) {
		return
	}
	v.m[p.Name] = NewPool(p)
	if !ok {
		i := sort.SearchStrings(v.names, p.Name)
		v.names = slices.Insert(v.names, i, p.Name)
	}
}

// Delete removes a pool.
func (v *Pools) Delete(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.m[name]; !ok {
		return
	}
	delete(v.m, name)
	if i, found := slices.BinarySearch(v.names, name); found {
		v.names = slices.Delete(v.names, i, i+1)
	}
}

// Get returns the pool of that name, or nil when there is none. On a miss of the
// view it reads the API server if live allows.
func (v *Pools) Get(ctx context.Context, name string, live *LiveReads) (*Pool, error) {
	if p, ok := v.get(name); ok {
		return p, nil
	}
	if v.live == nil || !live.take() {
		return nil, nil
	}
	obj := &v2beta1.SpiderIPPool{}
	if err := v.live.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return NewPool(obj), nil
}

// Range calls fn for every pool in name order until fn returns false.
func (v *Pools) Range(fn func(*Pool) bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, n := range v.names {
		if !fn(v.m[n]) {
			return
		}
	}
}

// RangePrefix calls fn, in name order, for every pool whose name starts with prefix
// until fn returns false.
func (v *Pools) RangePrefix(prefix string, fn func(*Pool) bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for i := sort.SearchStrings(v.names, prefix); i < len(v.names) && strings.HasPrefix(v.names[i], prefix); i++ {
		if !fn(v.m[v.names[i]]) {
			return
		}
	}
}

// List reads every pool from the API server, bypassing the view, if live allows:
// for the rare case where the view finds nothing and a pool may have been created a
// moment ago.
func (v *Pools) List(ctx context.Context, live *LiveReads) ([]*Pool, error) {
	if v.live == nil || !live.take() {
		return nil, nil
	}
	var list v2beta1.SpiderIPPoolList
	if err := v.live.List(ctx, &list); err != nil {
		return nil, err
	}
	out := make([]*Pool, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, NewPool(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
