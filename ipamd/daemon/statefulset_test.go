package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/service"
)

const stsNetworks = "macvlan, ipvlan"

// addAll runs ADD for each interface and returns interface → addresses.
func addAll(t testing.TB, svc *service.Service, pod *corev1.Pod, ifaces ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, i := range ifaces {
		r, err := svc.Allocate(context.Background(), addReq(pod, i, "c-"+string(pod.UID)))
		if err != nil {
			t.Fatalf("ADD %s of %s: %v", i, pod.Name, err)
		}
		out[i] = strings.Join(addresses(r), ",")
	}
	return out
}

// recordsOf is the records of several pools, keyed "pool/address".
func recordsOf(t *testing.T, pools ...string) map[string]v2beta1.PoolIPAllocation {
	t.Helper()
	out := map[string]v2beta1.PoolIPAllocation{}
	for _, p := range pools {
		for a, rec := range records(t, p) {
			out[p+"/"+a] = rec
		}
	}
	return out
}

// Spiderpool bug 1 and I5: a multi-NIC StatefulSet pod deleted and recreated under its
// name (the webhook stamped its endpoint's UID) keeps every interface's address; the
// pool records and the endpoint move to the new pod UID.
func TestStatefulSetRestartKeepsEveryInterface(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "sts")
	for i, n := range []string{"sts-eth0", "sts-net1", "sts-net2"} {
		fixtures.CreatePool(t, env.Client, fixtures.Pool(n, fmt.Sprintf("10.6%d.0.0/16", i), []string{fmt.Sprintf("10.6%d.0.1-10.6%d.0.20", i, i)}))
	}
	sel := `[{"interface":"eth0","ipv4":["sts-eth0"]},{"interface":"net1","ipv4":["sts-net1"]},{"interface":"net2","ipv4":["sts-net2"]}]`
	d, _ := startDaemon(t, "sts-node-a")
	d2, _ := startDaemon(t, "sts-node-b")
	sts := createStatefulSet(t, "sts", "db", 2)
	old := createPod(t, "sts", "db-0", "sts-node-a", ownedBy(sts), withAnnotations(annotations.MultusNetworks, stsNetworks, annotations.IPPools, sel,
		annotations.EndpointUID, annotations.NoEndpoint))
	before := addAll(t, d.Service, old, "eth0", "net1", "net2")
	ep := getEndpoint(t, "sts", "db-0")
	if ep == nil || len(ep.Status.Current.IPs) != 3 || ep.Status.OwnerControllerType != "StatefulSet" {
		t.Fatalf("endpoint %+v", ep)
	}
	// The pod goes away (its DELs keep the addresses: ordinal 0 < 2 replicas).
	for _, i := range []string{"eth0", "net1", "net2"} {
		r, err := d.Service.Release(ctx, delReq(old, i, "c-"+string(old.UID)))
		if err != nil || len(r.Kept) != 1 || len(r.Released) != 0 {
			t.Fatalf("DEL %s of a returning StatefulSet pod: %+v %v", i, r, err)
		}
	}
	deletePod(t, old)
	checkInvariants(t, true)

	// The StatefulSet controller recreates it, on another node; the webhook stamped
	// the endpoint's UID.
	fresh := createPod(t, "sts", "db-0", "sts-node-b", ownedBy(sts), withAnnotations(annotations.MultusNetworks, stsNetworks, annotations.IPPools, sel,
		annotations.EndpointUID, string(ep.UID)))
	// A late DEL of the old incarnation (its node was slow) keeps them for the new one.
	if r, err := d.Service.Release(ctx, delReq(old, "net1", "c-"+string(old.UID))); err != nil || len(r.Released) != 0 {
		t.Fatalf("late DEL of the old pod released %+v (%v)", r, err)
	}
	after := addAll(t, d2.Service, fresh, "net2", "eth0", "net1")
	for i, a := range before {
		if after[i] != a {
			t.Errorf("interface %s: had %s, now %s", i, a, after[i])
		}
	}
	for key, rec := range recordsOf(t, "sts-eth0", "sts-net1", "sts-net2") {
		if rec.PodUID != string(fresh.UID) {
			t.Errorf("%s still recorded for pod UID %s, want the new %s", key, rec.PodUID, fresh.UID)
		}
	}
	ep2 := getEndpoint(t, "sts", "db-0")
	if ep2.UID != ep.UID || ep2.Status.Current.UID != string(fresh.UID) || ep2.Status.Current.Node != "sts-node-b" || len(ep2.Status.Current.IPs) != 3 {
		t.Errorf("endpoint after takeover: uid %s (was %s), current %+v", ep2.UID, ep.UID, ep2.Status.Current)
	}
	checkInvariants(t, true)
}

