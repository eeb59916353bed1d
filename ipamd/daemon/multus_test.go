package daemon_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nicpool/nicpool/crds/annotations"
	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
)

// A bare spec.multusName entry names the NetworkAttachmentDefinition of that name in
// nicpool's namespace, as spiderpool reads it in its own: a tenant's NAD in namespace
// tenant-b whose CNI config is also named "prodnet" gets nothing from the pool, however
// the CNI call names its network; the pod attached through nicpool's own "prodnet"
// does. A namespaced entry is that NAD exactly.
func TestBareMultusNameIsNicpoolsNamespace(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "tenant-b")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("prodnet-pool", "10.211.0.0/16", []string{"10.211.0.1-10.211.0.9"},
		func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"prodnet"} }))
	fixtures.CreatePool(t, env.Client, fixtures.Pool("tenant-a-pool", "10.212.0.0/16", []string{"10.212.0.1-10.212.0.9"},
		func(p *v2beta1.SpiderIPPool) { p.Spec.MultusName = []string{"tenant-a/prodnet"} }))
	d, _ := startDaemon(t, "multus-node")
	sel := `[{"interface":"net1","ipv4":["prodnet-pool"]}]`
	var ae *api.Error

	// The tenant's own NAD, its CNI config named like the pool's bare entry.
	foreign := createPod(t, "tenant-b", "foreign", "multus-node",
		withAnnotations(annotations.MultusNetworks, "prodnet", annotations.IPPools, sel))
	req := addReq(foreign, "net1", "c")
	req.Network.Name = "prodnet"
	if r, err := d.Service.Allocate(ctx, req); !errors.As(err, &ae) || ae.Code != api.CodeNoPool || !strings.Contains(ae.Error(), "spec.multusName") {
		t.Errorf("tenant-b/prodnet (CNI name prodnet) from a pool of bare multusName prodnet: got %+v, %v; want refused naming spec.multusName", r, err)
	}
	// Another namespace's NAD named by a namespaced entry: not tenant-b's.
	other := createPod(t, "tenant-b", "other", "multus-node",
		withAnnotations(annotations.MultusNetworks, "prodnet", annotations.IPPools, `[{"interface":"net1","ipv4":["tenant-a-pool"]}]`))
	req = addReq(other, "net1", "c")
	req.Network.Name = "tenant-a/prodnet"
	// The refusal carries spiderpool's sentence for it too, naming the interface.
	if r, err := d.Service.Allocate(ctx, req); !errors.As(err, &ae) || ae.Code != api.CodeNoPool ||
		!strings.Contains(ae.Error(), "the spec.multusName [tenant-a/prodnet] in the IPPool tenant-a-pool used by the Pod interface net1 is not matched with the multusCR tenant-b/prodnet specified by the Pod") {
		t.Errorf("tenant-b/prodnet from a pool of multusName tenant-a/prodnet: got %+v, %v; want refused in spiderpool's words too", r, err)
	}
	if n := len(records(t, "prodnet-pool")) + len(records(t, "tenant-a-pool")); n != 0 {
		t.Errorf("the refused ADDs left %d addresses allocated", n)
	}

	// nicpool's own NAD of that name serves a pod of any namespace.
	own := createPod(t, "tenant-b", "own", "multus-node",
		withAnnotations(annotations.MultusNetworks, "nicpool-system/prodnet", annotations.IPPools, sel))
	req = addReq(own, "net1", "c")
	req.Network.Name = "whatever-the-author-chose"
	r, err := d.Service.Allocate(ctx, req)
	if err != nil || r.IPs[0].Pool != "prodnet-pool" {
		t.Errorf("nicpool-system/prodnet from a pool of bare multusName prodnet: got %+v, %v; want an address of prodnet-pool", r, err)
	}
	checkInvariants(t, false)
}
