package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/allocator"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/server"
)

// I6: ipamd died after its pool write and before its endpoint write. The restarted
// ipamd's next ADD returns the address already recorded for the (pod, interface) and
// writes the endpoint; a DEL instead releases it.
func TestCrashBetweenPoolWriteAndEndpointWrite(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "crash")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("crash", "10.82.0.0/16", []string{"10.82.0.1-10.82.0.20"}))
	sel := withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["crash"]}]`)
	first, kill := startDaemon(t, "crash-node")
	a := createPod(t, "crash", "a", "crash-node", sel)
	b := createPod(t, "crash", "b", "crash-node", sel)
	// The pool writes of both ADDs land; then the process dies.
	for _, p := range []*corev1.Pod{a, b} {
		if _, err := first.Service.Ledger.Allocate(ctx, "crash",
			allocator.Owner{Pod: p.Namespace + "/" + p.Name, PodUID: string(p.UID), Interface: "eth0"}); err != nil {
			t.Fatal(err)
		}
	}
	kill()
	recorded := records(t, "crash")
	restarted, _ := startDaemon(t, "crash-node")

	r, err := restarted.Service.Allocate(ctx, addReq(a, "eth0", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if rec := recorded[mustAddr(t, r.IPs[0].Address).String()]; rec.PodUID != string(a.UID) {
		t.Errorf("ADD after the crash got %s, not the address recorded before it", r.IPs[0].Address)
	}
	if ep := getEndpoint(t, "crash", "a"); ep == nil || len(ep.Status.Current.IPs) != 1 {
		t.Errorf("endpoint not written by the repairing ADD: %+v", ep)
	}
	rel, err := restarted.Service.Release(ctx, delReq(b, "eth0", "c"))
	if err != nil || len(rel.Released) != 1 {
		t.Errorf("DEL after the crash released %+v (%v), want b's address", rel, err)
	}
	if n := len(records(t, "crash")); n != 1 {
		t.Errorf("pool holds %d addresses, want only a's", n)
	}
	checkInvariants(t, false)
}

// I6: DEL died after releasing the pool record and before updating the endpoint. The
// next DEL removes the endpoint; a retried ADD instead allocates afresh and rewrites it.
func TestCrashBetweenPoolReleaseAndEndpointUpdate(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "crashdel")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("crashdel", "10.83.0.0/16", []string{"10.83.0.1-10.83.0.20"}))
	sel := withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["crashdel"]}]`)
	d, _ := startDaemon(t, "crashdel-node")
	a := createPod(t, "crashdel", "a", "crashdel-node", sel)
	b := createPod(t, "crashdel", "b", "crashdel-node", sel)
	for _, p := range []*corev1.Pod{a, b} {
		if _, err := d.Service.Allocate(ctx, addReq(p, "eth0", "c")); err != nil {
			t.Fatal(err)
		}
		owner := allocator.Owner{Pod: p.Namespace + "/" + p.Name, PodUID: string(p.UID), Interface: "eth0"}
		if _, err := d.Service.Ledger.Release(ctx, "crashdel", owner); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Service.Release(ctx, delReq(a, "eth0", "c")); err != nil {
		t.Fatal(err)
	}
	if getEndpoint(t, "crashdel", "a") != nil {
		t.Error("the repeated DEL left the endpoint")
	}
	r, err := d.Service.Allocate(ctx, addReq(b, "eth0", "c"))
	if err != nil {
		t.Fatal(err)
	}
	ep := getEndpoint(t, "crashdel", "b")
	if ep == nil || len(ep.Status.Current.IPs) != 1 || *ep.Status.Current.IPs[0].IPv4 != r.IPs[0].Address {
		t.Errorf("endpoint %+v does not record the ADD's %s", ep, r.IPs[0].Address)
	}
	checkInvariants(t, true)
}

