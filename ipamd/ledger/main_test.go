package ledger_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, func(s *testenv.Setup) (err error) {
		env, err = s.Start(testenv.Options{})
		return err
	})
}

// startCache starts an informer cache of pools, reserved IPs and blocks, with the
// ledger's indexes: only node's blocks when node is set (as an ipamd watches them),
// every block otherwise (as the webhook does).
func startCache(t testing.TB, ctx context.Context, node string) cache.Cache {
	t.Helper()
	opts := cache.Options{Scheme: env.Scheme, DefaultTransform: cache.TransformStripManagedFields()}
	if node != "" {
		opts.ByObject = map[client.Object]cache.ByObject{
			&ipamv1alpha1.IPBlock{}: {Field: fields.OneTermEqualSelector(ipamv1alpha1.FieldNode, node)},
		}
	}
	c, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Indexes(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&v2beta1.SpiderIPPool{}, &v2beta1.SpiderReservedIP{}, &ipamv1alpha1.IPBlock{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return c
}

// nodeLedger is an ipamd's ledger: its own cache, its node's blocks.
func nodeLedger(t *testing.T, ctx context.Context, node string) *ledger.Ledger {
	t.Helper()
	return ledger.New(ledger.Options{Node: node, Cache: startCache(t, ctx, node), Client: env.Client, Fresh: env.Client, Log: logr.Discard()})
}

// clusterLedger is the webhook's ledger: every block, no node.
func clusterLedger(t *testing.T, ctx context.Context) (*ledger.Ledger, cache.Cache) {
	t.Helper()
	c := startCache(t, ctx, "")
	return ledger.New(ledger.Options{Cache: c, Client: env.Client, Fresh: env.Client, Log: logr.Discard()}), c
}

// waitPool waits until the ledger's cache knows the pool (it was just created).
func waitPool(t testing.TB, ctx context.Context, c client.Reader, name string) {
	t.Helper()
	fixtures.Eventually(t, "pool "+name+" in the ledger's cache", func() bool {
		return c.Get(ctx, client.ObjectKey{Name: name}, &v2beta1.SpiderIPPool{}) == nil
	})
}

// records lists the pool's records from the API server through the one listing.
func records(t *testing.T, pool string) map[netip.Addr]ledger.Record {
	t.Helper()
	all, bad, err := ledger.List(context.Background(), env.Client)
	if err != nil || len(bad) > 0 {
		t.Fatalf("list records: %v %v", err, bad)
	}
	out := map[netip.Addr]ledger.Record{}
	for _, r := range all {
		if r.Pool != pool {
			continue
		}
		if prev, dup := out[r.Addr]; dup {
			t.Errorf("%s recorded twice: %+v and %+v", r.Addr, prev, r)
		}
		out[r.Addr] = r
	}
	return out
}

func blocksOf(t *testing.T, pool string) []ipamv1alpha1.IPBlock {
	t.Helper()
	var list ipamv1alpha1.IPBlockList
	if err := env.Client.List(context.Background(), &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(ipamv1alpha1.FieldPool, pool)}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func owner(i int) allocator.Owner {
	return allocator.Owner{Pod: fmt.Sprintf("ns/p%d", i), PodUID: fmt.Sprintf("uid-%d", i), Interface: "eth0"}
}
