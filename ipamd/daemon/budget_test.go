package daemon_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nicpool/nicpool/e2e/fixtures"
	"github.com/nicpool/nicpool/ipamd/api"
)

// TestNetworkDefaultPoolsHaveThePodsBounds: a network's default pools are a tenant's
// list, matched against every pool at each ADD (250k "*" cost 6.9 s of CPU per ADD
// with 100 pools). ADD and STATUS refuse a list over a pod's selection bounds, or
// with a duplicate, naming the key, before matching anything; nothing is allocated.
func TestNetworkDefaultPoolsHaveThePodsBounds(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, "bounds")
	fixtures.CreatePool(t, env.Client, fixtures.Pool("bounds", "10.61.0.0/16", []string{"10.61.0.1-10.61.0.10"}))
	d, _ := startDaemon(t, "bounds-node")
	stars := make([]string, 250000)
	for i := range stars {
		stars[i] = "*"
	}
	for name, n := range map[string]api.NetworkConfig{
		"250k wildcards": {Name: "net1", DefaultIPv4Pools: stars},
		"a duplicate":    {Name: "net1", DefaultIPv4Pools: []string{"bounds", "bounds"}},
		"17 wildcards":   {Name: "net1", DefaultIPv6Pools: strings.Fields(strings.Repeat("b* ", 17))},
	} {
		pod := createPod(t, "bounds", strings.ReplaceAll(name, " ", "-"), "bounds-node")
		req := addReq(pod, "net1", "c")
		req.Network = n
		_, err := d.Service.Allocate(ctx, req)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeInvalidConfig || !strings.Contains(ae.Message, "ipam.default_ipv") {
			t.Errorf("ADD with %s: %v; want an invalid-config error naming the key", name, err)
		}
		_, err = d.Service.Status(ctx, &api.StatusRequest{Network: n})
		if !errors.As(err, &ae) || ae.Code != api.CodeInvalidConfig || !strings.Contains(ae.Message, "ipam.default_ipv") {
			t.Errorf("STATUS with %s: %v; want an invalid-config error naming the key", name, err)
		}
	}
	if n := len(records(t, "bounds")); n != 0 {
		t.Errorf("pool bounds holds %d addresses after refused ADDs", n)
	}
	checkInvariants(t, false)
}
