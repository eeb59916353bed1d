package ledger

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"go4.org/netipx"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1alpha1 "github.com/nicpool/nicpool/crds/api/ipam/v1alpha1"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/eligibility"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/block"
)

// Errors of requests that a pool refuses.
var (
	// ErrPoolTerminating refuses allocations from a pool that is being deleted
	// (eligibility.Closed).
	ErrPoolTerminating = eligibility.ErrTerminating
	// ErrPoolDisabled refuses allocations from a pool with spec.disable: true.
	ErrPoolDisabled = eligibility.ErrDisabled
	// ErrNoNode is returned by Allocate of a ledger that allocates for no node.
	ErrNoNode = errors.New("this ledger allocates for no node")
)

// Cache index names; Indexes registers them.
const (
	// IndexBlockPool indexes IPBlocks by spec.pool.
	IndexBlockPool = "spec.pool"
	// IndexBlockPodUID indexes IPBlocks by the pod UIDs of their records.
	IndexBlockPodUID = "status.allocations.podUid"
	// IndexBlockRoom indexes IPBlocks with a free address by spec.pool: where an
	// allocation looks first, without reading every block its node holds (a node of a
	// large pool holds hundreds, nearly all full).
	IndexBlockRoom = "spec.pool.room"
)

// Indexer is the part of a controller-runtime cache that registers indexes.
type Indexer interface {
	IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error
}

// Indexes registers the cache indexes a node's ledger reads IPBlocks with (an ipamd's:
// its allocations, releases and transfers look a pod's blocks up by its UID).
// Components that share a cache may each call it: an index already registered is kept.
func Indexes(ctx context.Context, idx Indexer) error {
	if err := ClusterIndexes(ctx, idx); err != nil {
		return err
	}
	err := idx.IndexField(ctx, &ipamv1alpha1.IPBlock{}, IndexBlockRoom, func(o client.Object) []string {
		if b := o.(*ipamv1alpha1.IPBlock); b.Status.Free > 0 {
			return []string{b.Spec.Pool}
		}
		return nil
	})
	if err != nil && !alreadyIndexed(err) {
		return err
	}
	err = idx.IndexField(ctx, &ipamv1alpha1.IPBlock{}, IndexBlockPodUID, func(o client.Object) []string {
		b := o.(*ipamv1alpha1.IPBlock)
		var out []string
		for _, rec := range b.Status.Allocations {
			if !slices.Contains(out, rec.PodUID) {
				out = append(out, rec.PodUID)
			}
		}
		return out
	})
	if err != nil && !alreadyIndexed(err) {
		return err
	}
	return nil
}

// ClusterIndexes registers the one index a cluster-level ledger (Options.Node empty:
// the garbage collector's releases of records, the counts, migrations) reads IPBlocks
// with, by pool. It leaves out the index by pod UID, which such a ledger never reads
// and which costs a cache of every block in the cluster an entry per record.
func ClusterIndexes(ctx context.Context, idx Indexer) error {
	if err := idx.IndexField(ctx, &ipamv1alpha1.IPBlock{}, IndexBlockPool, func(o client.Object) []string {
		return []string{o.(*ipamv1alpha1.IPBlock).Spec.Pool}
	}); err != nil && !alreadyIndexed(err) {
		return err
	}
	return nil
}

// alreadyIndexed reports client-go's refusal to register an index name twice.
func alreadyIndexed(err error) bool {
	return strings.Contains(err.Error(), "indexer conflict")
}

// Options configure a Ledger.
type Options struct {
	// Node is the node this process allocates for: the blocks it claims carry its name.
	// Empty for cluster-level writers (garbage collector, counts), which never allocate.
	Node string
	// Order is which free address an allocation takes: allocator.NextAfterLast (the
	// zero value) continues after the address this process handed out last in the
	// pool, in its own blocks, claiming a new block rather than wrapping around;
	// allocator.Lowest takes the lowest free address of the node's blocks.
	Order allocator.Order
	// Cache is an informer cache with Indexes registered, serving SpiderIPPools,
	// SpiderReservedIPs and IPBlocks: an ipamd caches only its own node's blocks
	// (field selector spec.node), a cluster-level writer every block.
	Cache client.Reader
	// Client writes IPBlocks and pool status.
	Client client.Client
	// Fresh reads the API server directly: blocks of other nodes, and re-reads after
	// a conflict.
	Fresh client.Reader
	Log   logr.Logger
}

// Ledger writes allocation state. It is safe for concurrent use.
type Ledger struct {
	opts Options

	mu     sync.Mutex
	queues map[string]*queue
	pools  map[string]*poolState
	// ahead: the queues whose newest copy this process has is ahead of its cache.
	ahead aheadSet

	// beforeClaim, set by tests only, runs after a claim has chosen its block and
	// before it creates it: where another process's write can come in between.
	beforeClaim func(pool string)
}

