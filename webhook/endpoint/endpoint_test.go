package endpoint

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

func TestValidate(t *testing.T) {
	rec := func(ifname string, v4, v6 *string) v2beta1.IPAllocationDetail {
		return v2beta1.IPAllocationDetail{Interface: ifname, IPv4: v4, IPv6: v6}
	}
	for _, tc := range []struct {
		name string
		uid  string
		ips  []v2beta1.IPAllocationDetail
		want []string // substrings of the aggregated errors; none means valid
	}{
		{name: "valid dual stack", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To("10.0.0.5/24"), ptr.To("fd00::5/64")), rec("net1", ptr.To("10.1.0.5/24"), nil)}},
		{name: "no records yet", uid: "u"},
		{name: "no uid", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To("10.0.0.5/24"), nil)}, want: []string{"status.current.uid: Required value"}},
		{name: "empty interface", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("", ptr.To("10.0.0.5/24"), nil)}, want: []string{"status.current.ips[0].interface: Required value"}},
		{name: "duplicate interface", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To("10.0.0.5/24"), nil), rec("eth0", ptr.To("10.0.0.6/24"), nil)}, want: []string{"status.current.ips[1].interface: Duplicate value"}},
		{name: "address without prefix", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", ptr.To("10.0.0.5"), nil)}, want: []string{"status.current.ips[0].ipv4: Invalid value"}},
		{name: "IPv4 in ipv6", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", nil, ptr.To("10.0.0.5/24"))}, want: []string{"status.current.ips[0].ipv6: Invalid value", "must be an IPv6 address"}},
		{name: "no address", uid: "u", ips: []v2beta1.IPAllocationDetail{rec("eth0", nil, nil)}, want: []string{"status.current.ips[0]: Required value: an ipv4 or ipv6 address"}},
	} {
		e := &v2beta1.SpiderEndpoint{Status: v2beta1.WorkloadEndpointStatus{Current: v2beta1.PodIPAllocation{UID: tc.uid, IPs: tc.ips}}}
		errs := Validate(e)
		if len(tc.want) == 0 {
			if len(errs) > 0 {
				t.Errorf("%s: %v", tc.name, errs)
			}
			continue
		}
		msg := errs.ToAggregate().Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tc.name, msg, w)
			}
		}
	}
}