// A pool change on one interface of a recreated StatefulSet pod reallocates only that
// interface; the others keep their addresses.
func TestStatefulSetPoolChangeReallocatesOnlyThatInterface(t *testing.T) {
	createNamespace(t, "stsc")
	for i, n := range []string{"stsc-eth0", "stsc-net1", "stsc-net1-new"} {
		fixtures.CreatePool(t, env.Client, fixtures.Pool(n, fmt.Sprintf("10.7%d.0.0/16", i), []string{fmt.Sprintf("10.7%d.0.1-10.7%d.0.20", i, i)}))
	}
	d, _ := startDaemon(t, "stsc-node")
	sts := createStatefulSet(t, "stsc", "db", 1)
	sel := `[{"interface":"eth0","ipv4":["stsc-eth0"]},{"interface":"net1","ipv4":["stsc-net1"]}]`
	old := createPod(t, "stsc", "db-0", "stsc-node", ownedBy(sts), withAnnotations(annotations.MultusNetworks, "macvlan", annotations.IPPools, sel))
	before := addAll(t, d.Service, old, "eth0", "net1")
	ep := getEndpoint(t, "stsc", "db-0")
	deletePod(t, old)

	sel2 := `[{"interface":"eth0","ipv4":["stsc-eth0"]},{"interface":"net1","ipv4":["stsc-net1-new"]}]`
	fresh := createPod(t, "stsc", "db-0", "stsc-node", ownedBy(sts), withAnnotations(annotations.MultusNetworks, "macvlan", annotations.IPPools, sel2,
		annotations.EndpointUID, string(ep.UID)))
	after := addAll(t, d.Service, fresh, "eth0", "net1")
	if after["eth0"] != before["eth0"] {
		t.Errorf("eth0 changed from %s to %s though its pool did not", before["eth0"], after["eth0"])
	}
	if !strings.HasPrefix(after["net1"], "10.72.") {
		t.Errorf("net1 got %s, want an address of stsc-net1-new", after["net1"])
	}
	if n := len(records(t, "stsc-net1")); n != 0 {
		t.Errorf("old pool of net1 still holds %d addresses", n)
	}
	checkInvariants(t, true)
}