// New returns a ledger; see Options.
func New(opts Options) *Ledger {
	return &Ledger{opts: opts, queues: map[string]*queue{}, pools: map[string]*poolState{}}
}

// poolView is what the ledger derives from a pool and the reserved addresses.
type poolView struct {
	pool   *v2beta1.SpiderIPPool
	rng    *allocator.Range
	layout *block.Layout
	key    string // identifies the inputs: pool generation and reserved IPs' versions
}

// poolState is what this process knows of one pool between requests.
type poolState struct {
	name string

	mu     sync.Mutex
	view   *poolView
	known  map[string]*queue // blocks of the pool this process wrote or read
	cursor netip.Addr        // the address this node handed out last in the pool

	claim    sync.Mutex // one claim at a time
	claims   claimState
	borrow   sync.Mutex // one refresh of other nodes' blocks at a time
	borrowed uint64     // refreshes so far

	migrate sync.Mutex // one migration at a time
}

func (l *Ledger) poolState(name string) *poolState {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.pools[name]
	if ps == nil {
		ps = &poolState{name: name, known: map[string]*queue{}}
		l.pools[name] = ps
	}
	return ps
}

// view returns the pool (from the cache) with its range and block layout, computed
// again only when the pool's spec or the reserved addresses changed.
func (l *Ledger) view(ctx context.Context, ps *poolState) (*poolView, error) {
	pool := &v2beta1.SpiderIPPool{}
	if err := l.opts.Cache.Get(ctx, client.ObjectKey{Name: ps.name}, pool); err != nil {
		return nil, err
	}
	var reserved v2beta1.SpiderReservedIPList
	if err := l.opts.Cache.List(ctx, &reserved, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("read SpiderReservedIPs: %w", err)
	}
	keys := []string{strconv.FormatInt(pool.Generation, 10), string(pool.UID)}
	for _, r := range reserved.Items {
		keys = append(keys, r.Name+"@"+r.ResourceVersion)
	}
	sort.Strings(keys[2:])
	key := strings.Join(keys, ",")
	ps.mu.Lock()
	cur := ps.view
	ps.mu.Unlock()
	if cur != nil && cur.key == key {
		v := *cur
		v.pool = pool // status and deletion state change without a new generation
		rng := *cur.rng
		rng.Closed = allocator.Refusal(pool)
		v.rng = &rng
		return &v, nil
	}
	set, err := ReservedSet(ctx, l.opts.Cache)
	if err != nil {
		return nil, err
	}
	rng, err := allocator.NewRange(pool, set)
	if err != nil {
		return nil, err
	}
	rng.Order = l.opts.Order
	v := &poolView{pool: pool, rng: rng, layout: block.NewLayout(rng), key: key}
	ps.mu.Lock()
	ps.view = v
	ps.mu.Unlock()
	return v, nil
}

// blockOf returns the block of a pool that holds a, and its object name.
func blockOf(pool string, subnet netip.Prefix, a netip.Addr) (netip.Prefix, string) {
	var blk netip.Prefix
	if subnet.IsValid() && subnet.Contains(a) {
		blk = block.Of(subnet, a)
	} else {
		// The pool is gone or does not contain a: its blocks, if any, were full-size.
		blk, _ = a.Prefix(a.BitLen() - block.SizeBits)
	}
	return blk, block.Name(pool, blk)
}

// emptyRange is the range of a pool that no longer exists: nothing is allocatable, and
// releases still apply.
func emptyRange(pool string, blk netip.Prefix) *allocator.Range {
	var b netipx.IPSetBuilder
	set, _ := b.IPSet()
	fam := v2beta1.IPv4
	if !blk.Addr().Is4() {
		fam = v2beta1.IPv6
	}
	return &allocator.Range{Pool: pool, Family: fam, Subnet: blk, Allocatable: set}
}

// poolRange returns the range to apply a block's ops with. A pool that is gone
// allocates nothing: its range refuses new allocations (Range.Closed), like a
// terminating or disabled pool's.
func (l *Ledger) poolRange(ctx context.Context, pool string, blk netip.Prefix) (*allocator.Range, error) {
	v, err := l.view(ctx, l.poolState(pool))
	switch {
	case apierrors.IsNotFound(err):
		rng := emptyRange(pool, blk)
		rng.Closed = fmt.Errorf("allocate from pool %s: %w", pool, err)
		return rng, nil
	case err != nil:
		return nil, err
	}
	return v.rng, nil
}

// newer reports whether resourceVersion a is later than b, by the API machinery's own
// comparison; when either is not a well-formed resourceVersion, a is not newer.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}
