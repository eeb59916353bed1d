package daemon_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
)

// A CNI network name is its configuration's author's choice and not namespaced: two
// tenants' NetworkAttachmentDefinitions gc-a/x and gc-b/x may both call themselves
// "x". A GC of tenant B's "x", listing only B's attachments as valid, releases nothing
// of tenant A's live pod; what it releases is an attachment whose own pod is gone.
func TestGCOfOneNetworkNameInTwoNamespaces(t *testing.T) {
	ctx := context.Background()
	fixtures.CreatePool(t, env.Client, fixtures.Pool("gc-x", "10.219.0.0/16", []string{"10.219.0.1-10.219.0.20"}))
	d, _ := startDaemon(t, "gcx-node")
	pods := map[string]*corev1.Pod{}
	for _, ns := range []string{"gc-a", "gc-b"} {
		createNamespace(t, ns)
		for _, name := range []string{"live", "gone"} {
			p := createPod(t, ns, name, "gcx-node", withAnnotations(annotations.MultusNetworks, "x", annotations.IPPools, `[{"interface":"net1","ipv4":["gc-x"]}]`))
			req := addReq(p, "net1", "ctr-"+ns+"-"+name)
			req.Network.Name = "x"
			if _, err := d.Service.Allocate(ctx, req); err != nil {
				t.Fatal(err)
			}
			pods[ns+"/"+name] = p
		}
	}
	deletePod(t, pods["gc-a/gone"])
	deletePod(t, pods["gc-b/gone"])
	fixtures.Eventually(t, "the four endpoints in the cache", func() bool {
		return cachedEndpoints(t, d, "gc-a") == 2 && cachedEndpoints(t, d, "gc-b") == 2
	})

	// The runtime's GC of tenant B's network "x": B's live attachment is valid.
	r, err := d.Service.GC(ctx, &api.GCRequest{Network: api.NetworkConfig{Name: "x"},
		ValidAttachments: []api.Attachment{{ContainerID: "ctr-gc-b-live", Interface: "net1"}}})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, "gc-x")
	held := map[string]bool{}
	for _, rec := range recs {
		held[rec.Pod] = true
	}
	if !held["gc-a/live"] {
		t.Errorf("GC of tenant B's network x released tenant A's live pod gc-a/live (released %v)", r.Released)
	}
	if !held["gc-b/live"] {
		t.Errorf("GC released the valid attachment of gc-b/live")
	}
	if held["gc-a/gone"] || held["gc-b/gone"] || len(r.Released) != 2 {
		t.Errorf("GC released %v; want the addresses of the two deleted pods, whose own pods are gone (pool holds %v)", r.Released, recs)
	}
	checkInvariants(t, false)
}
