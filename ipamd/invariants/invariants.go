// Package invariants checks nicpool's allocation invariants I1–I4 and I8 (design.md)
// over the allocation records (read through ledger.List), endpoints and pods stored in
// the API server. Test suites and benchmarks of every component end with it.
package invariants

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/workload"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// Options choose the checks that hold only at rest.
type Options struct {
	// Converged adds I4: GC has run, so every record belongs to a live pod (same UID,
	// not Succeeded or Failed) or to a StatefulSet ordinal that will come back, and
	// every endpoint has such a pod.
	Converged bool
}

type owner struct{ uid, iface string }

// Kind says which rule a violation breaks.
type Kind string

// Kinds of violations.
const (
	// Malformed: how records are written (ledger.List's *ledger.Malformed): a key that
	// is not an address, a record outside its block, counts that disagree with the
	// records, an address recorded twice in one pool.
	Malformed Kind = "malformed"
	// NoInterface: I1, a record names no interface.
	NoInterface Kind = "record-without-interface"
	// NoPodUID: a record names no pod UID.
	NoPodUID Kind = "record-without-pod-uid"
	// InTwoPools: I3, an address is allocated in two pools.
	InTwoPools Kind = "address-in-two-pools"
	// TwoAddresses: I2, a pod interface holds two addresses of a family.
	TwoAddresses Kind = "interface-with-two-addresses"
	// EndpointInterface: I1, an endpoint records an empty or a duplicate interface.
	EndpointInterface Kind = "endpoint-interface"
	// EndpointMalformed: an endpoint's address or its pool cannot be read.
	EndpointMalformed Kind = "endpoint-malformed"
	// EndpointUnrecorded: an endpoint lists an address no record holds.
	EndpointUnrecorded Kind = "endpoint-address-unrecorded"
	// EndpointMismatch: I3, an endpoint lists an address a record gives to another pod
	// UID or interface.
	EndpointMismatch Kind = "endpoint-record-mismatch"
	// EndpointOtherPod: I8, an endpoint lists an address whose record names another pod.
	EndpointOtherPod Kind = "endpoint-record-of-other-pod"
	// EndpointGone: I4, an endpoint belongs to a pod that is gone.
	EndpointGone Kind = "endpoint-of-gone-pod"
	// RecordGone: I4, a record is held by a pod that is gone.
	RecordGone Kind = "record-of-gone-pod"
)

// Violation is one broken invariant and what it concerns; the fields that do not
// apply are empty.
type Violation struct {
	Kind Kind `json:"kind"`
	// Pool and Address are the record concerned.
	Pool    string     `json:"pool,omitempty"`
	Address netip.Addr `json:"address,omitempty"`
	// Pod is namespace/name; PodUID the UID a record or endpoint names.
	Pod    string `json:"pod,omitempty"`
	PodUID string `json:"podUID,omitempty"`
	// Endpoint is the SpiderEndpoint concerned, namespace/name.
	Endpoint string `json:"endpoint,omitempty"`
	// Block is the IPBlock concerned (Malformed only).
	Block string `json:"block,omitempty"`
	// Message says what is wrong, naming all of the above.
	Message string `json:"message"`
}

func (v Violation) String() string { return v.Message }

