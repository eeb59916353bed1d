// Package ipamconf holds the IPAM switches of spiderpool's spiderpool-conf ConfigMap
// (enableIPv4, enableIPv6, enableStatefulSet) as nicpool settings: one definition of
// their flags, which the webhook and ipamd both bind, and one answer to what each
// switch allows, so that the two never disagree on it.
//
// Each switch behaves as spiderpool v1.2.2 has it:
//
//   - a disabled IP family is not allocated: the pools of that family an interface
//     would draw from are left out (spiderpool drops them from its candidates; its
//     "every enabled family or fail" check is commented out, so an interface that
//     has pools of the enabled family only gets addresses of that family), and a
//     SpiderIPPool or SpiderReservedIP of that family is refused at admission;
//   - with StatefulSet addresses disabled, a StatefulSet's pod is served like any
//     other: its addresses are released when it goes, and the next pod of its name
//     gets new ones.
package ipamconf

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
)

// Switches are the settings. The zero value is spiderpool's chart's default, every
// switch on: the fields say what is turned off.
type Switches struct {
	// NoIPv4 and NoIPv6 turn an IP family off (spiderpool's enableIPv4/enableIPv6 false).
	NoIPv4, NoIPv6 bool
	// NoStatefulSet turns StatefulSet addresses off (enableStatefulSet false).
	NoStatefulSet bool
}

// Flag names, shared by the webhook and ipamd.
const (
	FlagIPv4        = "enable-ipv4"
	FlagIPv6        = "enable-ipv6"
	FlagStatefulSet = "enable-stateful-set"
)

// spiderpool-conf's keys (in its conf.yml), which are also the names of the chart's
// values under ChartSection, as spiderpool's chart names them.
const (
	KeyIPv4        = "enableIPv4"
	KeyIPv6        = "enableIPv6"
	KeyStatefulSet = "enableStatefulSet"
)

// ChartSection is the chart's map of the switches' values: ipam.enableIPv4 and so on.
const ChartSection = "ipam"

// Setting is one switch under each of its names: spiderpool-conf's key, nicpool's
// flag and the chart's value. Settings is the one table of them that the migration,
// the kubectl plugin and the chart read.
type Setting struct {
	// Key is spiderpool-conf's key.
	Key string
	// Flag is the webhook's and ipamd's flag, without its dashes.
	Flag string
	// off is the Switches field the setting turns off.
	off func(*Switches) *bool
}

// Settings are the switches, in a fixed order: IPv4, IPv6, StatefulSet.
var Settings = []Setting{
	{Key: KeyIPv4, Flag: FlagIPv4, off: func(s *Switches) *bool { return &s.NoIPv4 }},
	{Key: KeyIPv6, Flag: FlagIPv6, off: func(s *Switches) *bool { return &s.NoIPv6 }},
	{Key: KeyStatefulSet, Flag: FlagStatefulSet, off: func(s *Switches) *bool { return &s.NoStatefulSet }},
}

// SettingOfFlag is the setting of a flag name (without its dashes).
func SettingOfFlag(flag string) (Setting, bool) {
	for _, st := range Settings {
		if st.Flag == flag {
			return st, true
		}
	}
	return Setting{}, false
}

// ChartValue is the setting's chart value, as --set takes it (ipam.enableIPv4).
func (st Setting) ChartValue() string { return ChartSection + "." + st.Key }

// Enabled is the setting's value in s, as spiderpool-conf and the flag say it.
func (st Setting) Enabled(s Switches) bool { return !*st.off(&s) }

// Set sets the setting in s from spiderpool-conf's or the flag's value.
func (st Setting) Set(s *Switches, enabled bool) { *st.off(s) = !enabled }

// FlagArg is the flag with its value in s, as a command line gives it
// (--enable-ipv4=true).
func (st Setting) FlagArg(s Switches) string {
	return "--" + st.Flag + "=" + strconv.FormatBool(st.Enabled(s))
}

