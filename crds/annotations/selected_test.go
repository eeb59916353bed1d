package annotations

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelected(t *testing.T) {
	resolved := `[{"interface":"eth0","ipv4":["a"]},{"interface":"net1","ipv6":["b6"],"cleangateway":true}]`
	cases := []struct {
		name        string
		annotations map[string]string
		iface       string
		want        PoolSelection
		ok          bool
		wantErr     string
		notResolved bool
	}{
		{name: "resolved entry of the interface", annotations: map[string]string{IPPools: resolved}, iface: "net1",
			want: PoolSelection{Interface: "net1", IPv6: []string{"b6"}, CleanGateway: true}, ok: true},
		{name: "no annotation: defaults", annotations: map[string]string{MultusNetworks: "macvlan"}, iface: "net1"},
		{name: "single-NIC marker beside its eth0 entry: eth0 from the entry", annotations: map[string]string{IPPools: `[{"interface":"eth0","ipv4":["a"]}]`, IPPool: `{"ipv4":["a"]}`}, iface: "eth0",
			want: PoolSelection{Interface: "eth0", IPv4: []string{"a"}}, ok: true},
		{name: "single-NIC marker: other interfaces take the defaults", annotations: map[string]string{IPPools: `[{"interface":"eth0","ipv4":["a"]}]`, IPPool: `{"ipv4":["a"]}`}, iface: "net1"},
		{name: "interface left out is refused", annotations: map[string]string{IPPools: `[{"interface":"eth0","ipv4":["a"]}]`}, iface: "net1",
			wantErr: "names no pools for interface net1"},
		{name: "malformed", annotations: map[string]string{IPPools: `[`}, iface: "eth0", wantErr: "metadata.annotations[ipam.spidernet.io/ippools]"},
		{name: "unnamed entries are not resolved", annotations: map[string]string{IPPools: `[{"ipv4":["a"]}]`}, iface: "eth0",
			wantErr: "entry 0 names no interface", notResolved: true},
		{name: "a wildcard is not resolved", annotations: map[string]string{IPPools: `[{"interface":"eth0","ipv4":["a"]},{"interface":"net1","ipv6":["b6","b-*"]}]`}, iface: "eth0",
			wantErr: `entry 1 (interface net1) names the pattern "b-*", not a pool`, notResolved: true},
		{name: "single-NIC alone is not resolved", annotations: map[string]string{IPPool: `{"ipv4":["a"]}`}, iface: "eth0",
			wantErr: "ipam.spidernet.io/ippool is set", notResolved: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := Selected(c.annotations, c.iface)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || errors.Is(err, ErrNotResolved) != c.notResolved {
					t.Fatalf("err = %v, want one containing %q (not resolved: %v)", err, c.wantErr, c.notResolved)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.ok || !cmp.Equal(got, c.want) {
				t.Errorf("Selected = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}
