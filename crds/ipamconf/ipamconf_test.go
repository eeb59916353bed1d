package ipamconf_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/crds/ipamconf"
)

// LeaveOut is the rule the webhook and ipamd both apply: the pools of a disabled
// family are dropped, those of an enabled one kept in their order, and what was
// dropped is named with the flag that dropped it.
func TestLeaveOut(t *testing.T) {
	v4, v6 := []string{"a4", "b4"}, []string{"a6"}
	for _, c := range []struct {
		name         string
		sw           ipamconf.Switches
		in4, in6     []string
		keep4, keep6 []string
		left         []string
		families     []int64
		why          []string
	}{
		{name: "every family on", in4: v4, in6: v6, keep4: v4, keep6: v6},
		{name: "IPv6 off", sw: ipamconf.Switches{NoIPv6: true}, in4: v4, in6: v6, keep4: v4,
			left: []string{"a6"}, families: []int64{v2beta1.IPv6}, why: []string{"IPv6 is disabled (--enable-ipv6=false, spiderpool-conf's enableIPv6: false)"}},
		{name: "IPv4 off", sw: ipamconf.Switches{NoIPv4: true}, in4: v4, in6: v6, keep6: v6,
			left: []string{"a4", "b4"}, families: []int64{v2beta1.IPv4}, why: []string{"IPv4 is disabled (--enable-ipv4=false, spiderpool-conf's enableIPv4: false)"}},
		{name: "IPv6 off, no IPv6 pools named", sw: ipamconf.Switches{NoIPv6: true}, in4: v4, keep4: v4},
		{name: "IPv4 off, IPv4 pools only", sw: ipamconf.Switches{NoIPv4: true}, in4: v4,
			left: []string{"a4", "b4"}, families: []int64{v2beta1.IPv4}, why: []string{"--enable-ipv4=false"}},
		{name: "StatefulSet off leaves no pool out", sw: ipamconf.Switches{NoStatefulSet: true}, in4: v4, in6: v6, keep4: v4, keep6: v6},
	} {
		t.Run(c.name, func(t *testing.T) {
			k4, k6, left := c.sw.LeaveOut(slices.Clone(c.in4), slices.Clone(c.in6))
			if !slices.Equal(k4, c.keep4) || !slices.Equal(k6, c.keep6) {
				t.Errorf("kept %v %v, want %v %v", k4, k6, c.keep4, c.keep6)
			}
			if got := left.Pools(); !slices.Equal(got, c.left) {
				t.Errorf("left out %v, want %v", got, c.left)
			}
			if left.Empty() != (len(c.left) == 0) {
				t.Errorf("Empty() = %v with %v left out", left.Empty(), left.Pools())
			}
			if got := left.Families(); !slices.Equal(got, c.families) {
				t.Errorf("families left out %v, want %v", got, c.families)
			}
			why := left.Why()
			for _, w := range c.why {
				if !strings.Contains(why, w) {
					t.Errorf("Why() = %q, want it to say %q", why, w)
				}
			}
			if len(c.why) == 0 && why != "" {
				t.Errorf("Why() = %q with nothing left out", why)
			}
		})
	}
}

// What several interfaces left out adds up, each family once in Families.
func TestLeftAdds(t *testing.T) {
	sw := ipamconf.Switches{NoIPv6: true}
	var all ipamconf.Left
	for _, six := range [][]string{{"x6"}, nil, {"y6", "z6"}} {
		_, _, l := sw.LeaveOut([]string{"p4"}, six)
		all.Add(l)
	}
	if got, want := all.Pools(), []string{"x6", "y6", "z6"}; !slices.Equal(got, want) {
		t.Errorf("left out %v over three interfaces, want %v", got, want)
	}
	if got := all.Families(); !slices.Equal(got, []int64{v2beta1.IPv6}) {
		t.Errorf("families %v, want [6]", got)
	}
}