// Check reads every allocation record (ledger.List: IPBlocks, and pools not migrated
// yet), endpoint and pod through r (use an uncached client) and returns one error
// listing every violation, or nil.
func Check(ctx context.Context, r client.Reader, opts Options) error {
	vs, err := Violations(ctx, r, opts)
	if err != nil || len(vs) == 0 {
		return err
	}
	msgs := make([]string, len(vs))
	for i, v := range vs {
		msgs[i] = v.Message
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// Violations reads as Check does and returns every violation, sorted by message.
func Violations(ctx context.Context, r client.Reader, opts Options) ([]Violation, error) {
	recs, bad, err := ledger.List(ctx, r)
	if err != nil {
		return nil, err
	}
	var eps v2beta1.SpiderEndpointList
	if err := r.List(ctx, &eps); err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	var v []Violation
	add := func(vi Violation, format string, args ...any) {
		vi.Message = fmt.Sprintf(format, args...)
		v = append(v, vi)
	}
	for _, err := range bad {
		vi := Violation{Kind: Malformed, Message: err.Error()}
		var m *ledger.Malformed
		if errors.As(err, &m) {
			vi.Pool, vi.Address, vi.Block = m.Pool, m.Addr, m.Block
		}
		v = append(v, vi)
	}

	// addr → "pool", owner → family → addrs
	holder := map[netip.Addr]string{}
	byOwner := map[owner]map[bool][]string{}         // "pool/addr"
	records := map[string]v2beta1.PoolIPAllocation{} // "pool/addr"
	for _, r := range recs {
		key, rec := r.Addr.String(), r.Holder
		of := Violation{Pool: r.Pool, Address: r.Addr, Pod: rec.Pod, PodUID: rec.PodUID}
		if rec.Interface == "" {
			of.Kind = NoInterface
			add(of, "I1: pool %s: %s of pod %s (UID %s) names no interface", r.Pool, key, rec.Pod, rec.PodUID)
		}
		if rec.PodUID == "" {
			of.Kind = NoPodUID
			add(of, "pool %s: %s of pod %s names no pod UID", r.Pool, key, rec.Pod)
		}
		if prev, dup := holder[r.Addr]; dup {
			of.Kind = InTwoPools
			add(of, "I3: %s is allocated in pool %s and in pool %s", key, prev, r.Pool)
		}
		holder[r.Addr] = r.Pool
		o := owner{rec.PodUID, rec.Interface}
		if byOwner[o] == nil {
			byOwner[o] = map[bool][]string{}
		}
		byOwner[o][r.Addr.Is4()] = append(byOwner[o][r.Addr.Is4()], r.Pool+"/"+key)
		records[r.Pool+"/"+key] = rec
	}
	for o, fams := range byOwner {
		for is4, list := range fams {
			if len(list) > 1 {
				sort.Strings(list)
				first := records[list[0]]
				pool, addr, _ := strings.Cut(list[0], "/")
				add(Violation{Kind: TwoAddresses, Pool: pool, Address: netip.MustParseAddr(addr), Pod: first.Pod, PodUID: o.uid}, "I2: pod UID %s interface %q holds %d IPv%s addresses: %s", o.uid, o.iface, len(list), map[bool]string{true: "4", false: "6"}[is4], strings.Join(list, ", "))
			}
		}
	}

	live := map[string]*corev1.Pod{}
	if opts.Converged {
		var pods corev1.PodList
		if err := r.List(ctx, &pods); err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				live[string(p.UID)] = p
			}
		}
	}

	for _, ep := range eps.Items {
		name := ep.Namespace + "/" + ep.Name
		of := Violation{Pod: name, PodUID: ep.Status.Current.UID, Endpoint: name}
		with := func(k Kind, pool string, addr netip.Addr) Violation {
			vi := of
			vi.Kind, vi.Pool, vi.Address = k, pool, addr
			return vi
		}
		seen := map[string]bool{}
		for _, d := range ep.Status.Current.IPs {
			if d.Interface == "" {
				add(with(EndpointInterface, "", netip.Addr{}), "I1: endpoint %s records an address under an empty interface", name)
			}
			if seen[d.Interface] {
				add(with(EndpointInterface, "", netip.Addr{}), "I1: endpoint %s records interface %q twice", name, d.Interface)
			}
			seen[d.Interface] = true
		}
		lookup := func(pool string, addr netip.Addr) (v2beta1.PoolIPAllocation, bool) {
			rec, ok := records[pool+"/"+addr.String()]
			return rec, ok
		}
		v = append(v, EndpointAddresses(&ep, lookup, opts.Converged)...)
		if opts.Converged && live[ep.Status.Current.UID] == nil && !willReturn(ctx, r, &ep) {
			add(with(EndpointGone, "", netip.Addr{}), "I4: endpoint %s belongs to pod UID %s, which is gone", name, ep.Status.Current.UID)
		}
	}
	if opts.Converged {
		for key, rec := range records {
			if live[rec.PodUID] != nil {
				continue
			}
			ns, podName, _ := strings.Cut(rec.Pod, "/")
			ep := &v2beta1.SpiderEndpoint{}
			if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, ep); err == nil && ep.Status.Current.UID == rec.PodUID &&
				willReturn(ctx, r, ep) {
				continue
			}
			pool, addr, _ := strings.Cut(key, "/")
			add(Violation{Kind: RecordGone, Pool: pool, Address: netip.MustParseAddr(addr), Pod: rec.Pod, PodUID: rec.PodUID},
				"I4: %s is held by pod %s UID %s, which is gone", key, rec.Pod, rec.PodUID)
		}
	}
	sort.SliceStable(v, func(i, j int) bool { return v[i].Message < v[j].Message })
	return v, nil
}

