package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
	"github.com/nicpool/nicpool/ipamd/endpoint"
)

// Issue 10, finding 1: whoever may write a SpiderEndpoint in their own namespace names
// the UID of a running pod of another namespace in it. Neither the ADD of the pod of
// the forged endpoint's name (which discards it as a leftover) nor the node's CNI GC
// (which releases the interfaces of endpoints whose attachment is gone) frees the
// running pod's addresses: a record is released only for the pod it names.
func TestForgedEndpointReleasesNothingOfAnotherPod(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "forge-prod")
	createNamespace(t, "forge-evil")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("forge", "172.20.0.0/16", []string{"172.20.0.1-172.20.0.20"}))
	d, _ := startDaemon(t, "forge-node")
	sel := withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["forge"]}]`)
	victim := createPod(t, "forge-prod", "db", "forge-node", sel)
	before := addAll(t, d.Service, victim, "eth0")
	victimEP := getEndpoint(t, "forge-prod", "db")
	want := records(t, "forge")

	forge := func(name string) {
		t.Helper()
		atts, _ := json.Marshal(map[string]endpoint.Attachment{"eth0": {ContainerID: "gone", Network: "net-eth0"}})
		ep := &v2beta1.SpiderEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: "forge-evil", Name: name, Annotations: map[string]string{endpoint.AttachmentsAnnotation: string(atts)}},
			Status:     victimEP.Status, // the victim's UID, node and addresses
		}
		if err := env.Client.Create(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}

	// The pod the forged endpoint is named after starts: its ADD discards the endpoint.
	forge("x")
	x := createPod(t, "forge-evil", "x", "forge-node", sel)
	got := addAll(t, d.Service, x, "eth0")
	if got["eth0"] == before["eth0"] {
		t.Errorf("pod forge-evil/x was given the victim's address %s", got["eth0"])
	}
	if ep := getEndpoint(t, "forge-evil", "x"); ep == nil || ep.Status.Current.UID != string(x.UID) {
		t.Errorf("endpoint forge-evil/x after its pod's ADD: %+v", ep)
	}

	// The runtime's CNI GC lists no valid attachment: the forged endpoint's interface
	// is released like a DEL.
	forge("y")
	fixtures.Eventually(t, "both endpoints of namespace forge-evil in the cache", func() bool { return cachedEndpoints(t, d, "forge-evil") == 2 })
	if _, err := d.Service.GC(ctx, &api.GCRequest{Network: api.NetworkConfig{Name: "net-eth0"}, ValidAttachments: []api.Attachment{
		{ContainerID: "c-" + string(victim.UID), Interface: "eth0"}, {ContainerID: "c-" + string(x.UID), Interface: "eth0"},
	}}); err != nil {
		t.Fatal(err)
	}

	recs := records(t, "forge")
	for key, rec := range want {
		if recs[key] != rec {
			t.Errorf("%s: the victim's record %+v is now %+v", key, rec, recs[key])
		}
	}
	if ep := getEndpoint(t, "forge-prod", "db"); ep == nil || ep.Status.Current.UID != string(victim.UID) || len(ep.Status.Current.IPs) != 1 {
		t.Errorf("the victim's endpoint changed: %+v", ep)
	}
	if again := addAll(t, d.Service, victim, "eth0"); again["eth0"] != before["eth0"] {
		t.Errorf("victim's ADD retried: %s, had %s", again["eth0"], before["eth0"])
	}
	if ep := getEndpoint(t, "forge-evil", "y"); ep != nil {
		t.Errorf("forged endpoint y left after CNI GC: %+v", ep.Status.Current)
	}
	checkInvariants(t, true)
}

// Issue 10, finding 2: a pod that skipped the pod webhook keeps a hand-written stamp
// (ipam.nicpool.io/endpoint-uid). A pod named like a StatefulSet's pod that comes back,
// but not controlled by that StatefulSet (a bare pod, or a kind named StatefulSet of
// another API group), takes nothing over and frees nothing: its ADD is refused naming
// the StatefulSet, its DEL releases nothing, and the StatefulSet's own pod later keeps its
// address.
func TestForgedStampTakesNothingOver(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "stamp")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stamp", "172.21.0.0/16", []string{"172.21.0.1-172.21.0.20"}))
	d, _ := startDaemon(t, "stamp-node")
	sts := createStatefulSet(t, "stamp", "db", 1)
	sel := `[{"interface":"eth0","ipv4":["stamp"]}]`
	old := createPod(t, "stamp", "db-0", "stamp-node", ownedBy(sts), withAnnotations(annotations.IPPools, sel, annotations.EndpointUID, annotations.NoEndpoint))
	before := addAll(t, d.Service, old, "eth0")
	ep := getEndpoint(t, "stamp", "db-0")
	if r, err := d.Service.Release(ctx, delReq(old, "eth0", "c-"+string(old.UID))); err != nil || len(r.Kept) != 1 {
		t.Fatalf("DEL of a StatefulSet pod that comes back: %+v %v", r, err)
	}
	deletePod(t, old)
	want := records(t, "stamp")

	impostors := map[string]podOpt{
		"bare pod": func(*corev1.Pod) {},
		"StatefulSet kind of another group": func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "db", UID: "kruise-uid", Controller: ptr(true)}}
		},
	}
	for name, opt := range impostors {
		t.Run(name, func(t *testing.T) {
			p := createPod(t, "stamp", "db-0", "stamp-node", opt, withAnnotations(annotations.IPPools, sel, annotations.EndpointUID, string(ep.UID)))
			r, err := d.Service.Allocate(ctx, addReq(p, "eth0", "c-"+string(p.UID)))
			if err == nil {
				t.Errorf("ADD of an impostor with a forged stamp got %v", addresses(r))
			} else if !strings.Contains(err.Error(), "StatefulSet db") {
				t.Errorf("refusal does not name the StatefulSet: %v", err)
			}
			// The runtime undoes the failed ADD with a DEL.
			if r, err := d.Service.Release(ctx, delReq(p, "eth0", "c-"+string(p.UID))); err != nil || len(r.Released) != 0 {
				t.Errorf("DEL of the impostor: %+v %v", r, err)
			}
			if got := records(t, "stamp"); len(got) != len(want) {
				t.Errorf("pool records %v, want %v", got, want)
			} else {
				for key, rec := range want {
					if got[key] != rec {
						t.Errorf("%s: record %+v is now %+v", key, rec, got[key])
					}
				}
			}
			if ep2 := getEndpoint(t, "stamp", "db-0"); ep2 == nil || ep2.UID != ep.UID || ep2.Status.Current.UID != string(old.UID) {
				t.Errorf("endpoint after the impostor: %+v", ep2)
			}
			deletePod(t, p)
		})
	}

	fresh := createPod(t, "stamp", "db-0", "stamp-node", ownedBy(sts), withAnnotations(annotations.IPPools, sel, annotations.EndpointUID, string(ep.UID)))
	if after := addAll(t, d.Service, fresh, "eth0"); after["eth0"] != before["eth0"] {
		t.Errorf("the StatefulSet's pod got %s, had %s", after["eth0"], before["eth0"])
	}
	checkInvariants(t, true)
}

// Issue 10 finding 9, node side: a pool written before admission canonicalised its
// fields reaches ipamd as written. White space around an address is handed out
// canonical; a field that does not parse refuses the pool before any address is taken,
// naming the field, and the next pool serves the interface.
func TestPoolFieldsAreCanonicalOrRefused(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "fields")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("fields-broken", "172.25.0.0/16", []string{"172.25.0.1-172.25.0.9"}, func(p *v2beta1SpiderIPPool) {
		p.Spec.Routes = []v2beta1.Route{{Dst: "10.0.0.0/8", Gw: "not-an-address"}}
	}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("fields-spaced", "172.26.0.0/16", []string{"172.26.0.2-172.26.0.9"}, func(p *v2beta1SpiderIPPool) {
		p.Spec.Gateway = ptr(" 172.26.0.1 ")
		p.Spec.Routes = []v2beta1.Route{{Dst: "10.0.0.0/8", Gw: "\t172.26.0.1"}}
	}))
	d, _ := startDaemon(t, "fields-node")
	pod := createPod(t, "fields", "app", "fields-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["fields-broken","fields-spaced"]}]`))
	r, err := d.Service.Allocate(ctx, addReq(pod, "eth0", "c"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.IPs) != 1 || r.IPs[0].Pool != "fields-spaced" || r.IPs[0].Gateway != "172.26.0.1" {
		t.Errorf("ADD answered %+v, want an address of fields-spaced with gateway 172.26.0.1", r.IPs)
	}
	if len(r.Routes) != 1 || r.Routes[0] != (api.Route{Dst: "10.0.0.0/8", Gw: "172.26.0.1"}) {
		t.Errorf("routes %+v, want 10.0.0.0/8 via 172.26.0.1", r.Routes)
	}
	if ep := getEndpoint(t, "fields", "app"); ep == nil || len(ep.Status.Current.IPs) != 1 || deref(ep.Status.Current.IPs[0].IPv4Gateway) != "172.26.0.1" {
		t.Errorf("endpoint records %+v, want eth0 with gateway 172.26.0.1", ep)
	}
	if n := len(records(t, "fields-broken")); n != 0 {
		t.Errorf("the refused pool holds %d addresses", n)
	}
	only := createPod(t, "fields", "only", "fields-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["fields-broken"]}]`))
	_, err = d.Service.Allocate(ctx, addReq(only, "eth0", "c"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeNoPool || !strings.Contains(ae.Error(), "spec.routes[0].gw") {
		t.Errorf("ADD from the broken pool alone: %v, want code %d naming spec.routes[0].gw", err, api.CodeNoPool)
	}
	if n := len(records(t, "fields-broken")); n != 0 {
		t.Errorf("the refused pool holds %d addresses", n)
	}
	checkInvariants(t, false)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
