// Package service serves the CNI verbs of one node, one (pod UID, interface) at a
// time, one verb per file: ADD (add.go, with the StatefulSet takeover in takeover.go),
// DEL, CHECK, GC and STATUS. It reads from informer caches, allocates and releases
// through the ledger and writes the pods' SpiderEndpoints through ipamd/endpoint; the
// HTTP server is a thin shell on it.
package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/endpoint"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// IndexEndpointNode indexes endpoints by status.current.node; Indexes registers it.
const IndexEndpointNode = "status.current.node"

// Indexer is the part of a controller-runtime cache that registers indexes.
type Indexer = ledger.Indexer

// Indexes registers the cache indexes the service and its ledger read with.
func Indexes(ctx context.Context, idx Indexer) error {
	if err := ledger.Indexes(ctx, idx); err != nil {
		return err
	}
	return idx.IndexField(ctx, &v2beta1.SpiderEndpoint{}, IndexEndpointNode, func(o client.Object) []string {
		return []string{o.(*v2beta1.SpiderEndpoint).Status.Current.Node}
	})
}

// Service serves the CNI verbs of one node.
type Service struct {
	Node string
	// Cache is an informer cache with Indexes registered: pools, reserved IPs,
	// StatefulSets, namespaces, and of this node only: its pods, its endpoints, its
	// IPBlocks and the Node itself.
	Cache client.Reader
	// Client writes endpoints (allocation records go through Ledger).
	Client client.Client
	// Fresh reads from the API server, bypassing the cache: only to decide a takeover
	// and after a conflict.
	Fresh  client.Reader
	Ledger *ledger.Ledger
	Events events.EventRecorder // may be nil
	Log    logr.Logger
	// InFlight bounds the ADDs and DELs worked on at once (DefaultInFlight when 0).
	InFlight int
	// Multus says how a bare spec.multusName entry reads and which network eth0 is
	// attached through.
	Multus annotations.Multus
	// ServiceCIDRs says the cache holds networking.k8s.io/v1 ServiceCIDRs, the cluster's
	// Service CIDRs coordinator is told (false: the cluster serves none).
	ServiceCIDRs bool
	// SpiderCoordinators says the cache holds SpiderCoordinators (false: the API server
	// serves none, their CRD is not installed).
	SpiderCoordinators bool
	// Switches are spiderpool-conf's IPAM switches: the pools of a disabled family are
	// left out of every choice, and with StatefulSet addresses off a StatefulSet pod's
	// addresses are neither kept nor taken over.
	Switches ipamconf.Switches

	locks     keyedMutex
	waiting   atomic.Int64 // requests waiting for their turn
	slotsOnce sync.Once
	work      chan struct{} // one token per request at work

	endpoints *endpoint.Store
}

// New returns a service; see the fields for what each argument is.
func New(node string, cache client.Reader, c client.Client, fresh client.Reader, l *ledger.Ledger, rec events.EventRecorder, log logr.Logger) *Service {
	return &Service{Node: node, Cache: cache, Client: c, Fresh: fresh, Ledger: l, Events: rec, Log: log,
		endpoints: endpoint.NewStore(cache, fresh, c)}
}

// cniError builds the error the server answers with.
func cniError(code uint, msg string, err error) *api.Error {
	e := &api.Error{Code: code, Message: msg}
	if err != nil {
		e.Details = err.Error()
	}
	return e
}

// pod returns the pod of a request: from the cache, else (just bound, or recreated
// under the same name) from the API server. nil when it does not exist.
func (s *Service) pod(ctx context.Context, ref api.Pod) (*corev1.Pod, error) {
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	pod := &corev1.Pod{}
	err := s.Cache.Get(ctx, key, pod)
	if err == nil && (ref.UID == "" || string(pod.UID) == ref.UID) {
		return pod, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	pod = &corev1.Pod{}
	if err := s.Fresh.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return pod, nil
}

func (s *Service) namespace(ctx context.Context, name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	if err := s.Cache.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil
	}
	return ns
}

func (s *Service) node(ctx context.Context) *corev1.Node {
	n := &corev1.Node{}
	if err := s.Cache.Get(ctx, client.ObjectKey{Name: s.Node}, n); err != nil {
		return nil
	}
	return n
}