// Spiderpool bug 3: the endpoint was deleted and recreated (another UID) between
// admission and ADD; the node's cache may still show the old one. The pod starts
// cleanly: the stale endpoint is never used as a precondition, the leftover is
// released and the pod gets fresh addresses.
func TestStatefulSetEndpointDeletedAndRecreatedMeanwhile(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "stsr")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsr", "10.80.0.0/16", []string{"10.80.0.1-10.80.0.20"}))
	d, _ := startDaemon(t, "stsr-node")
	sts := createStatefulSet(t, "stsr", "db", 1)
	sel := `[{"interface":"eth0","ipv4":["stsr"]}]`
	old := createPod(t, "stsr", "db-0", "stsr-node", ownedBy(sts), withAnnotations(annotations.IPPools, sel))
	addAll(t, d.Service, old, "eth0")
	ep1 := getEndpoint(t, "stsr", "db-0")
	deletePod(t, old)
	fresh := createPod(t, "stsr", "db-0", "stsr-node", ownedBy(sts), withAnnotations(annotations.IPPools, sel, annotations.EndpointUID, string(ep1.UID)))

	// Someone deletes the endpoint and a new one of the old pod appears in its place.
	if err := env.Client.Delete(ctx, ep1); err != nil {
		t.Fatal(err)
	}
	ep2 := &v2beta1.SpiderEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "stsr", Name: "db-0"}, Status: ep1.Status}
	if err := env.Client.Create(ctx, ep2); err != nil {
		t.Fatal(err)
	}
	// The node's cache still holds the deleted endpoint, whose UID the pod's stamp
	// names: the very copy spiderpool used as an update precondition.
	stale := service.New("stsr-node", staleEndpoint{Reader: d.Cache, ep: ep1}, env.Client, env.Client, d.Service.Ledger, nil, logr.Discard())
	got := addAll(t, stale, fresh, "eth0")
	ep3 := getEndpoint(t, "stsr", "db-0")
	if ep3 == nil || ep3.Status.Current.UID != string(fresh.UID) || len(ep3.Status.Current.IPs) != 1 {
		t.Fatalf("endpoint after ADD: %+v", ep3)
	}
	recs := recordsOf(t, "stsr")
	if len(recs) != 1 {
		t.Errorf("pool holds %v, want only the new pod's address %s", recs, got["eth0"])
	}
	for _, rec := range recs {
		if rec.PodUID != string(fresh.UID) {
			t.Errorf("record of pod UID %s left", rec.PodUID)
		}
	}
	checkInvariants(t, true)
}

