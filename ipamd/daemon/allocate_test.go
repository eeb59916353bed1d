package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/daemon"
	"github.com/nicpool/nicpool/webhook/controller/gc"
)

// Five nodes allocate for 500 pods at once from one pool of exactly 500 addresses:
// every pod gets one address, none twice, and the pool's counts match. Then half the
// pods are deleted with a CNI DEL and half without (a node gone, a force delete): once
// the garbage collector has run, the pool is empty and no endpoint is left.
func TestFiveNodesFillPoolOfExactly500(t *testing.T) {
	const nodes, pods = 5, 500
	ctx := context.Background()
	createNamespace(t, "fill")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("fill-500", "10.50.0.0/16", []string{"10.50.0.1-10.50.1.244"})) // 500 addresses
	var ds []*daemon.Daemon
	for i := range nodes {
		d, _ := startDaemon(t, fmt.Sprintf("fill-node-%d", i))
		ds = append(ds, d)
	}
	ps := make([]*corev1.Pod, pods)
	parallel(t, pods, func(i int) {
		ps[i] = createPod(t, "fill", fmt.Sprintf("pod-%d", i), fmt.Sprintf("fill-node-%d", i%nodes),
			withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["fill-500"]}]`))
	})
	got := make([]string, pods)
	errs := make([]error, pods)
	parallel(t, pods, func(i int) {
		r, err := ds[i%nodes].Service.Allocate(ctx, addReq(ps[i], "eth0", fmt.Sprintf("c-%d", i)))
		errs[i] = err
		if err == nil {
			got[i] = strings.Join(addresses(r), ",")
		}
	})
	seen := map[string]int{}
	for i := range pods {
		if errs[i] != nil {
			t.Errorf("pod %d: %v", i, errs[i])
			continue
		}
		if prev, dup := seen[got[i]]; dup {
			t.Errorf("address %s given to pods %d and %d", got[i], prev, i)
		}
		seen[got[i]] = i
	}
	// The webhook's count owner writes the counts kubectl shows.
	p := recount(t, "fill-500")
	if n := len(records(t, "fill-500")); len(seen) != pods || n != pods || *p.Status.AllocatedIPCount != pods || *p.Status.TotalIPCount != pods {
		t.Errorf("%d pods got addresses; pool records %d, allocatedIPCount %d, totalIPCount %d; want all %d",
			len(seen), n, *p.Status.AllocatedIPCount, *p.Status.TotalIPCount, pods)
	}
	// The 501st pod is refused with the pool and its counts named.
	extra := createPod(t, "fill", "pod-extra", "fill-node-0", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["fill-500"]}]`))
	_, err := ds[0].Service.Allocate(ctx, addReq(extra, "eth0", "c-extra"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodePoolExhausted || !strings.Contains(ae.Error(), "pool fill-500 has no free IPv4 address: 500 allocated of 500 allocatable") {
		t.Errorf("ADD on a full pool: %v", err)
	}
	checkInvariants(t, false)

	deletePod(t, extra)
	parallel(t, pods, func(i int) {
		deletePod(t, ps[i])
		if i%2 == 1 {
			return // no DEL: left to the garbage collector
		}
		if _, err := ds[i%nodes].Service.Release(ctx, delReq(ps[i], "eth0", fmt.Sprintf("c-%d", i))); err != nil {
			t.Errorf("DEL pod %d: %v", i, err)
		}
	})
	if n := len(records(t, "fill-500")); n != pods/2 {
		t.Errorf("after DEL of half the pods: %d records, want %d", n, pods/2)
	}
	res, err := gc.RunOnce(ctx, env.Client, env.Client)
	if err != nil {
		t.Fatalf("garbage collection: %v", err)
	}
	if len(res.Released) != pods/2 {
		t.Errorf("garbage collector released %d addresses, want %d", len(res.Released), pods/2)
	}
	p = recount(t, "fill-500")
	var eps v2beta1.SpiderEndpointList
	if err := env.Client.List(ctx, &eps); err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, ep := range eps.Items {
		if ep.Namespace == "fill" {
			left++
		}
	}
	if n := len(records(t, "fill-500")); n != 0 || *p.Status.AllocatedIPCount != 0 || left != 0 {
		t.Errorf("after DEL and garbage collection: %d records, count %d, %d endpoints left", n, *p.Status.AllocatedIPCount, left)
	}
	checkInvariants(t, true)
}

// Spiderpool bug 2: retries of ADD for one (pod, interface), one after the other and
// at once, return the same address and never take a second one.
func TestRetriesNeverTakeASecondAddress(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "retry")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("retry-v4", "10.51.0.0/16", []string{"10.51.0.1-10.51.0.10"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("retry-v6", "fd00:51::/64", []string{"fd00:51::1-fd00:51::10"}))
	d, _ := startDaemon(t, "retry-node")
	pod := createPod(t, "retry", "app-0", "retry-node",
		withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["retry-v4"],"ipv6":["retry-v6"]}]`))
	first, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(first.IPs) != 2 {
		t.Fatalf("dual-stack ADD got %v", addresses(first))
	}
	for range 3 {
		again, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c1"))
		if err != nil || strings.Join(addresses(again), ",") != strings.Join(addresses(first), ",") {
			t.Fatalf("retry got %v (%v), want %v", addresses(again), err, addresses(first))
		}
	}
	parallel(t, 10, func(int) {
		again, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c1"))
		if err != nil || strings.Join(addresses(again), ",") != strings.Join(addresses(first), ",") {
			t.Errorf("concurrent retry got %v (%v), want %v", addresses(again), err, addresses(first))
		}
	})
	for _, pool := range []string{"retry-v4", "retry-v6"} {
		if n := len(records(t, pool)); n != 1 {
			t.Errorf("pool %s holds %d addresses after retries, want 1", pool, n)
		}
	}
	ep := getEndpoint(t, "retry", "app-0")
	if ep == nil || len(ep.Status.Current.IPs) != 1 || ep.Status.Current.IPs[0].Interface != "eth0" || ep.Status.Current.UID != string(pod.UID) {
		t.Errorf("endpoint %+v", ep)
	}
	// A DEL, repeated, releases once and then succeeds with nothing.
	r1, err := d.Service.Release(ctx, delReq(pod, "eth0", "c1"))
	if err != nil || len(r1.Released) != 2 {
		t.Errorf("DEL released %v (%v)", r1, err)
	}
	r2, err := d.Service.Release(ctx, delReq(pod, "eth0", "c1"))
	if err != nil || len(r2.Released) != 0 {
		t.Errorf("repeated DEL released %v (%v)", r2, err)
	}
	if getEndpoint(t, "retry", "app-0") != nil {
		t.Error("endpoint left after its last interface's DEL")
	}
	// An unknown pod or container succeeds.
	if _, err := d.Service.Release(ctx, &api.ReleaseRequest{Attachment: api.Attachment{ContainerID: "x", Interface: "eth0"}, Pod: api.Pod{Namespace: "retry", Name: "nobody"}}); err != nil {
		t.Errorf("DEL of an unknown pod: %v", err)
	}
	checkInvariants(t, false)
}

// Two interfaces drawing from one pool get two addresses; each interface is one entry
// of the endpoint, named.
func TestTwoInterfacesFromOnePool(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "twonic")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("twonic", "10.52.0.0/16", []string{"10.52.0.1-10.52.0.10"}))
	d, _ := startDaemon(t, "twonic-node")
	pod := createPod(t, "twonic", "app", "twonic-node", withAnnotations(
		annotations.MultusNetworks, "macvlan",
		annotations.IPPools, `[{"interface":"eth0","ipv4":["twonic"]},{"interface":"net1","ipv4":["twonic"]}]`))
	a, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Service.Allocate(ctx, addReq(pod, "net1", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if addresses(a)[0] == addresses(b)[0] {
		t.Errorf("both interfaces got %s", addresses(a)[0])
	}
	ep := getEndpoint(t, "twonic", "app")
	if ep == nil || len(ep.Status.Current.IPs) != 2 || ep.Status.Current.IPs[0].Interface != "eth0" || ep.Status.Current.IPs[1].Interface != "net1" {
		t.Errorf("endpoint %+v", ep)
	}
	checkInvariants(t, false)
}

// A pod whose pool selection admission did not resolve (it reached the node without
// nicpool's webhook) is refused loudly: a CNI error and an Event on the pod that say
// how to recover, and nothing allocated. ipamd does not resolve it again.
func TestUnresolvedSelectionIsRefusedLoudly(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "unres")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("unres", "10.59.0.0/16", []string{"10.59.0.1-10.59.0.10"}))
	d, _ := startDaemon(t, "unres-node")
	for name, sel := range map[string][]string{
		"unnamed": {annotations.IPPools, `[{"ipv4":["unres"]}]`},
		"single":  {annotations.IPPool, `{"ipv4":["unres"]}`},
		// Written after admission (the pods policy refuses that edit): never expanded.
		"wildcard": {annotations.IPPools, `[{"interface":"eth0","ipv4":["unre*"]}]`},
	} {
		pod := createPod(t, "unres", name, "unres-node", withAnnotations(sel...))
		_, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c"))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeInvalidConfig || !strings.Contains(ae.Error(), "not resolved at admission") || !strings.Contains(ae.Error(), "delete the pod") {
			t.Errorf("ADD of %s: %v; want an invalid-config error saying the selection is not resolved and how to recover", name, err)
		}
		fixtures.Eventually(t, "an InvalidPoolSelection event on pod unres/"+name, func() bool {
			var events corev1.EventList
			if err := env.Client.List(ctx, &events, client.InNamespace("unres")); err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				if e.InvolvedObject.UID == pod.UID && e.Reason == "InvalidPoolSelection" && strings.Contains(e.Message, "not resolved at admission") {
					return true
				}
			}
			return false
		})
	}
	if n := len(records(t, "unres")); n != 0 {
		t.Errorf("pool unres holds %d addresses after refused ADDs", n)
	}
	checkInvariants(t, false)
}

// I7: a dual-stack interface whose IPv6 pool is exhausted fails alone; the IPv4
// address it took is given back, and the pools of the pod's other interface are
// untouched.
func TestExhaustionOnOneInterfaceLeavesOtherPoolsUntouched(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "exh")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("exh-eth0", "10.53.0.0/16", []string{"10.53.0.1-10.53.0.10"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("exh-net1-v4", "10.54.0.0/16", []string{"10.54.0.1-10.54.0.10"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("exh-net1-v6", "fd00:54::/64", []string{"fd00:54::1"}))
	d, _ := startDaemon(t, "exh-node")
	sel := `[{"interface":"eth0","ipv4":["exh-eth0"]},{"interface":"net1","ipv4":["exh-net1-v4"],"ipv6":["exh-net1-v6"]}]`
	hog := createPod(t, "exh", "hog", "exh-node", withAnnotations(annotations.MultusNetworks, "macvlan", annotations.IPPools, sel))
	if _, err := d.Service.Allocate(ctx, addReq(hog, "net1", "h")); err != nil {
		t.Fatal(err)
	}
	pod := createPod(t, "exh", "app", "exh-node", withAnnotations(annotations.MultusNetworks, "macvlan", annotations.IPPools, sel))
	if _, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c")); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, n := range []string{"exh-eth0", "exh-net1-v4", "exh-net1-v6"} {
		before[n] = len(records(t, n))
	}
	_, err := d.Service.Allocate(ctx, addReq(pod, "net1", "c"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodePoolExhausted || !strings.Contains(ae.Error(), "pool exh-net1-v6 has no free IPv6 address: 1 allocated of 1 allocatable") {
		t.Fatalf("ADD of net1: %v; want exhaustion naming exh-net1-v6 and its counts", err)
	}
	for n, want := range before {
		if got := len(records(t, n)); got != want {
			t.Errorf("pool %s holds %d addresses after the failed ADD, had %d", n, got, want)
		}
	}
	// The failure is told on the pod, where its owner looks, in spiderpool's words
	// first (what spiderpool's users and its e2e suite match), then nicpool's; the
	// cause carries spiderpool's phrase for an exhausted pool before nicpool's counts.
	fixtures.Eventually(t, "an AllocationFailed event on pod exh/app", func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		if err := env.Client.List(ctx, &events, client.InNamespace("exh")); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "app" && e.Reason == "AllocationFailed" && strings.HasPrefix(e.Message, "spiderpool IP allocation error: interface net1: ") &&
				strings.Contains(e.Message, "all IP addresses used out: pool exh-net1-v6 has no free IPv6 address: 1 allocated of 1 allocatable") {
				return true, nil
			}
		}
		return false, nil
	})
	checkInvariants(t, false)
}

// Pools are tried in the user's order, skipping ineligible ones; with no annotation
// the namespace's, then the network's, then the cluster's default pools apply.
func TestPoolChoiceAndFallbacks(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "choice")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("choice-disabled", "10.55.0.0/16", []string{"10.55.0.1-10.55.0.5"}, func(p *v2beta1.SpiderIPPool) { p.Spec.Disable = ptr(true) }))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("choice-othernode", "10.56.0.0/16", []string{"10.56.0.1-10.56.0.5"}, func(p *v2beta1.SpiderIPPool) { p.Spec.NodeName = []string{"elsewhere"} }))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("choice-full", "10.57.0.0/16", []string{"10.57.0.1"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("choice-ok", "10.58.0.0/16", []string{"10.58.0.1-10.58.0.5"}, fixtures.Gateway("10.58.0.1")))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("choice-net", "10.59.0.0/16", []string{"10.59.0.1-10.59.0.5"}))
	d, _ := startDaemon(t, "choice-node")
	hog := createPod(t, "choice", "hog", "choice-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["choice-full"]}]`))
	if _, err := d.Service.Allocate(ctx, addReq(hog, "eth0", "h")); err != nil {
		t.Fatal(err)
	}
	pod := createPod(t, "choice", "app", "choice-node",
		withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["choice-disabled","choice-othernode","choice-full","choice-ok"]}]`))
	r, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if r.IPs[0].Pool != "choice-ok" || r.IPs[0].Address != "10.58.0.2/16" || r.IPs[0].Gateway != "10.58.0.1" {
		t.Errorf("got %+v, want 10.58.0.2/16 from choice-ok with its gateway", r.IPs[0])
	}
	// No annotation: the CNI network's default pools.
	plain := createPod(t, "choice", "plain", "choice-node")
	req := addReq(plain, "eth0", "c")
	req.Network.DefaultIPv4Pools = []string{"choice-net"}
	r, err = d.Service.Allocate(ctx, req)
	if err != nil || r.IPs[0].Pool != "choice-net" {
		t.Errorf("network default: %+v %v", r, err)
	}
	// Nothing eligible: refused with the reasons, the node's in spiderpool's words too.
	bad := createPod(t, "choice", "bad", "choice-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["choice-disabled","choice-othernode"]}]`))
	_, err = d.Service.Allocate(ctx, addReq(bad, "eth0", "c"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeNoPool || !strings.Contains(ae.Error(), "spec.disable") ||
		!strings.Contains(ae.Error(), `pool choice-othernode is restricted by spec.nodeName to [elsewhere] (unmatched Node name of IPPool choice-othernode): add node "choice-node" there`) {
		t.Errorf("ineligible pools: %v", err)
	}
	checkInvariants(t, false)
}

func mustAddr(t testing.TB, cidr string) netip.Addr {
	t.Helper()
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		t.Fatal(err)
	}
	return p.Addr()
}