// EndpointAddresses checks each address an endpoint lists against the record of that
// address in the endpoint's pool, which lookup returns (ok false when the pool
// records nothing there): the record gives it to the endpoint's pod UID and interface
// (I3) and names the endpoint's pod (I8). With unrecorded, an address no record holds
// is a violation too (EndpointUnrecorded: at rest, or when the record vanished under
// a live pod, which another pod may then be given). Malformed addresses are
// EndpointMalformed. The one rule, which Violations and ipamd's watch of its node's
// endpoints both apply.
func EndpointAddresses(ep *v2beta1.SpiderEndpoint, lookup func(pool string, addr netip.Addr) (v2beta1.PoolIPAllocation, bool), unrecorded bool) []Violation {
	var v []Violation
	name := ep.Namespace + "/" + ep.Name
	add := func(k Kind, pool string, addr netip.Addr, format string, args ...any) {
		v = append(v, Violation{Kind: k, Pool: pool, Address: addr, Pod: name, PodUID: ep.Status.Current.UID, Endpoint: name, Message: fmt.Sprintf(format, args...)})
	}
	for _, d := range ep.Status.Current.IPs {
		for _, pair := range []struct{ addr, pool *string }{{d.IPv4, d.IPv4Pool}, {d.IPv6, d.IPv6Pool}} {
			if pair.addr == nil {
				continue
			}
			pfx, err := netip.ParsePrefix(*pair.addr)
			if err != nil || pair.pool == nil {
				add(EndpointMalformed, "", netip.Addr{}, "endpoint %s interface %s: address %q or its pool is malformed", name, d.Interface, *pair.addr)
				continue
			}
			pool, addr := *pair.pool, pfx.Addr()
			rec, ok := lookup(pool, addr)
			if unrecorded && !ok {
				add(EndpointUnrecorded, pool, addr, "endpoint %s interface %s: %s is not recorded in pool %s", name, d.Interface, addr, pool)
			}
			if ok && (rec.PodUID != ep.Status.Current.UID || rec.Interface != d.Interface) {
				add(EndpointMismatch, pool, addr, "I3: endpoint %s (pod UID %s) interface %s records %s, which pool %s gives to pod UID %s interface %q",
					name, ep.Status.Current.UID, d.Interface, addr, pool, rec.PodUID, rec.Interface)
			}
			if ok && rec.Pod != name {
				add(EndpointOtherPod, pool, addr, "I8: endpoint %s interface %s lists %s of pool %s, whose record names pod %s (UID %s): a record's pod must be the endpoint that lists it",
					name, d.Interface, addr, pool, rec.Pod, rec.PodUID)
			}
		}
	}
	return v
}

// willReturn reports whether the StatefulSet an endpoint names still wants the
// endpoint's ordinal.
func willReturn(ctx context.Context, r client.Reader, ep *v2beta1.SpiderEndpoint) bool {
	set, ok := workload.EndpointStatefulSet(ep)
	if !ok {
		return false
	}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ep.Namespace, Name: set}, sts); err != nil {
		return false
	}
	return workload.WillReturn(sts, ep.Name)
}