// A leftover endpoint of another pod UID without a matching stamp is released and the
// pod allocates fresh.
func TestLeftoverEndpointWithoutStampIsReleased(t *testing.T) {
	createNamespace(t, "left")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("left", "10.81.0.0/16", []string{"10.81.0.1-10.81.0.20"}))
	d, _ := startDaemon(t, "left-node")
	old := createPod(t, "left", "web", "left-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["left"]}]`))
	addAll(t, d.Service, old, "eth0")
	deletePod(t, old) // no DEL ran: the node was down
	fresh := createPod(t, "left", "web", "left-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["left"]}]`))
	addAll(t, d.Service, fresh, "eth0")
	var uids []string
	for _, rec := range recordsOf(t, "left") {
		uids = append(uids, rec.PodUID)
	}
	sort.Strings(uids)
	if len(uids) != 1 || uids[0] != string(fresh.UID) {
		t.Errorf("pool records of pod UIDs %v, want only %s", uids, fresh.UID)
	}
	checkInvariants(t, true)
}

// staleEndpoint is a cache that lags: it still returns ep for ep's key.
type staleEndpoint struct {
	client.Reader
	ep *v2beta1.SpiderEndpoint
}

func (r staleEndpoint) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if e, ok := obj.(*v2beta1.SpiderEndpoint); ok && key == client.ObjectKeyFromObject(r.ep) {
		r.ep.DeepCopyInto(e)
		return nil
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// A recreated StatefulSet pod that lost an interface (its network was removed from
// the template) keeps eth0's address; the removed interface's address is released.
func TestStatefulSetRemovedInterfaceIsReleased(t *testing.T) {
	createNamespace(t, "stsd")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsd-eth0", "10.76.0.0/16", []string{"10.76.0.1-10.76.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsd-net1", "10.77.0.0/16", []string{"10.77.0.1-10.77.0.20"}))
	d, _ := startDaemon(t, "stsd-node")
	sts := createStatefulSet(t, "stsd", "db", 1)
	old := createPod(t, "stsd", "db-0", "stsd-node", ownedBy(sts), withAnnotations(annotations.MultusNetworks, "macvlan",
		annotations.IPPools, `[{"interface":"eth0","ipv4":["stsd-eth0"]},{"interface":"net1","ipv4":["stsd-net1"]}]`))
	before := addAll(t, d.Service, old, "eth0", "net1")
	ep := getEndpoint(t, "stsd", "db-0")
	deletePod(t, old)
	fresh := createPod(t, "stsd", "db-0", "stsd-node", ownedBy(sts), withAnnotations(
		annotations.IPPools, `[{"interface":"eth0","ipv4":["stsd-eth0"]}]`, annotations.EndpointUID, string(ep.UID)))
	after := addAll(t, d.Service, fresh, "eth0")
	if after["eth0"] != before["eth0"] {
		t.Errorf("eth0 changed from %s to %s", before["eth0"], after["eth0"])
	}
	if n := len(records(t, "stsd-net1")); n != 0 {
		t.Errorf("the removed interface's pool still holds %d addresses", n)
	}
	if ep2 := getEndpoint(t, "stsd", "db-0"); len(ep2.Status.Current.IPs) != 1 || ep2.Status.Current.IPs[0].Interface != "eth0" {
		t.Errorf("endpoint after takeover: %+v", ep2.Status.Current)
	}
	checkInvariants(t, true)
}

// I5 whatever picked the pool (issue 10 finding 4): a StatefulSet pod whose eth0 draws
// from its namespace's default pool keeps its address on restart while that default is
// unchanged, and moves to the new default when the namespace names another pool. The
// old pool's address is then released.
func TestStatefulSetNamespaceDefaultPool(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "stsn")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsn-a", "172.23.0.0/16", []string{"172.23.0.1-172.23.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsn-b", "172.24.0.0/16", []string{"172.24.0.1-172.24.0.20"}))
	setDefault := func(pool string) {
		t.Helper()
		ns := &corev1.Namespace{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "stsn"}, ns); err != nil {
			t.Fatal(err)
		}
		ns.Annotations = map[string]string{annotations.NamespaceDefaultIPv4Pool: `["` + pool + `"]`}
		if err := env.Client.Update(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	setDefault("stsn-a")
	d, _ := startDaemon(t, "stsn-node")
	fixtures.Eventually(t, "the namespace default pool in the cache", func() bool {
		ns := &corev1.Namespace{}
		return d.Cache.Get(ctx, client.ObjectKey{Name: "stsn"}, ns) == nil && ns.Annotations[annotations.NamespaceDefaultIPv4Pool] != ""
	})
	sts := createStatefulSet(t, "stsn", "db", 1)
	restart := func(old *corev1.Pod) *corev1.Pod {
		t.Helper()
		ep := getEndpoint(t, "stsn", "db-0")
		deletePod(t, old)
		return createPod(t, "stsn", "db-0", "stsn-node", ownedBy(sts), withAnnotations(annotations.EndpointUID, string(ep.UID)))
	}
	old := createPod(t, "stsn", "db-0", "stsn-node", ownedBy(sts), withAnnotations(annotations.EndpointUID, annotations.NoEndpoint))
	before := addAll(t, d.Service, old, "eth0")

	same := restart(old)
	if got := addAll(t, d.Service, same, "eth0"); got["eth0"] != before["eth0"] {
		t.Errorf("namespace default unchanged: eth0 got %s, had %s", got["eth0"], before["eth0"])
	}

	setDefault("stsn-b")
	fixtures.Eventually(t, "the new namespace default pool stsn-b in the cache", func() bool {
		ns := &corev1.Namespace{}
		return d.Cache.Get(ctx, client.ObjectKey{Name: "stsn"}, ns) == nil && strings.Contains(ns.Annotations[annotations.NamespaceDefaultIPv4Pool], "stsn-b")
	})
	moved := restart(same)
	if got := addAll(t, d.Service, moved, "eth0"); !strings.HasPrefix(got["eth0"], "172.24.") {
		t.Errorf("namespace default moved to stsn-b: eth0 got %s", got["eth0"])
	}
	if n := len(records(t, "stsn-a")); n != 0 {
		t.Errorf("the former default pool still holds %d addresses", n)
	}
	checkInvariants(t, true)
}

// I5 per address family: a recreated StatefulSet pod whose interface changed its IPv4
// pool only keeps that interface's IPv6 address (not merely one that happens to be
// free again) and takes a new IPv4 address from the new pool.
func TestStatefulSetPoolChangeKeepsTheOtherFamily(t *testing.T) {
	createNamespace(t, "stsf")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsf-v4", "172.27.0.0/16", []string{"172.27.0.1-172.27.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsf-v4-new", "172.28.0.0/16", []string{"172.28.0.1-172.28.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsf-v6", "fd00:27::/64", []string{"fd00:27::1-fd00:27::20"}))
	d, _ := startDaemon(t, "stsf-node")
	sts := createStatefulSet(t, "stsf", "db", 1)
	old := createPod(t, "stsf", "db-0", "stsf-node", ownedBy(sts), withAnnotations(
		annotations.IPPools, `[{"interface":"eth0","ipv4":["stsf-v4"],"ipv6":["stsf-v6"]}]`, annotations.EndpointUID, annotations.NoEndpoint))
	before := addAll(t, d.Service, old, "eth0")
	ep := getEndpoint(t, "stsf", "db-0")
	deletePod(t, old)
	fresh := createPod(t, "stsf", "db-0", "stsf-node", ownedBy(sts), withAnnotations(
		annotations.IPPools, `[{"interface":"eth0","ipv4":["stsf-v4-new"],"ipv6":["stsf-v6"]}]`, annotations.EndpointUID, string(ep.UID)))
	after := addAll(t, d.Service, fresh, "eth0")
	v6 := func(s string) string { return s[strings.Index(s, ",")+1:] }
	if v6(after["eth0"]) != v6(before["eth0"]) || !strings.HasPrefix(after["eth0"], "172.28.") {
		t.Errorf("eth0 had %s, now %s: want the same IPv6 and an IPv4 of stsf-v4-new", before["eth0"], after["eth0"])
	}
	if n := len(records(t, "stsf-v4")); n != 0 {
		t.Errorf("the former IPv4 pool still holds %d addresses", n)
	}
	checkInvariants(t, true)
}

// spiderpool's A00017: a StatefulSet pod's net1 draws from its CNI network's default
// pools, and the network is changed to name another IPv4 pool before the pod is
// recreated. eth0's ADD takes the endpoint over without seeing net1's network, so net1
// arrives at its own ADD still holding the old pool's address: that ADD releases it
// and takes one of the new pool, while net1's IPv6 address, whose pool the network
// still names, and eth0's are kept.
func TestStatefulSetNetworkDefaultPoolChangeMovesThatInterface(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "stsm")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsm-eth0", "10.64.0.0/16", []string{"10.64.0.1-10.64.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsm-net1-a", "172.29.0.0/16", []string{"172.29.0.1-172.29.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsm-net1-b", "172.30.0.0/16", []string{"172.30.0.1-172.30.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsm-net1-v6", "fd00:29::/64", []string{"fd00:29::1-fd00:29::20"}))
	d, _ := startDaemon(t, "stsm-node-a")
	d2, _ := startDaemon(t, "stsm-node-b")
	sts := createStatefulSet(t, "stsm", "db", 1)
	eth0 := api.NetworkConfig{Name: "default", DefaultIPv4Pools: []string{"stsm-eth0"}}
	net1 := api.NetworkConfig{Name: "macvlan", DefaultIPv4Pools: []string{"stsm-net1-a"}, DefaultIPv6Pools: []string{"stsm-net1-v6"}}
	add := func(svc *service.Service, p *corev1.Pod, iface string, network api.NetworkConfig) string {
		t.Helper()
		got, err := addOn(svc, p, iface, network)
		if err != nil {
			t.Fatalf("ADD %s of %s: %v", iface, p.Name, err)
		}
		return got
	}
	old := createPod(t, "stsm", "db-0", "stsm-node-a", ownedBy(sts), withAnnotations(annotations.MultusNetworks, "macvlan",
		annotations.EndpointUID, annotations.NoEndpoint))
	eth0Before, net1Before := add(d.Service, old, "eth0", eth0), add(d.Service, old, "net1", net1)
	if !strings.HasPrefix(net1Before, "172.29.") || !strings.Contains(net1Before, ",fd00:29::") {
		t.Fatalf("net1 got %s, want an address of stsm-net1-a and one of stsm-net1-v6", net1Before)
	}
	ep := getEndpoint(t, "stsm", "db-0")
	for _, i := range []string{"eth0", "net1"} {
		if r, err := d.Service.Release(ctx, delReq(old, i, "c-"+string(old.UID))); err != nil || len(r.Released) != 0 {
			t.Fatalf("DEL %s of a returning StatefulSet pod released %+v (%v)", i, r, err)
		}
	}
	deletePod(t, old)

	// The network now names stsm-net1-b for IPv4; the pod comes back on another node.
	net1.DefaultIPv4Pools = []string{"stsm-net1-b"}
	fresh := createPod(t, "stsm", "db-0", "stsm-node-b", ownedBy(sts), withAnnotations(annotations.MultusNetworks, "macvlan",
		annotations.EndpointUID, string(ep.UID)))
	eth0After, net1After := add(d2.Service, fresh, "eth0", eth0), add(d2.Service, fresh, "net1", net1)
	if eth0After != eth0Before {
		t.Errorf("eth0 had %s, now %s, though its pool did not change", eth0Before, eth0After)
	}
	v6 := func(s string) string { return s[strings.Index(s, ",")+1:] }
	if !strings.HasPrefix(net1After, "172.30.") || v6(net1After) != v6(net1Before) {
		t.Errorf("net1 had %s, now %s: want an IPv4 address of stsm-net1-b and the same IPv6 address", net1Before, net1After)
	}
	if recs := records(t, "stsm-net1-a"); len(recs) != 0 {
		t.Errorf("the pool the network no longer names still holds %v", recs)
	}
	for key, rec := range recordsOf(t, "stsm-eth0", "stsm-net1-b", "stsm-net1-v6") {
		if rec.PodUID != string(fresh.UID) {
			t.Errorf("%s recorded for pod UID %s, want %s", key, rec.PodUID, fresh.UID)
		}
	}
	ep2 := getEndpoint(t, "stsm", "db-0")
	for _, e := range ep2.Status.Current.IPs {
		if e.Interface == "net1" && (e.IPv4Pool == nil || *e.IPv4Pool != "stsm-net1-b" || e.IPv6Pool == nil || *e.IPv6Pool != "stsm-net1-v6") {
			t.Errorf("endpoint records net1 from pools %q and %q", deref(e.IPv4Pool), deref(e.IPv6Pool))
		}
	}
	// A repeated ADD (a retry of the runtime) answers the same addresses and frees nothing.
	if again := add(d2.Service, fresh, "net1", net1); again != net1After {
		t.Errorf("a repeated ADD of net1 answered %s, first %s", again, net1After)
	}
	checkInvariants(t, true)
}

// addOn runs the ADD of one interface attached through network and returns its
// addresses, comma-separated.
func addOn(svc *service.Service, p *corev1.Pod, iface string, network api.NetworkConfig) (string, error) {
	req := addReq(p, iface, "c-"+string(p.UID))
	req.Network = network
	r, err := svc.Allocate(context.Background(), req)
	if err != nil {
		return "", err
	}
	return strings.Join(addresses(r), ","), nil
}

// A StatefulSet pod whose net1 network names a new pool that has no free address: the
// ADD fails and net1 keeps holding its old address (nothing is lost for an address
// that is not there); once the new pool has room, the next ADD moves net1 to it.
func TestStatefulSetPoolChangeWithoutRoomKeepsTheOldAddress(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "stsx")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsx-eth0", "10.65.0.0/16", []string{"10.65.0.1-10.65.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsx-net1-a", "10.66.0.0/16", []string{"10.66.0.1-10.66.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsx-net1-b", "10.67.0.0/16", []string{"10.67.0.1"}))
	d, _ := startDaemon(t, "stsx-node")
	sts := createStatefulSet(t, "stsx", "db", 1)
	eth0 := api.NetworkConfig{Name: "default", DefaultIPv4Pools: []string{"stsx-eth0"}}
	net1 := api.NetworkConfig{Name: "macvlan", DefaultIPv4Pools: []string{"stsx-net1-a"}}
	// Another pod holds stsx-net1-b's only address.
	other := createPod(t, "stsx", "other", "stsx-node", withAnnotations(annotations.MultusNetworks, "macvlan"))
	if _, err := addOn(d.Service, other, "net1", api.NetworkConfig{Name: "macvlan", DefaultIPv4Pools: []string{"stsx-net1-b"}}); err != nil {
		t.Fatal(err)
	}
	old := createPod(t, "stsx", "db-0", "stsx-node", ownedBy(sts), withAnnotations(annotations.MultusNetworks, "macvlan",
		annotations.EndpointUID, annotations.NoEndpoint))
	for iface, network := range map[string]api.NetworkConfig{"eth0": eth0, "net1": net1} {
		if _, err := addOn(d.Service, old, iface, network); err != nil {
			t.Fatal(err)
		}
	}
	ep := getEndpoint(t, "stsx", "db-0")
	deletePod(t, old)

	net1.DefaultIPv4Pools = []string{"stsx-net1-b"}
	fresh := createPod(t, "stsx", "db-0", "stsx-node", ownedBy(sts), withAnnotations(annotations.MultusNetworks, "macvlan",
		annotations.EndpointUID, string(ep.UID)))
	if _, err := addOn(d.Service, fresh, "eth0", eth0); err != nil {
		t.Fatal(err)
	}
	_, err := addOn(d.Service, fresh, "net1", net1)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodePoolExhausted {
		t.Fatalf("ADD of net1 with stsx-net1-b full: %v, want pool exhausted", err)
	}
	held := records(t, "stsx-net1-a")
	if len(held) != 1 {
		t.Fatalf("after the failed ADD stsx-net1-a holds %v, want net1's old address", held)
	}
	for _, rec := range held {
		if rec.PodUID != string(fresh.UID) || rec.Interface != "net1" {
			t.Errorf("stsx-net1-a's address is recorded for %+v, want net1 of pod UID %s", rec, fresh.UID)
		}
	}

	if _, err := d.Service.Release(ctx, delReq(other, "net1", "c-"+string(other.UID))); err != nil {
		t.Fatal(err)
	}
	got, err := addOn(d.Service, fresh, "net1", net1)
	if err != nil || got != "10.67.0.1/16" {
		t.Fatalf("ADD of net1 once stsx-net1-b has room: %q %v, want 10.67.0.1/16", got, err)
	}
	if recs := records(t, "stsx-net1-a"); len(recs) != 0 {
		t.Errorf("stsx-net1-a still holds %v", recs)
	}
	checkInvariants(t, true)
}

