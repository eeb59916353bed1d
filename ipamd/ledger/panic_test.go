package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/guard"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// TestPanicInABlockWriteFailsItsCallsAndNotTheDaemon: a bug that panics while a
// block's write queue runs (here the API client, on its first block write) used to
// end the whole process, outside any recovery. It fails the calls that batch carried
// with the bug's error; the next allocation of the block is written.
func TestPanicInABlockWriteFailsItsCallsAndNotTheDaemon(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("panics", "10.31.0.0/16", []string{"10.31.0.1-10.31.0.20"}))
	ww, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var patches atomic.Int32
	c := interceptor.NewClient(ww, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*ipamv1alpha1.IPBlock); ok && patches.Add(1) == 1 {
				panic("injected: a bug in a block write")
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	const node = "node-panics"
	l := ledger.New(ledger.Options{Node: node, Cache: startCache(t, ctx, node), Client: c, Fresh: env.Client, Log: logr.Discard()})
	var p *guard.Panic
	if _, err := l.Allocate(ctx, "panics", owner(1)); !errors.As(err, &p) {
		t.Fatalf("allocation whose write panicked: %v, want the recovered panic", err)
	}
	got, err := l.Allocate(ctx, "panics", owner(2))
	if err != nil || !got.Addr.IsValid() {
		t.Fatalf("allocation after the panic: %+v, %v", got, err)
	}
	if patches.Load() < 2 {
		t.Errorf("%d block writes: the second allocation was not written", patches.Load())
	}
}