// A pod's sandbox is replaced (same pod UID, new container): the new container's ADD
// gets the interface's address, and the late DEL of the old container releases
// nothing; the new container's DEL does.
func TestDelOfAReplacedContainerReleasesNothing(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "sandbox")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("sandbox", "10.88.0.0/16", []string{"10.88.0.1-10.88.0.9"}))
	d, _ := startDaemon(t, "sandbox-node")
	pod := createPod(t, "sandbox", "app", "sandbox-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["sandbox"]}]`))
	a, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "old"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "new"))
	if err != nil || addresses(b)[0] != addresses(a)[0] {
		t.Fatalf("new container's ADD got %v (%v), want %v", b, err, addresses(a))
	}
	if r, err := d.Service.Release(ctx, delReq(pod, "eth0", "old")); err != nil || len(r.Released) != 0 {
		t.Errorf("DEL of the replaced container released %+v (%v)", r, err)
	}
	if n := len(records(t, "sandbox")); n != 1 {
		t.Errorf("pool holds %d addresses, want the new container's 1", n)
	}
	if r, err := d.Service.Release(ctx, delReq(pod, "eth0", "new")); err != nil || len(r.Released) != 1 {
		t.Errorf("DEL of the current container released %+v (%v)", r, err)
	}
	checkInvariants(t, false)
}

