package cli

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// defaultChunkSize is kubectl's --chunk-size default.
const defaultChunkSize = 500

// paged is a client whose every List reads the API server in pages of chunk items,
// as kubectl get --chunk-size does, so that no single request returns a whole large
// collection; 0 reads each in one request.
type paged struct {
	client.Client
	chunk int64
}

func (p paged) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if p.chunk <= 0 || lo.Limit > 0 {
		return p.Client.List(ctx, list, opts...)
	}
	var all []runtime.Object
	cont := ""
	for {
		page := append(append([]client.ListOption{}, opts...), client.Limit(p.chunk), client.Continue(cont))
		if err := p.Client.List(ctx, list, page...); err != nil {
			return err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, it := range items {
			all = append(all, it.DeepCopyObject())
		}
		cont = list.GetContinue()
		if cont == "" {
			break
		}
	}
	list.SetContinue("")
	return meta.SetList(list, all)
}