func (s *Service) pools(ctx context.Context) ([]v2beta1.SpiderIPPool, error) {
	var list v2beta1.SpiderIPPoolList
	// Read-only use: no copy of every pool's records per request.
	if err := s.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// held is one address an owner holds.
type held struct {
	pool *v2beta1.SpiderIPPool
	addr netip.Addr
}

// pool returns a pool from the cache; nil when it does not exist.
func (s *Service) pool(ctx context.Context, name string) (*v2beta1.SpiderIPPool, error) {
	p := &v2beta1.SpiderIPPool{}
	if err := s.Cache.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return p, nil
}

// heldBy returns what owner holds (allocator.Owner.Holds) in the given pools, in the
// pools where this node's blocks hold records of its pod UID, and at the addresses
// ep records for it (which may be in other nodes' blocks: a StatefulSet pod that
// moved, an address borrowed when the pool was nearly full). The ledger is the source
// of truth: an endpoint entry without its record holds nothing.
func (s *Service) heldBy(ctx context.Context, owner allocator.Owner, ep *v2beta1.SpiderEndpoint, candidates ...string) ([]held, error) {
	names, err := s.Ledger.PoolsHolding(ctx, owner.PodUID)
	if err != nil {
		return nil, err
	}
	hints := recordedAddrs(ep, owner)
	for pool := range hints {
		candidates = append(candidates, pool)
	}
	for _, n := range candidates {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []held
	for _, name := range names {
		addrs, err := s.Ledger.Held(ctx, name, owner, hints[name]...)
		if err != nil {
			return nil, fmt.Errorf("read what pod %s holds in pool %s: %w", owner.Pod, name, err)
		}
		if len(addrs) == 0 {
			continue
		}
		p, err := s.pool(ctx, name)
		if err != nil {
			return nil, err
		}
		if p == nil {
			p = &v2beta1.SpiderIPPool{}
			p.Name = name
		}
		for _, a := range addrs {
			out = append(out, held{pool: p, addr: a})
		}
	}
	return out, nil
}

// recordedAddrs returns, by pool, the addresses ep records for owner's interface (every
// interface when owner names none), when ep is owner's pod's.
func recordedAddrs(ep *v2beta1.SpiderEndpoint, owner allocator.Owner) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	if ep == nil || ep.Status.Current.UID != owner.PodUID || ep.Namespace+"/"+ep.Name != owner.Pod {
		return out
	}
	for _, d := range ep.Status.Current.IPs {
		if owner.Interface != "" && d.Interface != owner.Interface {
			continue
		}
		for _, pair := range []struct{ addr, pool *string }{{d.IPv4, d.IPv4Pool}, {d.IPv6, d.IPv6Pool}} {
			if pair.addr == nil || pair.pool == nil {
				continue
			}
			if pfx, err := netip.ParsePrefix(*pair.addr); err == nil {
				out[*pair.pool] = append(out[*pair.pool], pfx.Addr())
			}
		}
	}
	return out
}

// releaseAll releases every record owner holds (of every interface when
// owner.Interface is empty) in the pools where it holds any, plus extra pools. Records
// of another pod name are never released, whatever their UID.
func (s *Service) releaseAll(ctx context.Context, owner allocator.Owner, ep *v2beta1.SpiderEndpoint, extra ...string) ([]string, error) {
	hs, err := s.heldBy(ctx, owner, ep, extra...)
	if err != nil {
		return nil, err
	}
	return s.release(ctx, owner, hs)
}

// release gives back what owner holds (heldBy's answer, or part of it) through the
// ledger, one call per pool, and returns the addresses released: DEL, leftover
// endpoints, takeovers and an ADD whose interface holds addresses of pools it no
// longer draws from all release through it (a failed ADD's undo calls the ledger's
// Release address by address, carrying on past a failure).
func (s *Service) release(ctx context.Context, owner allocator.Owner, hs []held) ([]string, error) {
	var released []string
	byPool := map[string][]netip.Addr{}
	var order []string
	for _, h := range hs {
		if _, ok := byPool[h.pool.Name]; !ok {
			order = append(order, h.pool.Name)
		}
		byPool[h.pool.Name] = append(byPool[h.pool.Name], h.addr)
	}
	for _, pool := range order {
		done, err := s.Ledger.Release(ctx, pool, owner, byPool[pool]...)
		if err != nil {
			return released, fmt.Errorf("release %v of pod UID %s from pool %s: %w", byPool[pool], owner.PodUID, pool, err)
		}
		for _, a := range done {
			released = append(released, a.String())
		}
	}
	return released, nil
}

// statefulSetWillReturn reports whether the StatefulSet named by the pod (or, with the
// pod gone, by its endpoint) still wants the pod's ordinal, so the pod comes back under
// this name. Never with StatefulSet addresses off.
func (s *Service) statefulSetWillReturn(ctx context.Context, namespace, podName string, pod *corev1.Pod, ep *v2beta1.SpiderEndpoint) bool {
	if !s.Switches.StatefulSets() {
		return false
	}
	var set string
	var ok bool
	if pod != nil {
		set, ok = workload.StatefulSetOf(pod.OwnerReferences)
	} else {
		set, ok = workload.EndpointStatefulSet(ep)
	}
	if !ok {
		return false
	}
	sts := &appsv1.StatefulSet{}
	if err := s.Cache.Get(ctx, types.NamespacedName{Namespace: namespace, Name: set}, sts); err != nil {
		return false
	}
	return workload.WillReturn(sts, podName)
}

// allocationError begins the note of every Event of a failed ADD: spiderpool's agent
// words its failures so (its CNI plugin's ErrPostIPAM), and what spiderpool's users
// match on, its own e2e suite among them, keeps matching; nicpool's reason follows.
const allocationError = "spiderpool IP allocation error: "

func (s *Service) event(obj runtime.Object, reason, note string) {
	if s.Events == nil || obj == nil {
		return
	}
	s.Events.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Allocate", "%s", eventNote(note))
}

// maxNote is the longest Event note the API server accepts: it refuses a longer one
// (events.k8s.io/v1), and the pod would show no Event at all.
const maxNote = 1024

// eventNote is the note of an allocation Event: spiderpool's prefix, then the reason,
// cut to maxNote bytes on a character boundary, ending in " ...", when longer (a
// reason that lists many pools). The first causes, where spiderpool's phrases are,
// stay.
func eventNote(reason string) string {
	note := allocationError + reason
	if len(note) <= maxNote {
		return note
	}
	const more = " ..."
	cut := maxNote - len(more)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + more
}

// errEndpointMoved says the endpoint changed under us (conflict, deleted, replaced):
// decide again on a fresh read.
var errEndpointMoved = errors.New("SpiderEndpoint changed meanwhile")

// errEndpointReserved refuses an ADD: the pod's name holds the endpoint of a
// StatefulSet ordinal that comes back, and the pod is no pod of that StatefulSet.
var errEndpointReserved = errors.New("the pod's SpiderEndpoint is reserved for a StatefulSet pod")