// BindFlags registers the switches' flags on fs.
func (s *Switches) BindFlags(fs *flag.FlagSet) {
	fs.Var(off{&s.NoIPv4}, FlagIPv4, "allocate IPv4 addresses (spiderpool-conf's "+KeyIPv4+"); false leaves out every IPv4 pool an interface would draw from and refuses IPv4 SpiderIPPools and SpiderReservedIPs; give the webhook and every ipamd the same value")
	fs.Var(off{&s.NoIPv6}, FlagIPv6, "allocate IPv6 addresses (spiderpool-conf's "+KeyIPv6+"); false leaves out every IPv6 pool an interface would draw from and refuses IPv6 SpiderIPPools and SpiderReservedIPs; give the webhook and every ipamd the same value")
	fs.Var(off{&s.NoStatefulSet}, FlagStatefulSet, "keep a StatefulSet pod's addresses for the next pod of its name (spiderpool-conf's "+KeyStatefulSet+"); false serves StatefulSet pods like any other: their addresses are released when they go; give the webhook and every ipamd the same value")
}

// Validate refuses switches that allocate nothing.
func (s Switches) Validate() error {
	if s.NoIPv4 && s.NoIPv6 {
		return fmt.Errorf("--%s=false and --%s=false: at least one IP family must be enabled", FlagIPv4, FlagIPv6)
	}
	return nil
}

// Family reports whether addresses of the family (v2beta1.IPv4 or IPv6) are allocated.
func (s Switches) Family(family int64) bool {
	switch family {
	case v2beta1.IPv4:
		return !s.NoIPv4
	case v2beta1.IPv6:
		return !s.NoIPv6
	}
	return false
}

// LeaveOut is the one rule of a disabled IP family, for the webhook and ipamd alike:
// it keeps the pool lists of the enabled families and says what it left out. The
// lists of a disabled family come back empty, as spiderpool drops those pools from
// its candidates.
func (s Switches) LeaveOut(ipv4, ipv6 []string) (keep4, keep6 []string, left Left) {
	keep4, keep6 = ipv4, ipv6
	if s.NoIPv4 && len(ipv4) > 0 {
		keep4, left.IPv4 = nil, ipv4
	}
	if s.NoIPv6 && len(ipv6) > 0 {
		keep6, left.IPv6 = nil, ipv6
	}
	return keep4, keep6, left
}

// Left is what LeaveOut left out: the pools of each disabled family.
type Left struct {
	IPv4, IPv6 []string
}

// Add gathers what another LeaveOut left out (of another interface).
func (l *Left) Add(o Left) {
	l.IPv4 = append(l.IPv4, o.IPv4...)
	l.IPv6 = append(l.IPv6, o.IPv6...)
}

// Empty reports whether nothing was left out.
func (l Left) Empty() bool { return len(l.IPv4) == 0 && len(l.IPv6) == 0 }

// Pools lists the pools left out, IPv4 first.
func (l Left) Pools() []string {
	if l.Empty() {
		return nil
	}
	return append(append([]string{}, l.IPv4...), l.IPv6...)
}

// Families lists the families of which pools were left out, IPv4 first.
func (l Left) Families() []int64 {
	var f []int64
	if len(l.IPv4) > 0 {
		f = append(f, v2beta1.IPv4)
	}
	if len(l.IPv6) > 0 {
		f = append(f, v2beta1.IPv6)
	}
	return f
}

// Why says why the pools were left out, naming the flag of each family (Disabled).
func (l Left) Why() string {
	var why []string
	for _, f := range l.Families() {
		why = append(why, Disabled(f))
	}
	return strings.Join(why, "; ")
}

// StatefulSets reports whether a StatefulSet pod's addresses are kept for the next
// pod of its name.
func (s Switches) StatefulSets() bool { return !s.NoStatefulSet }

// Disabled says why a family is not allocated, naming the flag: for errors.
func Disabled(family int64) string {
	flag, key := FlagIPv4, KeyIPv4
	if family == v2beta1.IPv6 {
		flag, key = FlagIPv6, KeyIPv6
	}
	return fmt.Sprintf("IPv%d is disabled (--%s=false, spiderpool-conf's %s: false)", family, flag, key)
}

// off is a boolean flag that stores its negation: the flag says "enable", the field
// says what is off, so that the zero Switches is every switch on.
type off struct{ p *bool }

func (o off) String() string {
	if o.p == nil { // the flag package's zero value, for its "(default true)"
		return "false"
	}
	return strconv.FormatBool(!*o.p)
}

func (o off) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want true or false: %w", err)
	}
	*o.p = !b
	return nil
}

func (o off) IsBoolFlag() bool { return true }
