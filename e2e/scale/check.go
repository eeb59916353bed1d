package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/testenv"
	"github.com/nicpool/nicpool/ipamd/ledger"
)

// holder is who the stored allocation state says holds an address.
type holder struct{ Pool, Pod, PodUID, Interface string }

// heldAddresses reads the allocation records of the pods of namespace, by address,
// from whichever layout holds them.
func heldAddresses(ctx context.Context, r client.Reader, namespace string) (map[netip.Addr]holder, error) {
	records, bad, err := ledger.List(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(bad...); err != nil {
		return nil, fmt.Errorf("malformed allocation records: %w", err)
	}
	out := map[netip.Addr]holder{}
	for _, rec := range records {
		if ns, _, _ := strings.Cut(rec.Holder.Pod, "/"); ns == namespace {
			out[rec.Addr] = holder{Pool: rec.Pool, Pod: rec.Holder.Pod, PodUID: rec.Holder.PodUID, Interface: rec.Holder.Interface}
		}
	}
	return out, nil
}

// Accounting compares what the pods were given with what the store holds.
type Accounting struct {
	// Duplicates counts addresses returned to more than one pod.
	Duplicates int
	// Mismatched counts pods whose returned address the store gives to someone
	// else, or to nobody.
	Mismatched int
	// Leaked counts records held for no pod that got that address.
	Leaked int
	// Records is how many addresses the store holds for the run's pods.
	Records int
	// Examples describe the first problems found.
	Examples []string
}

// account compares the run's outcome with the records of its namespace's pods.
func account(ctx context.Context, r client.Reader, namespace string, pods []Pod, out []outcome) (Accounting, error) {
	held, err := heldAddresses(ctx, r, namespace)
	if err != nil {
		return Accounting{}, err
	}
	return compare(held, pods, out), nil
}

// compare checks every address given to a pod against the store's holder of it, and
// every record of the store against the pods given it.
func compare(held map[netip.Addr]holder, pods []Pod, out []outcome) Accounting {
	a := Accounting{Records: len(held)}
	note := func(format string, args ...any) {
		if len(a.Examples) < 5 {
			a.Examples = append(a.Examples, fmt.Sprintf(format, args...))
		}
	}
	given := map[netip.Addr][]int{} // address → indexes of the pods given it
	for i, o := range out {
		if o.Address == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(o.Address)
		if err != nil {
			a.Mismatched++
			note("pod %s was given %q, not an address", pods[i].Name, o.Address)
			continue
		}
		addr := pfx.Addr()
		if prev := given[addr]; len(prev) > 0 {
			a.Duplicates++
			note("%s was given to pod %s and to pod %s", addr, pods[prev[0]].Name, pods[i].Name)
		}
		given[addr] = append(given[addr], i)
		if h, ok := held[addr]; !ok || h.PodUID != pods[i].UID || h.Interface != "eth0" {
			a.Mismatched++
			note("pod %s was given %s, which the store gives to %+v", pods[i].Name, addr, h)
		}
	}
	for addr, h := range held {
		if !slices.ContainsFunc(given[addr], func(i int) bool { return pods[i].UID == h.PodUID }) {
			a.Leaked++
			note("%s is held by pod %s (UID %s) interface %q, which was not given it", addr, h.Pod, h.PodUID, h.Interface)
		}
	}
	return a
}

// StoredObject is one object of nicpool's API groups as the API server returns it.
type StoredObject struct {
	Resource, Name string
	Bytes          int
}

// ourResources are the resources of nicpool's and spiderpool's API groups.
func ourResources(env *testenv.Env) ([]schema.GroupVersionResource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || !ours(gv.Group) {
			continue
		}
		for _, res := range l.APIResources {
			if !strings.Contains(res.Name, "/") {
				out = append(out, gv.WithResource(res.Name))
			}
		}
	}
	return out, nil
}

// eachObject calls fn for every object of nicpool's API groups, a page at a time.
func eachObject(ctx context.Context, env *testenv.Env, fn func(schema.GroupVersionResource, *unstructured.Unstructured)) error {
	resources, err := ourResources(env)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	for _, gvr := range resources {
		opts := metav1.ListOptions{Limit: 500}
		for {
			page, err := dyn.Resource(gvr).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("list %s: %w", gvr, err)
			}
			for i := range page.Items {
				fn(gvr, &page.Items[i])
			}
			if opts.Continue = page.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return nil
}

// largestStored finds the largest object, as JSON, of nicpool's API groups.
func largestStored(ctx context.Context, env *testenv.Env) (StoredObject, error) {
	var largest StoredObject
	err := eachObject(ctx, env, func(gvr schema.GroupVersionResource, o *unstructured.Unstructured) {
		if n := size(o); n > largest.Bytes {
			largest = StoredObject{Resource: gvr.Resource, Name: o.GetName(), Bytes: n}
		}
	})
	return largest, err
}

// settle waits until no object of nicpool's API groups has changed for a few
// seconds: an ADD whose caller gave up may still be running in ipamd, and the
// accounting must see what it leaves. It says how long that took, or that the store
// was still changing after timeout.
func settle(ctx context.Context, env *testenv.Env, timeout time.Duration) (time.Duration, error) {
	began := time.Now()
	fingerprint := func() (string, error) {
		h := fnv.New64a()
		err := eachObject(ctx, env, func(_ schema.GroupVersionResource, o *unstructured.Unstructured) {
			_, _ = io.WriteString(h, o.GetName()+"@"+o.GetResourceVersion()+";")
		})
		return strconv.FormatUint(h.Sum64(), 16), err
	}
	last, err := fingerprint()
	if err != nil {
		return 0, err
	}
	const quiet = 3 // polls in a row without a change
	same := 0
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, false, func(context.Context) (bool, error) {
		now, err := fingerprint()
		if err != nil {
			return false, err
		}
		if now == last {
			same++
		} else {
			same, last = 0, now
		}
		return same >= quiet, nil
	})
	if err != nil {
		return time.Since(began), fmt.Errorf("nicpool's objects still changing %s after the last ADD: %w", timeout, err)
	}
	return time.Since(began), nil
}

// ours is an API group whose objects nicpool writes.
func ours(group string) bool {
	return group == v2beta1.GroupVersion.Group || group == "nicpool.io" || strings.HasSuffix(group, ".nicpool.io")
}

func size(o *unstructured.Unstructured) int {
	b, err := json.Marshal(o.Object)
	if err != nil {
		return 0
	}
	return len(b)
}