// STATUS says not ready, naming the pools, when every pool the network can use is full.
func TestStatusNotReadyWhenPoolsAreFull(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "status")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("status-full", "10.89.0.0/16", []string{"10.89.0.1"}))
	d, _ := startDaemon(t, "status-node")
	pod := createPod(t, "status", "app", "status-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["status-full"]}]`))
	net := api.NetworkConfig{Name: "net-eth0", DefaultIPv4Pools: []string{"status-full"}}
	if st, err := d.Service.Status(ctx, &api.StatusRequest{Network: net}); err != nil || !st.Ready {
		t.Fatalf("STATUS with a free address: %+v %v", st, err)
	}
	if _, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c")); err != nil {
		t.Fatal(err)
	}
	fixtures.Eventually(t, "STATUS to report pool status-full full", func() bool {
		st, err := d.Service.Status(ctx, &api.StatusRequest{Network: net})
		return err == nil && !st.Ready && strings.Contains(st.Message, "status-full")
	})
	checkInvariants(t, false)
}

// A runtime that gives up on an ADD before ipamd got to it (the plugin's
// request_timeout on a busy node) DELs the sandbox and retries with a new one, as the
// kubelet does. The given-up ADD does nothing ("try again later"), so nothing is left
// for the DEL to find, and the pod ends with the one address of its retry. (Work that
// had started when its caller left runs to its end: e2e/scale's TestHarness, callers
// give up.)
func TestGivenUpAddIsFinishedAndReleasedByDel(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "gaveup")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("gaveup", "10.63.0.0/16", []string{"10.63.0.1-10.63.0.10"}))
	d, _ := startDaemon(t, "gaveup-node")
	pod := createPod(t, "gaveup", "p", "gaveup-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["gaveup"]}]`))

	gone, cancel := context.WithCancel(ctx)
	cancel() // the caller has gone before ipamd starts on its ADD
	first, err := d.Service.Allocate(gone, addReq(pod, "eth0", "c1"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeTryAgainLater {
		t.Fatalf("ADD whose caller gave up: %+v, %v; want CNI code %d, nothing done", first, err, api.CodeTryAgainLater)
	}
	if recs := records(t, "gaveup"); len(recs) != 0 {
		t.Errorf("the given-up ADD left %v in the pool, want nothing", recs)
	}
	del, err := d.Service.Release(ctx, delReq(pod, "eth0", "c1"))
	if err != nil || len(del.Released) != 0 {
		t.Fatalf("DEL of the given-up sandbox released %+v (%v), want nothing", del, err)
	}
	if recs := records(t, "gaveup"); len(recs) != 0 {
		t.Errorf("after the DEL the pool holds %v, want nothing", recs)
	}
	retry, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c2"))
	if err != nil {
		t.Fatal(err)
	}
	if recs := records(t, "gaveup"); len(recs) != 1 {
		t.Errorf("after the retry the pool holds %v, want the retry's %v alone", recs, addresses(retry))
	}
	checkInvariants(t, false)
}
