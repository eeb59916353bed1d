package coordinator

import (
	"strings"
	"testing"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func ptr[T any](v T) *T { return &v }

// TestCheckNamesEveryFieldItRefuses: each value spiderpool's webhook refuses, each list
// over nicpool's bound and each podCIDRType nicpool cannot serve is refused naming its
// field; what spiderpool accepts and nicpool serves passes.
func TestCheckNamesEveryFieldItRefuses(t *testing.T) {
	served := []v2beta1.CoordinatorSpec{
		{},
		{Mode: ptr("underlay"), PodCIDRType: ptr("none"), HijackCIDR: []string{"169.254.0.0/16", "10.0.0.1", "fd00::/64"},
			PolicyRoutes: []v2beta1.CoordinatorRoute{{Dst: "10.7.0.0/16", Gw: "10.6.0.1"}, {Dst: "fd00:7::1", Gw: "fd00:6::1"}},
			PodMACPrefix: ptr("0a:1b"), PodDefaultRouteNIC: ptr("net1"), HostRuleTable: ptr(500), PodRPFilter: ptr(-1),
			TxQueueLen: ptr(1000), VethLinkAddress: ptr("169.254.100.1"), VethMTU: ptr(1500)},
		{Mode: ptr("disabled"), PodMACPrefix: ptr(""), VethLinkAddress: ptr("")},
	}
	for i, s := range served {
		if errs := Check(&v2beta1.SpiderCoordinator{Spec: s}); len(errs) > 0 {
			t.Errorf("served spec %d refused: %v", i, errs)
		}
	}
	many := make([]string, v2beta1.MaxCoordinatorCIDRs+1)
	for i := range many {
		many[i] = "10.0.0.0/8"
	}
	refused := map[string]v2beta1.CoordinatorSpec{
		"spec.mode":                {Mode: ptr("disable")},
		"spec.podCIDRType":         {PodCIDRType: ptr("auto")},
		"spec.hijackCIDR[1]":       {HijackCIDR: []string{"10.0.0.0/8", "10.0.0.0/40"}},
		"spec.hijackCIDR":          {HijackCIDR: many},
		"spec.policyRoutes[0].dst": {PolicyRoutes: []v2beta1.CoordinatorRoute{{Dst: "nowhere", Gw: "10.0.0.1"}}},
		"spec.policyRoutes[0].gw":  {PolicyRoutes: []v2beta1.CoordinatorRoute{{Dst: "10.0.0.0/8", Gw: ""}}},
		"spec.policyRoutes[0]":     {PolicyRoutes: []v2beta1.CoordinatorRoute{{Dst: "10.0.0.0/8", Gw: "fd00::1"}}},
		"spec.podMACPrefix":        {PodMACPrefix: ptr("01:1b")},
		"spec.podDefaultRouteNIC":  {PodDefaultRouteNIC: ptr("a-name-longer-than-15")},
		"spec.hostRuleTable":       {HostRuleTable: ptr(0)},
		"spec.podRPFilter":         {PodRPFilter: ptr(3)},
		"spec.txQueueLen":          {TxQueueLen: ptr(-1)},
		"spec.vethLinkAddress":     {VethLinkAddress: ptr("169.254.100.1/32")},
		"spec.vethMTU":             {VethMTU: ptr(0)},
	}
	for field, s := range refused {
		errs := Check(&v2beta1.SpiderCoordinator{Spec: s})
		if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), field+":") {
			t.Errorf("%s: refused with %v, want one error naming it", field, errs)
		}
	}
}