// A pod that no StatefulSet controls keeps what its pod UID holds at a repeated ADD
// (a sandbox recreated) though its network names other pools since, as in spiderpool:
// only StatefulSet pods, whose addresses outlive them, are moved to the new pools.
func TestPodKeepsItsAddressWhenItsNetworkNamesOtherPools(t *testing.T) {
	createNamespace(t, "netk")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("netk-a", "10.68.0.0/16", []string{"10.68.0.1-10.68.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("netk-b", "10.69.0.0/16", []string{"10.69.0.1-10.69.0.20"}))
	d, _ := startDaemon(t, "netk-node")
	p := createPod(t, "netk", "web", "netk-node", withAnnotations(annotations.MultusNetworks, "macvlan"))
	first, err := addOn(d.Service, p, "net1", api.NetworkConfig{Name: "macvlan", DefaultIPv4Pools: []string{"netk-a"}})
	if err != nil {
		t.Fatal(err)
	}
	again, err := addOn(d.Service, p, "net1", api.NetworkConfig{Name: "macvlan", DefaultIPv4Pools: []string{"netk-b"}})
	if err != nil || again != first {
		t.Errorf("repeated ADD after the network changed pools: %q %v, want %s", again, err, first)
	}
	if n := len(records(t, "netk-b")); n != 0 {
		t.Errorf("netk-b holds %d addresses", n)
	}
	checkInvariants(t, true)
}
