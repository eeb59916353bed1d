package ledger

import (
	"context"
	"fmt"

	"go4.org/netipx"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipranges"
)

// ReservedSet is the union of every SpiderReservedIP's addresses: never allocatable.
// The webhook validates them; one that does not parse withholds nothing.
func ReservedSet(ctx context.Context, r client.Reader) (*netipx.IPSet, error) {
	var list v2beta1.SpiderReservedIPList
	if err := r.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list SpiderReservedIPs: %w", err)
	}
	var b netipx.IPSetBuilder
	for _, item := range list.Items {
		for _, s := range item.Spec.IPs {
			if rg, err := ipranges.ParseRange(s, nil); err == nil {
				b.AddRange(rg)
			}
		}
	}
	return b.IPSet()
}
