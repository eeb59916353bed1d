package daemon_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/daemon"
)

// spiderpool-conf's enableIPv6: false, as ipamd's --enable-ipv6=false: an interface
// whose pools are of both families gets an IPv4 address only, and nothing is taken
// from the IPv6 pool; an interface with IPv6 pools only fails its ADD, saying which
// pools were left out and why.
func TestDisabledFamilyIsLeftOut(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "fam")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("fam-v4", "10.231.0.0/16", []string{"10.231.0.1-10.231.0.20"}))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("fam-v6", "fd00:231::/64", []string{"fd00:231::1-fd00:231::20"}))
	d, _ := startDaemonWith(t, "fam-node", func(o *daemon.Options) { o.Switches.NoIPv6 = true })

	dual := createPod(t, "fam", "dual", "fam-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv4":["fam-v4"],"ipv6":["fam-v6"]}]`))
	r, err := d.Service.Allocate(ctx, addReq(dual, "eth0", "c-dual"))
	if err != nil {
		t.Fatalf("ADD of a pod with IPv4 and IPv6 pools, IPv6 disabled: %v", err)
	}
	if got := addresses(r); len(got) != 1 || !strings.HasPrefix(got[0], "10.231.0.") {
		t.Errorf("ADD gave %v, want one address of fam-v4 alone", got)
	}
	if n := len(records(t, "fam-v6")); n != 0 {
		t.Errorf("the IPv6 pool holds %d addresses with IPv6 disabled", n)
	}

	v6only := createPod(t, "fam", "v6only", "fam-node", withAnnotations(annotations.IPPools, `[{"interface":"eth0","ipv6":["fam-v6"]}]`))
	_, err = d.Service.Allocate(ctx, addReq(v6only, "eth0", "c-v6only"))
	if err == nil || !strings.Contains(err.Error(), "[fam-v6]") || !strings.Contains(err.Error(), "--enable-ipv6=false") {
		t.Errorf("ADD of a pod with IPv6 pools only, IPv6 disabled: %v; want a refusal naming fam-v6 and --enable-ipv6=false", err)
	}
	if n := len(records(t, "fam-v6")); n != 0 {
		t.Errorf("the IPv6 pool holds %d addresses with IPv6 disabled", n)
	}
	checkInvariants(t, true)
}

// spiderpool-conf's enableStatefulSet: false, as ipamd's --enable-stateful-set=false:
// a StatefulSet pod's DEL releases its address though its ordinal comes back, and the
// next pod of its name, even stamped with the endpoint's UID (as a webhook with the
// switch on would stamp it), does not take the predecessor's address over.
func TestStatefulSetAddressesOff(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "stsoff")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("stsoff", "10.232.0.0/16", []string{"10.232.0.1-10.232.0.20"}))
	d, _ := startDaemonWith(t, "stsoff-node", func(o *daemon.Options) { o.Switches.NoStatefulSet = true })
	sts := createStatefulSet(t, "stsoff", "db", 2)
	sel := `[{"interface":"eth0","ipv4":["stsoff"]}]`

	// A DEL releases, where with the switch on it keeps (ordinal 0 < 2 replicas).
	first := createPod(t, "stsoff", "db-0", "stsoff-node", ownedBy(sts), withAnnotations(annotations.IPPools, sel))
	addAll(t, d.Service, first, "eth0")
	r, err := d.Service.Release(ctx, delReq(first, "eth0", "c-"+string(first.UID)))
	if err != nil || len(r.Released) != 1 || len(r.Kept) != 0 {
		t.Fatalf("DEL of a StatefulSet pod with StatefulSet addresses off: %+v %v; want its address released", r, err)
	}
	deletePod(t, first)

	// A pod that went without a DEL (its node was lost): the next pod of its name
	// gets a new address, and the predecessor's is released.
	second := createPod(t, "stsoff", "db-1", "stsoff-node", ownedBy(sts), withAnnotations(annotations.IPPools, sel))
	before := addAll(t, d.Service, second, "eth0")["eth0"]
	ep := getEndpoint(t, "stsoff", "db-1")
	deletePod(t, second)
	third := createPod(t, "stsoff", "db-1", "stsoff-node", ownedBy(sts), withAnnotations(annotations.IPPools, sel,
		annotations.EndpointUID, string(ep.UID)))
	after := addAll(t, d.Service, third, "eth0")["eth0"]
	if after == before {
		t.Errorf("the next pod of db-1 got its predecessor's address %s with StatefulSet addresses off", before)
	}
	recs := records(t, "stsoff")
	if len(recs) != 1 {
		t.Errorf("pool stsoff holds %d addresses, want 1 (the new pod's): %v", len(recs), recs)
	}
	for a, rec := range recs {
		if rec.PodUID != string(third.UID) {
			t.Errorf("%s recorded for pod UID %s, want the new pod's %s", a, rec.PodUID, third.UID)
		}
	}
	checkInvariants(t, true)
}
