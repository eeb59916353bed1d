package ipamconf_test

import (
	"flag"
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

// The table of the switches' names: each setting turns its own switch and no other,
// its flag is one BindFlags registers (and every flag registered has its setting),
// and its chart value is spiderpool's chart's name under ipam.
func TestSettings(t *testing.T) {
	want := []struct{ key, flag, chart string }{
		{"enableIPv4", "enable-ipv4", "ipam.enableIPv4"},
		{"enableIPv6", "enable-ipv6", "ipam.enableIPv6"},
		{"enableStatefulSet", "enable-stateful-set", "ipam.enableStatefulSet"},
	}
	if len(ipamconf.Settings) != len(want) {
		t.Fatalf("%d settings, want %d", len(ipamconf.Settings), len(want))
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var bound ipamconf.Switches
	bound.BindFlags(fs)
	registered := 0
	fs.VisitAll(func(f *flag.Flag) {
		registered++
		if _, ok := ipamconf.SettingOfFlag(f.Name); !ok {
			t.Errorf("flag --%s has no setting", f.Name)
		}
	})
	if registered != len(want) {
		t.Errorf("BindFlags registers %d flags, want %d", registered, len(want))
	}
	for i, st := range ipamconf.Settings {
		w := want[i]
		if st.Key != w.key || st.Flag != w.flag || st.ChartValue() != w.chart {
			t.Errorf("setting %d is %s/--%s/%s, want %s/--%s/%s", i, st.Key, st.Flag, st.ChartValue(), w.key, w.flag, w.chart)
		}
		if got, ok := ipamconf.SettingOfFlag(w.flag); !ok || got.Key != w.key {
			t.Errorf("SettingOfFlag(%q) = %s, %v", w.flag, got.Key, ok)
		}
		// Off through the table is what the flag set to false gives.
		var viaTable ipamconf.Switches
		st.Set(&viaTable, false)
		viaFlag := ipamconf.Switches{}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		viaFlag.BindFlags(fs)
		if err := fs.Parse([]string{"--" + st.Flag + "=false"}); err != nil {
			t.Fatal(err)
		}
		if viaTable != viaFlag {
			t.Errorf("%s set false is %+v; --%s=false gives %+v", st.Key, viaTable, st.Flag, viaFlag)
		}
		if st.Enabled(viaTable) || st.FlagArg(viaTable) != "--"+w.flag+"=false" {
			t.Errorf("%s reads back enabled=%v, %s", st.Key, st.Enabled(viaTable), st.FlagArg(viaTable))
		}
		st.Set(&viaTable, true)
		if viaTable != (ipamconf.Switches{}) || st.FlagArg(viaTable) != "--"+w.flag+"=true" {
			t.Errorf("%s set true again is %+v, %s", st.Key, viaTable, st.FlagArg(viaTable))
		}
	}
	if _, ok := ipamconf.SettingOfFlag("enable-ipv5"); ok {
		t.Error("SettingOfFlag found a setting for a flag that does not exist")
	}
}
