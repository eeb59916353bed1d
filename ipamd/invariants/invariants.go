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

// Check reads every allocation record (ledger.List: IPBlocks, and pools not migrated
// yet), endpoint and pod through r (use an uncached client) and returns one error
// listing every violation, or nil.
func Check(ctx context.Context, r client.Reader, opts Options) error {
	recs, bad, err := ledger.List(ctx, r)
	if err != nil {
		return err
	}
	var eps v2beta1.SpiderEndpointList
	if err := r.List(ctx, &eps); err != nil {
		return fmt.Errorf("list endpoints: %w", err)
	}
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	for _, err := range bad {
		add("%v", err)
	}

	// addr → "pool", owner → family → addrs
	holder := map[netip.Addr]string{}
	byOwner := map[owner]map[bool][]string{}
	records := map[string]v2beta1.PoolIPAllocation{} // "pool/addr"
	for _, r := range recs {
		key, rec := r.Addr.String(), r.Holder
		if rec.Interface == "" {
			add("I1: pool %s: %s of pod %s (UID %s) names no interface", r.Pool, key, rec.Pod, rec.PodUID)
		}
		if rec.PodUID == "" {
			add("pool %s: %s of pod %s names no pod UID", r.Pool, key, rec.Pod)
		}
		if prev, dup := holder[r.Addr]; dup {
			add("I3: %s is allocated in pool %s and in pool %s", key, prev, r.Pool)
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
				add("I2: pod UID %s interface %q holds %d IPv%s addresses: %s", o.uid, o.iface, len(list), map[bool]string{true: "4", false: "6"}[is4], strings.Join(list, ", "))
			}
		}
	}

	live := map[string]*corev1.Pod{}
	if opts.Converged {
		var pods corev1.PodList
		if err := r.List(ctx, &pods); err != nil {
			return fmt.Errorf("list pods: %w", err)
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
		seen := map[string]bool{}
		for _, d := range ep.Status.Current.IPs {
			if d.Interface == "" {
				add("I1: endpoint %s records an address under an empty interface", name)
			}
			if seen[d.Interface] {
				add("I1: endpoint %s records interface %q twice", name, d.Interface)
			}
			seen[d.Interface] = true
			for _, pair := range []struct{ addr, pool *string }{{d.IPv4, d.IPv4Pool}, {d.IPv6, d.IPv6Pool}} {
				if pair.addr == nil {
					continue
				}
				pfx, err := netip.ParsePrefix(*pair.addr)
				if err != nil || pair.pool == nil {
					add("endpoint %s interface %s: address %q or its pool is malformed", name, d.Interface, *pair.addr)
					continue
				}
				rec, ok := records[*pair.pool+"/"+pfx.Addr().String()]
				if opts.Converged && !ok {
					add("endpoint %s interface %s: %s is not recorded in pool %s", name, d.Interface, pfx.Addr(), *pair.pool)
				}
				if ok && (rec.PodUID != ep.Status.Current.UID || rec.Interface != d.Interface) {
					add("I3: endpoint %s (pod UID %s) interface %s records %s, which pool %s gives to pod UID %s interface %q",
						name, ep.Status.Current.UID, d.Interface, pfx.Addr(), *pair.pool, rec.PodUID, rec.Interface)
				}
				if ok && rec.Pod != name {
					add("I8: endpoint %s interface %s lists %s of pool %s, whose record names pod %s (UID %s): a record's pod must be the endpoint that lists it",
						name, d.Interface, pfx.Addr(), *pair.pool, rec.Pod, rec.PodUID)
				}
			}
		}
		if opts.Converged && live[ep.Status.Current.UID] == nil && !willReturn(ctx, r, &ep) {
			add("I4: endpoint %s belongs to pod UID %s, which is gone", name, ep.Status.Current.UID)
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
			add("I4: %s is held by pod %s UID %s, which is gone", key, rec.Pod, rec.PodUID)
		}
	}
	if len(v) == 0 {
		return nil
	}
	sort.Strings(v)
	return errors.New(strings.Join(v, "\n"))
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
