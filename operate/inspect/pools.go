package inspect

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// PoolReport is the usage of one pool.
type PoolReport struct {
	Name   string `json:"name"`
	Family int64  `json:"family"`
	Subnet string `json:"subnet"`
	// Used counts the pool's records; Free the allocatable addresses no record holds;
	// Total the allocatable addresses (spec.ips minus excludeIPs, the gateway and
	// reserved addresses); Reserved the pool's addresses that SpiderReservedIPs withhold.
	Used     int64 `json:"used"`
	Free     int64 `json:"free"`
	Total    int64 `json:"total"`
	Reserved int64 `json:"reserved"`
	Default  bool  `json:"default,omitempty"`
	Disabled bool  `json:"disabled,omitempty"`
	// Terminating is true for a pool being deleted: it hands out nothing new.
	Terminating bool `json:"terminating,omitempty"`
	// Affinity summarises which namespaces, pods, nodes and networks may use the pool;
	// empty when any may.
	Affinity string `json:"affinity,omitempty"`
	// Error says why the pool's addresses cannot be computed (a malformed spec).
	Error string `json:"error,omitempty"`
}

// Pools reports every pool, the fullest (smallest free fraction) first.
func Pools(ctx context.Context, r client.Reader) ([]PoolReport, error) {
	var pools v2beta1.SpiderIPPoolList
	if err := r.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("list SpiderIPPools: %w", err)
	}
	reserved, err := ledger.ReservedSet(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("list SpiderReservedIPs: %w", err)
	}
	recs, _, err := ledger.List(ctx, r)
	if err != nil {
		return nil, err
	}
	used := map[string]map[netip.Addr]struct{}{}
	for _, rec := range recs {
		if used[rec.Pool] == nil {
			used[rec.Pool] = map[netip.Addr]struct{}{}
		}
		used[rec.Pool][rec.Addr] = struct{}{}
	}
	out := make([]PoolReport, 0, len(pools.Items))
	for i := range pools.Items {
		p := &pools.Items[i]
		rep := PoolReport{
			Name: p.Name, Subnet: p.Spec.Subnet,
			Used:        int64(len(used[p.Name])),
			Default:     p.Spec.Default != nil && *p.Spec.Default,
			Disabled:    p.Spec.Disable != nil && *p.Spec.Disable,
			Terminating: p.DeletionTimestamp != nil,
			Affinity:    affinity(&p.Spec),
		}
		rng, err := allocator.NewRange(p, reserved)
		if err != nil {
			rep.Error = err.Error()
		} else {
			rep.Family, rep.Total, rep.Reserved = rng.Family, rng.Total, rng.Reserved
			rep.Free = rng.Free(used[p.Name])
		}
		out = append(out, rep)
	}
	sort.SliceStable(out, func(i, j int) bool {
		fi, fj := freeFraction(out[i]), freeFraction(out[j])
		if fi != fj {
			return fi < fj
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func freeFraction(p PoolReport) float64 {
	if p.Total == 0 {
		return 0
	}
	return float64(p.Free) / float64(p.Total)
}

// affinity summarises a pool's restrictions: "namespaces=a,b pods=app=web nodes=n1
// networks=kube-system/macvlan".
func affinity(s *v2beta1.IPPoolSpec) string {
	var parts []string
	add := func(key string, names []string, sel *metav1.LabelSelector) {
		var vals []string
		vals = append(vals, names...)
		if sel != nil {
			vals = append(vals, "{"+metav1.FormatLabelSelector(sel)+"}")
		}
		if len(vals) > 0 {
			parts = append(parts, key+"="+strings.Join(vals, ","))
		}
	}
	add("namespaces", s.NamespaceName, s.NamespaceAffinity)
	add("pods", nil, s.PodAffinity)
	add("nodes", s.NodeName, s.NodeAffinity)
	add("networks", s.MultusName, nil)
	return strings.Join(parts, " ")
}