// I6 under load: an ipamd is killed while 60 ADDs are in flight; requests are cut at
// random moments. A restarted ipamd's ADDs give every pod exactly one address, and
// their DELs leave nothing.
func TestKilledMidAllocationRepairedByNextAddAndDel(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "kill")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("kill", "10.84.0.0/16", []string{"10.84.0.1-10.84.0.60"}))
	sel := withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["kill"]}]`)
	const n = 60
	pods := make([]*corev1.Pod, n)
	parallel(t, n, func(i int) { pods[i] = createPod(t, "kill", fmt.Sprintf("p-%d", i), "kill-node", sel) })
	victim, kill := startDaemon(t, "kill-node")
	parallel(t, n, func(i int) {
		rctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(40))*time.Millisecond)
		defer cancel()
		_, _ = victim.Service.Allocate(rctx, addReq(pods[i], "eth0", "c"))
	})
	kill()
	// What the kill left may include an endpoint entry whose address the pool no
	// longer records for it (an ADD undone after its endpoint write was cut): the
	// next ADD or DEL repairs it, and the checks below run after them.
	d, _ := startDaemon(t, "kill-node")
	seen := map[string]bool{}
	parallel(t, n, func(i int) {
		r, err := d.Service.Allocate(ctx, addReq(pods[i], "eth0", "c"))
		if err != nil {
			t.Errorf("ADD of pod %d after the kill: %v", i, err)
			return
		}
		_ = r
	})
	for a, rec := range records(t, "kill") {
		if seen[rec.PodUID] {
			t.Errorf("pod UID %s holds two addresses (one is %s)", rec.PodUID, a)
		}
		seen[rec.PodUID] = true
	}
	if len(seen) != n {
		t.Errorf("%d pods hold addresses, want %d", len(seen), n)
	}
	checkInvariants(t, false)
	parallel(t, n, func(i int) {
		deletePod(t, pods[i])
		if _, err := d.Service.Release(ctx, delReq(pods[i], "eth0", "c")); err != nil {
			t.Errorf("DEL of pod %d: %v", i, err)
		}
	})
	if left := len(records(t, "kill")); left != 0 {
		t.Errorf("%d addresses left after every DEL", left)
	}
	checkInvariants(t, false)
}

// CNI GC releases the attachments the runtime no longer has whose pods are gone, and
// only those.
func TestGCReleasesInvalidAttachmentsOnly(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "gc")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("gc", "10.85.0.0/16", []string{"10.85.0.1-10.85.0.20"}))
	sel := withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["gc"]}]`)
	d, _ := startDaemon(t, "gc-node")
	live := createPod(t, "gc", "live", "gc-node", sel)
	gone := createPod(t, "gc", "gone", "gc-node", sel)
	for _, p := range []*corev1.Pod{live, gone} {
		if _, err := d.Service.Allocate(ctx, addReq(p, "eth0", "ctr-"+p.Name)); err != nil {
			t.Fatal(err)
		}
	}
	deletePod(t, gone) // without a DEL
	// The cache must show both endpoints before GC can judge them.
	fixtures.Eventually(t, "both endpoints of namespace gc in the cache", func() bool {
		r, _ := d.Service.GC(ctx, &api.GCRequest{Network: api.NetworkConfig{Name: "unrelated"}})
		return r != nil && getEndpoint(t, "gc", "gone") != nil && cachedEndpoints(t, d, "gc") == 2
	})
	r, err := d.Service.GC(ctx, &api.GCRequest{Network: api.NetworkConfig{Name: "net-eth0"},
		ValidAttachments: []api.Attachment{{ContainerID: "ctr-live", Interface: "eth0"}}})
	if err != nil || len(r.Released) != 1 {
		t.Fatalf("GC released %+v (%v), want gone's address", r, err)
	}
	recs := records(t, "gc")
	if len(recs) != 1 {
		t.Errorf("pool holds %v", recs)
	}
	for _, rec := range recs {
		if rec.PodUID != string(live.UID) {
			t.Errorf("GC released the live pod's address")
		}
	}
	checkInvariants(t, false)
}

// The socket speaks ipamd/api: root-only, "try again later" until synced, then the
// CNI verbs in frames through api.Client, served by the plugin's library.
func TestSocketServesTheAPI(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "sock")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("sock", "10.86.0.0/16", []string{"10.86.0.1-10.86.0.20"}, fixtures.Default))
	d, _ := startDaemon(t, "sock-node")
	path := filepath.Join(t.TempDir(), "ipamd.sock")
	l, err := server.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = server.Serve(sctx, l, server.Handler(d.Service, func() bool { return ready })) }()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	c := api.NewClient(path, 30*time.Second)
	pod := createPod(t, "sock", "app", "sock-node")
	_, err = c.Allocate(ctx, addReq(pod, "eth0", "c"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeTryAgainLater {
		t.Errorf("ADD before sync: %v, want code 11", err)
	}
	ready = true
	r, err := c.Allocate(ctx, addReq(pod, "eth0", "c"))
	if err != nil || len(r.IPs) != 1 || r.Interface != "eth0" {
		t.Fatalf("ADD through the socket: %+v %v", r, err)
	}
	addr := mustAddr(t, r.IPs[0].Address).String()
	if rec, ok := records(t, "sock")[addr]; !ok || rec.PodUID != string(pod.UID) {
		t.Errorf("ADD through the socket answered %s, which pool sock records as %+v", addr, rec)
	}
	fixtures.Eventually(t, "STATUS to report pool sock ready", func() bool { // STATUS reads the cache, which follows the write shortly
		st, err := c.Status(ctx, &api.StatusRequest{Network: api.NetworkConfig{Name: "net-eth0", DefaultIPv4Pools: []string{"sock"}}})
		return err == nil && st.Ready
	})
	if st, err := c.Status(ctx, &api.StatusRequest{Network: api.NetworkConfig{Name: "net-eth0", DefaultIPv4Pools: []string{"gone"}}}); err != nil || st.Ready || !strings.Contains(st.Message, "gone") {
		t.Errorf("STATUS of a network whose only pool does not exist: %+v %v, want not ready naming it", st, err)
	}
	if _, err := c.Release(ctx, delReq(pod, "eth0", "c")); err != nil {
		t.Errorf("DEL: %v", err)
	}
	if rec, ok := records(t, "sock")[addr]; ok {
		t.Errorf("after DEL through the socket, pool sock still records %s as %+v", addr, rec)
	}
	if _, err := c.Allocate(ctx, &api.AllocateRequest{Pod: api.Pod{Namespace: "sock", Name: "app"}, Network: api.NetworkConfig{Name: "net-eth0"}}); !errors.As(err, &ae) || ae.Code != 4 || !strings.Contains(ae.Message, "CNI_IFNAME") {
		t.Errorf("ADD without interface: %v, want code 4 naming CNI_IFNAME", err)
	}
	checkInvariants(t, false)
}
